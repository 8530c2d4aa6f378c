// The child of the checkpoint crash test (checkpoint_crash_test.cpp): runs
// the test's pipeline, appends every delivered batch to an output file as a
// line, and every K batches writes its checkpoint atomically: the number of
// batches and output bytes so far, then the iterator's state. Started again
// after a SIGKILL, it resumes from the last checkpoint, first cutting the
// output back to what that checkpoint had delivered.
//
//   checkpoint_crash_child DATA_DIR OUT_FILE CHECKPOINT_FILE K
//
// Exits 0 at the end of the pipeline, 2 on bad arguments, 1 on an error
// (printed).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>

#include "support/crash_pipeline.hpp"

namespace {

// The checkpoint file: batches and output bytes (8 bytes each, little-endian),
// then the state's bytes.
struct Checkpoint {
  std::uint64_t batches = 0;
  std::uint64_t output_bytes = 0;
  std::vector<std::byte> state;
};

void put_u64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_u64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  std::vector<std::byte> bytes;
  put_u64(bytes, c.batches);
  put_u64(bytes, c.output_bytes);
  bytes.insert(bytes.end(), c.state.begin(), c.state.end());
  ingest::detail::AtomicFileWriter out(path, "crash child");
  out.write(bytes.data(), bytes.size());
  out.commit();  // temporary file, fsync, rename: the old checkpoint or this one
}

Checkpoint read_checkpoint(const std::string& path) {
  ingest::detail::FileReader in(path, "crash child");
  std::vector<std::byte> bytes(static_cast<std::size_t>(in.size()));
  if (in.read(bytes.data(), bytes.size()) != bytes.size() || bytes.size() < 16) {
    throw std::runtime_error("short checkpoint " + path);
  }
  Checkpoint c;
  c.batches = get_u64(bytes.data());
  c.output_bytes = get_u64(bytes.data() + 8);
  c.state.assign(bytes.begin() + 16, bytes.end());
  return c;
}

void write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0) throw std::runtime_error("write failed");
    done += static_cast<std::size_t>(n);
  }
}

int run(const std::string& data, const std::string& out_path, const std::string& checkpoint_path,
        std::uint64_t k) {
  const auto pipeline = ingest::testing::crash_pipeline(data);
  Checkpoint c;
  const bool resume = std::filesystem::exists(checkpoint_path);
  if (resume) c = read_checkpoint(checkpoint_path);
  // What the last checkpoint delivered stays; anything written after it goes.
  const int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(c.output_bytes)) != 0 ||
      ::lseek(fd, 0, SEEK_END) < 0) {
    throw std::runtime_error("cannot open " + out_path);
  }
  auto it =
      resume ? pipeline.iterator(ingest::IteratorState::from_bytes(c.state)) : pipeline.iterator();
  while (auto batch = it.next()) {
    const std::string line = ingest::testing::crash_line(*batch);
    write_all(fd, line);
    ++c.batches;
    c.output_bytes += line.size();
    if (c.batches % k == 0) {
      const ingest::IteratorState state = it.save();
      c.state.assign(state.bytes().begin(), state.bytes().end());
      write_checkpoint(checkpoint_path, c);
    }
  }
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DATA_DIR OUT_FILE CHECKPOINT_FILE K\n", argv[0]);
    return 2;
  }
  try {
    return run(argv[1], argv[2], argv[3], std::strtoull(argv[4], nullptr, 10));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_crash_child: %s\n", e.what());
    return 1;
  }
}
