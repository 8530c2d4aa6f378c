#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/records.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::string>;

TEST_CASE("tfrecord reads files in order, any compression", "[sources][tfrecord]") {
  TempDir dir;
  const auto p1 = sample_payloads(100, 1), p2 = sample_payloads(50, 2);
  write_file(dir / "a", frame_records(p1));
  write_file(dir / "b", frame_records(p2));
  write_file(dir / "b.gz", gzip_bytes(frame_records(p2)));
  write_file(dir / "a.z", zlib_bytes(frame_records(p1)));
  V both = p1;
  both.insert(both.end(), p2.begin(), p2.end());
  CHECK(collect(tfrecord({dir / "a", dir / "b"})) == both);
  CHECK(collect(tfrecord({dir / "a", dir / "b"}, {.buffer_size = 100, .memory_map = false})) ==
        both);
  CHECK(collect(tfrecord(dir / "b.gz", {.compression = Compression::gzip})) == p2);
  CHECK(collect(tfrecord(dir / "a.z", {.compression = Compression::zlib, .buffer_size = 64})) ==
        p1);
  auto ds = tfrecord(std::vector<std::string>{dir / "a", dir / "b"});
  CHECK(collect(ds) == collect(ds));  // every pass re-reads
  CHECK(collect(tfrecord(std::vector<std::string>{})).empty());
  CHECK_THROWS_AS(tfrecord(dir / "a", {.buffer_size = 0}), InvalidArgument);
}

TEST_CASE("tfrecord reads every fixture file", "[sources][tfrecord][fixtures]") {
  for (const Fixture& f : all_fixtures()) {
    INFO(f.name);
    const auto records = collect(tfrecord(f.path, {.compression = f.compression}));
    const auto& expected = f.expected.at("records");
    REQUIRE(records.size() == expected.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
      CHECK(sha256_hex(records[i]) == expected[i].at("sha256").get<std::string>());
    }
  }
}

TEST_CASE("after data loss tfrecord moves on to the next file", "[sources][tfrecord]") {
  TempDir dir;
  std::string bad = frame_records({"a1", "a2", "a3"});
  bad[frame_record("a1").size() + 12] ^= 0x20;  // payload of a2
  write_file(dir / "bad", bad);
  write_file(dir / "cut", frame_records({"c1", "c2"}).substr(0, 30));
  write_file(dir / "good", frame_records({"g1"}));
  for (bool mapped : {true, false}) {
    auto out = collect_outcomes(tfrecord({dir / "bad", dir / "missing", dir / "cut", dir / "good"},
                                         {.memory_map = mapped}));
    REQUIRE(out.size() == 6);
    CHECK(out[0].value == "a1");
    CHECK_THAT(out[1].error, Catch::StartsWith("DataLossError: corrupted record at 30") &&
                                 Catch::Contains("stage 'tfrecord'") &&
                                 Catch::Contains("file '" + dir / "bad" + "'") &&
                                 Catch::Contains("offset 30"));
    CHECK_THAT(out[2].error, Catch::StartsWith("IoError") && Catch::Contains("missing"));
    CHECK(out[3].value == "c1");
    CHECK_THAT(out[4].error, Catch::StartsWith("DataLossError: truncated record at 30"));
    CHECK(out[5].value == "g1");
  }

  // ignore_errors over a corrupt file ends instead of looping.
  auto kept = tfrecord({dir / "bad", dir / "cut", dir / "good"}).ignore_errors();
  CHECK(collect(kept) == V{"a1", "c1", "g1"});
  CHECK(kept.ignored_errors() == 2);
}

TEST_CASE("tfrecord without CRC checks skips verification", "[sources][tfrecord]") {
  TempDir dir;
  std::string bad = frame_records({"hello", "world"});
  bad[bad.size() - 1] ^= 0x01;  // the last data CRC
  write_file(dir / "bad", bad);
  CHECK_THROWS_AS(collect(tfrecord(dir / "bad")), DataLossError);
  CHECK(collect(tfrecord(dir / "bad", {.verify_crc = false})) == V{"hello", "world"});
}

TEST_CASE("tfrecord reads a large mapped file with its pages populated on the runtime",
          "[sources][tfrecord]") {
  // Files over two populate chunks get background jobs on the pipeline's pool;
  // the records must be the same whether the jobs run early, late or not at all.
  TempDir dir;
  V payloads;
  for (const auto& p : sample_payloads(1500, 7)) payloads.push_back(p + std::string(4000, 'x'));
  write_file(dir / "big", frame_records(payloads));
  REQUIRE(std::filesystem::file_size(dir / "big") > 2 * detail::FileMapping::populate_chunk);
  for (std::size_t threads : {1, 2}) {
    auto ds = tfrecord(dir / "big").with_options({.threads = threads});
    CHECK(collect(ds) == payloads);
    auto it = ds.iterator();  // stopped mid-file: pending jobs must not touch the unmapped file
    for (int i = 0; i < 700; ++i) REQUIRE(it.next());
  }
  CHECK(collect(tfrecord(dir / "big", {.memory_map = false})) == payloads);
}
