#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "support/files.hpp"
#include "support/memory.hpp"
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

TEST_CASE("csv: per-column defaults fill empty fields, and required columns fail",
          "[sources][csv]") {
  TempDir dir;
  write_file(dir / "d.csv", "1,,\n,b,2.5\n3,c,NA\n");
  auto ds = csv<std::int64_t, std::string, double>(
      dir / "d.csv", {.defaults = {std::nullopt, std::string("none"), -1.0}, .na_value = "NA"});
  auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == std::tuple<std::int64_t, std::string, double>{1, "none", -1.0});
  CHECK_FALSE(out[1].value);
  CHECK_THAT(out[1].error, Catch::Contains("InvalidArgument") &&
                               Catch::Contains("column 0 is required (it has no default) but "
                                               "its field is empty") &&
                               Catch::Contains("line 2, column 0") && Catch::Contains("d.csv") &&
                               Catch::Contains("stage 'csv'"));
  CHECK(out[2].value == std::tuple<std::int64_t, std::string, double>{3, "c", -1.0});
}

TEST_CASE("csv: type errors name file, line and column, and the next record follows",
          "[sources][csv]") {
  TempDir dir;
  write_file(dir / "t.csv", "1,2.5\nx,1\n3,abc\n4,1e999\n99999999999,1\n5,+7\n");
  auto out = collect_outcomes(csv<std::int32_t, float>(dir / "t.csv"));
  REQUIRE(out.size() == 6);
  CHECK(out[0].value == std::tuple<std::int32_t, float>{1, 2.5f});
  CHECK_THAT(out[1].error, Catch::Contains("cannot parse 'x' as int32 in column 0") &&
                               Catch::Contains("line 2, column 0"));
  CHECK_THAT(out[2].error, Catch::Contains("cannot parse 'abc' as float in column 1") &&
                               Catch::Contains("line 3, column 1"));
  CHECK_THAT(out[3].error, Catch::Contains("as float"));  // out of range
  CHECK_THAT(out[4].error, Catch::Contains("as int32"));  // out of range
  CHECK(out[5].value == std::tuple<std::int32_t, float>{5, 7.0f});
  try {
    collect(csv<std::int32_t, float>(dir / "t.csv"));
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().file == dir / "t.csv");
    CHECK(e.context().line == 2);
    CHECK(e.context().column == 0);  // 0-based, as select_cols
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

TEST_CASE("csv: an empty line is a record of one empty field, as in tf.data", "[sources][csv]") {
  // issue 10 item 15: ingest skipped empty lines silently.
  TempDir dir;
  write_file(dir / "one.csv", "1\n\n3\r\r\n5\n");
  CHECK(collect(csv<std::int64_t>(dir / "one.csv", {.defaults = {std::int64_t{-1}}})) ==
        std::vector<std::tuple<std::int64_t>>{{1}, {-1}, {3}, {-1}, {5}});
  // A required column: an error naming the file and line; the next record follows.
  auto required = collect_outcomes(csv<std::int64_t>(dir / "one.csv"));
  REQUIRE(required.size() == 5);
  CHECK_THAT(required[1].error, Catch::Contains("is required") && Catch::Contains("line 2") &&
                                    Catch::Contains("one.csv"));
  CHECK_THAT(required[3].error, Catch::Contains("line 4"));
  CHECK(required[4].value == std::tuple<std::int64_t>{5});
  // More than one column: the empty line has too few fields.
  write_file(dir / "two.csv", "1,2\n\n3,4\n");
  auto two = collect_outcomes(
      csv<std::int64_t, std::int64_t>(dir / "two.csv", {.defaults = {std::int64_t{0}, 0}}));
  REQUIRE(two.size() == 3);
  CHECK_THAT(two[1].error, Catch::Contains("expected 2 fields, got 1") &&
                               Catch::Contains("line 2") && Catch::Contains("two.csv"));
  CHECK(two[2].value == std::tuple<std::int64_t, std::int64_t>{3, 4});
  // A bare \r ends a record (it stayed in the last field before).
  write_file(dir / "cr.csv", "1,a\r2,b\r");
  CHECK(collect(csv<std::int64_t, std::string>(dir / "cr.csv")) ==
        std::vector<std::tuple<std::int64_t, std::string>>{{1, "a"}, {2, "b"}});
}

TEST_CASE("csv: an empty file with a header is an error naming the file", "[sources][csv]") {
  // issue 10 item 15: tf.data raises "Can't read header of file"; ingest returned nothing.
  TempDir dir;
  write_file(dir / "empty.csv", "");
  write_file(dir / "header-only.csv", "a,b\n");
  try {
    collect(csv<std::int64_t, std::int64_t>(dir / "empty.csv", {.header = true}));
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().file == dir / "empty.csv");
    CHECK_THAT(e.message(), Catch::Contains("header"));
  }
  CHECK(
      collect(csv<std::int64_t, std::int64_t>(dir / "header-only.csv", {.header = true})).empty());
  CHECK(collect(csv<std::int64_t, std::int64_t>(dir / "empty.csv")).empty());
}

