#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include <ingest/formats/tfrecord_format.hpp>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/inflate_engines.hpp"
#include "support/records.hpp"
#include "support/sha256.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {
std::vector<std::string> read_all(const std::string& path, TFRecordOptions options = {}) {
  TFRecordReader reader(path, options);
  std::vector<std::string> out;
  while (auto r = reader.read()) out.push_back(std::move(*r));
  return out;
}

// The DataLossError reading `path` raises (fails the test if none).
DataLossError read_error(const std::string& path, TFRecordOptions options = {}) {
  try {
    read_all(path, options);
  } catch (const DataLossError& e) {
    return e;
  }
  FAIL("no DataLossError for " << path);
  throw;
}
}  // namespace

TEST_CASE("every fixture's framing decodes as its JSON says", "[formats][tfrecord][fixtures]") {
  INGEST_EACH_INFLATE_ENGINE();
  const auto fixtures = all_fixtures();
  REQUIRE(fixtures.size() == 11);
  for (const Fixture& f : fixtures) {
    INFO(f.name);
    const std::string bytes = file_contents(f.path);
    CHECK(bytes.size() == f.expected.at("file_size").get<std::size_t>());
    CHECK(sha256_hex(bytes) == f.expected.at("file_sha256").get<std::string>());
    const auto& records = f.expected.at("records");
    REQUIRE(records.size() == f.expected.at("num_records").get<std::size_t>());
    for (std::size_t buffer : {std::size_t{256} << 10, std::size_t{1000}, std::size_t{0}}) {
      // buffer 0: the default buffer, with plain files memory-mapped
      TFRecordReader reader(f.path, {.compression = f.compression,
                                     .buffer_size = buffer ? buffer : default_buffer_size,
                                     .memory_map = buffer == 0});
      std::size_t i = 0;
      for (;;) {
        const std::uint64_t offset = reader.offset();
        auto view = reader.read_view();
        if (!view) break;
        REQUIRE(i < records.size());
        const auto& r = records[i];
        CHECK(offset == r.at("offset").get<std::uint64_t>());
        CHECK(view->size() == r.at("length").get<std::size_t>());
        CHECK(sha256_hex(*view) == r.at("sha256").get<std::string>());
        if (r.contains("hex")) CHECK(to_hex(*view) == r.at("hex").get<std::string>());
        ++i;
      }
      CHECK(i == records.size());
      CHECK(reader.offset() == f.expected.at("stream_size").get<std::uint64_t>());
    }
  }
}

TEST_CASE("read and read_view agree, for small and large records", "[formats][tfrecord]") {
  TempDir dir;
  auto payloads = sample_payloads(300);
  payloads.push_back(std::string(200000, 'x'));  // larger than the window
  payloads.push_back("");
  write_file(dir / "a", frame_records(payloads));
  for (std::size_t buffer : {64, 4096, 1 << 18, 0}) {
    const TFRecordOptions options{.buffer_size = buffer ? buffer : default_buffer_size,
                                  .memory_map = buffer == 0};
    CHECK(read_all(dir / "a", options) == payloads);
    TFRecordReader reader(dir / "a", options);
    for (const auto& p : payloads) {
      auto v = reader.read_view();
      REQUIRE(v);
      CHECK(*v == p);
    }
    CHECK_FALSE(reader.read_view());
    CHECK_FALSE(reader.read_view());  // stays at the end
  }
  write_file(dir / "empty", "");
  CHECK(read_all(dir / "empty").empty());
}

TEST_CASE("a record goes into a string a stage gave back", "[formats][tfrecord]") {
  // A map gave back a string of the record's size class on this thread
  // (detail::StringRecycler): the reader fills it instead of allocating.
  TempDir dir;
  const std::vector<std::string> payloads{std::string(3500, 'a'), std::string(3400, 'b')};
  write_file(dir / "a", frame_records(payloads));
  auto& recycler = detail::StringRecycler::instance();
  std::string done = recycler.take(3500);
  done.assign(3500, 'z');
  const char* buffer = done.data();
  recycler.give(done);
  for (bool mapped : {false, true}) {
    TFRecordReader reader(dir / "a", {.memory_map = mapped});
    std::optional<std::string> first = reader.read();
    REQUIRE(first);
    CHECK(*first == payloads[0]);
    CHECK(first->data() == buffer);
    recycler.give(*first);  // as the map would; the next record reuses it again
    std::optional<std::string> second = reader.read();
    REQUIRE(second);
    CHECK(*second == payloads[1]);
    CHECK(second->data() == buffer);
    recycler.give(*second);
    CHECK_FALSE(reader.read());
  }
}

