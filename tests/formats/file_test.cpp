#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

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