TEST_CASE("csv: exclude_cols drops columns (tf.data semantics)", "[sources][csv]") {
  // issue 10 item 15: the option did not exist.
  TempDir dir;
  write_file(dir / "e.csv", "a,1,x,2.5\nb,2,y,3.5\nc,3,z\n");
  using Row = std::tuple<std::string, double>;
  auto out = collect_outcomes(csv<std::string, double>(dir / "e.csv", {.exclude_cols = {1, 2}}));
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == Row{"a", 2.5});
  CHECK(out[1].value == Row{"b", 3.5});
  CHECK_THAT(out[2].error,
             Catch::Contains("expected 4 fields, got 3") && Catch::Contains("line 3"));
  // The last columns can be excluded; the count is exact.
  auto last =
      collect_outcomes(csv<std::string, std::int64_t>(dir / "e.csv", {.exclude_cols = {2, 3}}));
  REQUIRE(last.size() == 3);
  CHECK(last[1].value == std::tuple<std::string, std::int64_t>{"b", 2});
  CHECK_FALSE(last[2].value);  // the short third record
  CHECK(collect_outcomes(csv<std::string>(dir / "e.csv", {.exclude_cols = {1, 2, 3}}))
            .front()
            .value == std::tuple<std::string>{"a"});
  // Invalid: with select_cols, not increasing, or past the file's columns.
  CHECK_THROWS_AS(
      (csv<std::string, double>(dir / "e.csv", {.select_cols = {0, 3}, .exclude_cols = {1, 2}})),
      InvalidArgument);
  CHECK_THROWS_AS((csv<std::string, double>(dir / "e.csv", {.exclude_cols = {2, 1}})),
                  InvalidArgument);
  CHECK_THROWS_AS((csv<std::string, double>(dir / "e.csv", {.exclude_cols = {1, 1}})),
                  InvalidArgument);
  CHECK_THROWS_AS((csv<std::string, double>(dir / "e.csv", {.exclude_cols = {1, 4}})),
                  InvalidArgument);
  CHECK_NOTHROW(csv<std::string, double>(dir / "e.csv", {.exclude_cols = {2, 3}}));
}

TEST_CASE("csv: a partial .defaults list makes the remaining columns required", "[sources][csv]") {
  // issue 16 item 3: `.defaults = {1, 2}` for three columns did not compile
  // ("could not convert '{{1, 2}}' ... to CsvOptions"); now the missing
  // trailing defaults are required columns.
  TempDir dir;
  write_file(dir / "p.csv", "a,b,c\n,,3\n4,5,\n,,\n");
  using Row = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  auto out = collect_outcomes(csv<std::int64_t, std::int64_t, std::int64_t>(
      dir / "p.csv", {.defaults = {1, 2}, .header = true}));
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == Row{1, 2, 3});
  CHECK_FALSE(out[1].value);
  // The file, the line, the column by 0-based index and by its header name.
  CHECK_THAT(out[1].error,
             Catch::Contains("column 2 ('c') is required (it has no default) but its field is "
                             "empty") &&
                 Catch::Contains("p.csv") && Catch::Contains("line 3, column 2"));
  CHECK_THAT(out[2].error, Catch::Contains("column 2 ('c') is required"));
  // One value, std::nullopt and `{}` entries, and a full list all work.
  CHECK(
      collect_outcomes(csv<std::int64_t, std::string>(
                           dir / "p.csv", {.defaults = {7}, .header = true, .select_cols = {0, 2}}))
          .front()
          .value == std::tuple<std::int64_t, std::string>{7, "3"});
  auto nullopt_first = collect_outcomes(csv<std::int64_t, std::int64_t, std::int64_t>(
      dir / "p.csv", {.defaults = {std::nullopt, 0}, .header = true}));
  CHECK_THAT(nullopt_first[0].error, Catch::Contains("column 0 ('a') is required"));
  CHECK_THAT(nullopt_first[1].error, Catch::Contains("column 2 ('c') is required"));
  CsvDefaults<std::int64_t, std::string, double> full = {{}, std::string("x"), 0.5};
  CHECK_FALSE(full.get<0>());
  CHECK(full.get<1>() == "x");
  CHECK(full.get<2>() == 0.5);
  CsvDefaults<std::int64_t, std::string, double> two = {std::int64_t{3}, "y"};
  CHECK(two.get<0>() == 3);
  CHECK(two.get<1>() == "y");
  CHECK_FALSE(two.get<2>());
  CsvDefaults<std::int64_t, std::string, double> copy = two;  // copies are not partial lists
  CHECK(copy.get<1>() == "y");
  // na_value in a required column says so.
  write_file(dir / "na.csv", "1,NA\n");
  CHECK_THAT(
      collect_outcomes(csv<std::int64_t, double>(dir / "na.csv", {.na_value = "NA"})).front().error,
      Catch::Contains("column 1 is required (it has no default) but its field is 'NA' "
                      "(na_value)") &&
          Catch::Contains("line 1, column 1"));
}

