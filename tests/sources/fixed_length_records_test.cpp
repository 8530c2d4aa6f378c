#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::string>;

TEST_CASE("fixed_length_records skips header and footer", "[sources][fixed_length_records]") {
  TempDir dir;
  write_file(dir / "a", "HHabcdefghFFF");
  CHECK(collect(fixed_length_records(dir / "a", 4, {.header_bytes = 2, .footer_bytes = 3})) ==
        V{"abcd", "efgh"});
  write_file(dir / "b", "abcdef");
  CHECK(collect(fixed_length_records(dir / "b", 3)) == V{"abc", "def"});
  CHECK(collect(fixed_length_records({dir / "b", dir / "b"}, 2)) ==
        V{"ab", "cd", "ef", "ab", "cd", "ef"});
  write_file(dir / "hf", "HHFFF");  // header and footer only
  CHECK(
      collect(fixed_length_records(dir / "hf", 4, {.header_bytes = 2, .footer_bytes = 3})).empty());
}

TEST_CASE("fixed_length_records: a body that is not whole records fails at the first next()",
          "[sources][fixed_length_records]") {
  // issue 10 item 16: a plain file's size is known, so the error comes
  // before any record (as tf.data), not after the records before it.
  TempDir dir;
  write_file(dir / "a", "HHabcdefgFFF");  // 7 bytes of records of 4
  write_file(dir / "b", "wxyz");
  write_file(dir / "c", "HHwxyzFFF");
  auto out = collect_outcomes(fixed_length_records({dir / "a", dir / "b", dir / "c"}, 4,
                                                   {.header_bytes = 2, .footer_bytes = 3}));
  REQUIRE(out.size() == 3);
  CHECK_FALSE(out[0].value);
  CHECK_THAT(out[0].error, Catch::Contains("DataLossError: truncated record at 6") &&
                               Catch::Contains("body of 7 bytes") &&
                               Catch::Contains("not a multiple of record_bytes 4"));
  CHECK_FALSE(out[1].value);  // b has no room for header and footer
  CHECK_THAT(out[1].error, Catch::Contains("fewer than header_bytes + footer_bytes"));
  CHECK(out[2].value == "wxyz");
  try {
    auto it = fixed_length_records(dir / "a", 4, {.header_bytes = 2, .footer_bytes = 3}).iterator();
    it.next();
    FAIL("no error");
  } catch (const DataLossError& e) {
    CHECK(e.context().file == dir / "a");
    CHECK(e.context().offset == 6u);
    CHECK(e.context().stage == "fixed_length_records");
  }
  // Many records before the cut: still the first next().
  write_file(dir / "long", std::string(4000, 'r') + "xy");
  auto it = fixed_length_records(dir / "long", 4).iterator();
  CHECK_THROWS_AS(it.next(), DataLossError);
  CHECK_FALSE(it.next());
  CHECK_THROWS_AS(fixed_length_records(dir / "a", 0), InvalidArgument);
}

TEST_CASE("fixed_length_records: a compressed file fails when the cut is reached",
          "[sources][fixed_length_records]") {
  // Its size is known only once decompressed: the records before the cut come first.
  TempDir dir;
  write_file(dir / "a.gz", gzip_bytes("HHabcdefgFFF"));
  auto out = collect_outcomes(fixed_length_records(
      dir / "a.gz", 4, {.header_bytes = 2, .footer_bytes = 3, .compression = Compression::gzip}));
  REQUIRE(out.size() == 2);
  CHECK(out[0].value == "abcd");
  CHECK_THAT(out[1].error,
             Catch::Contains("truncated record at 6") && Catch::Contains("3 of 4 bytes"));
  write_file(dir / "b.gz", gzip_bytes("wxyz"));
  CHECK_THAT(collect_outcomes(
                 fixed_length_records(
                     dir / "b.gz", 4,
                     {.header_bytes = 2, .footer_bytes = 3, .compression = Compression::gzip}))
                 .front()
                 .error,
             Catch::Contains("fewer than header_bytes + footer_bytes"));
}

