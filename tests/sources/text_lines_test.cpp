#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::string>;

TEST_CASE("text_lines splits on \\n and strips \\r", "[sources][text_lines]") {
  TempDir dir;
  write_file(dir / "a", "one\ntwo\r\n\nfour");
  write_file(dir / "b", "x\ny\n");
  write_file(dir / "empty", "");
  write_file(dir / "nl", "\n");
  CHECK(collect(text_lines(dir / "a")) == V{"one", "two", "", "four"});
  CHECK(collect(text_lines(dir / "b")) == V{"x", "y"});  // no extra empty line
  CHECK(collect(text_lines(dir / "empty")).empty());
  CHECK(collect(text_lines(dir / "nl")) == V{""});
  CHECK(collect(text_lines({dir / "a", dir / "empty", dir / "b"})) ==
        V{"one", "two", "", "four", "x", "y"});
}

TEST_CASE("text_lines: long lines, small buffers, compressed files", "[sources][text_lines]") {
  TempDir dir;
  V lines;
  std::string text;
  for (int i = 0; i < 500; ++i) {
    lines.push_back(
        std::string(static_cast<std::size_t>(i * 37 % 1000), static_cast<char>('a' + i % 26)));
    text += lines.back() + (i % 3 ? "\n" : "\r\n");
  }
  write_file(dir / "t", text);
  write_file(dir / "t.gz", gzip_bytes(text));
  write_file(dir / "t.z", zlib_bytes(text));
  CHECK(collect(text_lines(dir / "t", {.buffer_size = 64})) == lines);
  CHECK(collect(text_lines(dir / "t.gz", {.compression = Compression::gzip})) == lines);
  CHECK(collect(text_lines(dir / "t.z", {.compression = Compression::zlib, .buffer_size = 100})) ==
        lines);
  auto ds = text_lines(dir / "t");
  CHECK(collect(ds) == collect(ds));  // re-iterable
}

TEST_CASE("text_lines reports a missing file and goes on", "[sources][text_lines]") {
  TempDir dir;
  write_file(dir / "b", "x\n");
  auto out = collect_outcomes(text_lines({dir / "missing", dir / "b"}));
  REQUIRE(out.size() == 2);
  CHECK_THAT(out[0].error, Catch::Contains("IoError") && Catch::Contains("missing") &&
                               Catch::Contains("text_lines"));
  CHECK(out[1].value == "x");
  CHECK_THROWS_AS(text_lines(dir / "b", {.buffer_size = 0}), InvalidArgument);
}

TEST_CASE("text_lines handles \\r as TextLineDataset does: dropped, never a line break",
          "[sources][text_lines]") {
  // issue 10 item 15: tf's BufferedInputStream::ReadLine drops every '\r'
  // and splits on '\n' only; ingest stripped only a trailing '\r'.
  TempDir dir;
  write_file(dir / "cr", "a\rb\nc\r\r\n\r\nd\re");
  write_file(dir / "tail", "x\n\r");
  write_file(dir / "only", "\r\r");
  for (std::size_t buffer : {std::size_t{64}, default_buffer_size}) {
    CHECK(collect(text_lines(dir / "cr", {.buffer_size = buffer})) == V{"ab", "c", "", "de"});
    CHECK(collect(text_lines(dir / "tail", {.buffer_size = buffer})) == V{"x"});
    CHECK(collect(text_lines(dir / "only", {.buffer_size = buffer})).empty());
  }
  write_file(dir / "cr.gz", gzip_bytes("a\rb\nc\r\r\n\r\nd\re"));
  CHECK(collect(text_lines(dir / "cr.gz", {.compression = Compression::gzip})) ==
        V{"ab", "c", "", "de"});
}