TEST_CASE("a flipped byte in a length, a payload or a CRC is a corrupted record",
          "[formats][tfrecord]") {
  TempDir dir;
  const std::vector<std::string> payloads{"first", "second record", "third"};
  const std::string good = frame_records(payloads);
  const std::size_t second = frame_record(payloads[0]).size();  // offset of record 2
  struct Case {
    std::size_t at;
    std::uint64_t offset;  // reported: header problems at the record, payload ones at +12
    const char* why;
  };
  for (const Case c :
       {Case{second + 0, second, "length checksum"}, Case{second + 9, second, "length checksum"},
        Case{second + 12, second + 12, "data checksum"},
        Case{second + 12 + 13, second + 12, "data checksum"}}) {
    std::string bad = good;
    bad[c.at] ^= 0x01;
    write_file(dir / "bad", bad);
    CHECK(read_error(dir / "bad", {.memory_map = false}).context().offset == c.offset);
    const DataLossError e = read_error(dir / "bad");
    CHECK(e.context().file == dir / "bad");
    CHECK(e.context().offset == c.offset);
    CHECK(e.context().stage == "tfrecord");
    CHECK_THAT(e.message(), Catch::StartsWith("corrupted record at " + std::to_string(c.offset)));
    CHECK_THAT(e.message(), Catch::Contains(c.why));
    // Records before the damage were delivered; after the error the reader is done.
    TFRecordReader reader(dir / "bad");
    CHECK(reader.read() == payloads[0]);
    CHECK_THROWS_AS(reader.read(), DataLossError);
    CHECK_FALSE(reader.read());
    // Without CRC checks the payload flips go unnoticed.
    if (c.at >= second + 12) {
      auto records = read_all(dir / "bad", {.verify_crc = false});
      CHECK(records.size() == 3);
    }
  }
}

TEST_CASE("truncation at every offset is a truncated record, never a crash",
          "[formats][tfrecord]") {
  INGEST_EACH_INFLATE_ENGINE();
  TempDir dir;
  const std::vector<std::string> payloads{"a", "", "hello world", std::string(300, 'z')};
  const std::string good = frame_records(payloads);
  std::vector<std::size_t> boundaries{0};
  for (const auto& p : payloads) boundaries.push_back(boundaries.back() + frame_record(p).size());
  for (auto c : {Compression::none, Compression::gzip, Compression::zlib}) {
    for (std::size_t cut = 0; cut < good.size(); ++cut) {
      for (bool mapped : {false, true}) {
        if (mapped && c != Compression::none) continue;
        INFO("cut at " << cut << ", " << compression_name(c) << (mapped ? ", mapped" : ""));
        const std::string part = good.substr(0, cut);
        write_file(dir / "cut", c == Compression::gzip   ? gzip_bytes(part)
                                : c == Compression::zlib ? zlib_bytes(part)
                                                         : part);
        std::size_t complete = 0;
        while (complete + 1 < boundaries.size() && boundaries[complete + 1] <= cut) ++complete;
        TFRecordReader reader(dir / "cut",
                              {.compression = c, .buffer_size = 128, .memory_map = mapped});
        for (std::size_t i = 0; i < complete; ++i) CHECK(reader.read() == payloads[i]);
        if (boundaries[complete] == cut) {
          CHECK_FALSE(reader.read());  // a clean end at a record boundary
          continue;
        }
        try {
          reader.read();
          FAIL("no error");
        } catch (const DataLossError& e) {
          const std::uint64_t start = boundaries[complete];
          const std::uint64_t expected =
              cut < start + detail::tfrecord_header_bytes ? start : start + 12;
          CHECK(e.message() == "truncated record at " + std::to_string(expected));
          CHECK(e.context().offset == expected);
        }
      }
    }
  }
}

