#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <ingest/formats/csv.hpp>

#include "support/files.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {
using Records = std::vector<std::vector<std::string>>;

Records split(const std::string& text, detail::CsvDialect dialect = {}, std::size_t buffer = 64,
              std::vector<std::int64_t>* lines = nullptr) {
  TempDir dir;
  write_file(dir / "f.csv", text);
  detail::CsvRecordReader reader(dir / "f.csv", Compression::none, buffer, dialect);
  Records out;
  while (reader.next()) {
    std::vector<std::string> fields;
    for (std::size_t i = 0; i < reader.size(); ++i) fields.emplace_back(reader.field(i));
    if (lines) lines->push_back(reader.record_line());
    out.push_back(std::move(fields));
  }
  return out;
}
}  // namespace

TEST_CASE("CSV splitting follows RFC 4180", "[formats][csv]") {
  CHECK(split("a,b,c\n1,2,3\n") == Records{{"a", "b", "c"}, {"1", "2", "3"}});
  CHECK(split("a,b\r\n1,2\r\n") == Records{{"a", "b"}, {"1", "2"}});
  CHECK(split("a,b\n1,2") == Records{{"a", "b"}, {"1", "2"}});  // no final newline
  CHECK(split("\"x,y\",\"say \"\"hi\"\"\",z\n") == Records{{"x,y", "say \"hi\"", "z"}});
  CHECK(split("\"two\nlines\",b\r\nc,d\n") == Records{{"two\nlines", "b"}, {"c", "d"}});
  CHECK(split(",,\n") == Records{{"", "", ""}});
  CHECK(split("\"\",x\n") == Records{{"", "x"}});
  // An empty line is a record of one empty field (tf.data's CsvDataset).
  CHECK(split("a\n\n\r\nb\n") == Records{{"a"}, {""}, {""}, {"b"}});
  CHECK(split("") == Records{});
  CHECK(split("a;b;\"c;d\"\n", {.delimiter = ';'}) == Records{{"a", "b", "c;d"}});
  CHECK(split("a\tb\n", {.delimiter = '\t'}) == Records{{"a", "b"}});
  CHECK(split("a\"b,c\n", {.quoting = false}) == Records{{"a\"b", "c"}});
}

TEST_CASE("CSV records longer than the buffer, and quotes at buffer edges", "[formats][csv]") {
  std::string text;
  Records expected;
  for (int i = 0; i < 200; ++i) {
    const std::string long_field(static_cast<std::size_t>(i * 13 % 300), 'x');
    text += std::to_string(i) + ",\"" + long_field + "\"\"q\"\"\r\n\"," + long_field + "\n";
    expected.push_back({std::to_string(i), long_field + "\"q\"\r\n", long_field});
  }
  for (std::size_t buffer : {64, 100, 1 << 16}) {
    std::vector<std::int64_t> lines;
    CHECK(split(text, {}, buffer, &lines) == expected);
    REQUIRE(lines.size() == 200);
    CHECK(lines[0] == 1);
    CHECK(lines[1] == 3);  // every record spans two lines
    CHECK(lines[199] == 399);
  }
}

TEST_CASE("malformed CSV names the line and column and skips the record", "[formats][csv]") {
  TempDir dir;
  write_file(dir / "f.csv", "a,b\n1,x\"y\n2,\"ok\"z\n3,\"open\n");
  detail::CsvRecordReader reader(dir / "f.csv", Compression::none, 64, {});
  REQUIRE(reader.next());
  auto expect_error = [&](std::int64_t line, std::int64_t column, const char* what) {
    try {
      reader.next();
      FAIL("no error");
    } catch (const InvalidArgument& e) {
      CHECK(e.context().line == line);
      CHECK(e.context().column == column);
      CHECK(e.context().file == dir / "f.csv");
      CHECK_THAT(e.message(), Catch::Contains(what));
    }
  };
  // Columns are numbered from 0, as select_cols numbers them (issue 16 item 3).
  expect_error(2, 1, "quote inside an unquoted field");
  expect_error(3, 1, "after the closing quote");
  expect_error(4, 1, "unterminated quoted field");
  CHECK_FALSE(reader.next());
}

