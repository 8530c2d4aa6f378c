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

TEST_CASE("fixed_length_records: a truncated last record is data loss",
          "[sources][fixed_length_records]") {
  TempDir dir;
  write_file(dir / "a", "HHabcdefgFFF");  // 7 bytes of records of 4
  write_file(dir / "b", "wxyz");
  auto out = collect_outcomes(
      fixed_length_records({dir / "a", dir / "b"}, 4, {.header_bytes = 2, .footer_bytes = 3}));
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == "abcd");
  CHECK_THAT(out[1].error, Catch::Contains("DataLossError: truncated record at 6") &&
                               Catch::Contains("3 of 4 bytes"));
  CHECK_FALSE(out[2].value);  // b has no room for header and footer
  CHECK_THAT(out[2].error, Catch::Contains("fewer than header_bytes + footer_bytes"));
  try {
    collect(fixed_length_records(dir / "a", 4, {.header_bytes = 2, .footer_bytes = 3}));
    FAIL("no error");
  } catch (const DataLossError& e) {
    CHECK(e.context().file == dir / "a");
    CHECK(e.context().offset == 6u);
    CHECK(e.context().stage == "fixed_length_records");
  }
  CHECK_THROWS_AS(fixed_length_records(dir / "a", 0), InvalidArgument);
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
