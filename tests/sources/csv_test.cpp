#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "support/files.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("csv yields typed tuples, with quoting, CRLF and header skipping", "[sources][csv]") {
  TempDir dir;
  write_file(dir / "a.csv",
             "id,name,score,big,ratio\r\n"
             "1,\"Smith, \"\"J\"\"\",2.5,9000000000,0.125\r\n"
             "2,\"multi\nline\",-1e3,-7, 3 \n");
  using Row = std::tuple<std::int32_t, std::string, float, std::int64_t, double>;
  const auto rows = collect(
      csv<std::int32_t, std::string, float, std::int64_t, double>(dir / "a.csv", {.header = true}));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == Row{1, "Smith, \"J\"", 2.5f, 9000000000, 0.125});
  CHECK(rows[1] == Row{2, "multi\nline", -1000.0f, -7, 3.0});
  // header applies to every file
  const auto twice = collect(csv<std::int32_t, std::string, float, std::int64_t, double>(
      {dir / "a.csv", dir / "a.csv"}, {.header = true}));
  CHECK(twice.size() == 4);
}

TEST_CASE("csv: per-column defaults fill empty fields; required columns fail", "[sources][csv]") {
  TempDir dir;
  write_file(dir / "d.csv", "1,,\n,b,2.5\n3,c,NA\n");
  auto ds = csv<std::int64_t, std::string, double>(
      dir / "d.csv", {.defaults = {std::nullopt, std::string("none"), -1.0}, .na_value = "NA"});
  auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == std::tuple<std::int64_t, std::string, double>{1, "none", -1.0});
  CHECK_FALSE(out[1].value);
  CHECK_THAT(out[1].error, Catch::Contains("InvalidArgument") &&
                               Catch::Contains("column 1 has no default") &&
                               Catch::Contains("line 2") && Catch::Contains("column 1") &&
                               Catch::Contains("d.csv") && Catch::Contains("stage 'csv'"));
  CHECK(out[2].value == std::tuple<std::int64_t, std::string, double>{3, "c", -1.0});
}

TEST_CASE("csv: type errors name file, line and column, and the next record follows",
          "[sources][csv]") {
  TempDir dir;
  write_file(dir / "t.csv", "1,2.5\nx,1\n3,abc\n4,1e999\n99999999999,1\n5,+7\n");
  auto out = collect_outcomes(csv<std::int32_t, float>(dir / "t.csv"));
  REQUIRE(out.size() == 6);
  CHECK(out[0].value == std::tuple<std::int32_t, float>{1, 2.5f});
  CHECK_THAT(out[1].error, Catch::Contains("cannot parse 'x' as int32") &&
                               Catch::Contains("line 2") && Catch::Contains("column 1"));
  CHECK_THAT(out[2].error, Catch::Contains("cannot parse 'abc' as float") &&
                               Catch::Contains("line 3") && Catch::Contains("column 2"));
  CHECK_THAT(out[3].error, Catch::Contains("as float"));  // out of range
  CHECK_THAT(out[4].error, Catch::Contains("as int32"));  // out of range
  CHECK(out[5].value == std::tuple<std::int32_t, float>{5, 7.0f});
  try {
    collect(csv<std::int32_t, float>(dir / "t.csv"));
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().file == dir / "t.csv");
    CHECK(e.context().line == 2);
    CHECK(e.context().column == 1);
  }
}

TEST_CASE("csv: field counts, select_cols, delimiters, compressed files", "[sources][csv]") {
  TempDir dir;
  write_file(dir / "n.csv", "1,2\n1,2,3\n4,5\n");
  auto out = collect_outcomes(csv<std::int64_t, std::int64_t>(dir / "n.csv"));
  REQUIRE(out.size() == 3);
  CHECK_THAT(out[1].error,
             Catch::Contains("expected 2 fields, got 3") && Catch::Contains("line 2"));
  CHECK(out[2].value == std::tuple<std::int64_t, std::int64_t>{4, 5});

  write_file(dir / "s.tsv", "a\t1\tx\t2.5\nb\t2\ty\t3.5\n");
  const auto picked =
      collect(csv<std::string, double>(dir / "s.tsv", {.delimiter = '\t', .select_cols = {0, 3}}));
  CHECK(picked == std::vector<std::tuple<std::string, double>>{{"a", 2.5}, {"b", 3.5}});
  CHECK_THROWS_AS((csv<std::string, double>(dir / "s.tsv", {.select_cols = {3, 0}})),
                  InvalidArgument);
  CHECK_THROWS_AS(csv<std::string>(dir / "s.tsv", {.delimiter = '"'}), InvalidArgument);

  std::string text;
  for (int i = 0; i < 2000; ++i) text += std::to_string(i) + ",\"v" + std::to_string(i) + "\"\n";
  write_file(dir / "big.csv.gz", gzip_bytes(text));
  const auto rows = collect(csv<std::int32_t, std::string>(
      dir / "big.csv.gz", {.compression = Compression::gzip, .buffer_size = 128}));
  REQUIRE(rows.size() == 2000);
  CHECK(rows[1999] == std::tuple<std::int32_t, std::string>{1999, "v1999"});
}
