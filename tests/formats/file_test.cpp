#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <ingest/formats/file.hpp>

#include "support/files.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("FileReader reads a file in pieces and knows its size", "[formats][file]") {
  TempDir dir;
  write_file(dir / "a", "hello, world");
  detail::FileReader f(dir / "a", "test");
  CHECK(f.has_size());
  CHECK(f.size() == 12);
  char buf[8];
  CHECK(f.read(buf, 5) == 5);
  CHECK(std::string(buf, 5) == "hello");
  CHECK(f.read(buf, 8) == 7);
  CHECK(std::string(buf, 7) == ", world");
  CHECK(f.read(buf, 8) == 0);
  CHECK(f.position() == 12);
  detail::FileReader moved(std::move(f));
  CHECK(moved.path() == dir / "a");
}

TEST_CASE("FileReader names the file when it cannot open it", "[formats][file]") {
  TempDir dir;
  try {
    detail::FileReader f(dir / "missing", "tfrecord");
    FAIL("no error");
  } catch (const IoError& e) {
    CHECK(e.context().file == dir / "missing");
    CHECK(e.context().stage == "tfrecord");
    CHECK_THAT(e.what(), Catch::Contains("cannot open file"));
  }
  CHECK_THROWS_AS(detail::FileReader(dir.path().string(), "x"), IoError);  // a directory
}

TEST_CASE("AtomicFileWriter shows the file under its name only after commit", "[formats][file]") {
  TempDir dir;
  const std::string path = dir / "out.bin";
  {
    detail::AtomicFileWriter w(path, "test");
    w.write("abc", 3);
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK(std::filesystem::exists(w.temp_path()));
    CHECK(std::filesystem::path(w.temp_path()).filename().string().front() == '.');
    w.commit();
    CHECK(w.committed());
    CHECK(w.bytes_written() == 3);
    CHECK_THROWS_AS(w.write("x", 1), InvalidArgument);
  }
  CHECK(read_file(path) == "abc");
  CHECK(dir.list() == std::vector<std::string>{"out.bin"});
}

TEST_CASE("AtomicFileWriter abandoned leaves nothing behind", "[formats][file]") {
  TempDir dir;
  const std::string path = dir / "out.bin";
  {
    detail::AtomicFileWriter w(path, "test");
    w.write("partial", 7);
  }
  CHECK(dir.list().empty());
  // An existing file is replaced only on commit.
  write_file(path, "old");
  {
    detail::AtomicFileWriter w(path, "test");
    w.write("new", 3);
    CHECK(read_file(path) == "old");
    w.abandon();
  }
  CHECK(read_file(path) == "old");
  CHECK(dir.list() == std::vector<std::string>{"out.bin"});
  CHECK_THROWS_AS(detail::AtomicFileWriter(dir / "no/such/dir/x", "test"), IoError);
}

TEST_CASE("I/O buffers are page-aligned", "[formats][file]") {
  for (std::size_t n : {1, 64, 4096, 256 << 10, 1 << 20}) {
    const detail::AlignedBuffer b = detail::make_aligned_buffer(n);
    CHECK(reinterpret_cast<std::uintptr_t>(b.get()) % detail::io_buffer_alignment == 0);
  }
}

namespace {

// Stores the background jobs a FileMapping hands out, to run them when the test says.
struct JobQueue {
  std::vector<std::function<void()>> jobs;
  detail::BackgroundExecutor executor() {
    return [this](std::function<void()> job) { jobs.push_back(std::move(job)); };
  }
  std::size_t run_all() {
    const std::size_t n = jobs.size();
    for (auto& job : jobs) job();
    jobs.clear();
    return n;
  }
};

std::string pattern_bytes(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131) >> 7);
  return s;
}

}  // namespace

TEST_CASE("FileMapping populates ahead of the reader through its executor", "[formats][file]") {
  TempDir dir;
  constexpr std::size_t chunk = detail::FileMapping::populate_chunk;
  constexpr std::size_t ahead = detail::FileMapping::populate_ahead;
  const std::string bytes = pattern_bytes(5 * ahead + 123);
  write_file(dir / "big", bytes);
  detail::FileReader file(dir / "big", "test");
  JobQueue queue;
  detail::FileMapping m(file, queue.executor());
  REQUIRE_FALSE(m.empty());
  REQUIRE(m.size() == bytes.size());
  // The reader faults the first chunk in itself; one job populates the rest of the window.
  CHECK(m.populated() == chunk);
  CHECK(queue.run_all() == 1);
  CHECK(m.populated() == ahead);
  CHECK(std::string_view(m.data(), m.size()) == bytes);

  // One job at a time: a reader that moves on while its job waits adds to
  // that job's work instead of queueing another.
  m.advance(chunk);
  m.advance(2 * chunk);
  CHECK(queue.jobs.size() == 1);
  queue.run_all();
  CHECK(m.populated() == 2 * chunk + ahead);
  for (std::size_t at = 2 * chunk; at < bytes.size(); at += chunk / 3) {
    m.advance(at);
    queue.run_all();
    CHECK(m.populated() >= std::min(bytes.size(), at + ahead - chunk));  // stays ahead
  }
  CHECK(m.populated() == bytes.size());
  CHECK(std::string_view(m.data(), m.size()) == bytes);

  // A job that runs late skips what the reader has already passed.
  detail::FileMapping late(file, queue.executor());
  late.advance(3 * ahead);
  CHECK(queue.jobs.size() == 1);
  queue.run_all();
  CHECK(late.populated() == 4 * ahead);
}

TEST_CASE("FileMapping's background jobs outlive it safely", "[formats][file]") {
  TempDir dir;
  const std::string bytes = pattern_bytes(4 * detail::FileMapping::populate_ahead);
  write_file(dir / "big", bytes);
  detail::FileReader file(dir / "big", "test");
  JobQueue queue;
  {
    detail::FileMapping m(file, queue.executor());
    CHECK(m.data()[bytes.size() - 1] == bytes.back());
    REQUIRE_FALSE(queue.jobs.empty());
  }  // destroyed with population jobs pending: its unmapping is queued behind them
  const std::size_t pending = queue.jobs.size();
  CHECK(queue.run_all() == pending);  // they find the reader gone; the last one unmaps

  // An executor that cannot take jobs: the mapping reads without help.
  detail::FileMapping refused(file, [](std::function<void()>) { throw std::bad_alloc(); });
  CHECK(std::string_view(refused.data(), refused.size()) == bytes);
  refused.advance(bytes.size() / 2);

  // A file smaller than two chunks gets no help, and moves keep one mapping.
  write_file(dir / "small", bytes.substr(0, detail::FileMapping::populate_chunk));
  detail::FileReader small_file(dir / "small", "test");
  detail::FileMapping small(small_file, queue.executor());
  CHECK(queue.jobs.empty());
  detail::FileMapping moved(std::move(small));
  CHECK(small.empty());
  CHECK(moved.size() == detail::FileMapping::populate_chunk);
  small = std::move(moved);
  CHECK(small.data()[7] == bytes[7]);
}