TEST_CASE("an oversized length is rejected before anything is allocated", "[formats][tfrecord]") {
  INGEST_EACH_INFLATE_ENGINE();
  TempDir dir;
  // A header claiming 2^60 bytes, with a valid CRC: more than max_record_bytes.
  std::string header;
  put_le(header, std::uint64_t{1} << 60, 8);
  put_le(header, masked_crc32c(header.data(), 8), 4);
  write_file(dir / "huge", header + "tiny");
  CHECK_THAT(read_error(dir / "huge", {.memory_map = false}).message(),
             Catch::StartsWith("corrupted record at 0"));
  DataLossError e = read_error(dir / "huge");
  CHECK_THAT(e.message(), Catch::StartsWith("corrupted record at 0 (length 1152921504606846976 "
                                            "exceeds max_record_bytes 1073741824)"));
  // Under the maximum but more than the file holds: truncated, nothing allocated.
  std::string header_512m;
  put_le(header_512m, std::uint64_t{512} << 20, 8);
  put_le(header_512m, masked_crc32c(header_512m.data(), 8), 4);
  write_file(dir / "long", header_512m + "tiny");
  e = read_error(dir / "long");
  CHECK(e.message() == "truncated record at 12");
  CHECK(read_error(dir / "long", {.memory_map = false}).message() == "truncated record at 12");
  // Compressed: the size is unknown, so max_record_bytes decides.
  write_file(dir / "huge.gz", gzip_bytes(header + "tiny"));
  e = read_error(dir / "huge.gz", {.compression = Compression::gzip});
  CHECK_THAT(e.message(), Catch::Contains("corrupted record at 0"));
  CHECK_THAT(e.message(), Catch::Contains("exceeds max_record_bytes"));
  // Under the maximum but longer than the data: the string grows only with the data.
  write_file(dir / "big.gz", gzip_bytes(header_512m + std::string(1000, 'a')));
  e = read_error(dir / "big.gz", {.compression = Compression::gzip});
  CHECK(e.message() == "truncated record at 12");
  // A small configured maximum.
  write_file(dir / "ok", frame_records({std::string(100, 'a')}));
  e = read_error(dir / "ok", {.max_record_bytes = 99});
  CHECK_THAT(e.message(), Catch::Contains("exceeds max_record_bytes 99"));
  CHECK(read_all(dir / "ok", {.max_record_bytes = 100}).size() == 1);
}

TEST_CASE("gzip files of several members and zlib files read like plain ones",
          "[formats][tfrecord]") {
  INGEST_EACH_INFLATE_ENGINE();
  TempDir dir;
  const auto payloads = sample_payloads(500, 7);
  const std::string plain = frame_records(payloads);
  // Members split at arbitrary points, even inside a record.
  write_file(dir / "multi.gz", gzip_bytes(plain.substr(0, 1001)) +
                                   gzip_bytes(plain.substr(1001, 50000)) +
                                   gzip_bytes(plain.substr(51001)));
  write_file(dir / "z", zlib_bytes(plain));
  CHECK(read_all(dir / "multi.gz", {.compression = Compression::gzip}) == payloads);
  CHECK(read_all(dir / "z", {.compression = Compression::zlib}) == payloads);
  CHECK(read_all(dir / "z", {.compression = Compression::zlib, .buffer_size = 100}) == payloads);
}