TEST_CASE("CSV errors number columns from 0 in the context and in what()", "[formats][csv]") {
  // issue 16 item 3: messages said "column 1" for the first column while
  // select_cols and exclude_cols count from 0.
  TempDir dir;
  write_file(dir / "f.csv", "x\"y,b\nok,\"a\"b,c\n");
  detail::CsvRecordReader reader(dir / "f.csv", Compression::none, 64, {});
  try {
    reader.next();
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().column == 0);
    CHECK_THAT(e.what(), Catch::Contains("line 1, column 0") && Catch::Contains("f.csv"));
  }
  try {
    reader.next();
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().column == 1);
    CHECK_THAT(e.what(), Catch::Contains("line 2, column 1"));
  }
  CHECK_FALSE(reader.next());
}

TEST_CASE("CSV: empty lines are records and a bare CR is a line break, as in tf.data",
          "[formats][csv]") {
  // issue 10 item 15: empty lines were skipped silently and a bare \r stayed
  // inside the field; CsvDataset ends a record at \n, \r\n or \r.
  for (std::size_t buffer : {std::size_t{64}, std::size_t{65}, std::size_t{1} << 16}) {
    INFO(buffer);
    CHECK(split("\n", {}, buffer) == Records{{""}});
    CHECK(split("\n\n", {}, buffer) == Records{{""}, {""}});
    CHECK(split("\r", {}, buffer) == Records{{""}});
    CHECK(split("\r\n", {}, buffer) == Records{{""}});
    CHECK(split("a,b\rc,d\r", {}, buffer) == Records{{"a", "b"}, {"c", "d"}});
    CHECK(split("a,b\r\rc,d", {}, buffer) == Records{{"a", "b"}, {""}, {"c", "d"}});
    CHECK(split("a\r\n\r\nb", {}, buffer) == Records{{"a"}, {""}, {"b"}});
    CHECK(split("\"q\"\rx\r\n", {}, buffer) == Records{{"q"}, {"x"}});
    CHECK(split("\"two\rlines\",b\r", {}, buffer) == Records{{"two\rlines", "b"}});
    CHECK(split(",\r,", {}, buffer) == Records{{"", ""}, {"", ""}});
  }
  // A \r at every buffer edge: records stay whole and lines are counted once per break.
  std::string text;
  Records expected;
  std::vector<std::int64_t> expected_lines;
  std::int64_t line = 1;
  for (int i = 0; i < 300; ++i) {
    const std::string field(static_cast<std::size_t>(i % 70), 'a' + static_cast<char>(i % 26));
    const char* breaks[] = {"\n", "\r", "\r\n"};
    text += field + "," + std::to_string(i) + breaks[i % 3];
    expected.push_back({field, std::to_string(i)});
    expected_lines.push_back(line++);
    if (i % 7 == 0) {
      text += breaks[(i / 7) % 3];  // an empty line
      expected.push_back({""});
      expected_lines.push_back(line++);
    }
  }
  for (std::size_t buffer : {std::size_t{64}, std::size_t{97}, std::size_t{1} << 16}) {
    std::vector<std::int64_t> lines;
    CHECK(split(text, {}, buffer, &lines) == expected);
    CHECK(lines == expected_lines);
  }
  // Errors skip to the end of their line, whatever its break.
  TempDir dir;
  write_file(dir / "f.csv", "x\"y\rok\r\"open");
  detail::CsvRecordReader reader(dir / "f.csv", Compression::none, 64, {});
  CHECK_THROWS_AS(reader.next(), InvalidArgument);
  REQUIRE(reader.next());
  CHECK(reader.field(0) == "ok");
  CHECK(reader.record_line() == 2);
  CHECK_THROWS_AS(reader.next(), InvalidArgument);
  CHECK_FALSE(reader.next());
}