TEST_CASE("csv: messages name the header's column when there is a header", "[sources][csv]") {
  TempDir dir;
  write_file(dir / "h.csv", "id,score\n1,2.5\n2,abc\n");
  auto out = collect_outcomes(csv<std::int32_t, float>(dir / "h.csv", {.header = true}));
  REQUIRE(out.size() == 2);
  CHECK_THAT(out[1].error, Catch::Contains("cannot parse 'abc' as float in column 1 ('score')") &&
                               Catch::Contains("h.csv") && Catch::Contains("line 3, column 1"));
  // select_cols: the column is the file's, not the tuple's.
  write_file(dir / "s.csv", "a,b,c\nx,1,\n");
  CHECK_THAT(collect_outcomes(csv<std::string, std::int64_t>(
                                  dir / "s.csv", {.header = true, .select_cols = {0, 2}}))
                 .front()
                 .error,
             Catch::Contains("column 2 ('c') is required") && Catch::Contains("line 2, column 2"));
}

TEST_CASE("csv: select_names picks columns by header name, in the order listed", "[sources][csv]") {
  // issue 16 item 3: columns could only be picked by index.
  TempDir dir;
  write_file(dir / "a.csv", "id,name,age,label\n1,ann,31,0\n2,bob,,1\n");
  write_file(dir / "b.csv", "label,age,id\n1,40,3\n");  // another order: resolved per file
  using Row = std::tuple<std::int32_t, std::string>;
  auto out = collect_outcomes(csv<std::int32_t, std::string>(
      {dir / "a.csv", dir / "b.csv"},
      {.defaults = {-1}, .header = true, .select_names = {"age", "label"}}));
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == Row{31, "0"});
  CHECK(out[1].value == Row{-1, "1"});
  CHECK(out[2].value == Row{40, "1"});
  // Errors name the file's column and its name.
  write_file(dir / "bad.csv", "x,age\n1,old\n");
  auto bad = collect_outcomes(
      csv<std::int32_t>(dir / "bad.csv", {.header = true, .select_names = {"age"}}));
  REQUIRE(bad.size() == 1);
  CHECK_THAT(bad[0].error, Catch::Contains("cannot parse 'old' as int32 in column 1 ('age')") &&
                               Catch::Contains("line 2, column 1"));
  // A record shorter than the columns picked.
  write_file(dir / "short.csv", "a,b,c\n1,2\n1,2,3\n");
  auto short_rows = collect_outcomes(csv<std::int64_t, std::int64_t>(
      dir / "short.csv", {.header = true, .select_names = {"c", "a"}}));
  REQUIRE(short_rows.size() == 2);
  CHECK_THAT(short_rows[0].error,
             Catch::Contains("expected at least 3 fields, got 2") && Catch::Contains("line 2"));
  CHECK(short_rows[1].value == std::tuple<std::int64_t, std::int64_t>{3, 1});
}

