#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <ingest/sources/range.hpp>
#include <ingest/storage/file.hpp>
#include <ingest/storage/state_file.hpp>

#include "support/files.hpp"
#include "support/processes.hpp"

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
  CHECK(file_contents(path) == "abc");
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
    CHECK(file_contents(path) == "old");
    w.abandon();
  }
  CHECK(file_contents(path) == "old");
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
  // The reader faults the first chunk in itself; once it has read half of
  // it, one job populates the rest of the window.
  CHECK(m.populated() == chunk);
  m.advance(chunk / 2 - 1);
  CHECK(queue.jobs.empty());
  m.advance(chunk / 2);
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

  // A reader that starts further in (a restore's seek) faults the chunk from
  // there in itself; population starts there, once it has read half of it.
  detail::FileMapping from(file, queue.executor());
  from.start_at(2 * ahead + 5);
  CHECK(from.populated() == 2 * ahead + chunk);
  from.advance(2 * ahead + chunk / 4);
  CHECK(queue.jobs.empty());
  from.advance(2 * ahead + 5 + chunk / 2);
  CHECK(queue.run_all() == 1);
  CHECK(from.populated() == 3 * ahead);
  CHECK(std::string_view(from.data(), from.size()) == bytes);
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
    m.advance(detail::FileMapping::populate_chunk);
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

TEST_CASE("temporary file names are recognised exactly", "[formats][file][orphans]") {
  long long pid = 0;
  CHECK(detail::parse_temporary_name(".out.bin.tmp-123-4-56789", pid));
  CHECK(pid == 123);
  for (const char* other : {"out.bin.tmp-1-2-3", ".out.tmp-1-2", ".out.tmp-1-2-3x",
                            ".out.tmp-a-2-3", ".out.tmp-1--3", ".tmp-1-2-3", "..tmp-1-2-3",
                            ".out.bin", ".out.tmp-1-2-3-4", ".out.tmp-1234567890123456789-2-3"}) {
    INFO(other);
    CHECK_FALSE(detail::parse_temporary_name(other, pid));
  }
}

TEST_CASE("a writer removes the temporaries of killed writers, never a live one's",
          "[formats][file][orphans]") {
  // issue 10 item 8: a SIGKILLed writer's temporary file stayed forever.
  TempDir dir;
  std::string dead_temp;
  {
    // The child writes its temporary name into a file before it reports.
    ChildProcess child([&] {
      auto* w = new detail::AtomicFileWriter(dir / "a.bin", "test");  // never destroyed
      w->write("partial", 7);
      write_file(dir / "name.txt", w->temp_path());
    });
    dead_temp = file_contents(dir / "name.txt");
    CHECK(std::filesystem::exists(dead_temp));
    // While the child lives, its temporary is locked: a new writer keeps it.
    {
      detail::AtomicFileWriter w(dir / "b.bin", "test");
      CHECK(std::filesystem::exists(dead_temp));
    }
    CHECK(detail::remove_orphaned_temporaries(dir.path().string()) == 0);
    CHECK(std::filesystem::exists(dead_temp));
  }  // SIGKILLed here
  CHECK(std::filesystem::exists(dead_temp));
  std::filesystem::remove(dir / "name.txt");

  // A writer in this process is live too; other files are not touched.
  detail::AtomicFileWriter live(dir / "c.bin", "test");
  write_file(dir / ".hidden.tmp-notours", "x");
  write_file(dir / "data.bin", "x");
  {
    detail::AtomicFileWriter w(dir / "d.bin", "test");  // opening the directory sweeps it
    w.write("d", 1);
    w.commit();
  }
  CHECK_FALSE(std::filesystem::exists(dead_temp));
  CHECK(std::filesystem::exists(live.temp_path()));
  CHECK(dir.list() ==
        std::vector<std::string>{std::filesystem::path(live.temp_path()).filename().string(),
                                 ".hidden.tmp-notours", "d.bin", "data.bin"});
  live.write("c", 1);
  live.commit();
  CHECK(file_contents(dir / "c.bin") == "c");
}

TEST_CASE("a live writer in another process keeps its temporary and commits it",
          "[formats][file][orphans]") {
  TempDir dir;
  int to_child[2], from_child[2];
  REQUIRE(::pipe(to_child) == 0);
  REQUIRE(::pipe(from_child) == 0);
  // The child writes, sends its temporary's name, waits for the parent's
  // word, then commits.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    bool ok = false;
    try {
      detail::AtomicFileWriter w(dir / "live.bin", "test");
      w.write("live", 4);
      const std::string& name = w.temp_path();
      ok = ::write(from_child[1], name.data(), name.size()) == static_cast<::ssize_t>(name.size());
      ::close(from_child[1]);
      char go = 0;
      ok = ok && ::read(to_child[0], &go, 1) == 1;
      w.commit();
    } catch (...) {
      ok = false;
    }
    ::_exit(ok ? 0 : 1);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  std::string temp;
  char buf[256];
  for (::ssize_t got; (got = ::read(from_child[0], buf, sizeof buf)) > 0;) {
    temp.append(buf, static_cast<std::size_t>(got));
  }
  ::close(from_child[0]);
  REQUIRE_FALSE(temp.empty());
  CHECK(detail::remove_orphaned_temporaries(dir.path().string()) == 0);
  { detail::AtomicFileWriter w(dir / "other.bin", "test"); }
  CHECK(std::filesystem::exists(temp));
  REQUIRE(::write(to_child[1], "g", 1) == 1);
  ::close(to_child[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(file_contents(dir / "live.bin") == "live");
  CHECK(dir.list() == std::vector<std::string>{"live.bin"});
}

TEST_CASE("checkpoints are created 0600 unless a mode is given, data files 0644",
          "[storage][file][hostile]") {
  TempDir dir;
  const mode_t saved = ::umask(022);
  auto it = range(10).iterator();
  (void)it.next();
  const IteratorState state = it.save();
  auto mode = [](const std::filesystem::path& p) {
    return std::filesystem::status(p).permissions() & std::filesystem::perms::all;
  };
  using std::filesystem::perms;
  write_state(dir / "state", state);
  CHECK(mode(dir / "state") == (perms::owner_read | perms::owner_write));
  write_state(dir / "shared", state, 0640);
  CHECK(mode(dir / "shared") == (perms::owner_read | perms::owner_write | perms::group_read));
  CHECK(read_state(dir / "state").bytes().size() == state.bytes().size());
  {
    detail::AtomicFileWriter data(dir / "data", "test");
    data.write("x", 1);
    data.commit();
  }
  CHECK(mode(dir / "data") ==
        (perms::owner_read | perms::owner_write | perms::group_read | perms::others_read));
  ::umask(saved);
}