TEST_CASE("fixed_length_records: huge sizes are rejected or bounded, never allocated",
          "[sources][fixed_length_records]") {
  // issue 10 item 16: header_bytes + footer_bytes wrapped, and a record_bytes
  // of 2^40 made the reader allocate 1 TiB before reading anything.
  TempDir dir;
  write_file(dir / "a", "abcdefgh");
  write_file(dir / "a.gz", gzip_bytes("abcdefgh"));
  const std::size_t max = SIZE_MAX;
  for (auto [header, footer] : {std::pair{max, std::size_t{1}}, std::pair{std::size_t{1}, max},
                                std::pair{max / 2 + 1, max / 2 + 1}}) {
    try {
      fixed_length_records(dir / "a", 4, {.header_bytes = header, .footer_bytes = footer});
      FAIL("no error");
    } catch (const InvalidArgument& e) {
      CHECK_THAT(e.message(), Catch::Contains("header_bytes + footer_bytes"));
    }
  }
  try {
    fixed_length_records(dir / "a", max - 2, {.header_bytes = 2, .footer_bytes = 1});
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.message(), Catch::Contains("record_bytes"));
  }
  const std::size_t tib = std::size_t{1} << 40;
  // Plain: the size says no record of that size fits; nothing is allocated.
  CHECK_THAT(collect_outcomes(fixed_length_records(dir / "a", tib)).front().error,
             Catch::Contains("truncated record at 0"));
  CHECK_THAT(
      collect_outcomes(fixed_length_records(dir / "a", 4, {.header_bytes = tib})).front().error,
      Catch::Contains("fewer than header_bytes + footer_bytes"));
  CHECK_THAT(
      collect_outcomes(fixed_length_records(dir / "a", 4, {.footer_bytes = tib})).front().error,
      Catch::Contains("fewer than header_bytes + footer_bytes"));
  // Compressed: memory grows only with the data that arrives.
  const FixedLengthRecordOptions gz{.compression = Compression::gzip};
  CHECK_THAT(collect_outcomes(fixed_length_records(dir / "a.gz", tib, gz)).front().error,
             Catch::Contains("truncated record at 0"));
  FixedLengthRecordOptions big_header = gz;
  big_header.header_bytes = tib;
  CHECK_THAT(collect_outcomes(fixed_length_records(dir / "a.gz", 4, big_header)).front().error,
             Catch::Contains("fewer than header_bytes + footer_bytes"));
  FixedLengthRecordOptions big_footer = gz;
  big_footer.footer_bytes = tib;
  CHECK_THAT(collect_outcomes(fixed_length_records(dir / "a.gz", 4, big_footer)).front().error,
             Catch::Contains("fewer than header_bytes + footer_bytes"));
  // Large records that are there are still read (through a growing window).
  const std::string big(3 << 20, 'b');
  write_file(dir / "big", big + big);
  write_file(dir / "big.gz", gzip_bytes(big + big));
  CHECK(collect(fixed_length_records(dir / "big", big.size(), {.buffer_size = 4096})) ==
        V{big, big});
  CHECK(collect(fixed_length_records(dir / "big.gz", big.size(),
                                     {.compression = Compression::gzip, .buffer_size = 4096})) ==
        V{big, big});
}

TEST_CASE("fixed_length_records reads compressed files", "[sources][fixed_length_records]") {
  TempDir dir;
  std::string data = "HEADER";
  V records;
  for (int i = 0; i < 1000; ++i) {
    records.push_back(std::string(10, static_cast<char>('a' + i % 26)) + std::to_string(i % 10));
    data += records.back();
  }
  data += "FOOT";
  write_file(dir / "a.gz", gzip_bytes(data));
  CHECK(collect(fixed_length_records(dir / "a.gz", 11,
                                     {.header_bytes = 6,
                                      .footer_bytes = 4,
                                      .compression = Compression::gzip,
                                      .buffer_size = 100})) == records);
}