TEST_CASE("csv: a name missing from a file's header skips that file with a clear error",
          "[sources][csv]") {
  TempDir dir;
  write_file(dir / "good.csv", "age,label\n1,a\n");
  write_file(dir / "other.csv", "age,lbl,x\n2,b,c\n3,c,d\n");
  write_file(dir / "twice.csv", "label,age,label\n4,d,e\n");
  auto ds = csv<std::int64_t, std::string>(
      {dir / "good.csv", dir / "other.csv", dir / "twice.csv", dir / "good.csv"},
      {.header = true, .select_names = {"age", "label"}});
  auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 4);
  CHECK(out[0].value == std::tuple<std::int64_t, std::string>{1, "a"});
  CHECK_THAT(out[1].error, Catch::Contains("InvalidArgument") &&
                               Catch::Contains("no column named 'label' in the header; its "
                                               "columns are [age, lbl, x]") &&
                               Catch::Contains("other.csv") && Catch::Contains("line 1") &&
                               Catch::Contains("stage 'csv'"));
  CHECK_THAT(out[2].error, Catch::Contains("the name 'label' appears twice in the header "
                                           "[label, age, label] (columns 0 and 2)") &&
                               Catch::Contains("twice.csv"));
  CHECK(out[3].value == std::tuple<std::int64_t, std::string>{1, "a"});
  try {
    collect(ds);
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().file == dir / "other.csv");
    CHECK(e.context().line == 1);
  }
  // Bad arguments, when the dataset is built.
  auto invalid = [&](CsvOptions<std::int64_t, std::string> options, const char* what) {
    try {
      csv<std::int64_t, std::string>(dir / "good.csv", std::move(options));
      FAIL("no error");
    } catch (const InvalidArgument& e) {
      CHECK_THAT(e.what(), Catch::Contains(what));
    }
  };
  invalid({.select_names = {"age", "label"}}, "select_names needs .header = true");
  invalid({.header = true, .select_names = {"age"}},
          "select_names must list 2 names, one per column type, not 1");
  invalid({.header = true, .select_names = {"age", "age"}}, "select_names lists 'age' twice");
  invalid({.header = true, .select_cols = {0, 1}, .select_names = {"age", "label"}},
          "select_names cannot be given with select_cols or exclude_cols");
  invalid({.header = true, .exclude_cols = {2}, .select_names = {"age", "label"}},
          "select_names cannot be given with select_cols or exclude_cols");
}

TEST_CASE("csv: a line of millions of fields costs what the schema reads, then the next follows",
          "[sources][csv][hostile]") {
  // 5 M fields in one 10 MB line, read as two columns.
  TempDir dir;
  std::string line;
  line.reserve(10'000'002);
  for (int i = 0; i < 5'000'000; ++i) line += i + 1 < 5'000'000 ? "0," : "00";
  write_file(dir / "wide.csv", "1,2\n" + line + "\n3,4\n");
  line.clear();
  line.shrink_to_fit();
  const std::size_t line_bytes = 10'000'001;
  const std::size_t max_line = std::size_t{16} << 20;
  std::vector<Outcome<std::tuple<std::int64_t, std::int64_t>>> out;
  const std::uint64_t before = rss_bytes();
  REQUIRE(reset_peak_rss());
  out = collect_outcomes(
      csv<std::int64_t, std::int64_t>(dir / "wide.csv", {.max_line_bytes = max_line}));
  const std::uint64_t peak = peak_rss_bytes();
  const std::uint64_t grew = peak > before ? peak - before : 0;
  INFO("peak RSS +" << grew << " bytes");
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == std::tuple<std::int64_t, std::int64_t>{1, 2});
  CHECK_THAT(out[1].error, Catch::Contains("expected 2 fields, got 5000000") &&
                               Catch::Contains("wide.csv") && Catch::Contains("line 2"));
  CHECK(out[2].value == std::tuple<std::int64_t, std::int64_t>{3, 4});
  if (memory_is_measured) CHECK(grew <= 2 * line_bytes + max_line);
}

TEST_CASE("csv: a line longer than max_line_bytes is an error naming file and line",
          "[sources][csv][hostile]") {
  TempDir dir;
  // A long line with a quoted line break inside: it is one record.
  const std::string long_line =
      "\"" + std::string(1 << 20, 'x') + "\n" + std::string(2 << 20, 'y') + "\",1";
  write_file(dir / "long.csv", "a,1\n" + long_line + "\nb,2\n");
  auto ds = csv<std::string, std::int32_t>(dir / "long.csv", {.max_line_bytes = 1 << 20});
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == std::tuple<std::string, std::int32_t>{"a", 1});
  CHECK_THAT(out[1].error, Catch::Contains("longer than max_line_bytes (1048576 bytes)") &&
                               Catch::Contains("long.csv") && Catch::Contains("line 2"));
  CHECK(out[2].value == std::tuple<std::string, std::int32_t>{"b", 2});
  CHECK(CsvOptions<std::int32_t>{}.max_line_bytes == std::size_t{64} << 20);
  CHECK_THROWS_AS(csv<std::int32_t>(dir / "long.csv", {.max_line_bytes = 0}), InvalidArgument);
  // csv_rows takes the same bound.
  write_file(dir / "rows.csv", "s,n\n" + long_line + "\nb,2\n");
  const auto rows = collect_outcomes(csv_rows(dir / "rows.csv", {.max_line_bytes = 1 << 20}));
  REQUIRE(rows.size() == 2);
  CHECK_THAT(rows[0].error, Catch::Contains("max_line_bytes") && Catch::Contains("line 2"));
  CHECK(rows[1].value.has_value());
}
