#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <ingest/formats/compression.hpp>

#include "support/files.hpp"
#include "support/inflate_engines.hpp"
#include "support/records.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {
// Everything an InputStream yields, through small fills and reads.
std::string drain(const std::string& path, Compression c, std::size_t buffer,
                  bool memory_map = false) {
  detail::InputStream in(path, c, buffer, "test", memory_map);
  std::string out;
  std::size_t step = 1;
  for (;;) {
    if (step % 3 == 0) {
      std::string chunk(step * 37, '\0');
      const std::size_t got = in.read(chunk.data(), chunk.size());
      out.append(chunk, 0, got);
      if (got < chunk.size()) break;
    } else {
      if (!in.fill(step * 11)) {
        out.append(in.data(), in.available());
        in.consume(in.available());
        if (!in.fill(1)) break;
      }
      const std::size_t take = std::min(in.available(), step * 5);
      out.append(in.data(), take);
      in.consume(take);
    }
    CHECK(in.offset() == out.size());
    ++step;
  }
  return out;
}

std::string sample_text(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; s.size() < n; ++i) s += "line " + std::to_string(i * 7919 % 1000) + "\n";
  s.resize(n);
  return s;
}
}  // namespace

TEST_CASE("InputStream yields a plain file exactly, through any mix of fill and read",
          "[formats][compression]") {
  TempDir dir;
  const std::string data = frame_records(sample_payloads(200));
  write_file(dir / "plain", data);
  for (std::size_t buffer : {64, 100, 4096, 1 << 20}) {
    CHECK(drain(dir / "plain", Compression::none, buffer) == data);
  }
  CHECK(drain(dir / "plain", Compression::none, 64, true) == data);
  detail::InputStream mapped(dir / "plain", Compression::none, 64, "test", true);
  CHECK(mapped.mapped());
  CHECK(mapped.available() == data.size());  // the window is the whole file
  mapped.consume(100);
  CHECK(mapped.remaining() == data.size() - 100);
  CHECK(std::string(mapped.data(), 10) == data.substr(100, 10));
  write_file(dir / "empty", "");
  CHECK_FALSE(detail::InputStream(dir / "empty", Compression::none, 64, "test", true).mapped());

  detail::InputStream in(dir / "plain", Compression::none, 64);
  CHECK_FALSE(in.mapped());
  CHECK(in.remaining() == data.size());
  REQUIRE(in.fill(10));
  in.consume(10);
  CHECK(in.remaining() == data.size() - 10);
  // fill beyond the buffer grows the window
  REQUIRE(in.fill(1000));
  CHECK(std::string(in.data(), 1000) == data.substr(10, 1000));
}

TEST_CASE("InputStream inflates gzip (several members) and zlib", "[formats][compression]") {
  INGEST_EACH_INFLATE_ENGINE();
  TempDir dir;
  const std::string data = sample_text(300000);
  write_file(dir / "z", zlib_bytes(data));
  write_file(dir / "g", gzip_bytes(data));
  // Three gzip members, one of them empty, at different levels.
  const std::string multi =
      gzip_bytes(data.substr(0, 1000), 1) + gzip_bytes("", 6) + gzip_bytes(data.substr(1000), 9);
  write_file(dir / "multi", multi);
  for (std::size_t buffer : {64, 1000, 1 << 18}) {
    CHECK(drain(dir / "z", Compression::zlib, buffer) == data);
    CHECK(drain(dir / "g", Compression::gzip, buffer) == data);
    CHECK(drain(dir / "multi", Compression::gzip, buffer) == data);
  }
  detail::InputStream in(dir / "g", Compression::gzip);
  CHECK_FALSE(in.remaining().has_value());
  // An empty file is an empty stream in every compression.
  write_file(dir / "empty", "");
  for (auto c : {Compression::none, Compression::gzip, Compression::zlib}) {
    detail::InputStream e(dir / "empty", c);
    CHECK_FALSE(e.fill(1));
    CHECK(e.available() == 0);
  }
}

TEST_CASE("corrupt or truncated compressed data raises DataLossError naming the file",
          "[formats][compression]") {
  INGEST_EACH_INFLATE_ENGINE();
  TempDir dir;
  const std::string data = sample_text(100000);
  std::string gz = gzip_bytes(data);
  write_file(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  try {
    drain(dir / "cut.gz", Compression::gzip, 4096);
    FAIL("no error");
  } catch (const DataLossError& e) {
    CHECK(e.context().file == dir / "cut.gz");
    CHECK_THAT(e.what(), Catch::Contains("truncated gzip stream"));
  }
  std::string bad = gz;
  bad[bad.size() / 3] ^= 0x55;
  bad[bad.size() / 3 + 1] ^= 0x55;
  write_file(dir / "bad.gz", bad);
  CHECK_THROWS_AS(drain(dir / "bad.gz", Compression::gzip, 4096), DataLossError);
  write_file(dir / "notgz", "this is not gzip at all");
  CHECK_THROWS_AS(drain(dir / "notgz", Compression::gzip, 4096), DataLossError);
  CHECK_THROWS_AS(drain(dir / "notgz", Compression::zlib, 4096), DataLossError);
  // Garbage after a complete gzip member is not a member.
  write_file(dir / "trailing.gz", gz + "garbage!");
  CHECK_THROWS_AS(drain(dir / "trailing.gz", Compression::gzip, 4096), DataLossError);
  // A truncated trailer (CRC/size) is data loss too.
  write_file(dir / "trailer.gz", gz.substr(0, gz.size() - 3));
  CHECK_THROWS_AS(drain(dir / "trailer.gz", Compression::gzip, 4096), DataLossError);
}

TEST_CASE("OutputStream writes every compression, and zlib reads it back",
          "[formats][compression]") {
  INGEST_EACH_INFLATE_ENGINE();
  TempDir dir;
  const std::string data = sample_text(500000);
  for (auto c : {Compression::none, Compression::gzip, Compression::zlib}) {
    const std::string path = dir / ("out-" + std::string(compression_name(c)));
    {
      detail::OutputStream out(path, c, 6, 1000);
      // Small writes, a large one, and an empty one.
      out.write(data.data(), 10);
      out.write(data.data() + 10, 100000);
      out.write(data.data() + 100010, 0);
      for (std::size_t at = 100010; at < data.size(); at += 777) {
        out.write(data.data() + at, std::min<std::size_t>(777, data.size() - at));
      }
      CHECK_FALSE(std::filesystem::exists(path));
      out.close();
      CHECK_FALSE(out.is_open());
      CHECK_THROWS_AS(out.write("x", 1), InvalidArgument);
    }
    CHECK(drain(path, c, 1 << 16) == data);
    if (c != Compression::none) {
      CHECK(std::filesystem::file_size(path) < data.size() / 2);
    }
  }
  CHECK_THROWS_AS(detail::OutputStream(dir / "x", Compression::gzip, 42), InvalidArgument);
  CHECK(dir.list().size() == 3);
}