TEST_CASE("with verify_crc, zlib leaves a compressed file's own checksum to the records' CRCs",
          "[formats][tfrecord]") {
  INGEST_EACH_INFLATE_ENGINE();
  TempDir dir;
  const auto payloads = sample_payloads(200, 11);
  const std::string plain = frame_records(payloads);
  auto flip = [](std::string bytes, std::size_t at) {
    bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
    return bytes;
  };
  // zlib skips the stream's checksum when the records' CRCs are checked;
  // ISA-L checks it always (it costs it about 2%).
  const bool skips = ingest_inflate_engine == detail::InflateEngine::zlib;
  // A wrong trailer (gzip: CRC-32 then length, in the first of two members;
  // zlib: the Adler-32) over intact data: the records all check out, so
  // zlib reads them; without the records' CRCs the trailer reports it.
  const std::string first = gzip_bytes(plain.substr(0, 3000));
  write_file(dir / "trailer.gz", flip(first, first.size() - 8) + gzip_bytes(plain.substr(3000)));
  const std::string z = zlib_bytes(plain);
  write_file(dir / "trailer.z", flip(z, z.size() - 2));
  for (auto [name, c] :
       {std::pair{"trailer.gz", Compression::gzip}, std::pair{"trailer.z", Compression::zlib}}) {
    INFO(name);
    if (skips) {
      CHECK(read_all(dir / name, {.compression = c}) == payloads);
    } else {
      CHECK_THAT(read_error(dir / name, {.compression = c}).message(),
                 Catch::Contains("incorrect data check"));
    }
    const DataLossError e = read_error(dir / name, {.compression = c, .verify_crc = false});
    CHECK_THAT(e.message(), Catch::Contains("incorrect data check"));
    CHECK(e.context().file == dir / name);
  }
  // Stored (level 0) deflate data inflates whatever its bytes: a flipped
  // payload byte is a corrupted record with verify_crc (with zlib; ISA-L's
  // CRC check, inflating ahead of the records, finds it first), and the gzip
  // CRC's error without it.
  const std::string stored = gzip_bytes(plain, 0);
  const std::size_t payload_byte = stored.size() - 8 - 4 - payloads.back().size() / 2;
  write_file(dir / "stored.gz", flip(stored, payload_byte));
  CHECK_THAT(read_error(dir / "stored.gz", {.compression = Compression::gzip}).message(),
             Catch::Contains(skips ? "corrupted record" : "incorrect data check"));
  CHECK_THAT(read_error(dir / "stored.gz", {.compression = Compression::gzip, .verify_crc = false})
                 .message(),
             Catch::Contains("incorrect data check"));
}

TEST_CASE("a length near 2^64 is a truncated record with max_record_bytes at its maximum",
          "[formats][tfrecord]") {
  INGEST_EACH_INFLATE_ENGINE();
  // issue 10 item 2: length + 4 wrapped to a small number, which passed the
  // bounds checks and then checksummed 2^64 bytes (a heap overflow).
  TempDir dir;
  const TFRecordOptions unlimited{.max_record_bytes = UINT64_MAX};
  for (std::uint64_t length : {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 3, UINT64_MAX - 4,
                               UINT64_MAX / 2, std::uint64_t{1} << 40}) {
    INFO(length);
    std::string header;
    put_le(header, length, 8);
    put_le(header, masked_crc32c(header.data(), 8), 4);
    const std::string bytes = header + "tiny payload and then some bytes";
    write_file(dir / "wrap", bytes);
    write_file(dir / "wrap.gz", gzip_bytes(bytes));
    write_file(dir / "wrap.z", deflate_bytes(bytes, 15));
    for (std::size_t buffer : {std::size_t{64}, std::size_t{1000}, default_buffer_size}) {
      INFO(buffer);
      for (bool map : {true, false}) {
        TFRecordOptions o = unlimited;
        o.buffer_size = buffer;
        o.memory_map = map;
        const DataLossError e = read_error(dir / "wrap", o);
        CHECK(e.message() == "truncated record at 12");
        CHECK(e.context().file == dir / "wrap");
        CHECK(e.context().offset == 12);
        // read_view takes the same paths as read
        TFRecordReader reader(dir / "wrap", o);
        CHECK_THROWS_AS(reader.read_view(), DataLossError);
      }
      for (auto [name, c] :
           {std::pair{"wrap.gz", Compression::gzip}, std::pair{"wrap.z", Compression::zlib}}) {
        TFRecordOptions o = unlimited;
        o.buffer_size = buffer;
        o.compression = c;
        CHECK(read_error(dir / name, o).message() == "truncated record at 12");
        TFRecordReader reader(dir / name, o);
        CHECK_THROWS_AS(reader.read_view(), DataLossError);
      }
    }
  }
}
