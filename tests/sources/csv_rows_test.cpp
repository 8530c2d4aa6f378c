#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "support/files.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

// issue 16 item 3: a make_csv_dataset-like entry that reads the header and
// yields named columns.

TEST_CASE("csv_rows: the header names the columns, fields by name, typed on access",
          "[sources][csv_rows]") {
  TempDir dir;
  write_file(dir / "a.csv",
             "name,age,label\r\n"
             "ann,31,cat\r\n"
             "\"Smith, \"\"J\"\"\",\" 7 \",\"two\nlines\"\r\n");
  auto ds = csv_rows(dir / "a.csv");
  CHECK(ds.cardinality() == unknown_cardinality);
  const auto rows = collect(ds);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].names() == std::vector<std::string>{"name", "age", "label"});
  CHECK(rows[0].size() == 3);
  CHECK(rows[0]["name"] == "ann");
  CHECK(rows[0].get<float>("age") == 31.0f);
  CHECK(rows[0].get<std::int64_t>("age") == 31);
  CHECK(rows[0].get<std::string>("label") == "cat");
  CHECK(rows[0].get<std::string_view>("label") == "cat");
  CHECK(rows[0].field(2) == "cat");
  CHECK(rows[0].contains("age"));
  CHECK_FALSE(rows[0].contains("Age"));
  CHECK(rows[0].line() == 2);
  CHECK(rows[0].file() == dir / "a.csv");
  CHECK(rows[1]["name"] == "Smith, \"J\"");
  CHECK(rows[1].get<std::int32_t>("age") == 7);  // spaces around a number, as csv
  CHECK(rows[1]["label"] == "two\nlines");
  CHECK(rows[1].line() == 3);
  // Copies are independent of the reader and of each other.
  CsvRow copy = rows[1];
  CHECK(copy["label"] == "two\nlines");
  CsvRow empty;
  CHECK(empty.size() == 0);
  CHECK_FALSE(empty.contains("name"));
  CHECK_THROWS_AS(empty["name"], InvalidArgument);
}

TEST_CASE("csv_rows: batch, map and the other stages take rows", "[sources][csv_rows]") {
  TempDir dir;
  std::string text = "x,y\n";
  for (int i = 0; i < 5; ++i) text += std::to_string(i) + "," + std::to_string(i * 10) + "\n";
  write_file(dir / "b.csv", text);
  const auto batches = collect(csv_rows(dir / "b.csv").batch(2));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].size() == 2);
  CHECK(batches[2].size() == 1);
  CHECK(batches[1][1].get<std::int64_t>("y") == 30);
  CHECK(batches[2][0]["x"] == "4");
  // The usual end of such a pipeline: named fields to a typed tuple.
  const auto pairs = collect(csv_rows(dir / "b.csv")
                                 .map([](const CsvRow& row) {
                                   return std::tuple<float, std::int64_t>(
                                       row.get<float>("x"), row.get<std::int64_t>("y"));
                                 })
                                 .batch(5));
  REQUIRE(pairs.size() == 1);
  CHECK(std::get<1>(pairs[0]).shape() == Shape{5});
}

TEST_CASE("csv_rows: select_columns in the order listed, column_names without a header",
          "[sources][csv_rows]") {
  TempDir dir;
  write_file(dir / "s.csv", "id,age,label,extra\n1,31,a,x\n2,40,b\n");
  // Only the selected columns need to be there (as CsvDataset's select_cols).
  const auto rows = collect(csv_rows(dir / "s.csv", {.select_columns = {"label", "id"}}));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].names() == std::vector<std::string>{"label", "id"});
  CHECK(rows[0].field(0) == "a");
  CHECK(rows[1]["id"] == "2");
  CHECK_FALSE(rows[1].contains("age"));
  // Without a header: the names are given, and every line is a record.
  write_file(dir / "n.csv", "1,2\n3,4\n");
  const auto named =
      collect(csv_rows(dir / "n.csv", {.column_names = {"a", "b"}, .header = false}));
  REQUIRE(named.size() == 2);
  CHECK(named[0].get<std::int32_t>("b") == 2);
  CHECK(named[1].line() == 2);
  // Names given and a header present: the header line is skipped, not checked.
  const auto renamed = collect(csv_rows(dir / "n.csv", {.column_names = {"p", "q"}}));
  REQUIRE(renamed.size() == 1);
  CHECK(renamed[0]["q"] == "4");
  // Without selection a record must have every column.
  auto out = collect_outcomes(csv_rows(dir / "s.csv"));
  REQUIRE(out.size() == 2);
  CHECK_THAT(out[1].error, Catch::Contains("expected 4 fields, got 3") &&
                               Catch::Contains("s.csv") && Catch::Contains("line 3") &&
                               Catch::Contains("stage 'csv_rows'"));
}

TEST_CASE("csv_rows: column_defaults fill empty fields, required columns name the column",
          "[sources][csv_rows]") {
  TempDir dir;
  write_file(dir / "d.csv", "id,age,label\n1,,a\n2,NA,\n,5,c\n4,6,d\n");
  auto out = collect_outcomes(
      csv_rows(dir / "d.csv", {.column_defaults = {std::nullopt, "-1", "none"}, .na_value = "NA"}));
  REQUIRE(out.size() == 4);
  CHECK(out[0].value->get<int>("age") == -1);
  CHECK((*out[1].value)["age"] == "-1");
  CHECK((*out[1].value)["label"] == "none");
  CHECK_FALSE(out[2].value);
  CHECK_THAT(out[2].error,
             Catch::Contains("InvalidArgument") &&
                 Catch::Contains("column 0 ('id') is required (its column_defaults entry is "
                                 "std::nullopt) but its field is empty") &&
                 Catch::Contains("d.csv") && Catch::Contains("line 4, column 0") &&
                 Catch::Contains("stage 'csv_rows'"));
  CHECK(out[3].value->get<std::int64_t>("id") == 4);
  // With select_columns the defaults follow the selection's order; the
  // column in the message is the file's.
  auto selected = collect_outcomes(csv_rows(dir / "d.csv", {.select_columns = {"label", "age"},
                                                            .column_defaults = {std::nullopt, "0"},
                                                            .na_value = "NA"}));
  REQUIRE(selected.size() == 4);
  CHECK((*selected[0].value)["age"] == "0");
  CHECK_THAT(selected[1].error, Catch::Contains("column 2 ('label') is required") &&
                                    Catch::Contains("line 3, column 2"));
  // No defaults: empty fields read as "" and a number from one is an error.
  const auto plain = collect(csv_rows(dir / "d.csv"));
  REQUIRE(plain.size() == 4);
  CHECK(plain[0]["age"].empty());
  CHECK(plain[1]["label"].empty());
  try {
    (void)plain[0].get<float>("age");
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.what(), Catch::Contains("csv_rows: column 1 ('age') is empty (give it a default "
                                         "in column_defaults)") &&
                             Catch::Contains("d.csv") && Catch::Contains("line 2, column 1"));
    CHECK(e.context().column == 1);
  }
  // A wrong number of defaults.
  try {
    csv_rows(dir / "d.csv", {.column_defaults = {"0", "1"}});
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.what(), Catch::Contains("column_defaults has 2 values for 3 columns [id, age, "
                                         "label] (one per column"));
  }
}

TEST_CASE("csv_rows: an absent or unparsable column names the file, line, column and name",
          "[sources][csv_rows]") {
  TempDir dir;
  write_file(dir / "e.csv", "id,age\n1,old\n");
  const auto rows = collect(csv_rows(dir / "e.csv"));
  REQUIRE(rows.size() == 1);
  try {
    (void)rows[0].get<std::int32_t>("age");
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("csv_rows: cannot parse 'old' as int32 in column 1 ('age')") &&
                   Catch::Contains("e.csv") && Catch::Contains("line 2, column 1"));
    CHECK(e.context().file == dir / "e.csv");
    CHECK(e.context().line == 2);
    CHECK(e.context().column == 1);
  }
  try {
    (void)rows[0]["label"];
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("csv_rows: no column named 'label'; the row's columns are [id, "
                               "age]") &&
                   Catch::Contains("e.csv") && Catch::Contains("line 2"));
  }
  // Inside a map the error also names the stage and the element.
  auto out = collect_outcomes(
      csv_rows(dir / "e.csv").map([](const CsvRow& row) { return row.get<float>("age"); }));
  REQUIRE(out.size() == 1);
  CHECK_THAT(out[0].error, Catch::Contains("cannot parse 'old' as float in column 1 ('age')") &&
                               Catch::Contains("stage 'map'") && Catch::Contains("element 0"));
}

TEST_CASE("csv_rows: every file must have the first file's header", "[sources][csv_rows]") {
  TempDir dir;
  write_file(dir / "1.csv", "a,b\n1,2\n");
  write_file(dir / "2.csv", "a,c\n3,4\n5,6\n");
  write_file(dir / "3.csv", "");
  write_file(dir / "4.csv", "a,b\n7,8\n");
  auto out =
      collect_outcomes(csv_rows({dir / "1.csv", dir / "2.csv", dir / "3.csv", dir / "4.csv"}));
  REQUIRE(out.size() == 4);
  CHECK((*out[0].value)["b"] == "2");
  // The file that differs is named and skipped; the next file follows.
  CHECK_THAT(out[1].error, Catch::Contains("InvalidArgument") &&
                               Catch::Contains("the header [a, c] differs from the first "
                                               "file's [a, b] (every file must have the same "
                                               "header)") &&
                               Catch::Contains("2.csv") && Catch::Contains("line 1"));
  CHECK_THAT(out[2].error, Catch::Contains("cannot read the header: the file is empty") &&
                               Catch::Contains("3.csv"));
  CHECK((*out[3].value)["a"] == "7");
  CHECK(out[3].value->file() == dir / "4.csv");
}

TEST_CASE("csv_rows: bad arguments raise InvalidArgument when the dataset is built",
          "[sources][csv_rows]") {
  TempDir dir;
  write_file(dir / "h.csv", "id,age,label\n1,2,3\n");
  write_file(dir / "dup.csv", "id,age,id\n1,2,3\n");
  write_file(dir / "empty.csv", "");
  auto invalid = [&](FileList paths, CsvRowsOptions options, const std::string& what) {
    try {
      csv_rows(std::move(paths), std::move(options));
      FAIL("no error");
    } catch (const InvalidArgument& e) {
      CHECK_THAT(e.what(), Catch::Contains(what) && Catch::Contains("stage 'csv_rows'"));
    }
  };
  // A selected name the header lacks: the file, the name, the header's columns.
  invalid(dir / "h.csv", {.select_columns = {"age", "weight"}},
          "csv_rows: select_columns: no column named 'weight' in the header; its columns are "
          "[id, age, label]");
  invalid(dir / "h.csv", {.select_columns = {"age", "weight"}}, "h.csv");
  invalid(dir / "h.csv", {.select_columns = {"age", "age"}}, "select_columns lists 'age' twice");
  invalid(dir / "dup.csv", {},
          "the column name 'id' appears twice in the header [id, age, id] "
          "(columns 0 and 2)");
  invalid(dir / "dup.csv", {}, "dup.csv");
  invalid(dir / "h.csv", {.column_names = {"x", "x"}}, "appears twice in column_names");
  invalid(dir / "h.csv", {.column_names = {"x", "y"}, .select_columns = {"z"}},
          "no column named 'z'");
  invalid(dir / "empty.csv", {}, "cannot read the header: the file is empty");
  invalid(dir / "empty.csv", {}, "empty.csv");
  invalid(dir / "h.csv", {.header = false}, "with .header = false, give the columns' names");
  invalid(std::vector<std::string>{}, {}, "no files to read the header from");
  invalid(dir / "h.csv", {.delimiter = '"'}, "the delimiter cannot be the quote character");
  invalid(dir / "h.csv", {.buffer_size = 0}, "buffer_size must be > 0");
  CHECK_THROWS_AS(csv_rows(dir / "missing.csv"), IoError);
  // With the names given, no file is read when the dataset is built.
  CHECK_NOTHROW(csv_rows(dir / "missing.csv", {.column_names = {"a"}}));
  CHECK(collect(csv_rows(std::vector<std::string>{}, {.column_names = {"a"}})).empty());
}

TEST_CASE("csv_rows: long records, small buffers, gzip, delimiters", "[sources][csv_rows]") {
  TempDir dir;
  std::string text = "k;v\n";
  for (int i = 0; i < 500; ++i) {
    text +=
        std::to_string(i) + ";\"" + std::string(static_cast<std::size_t>(i % 150), 'v') + "\"\n";
  }
  write_file(dir / "big.csv.gz", gzip_bytes(text));
  auto it = csv_rows(dir / "big.csv.gz",
                     {.delimiter = ';', .compression = Compression::gzip, .buffer_size = 64})
                .iterator();
  for (int i = 0; i < 500; ++i) {
    auto row = it.next();
    REQUIRE(row);
    CHECK(row->get<int>("k") == i);
    CHECK(row->get<std::string>("v") == std::string(static_cast<std::size_t>(i % 150), 'v'));
    if (i == 250) break;  // an iterator destroyed mid-file
  }
}

TEST_CASE("csv_rows: the README's example", "[sources][csv_rows]") {
  TempDir dir;
  write_file(dir / "train.csv", "age,fare,class,survived\n22,7.25,3,0\n,71.3,1,1\n26,,3,1\n");
  auto ds = ingest::csv_rows(dir / "train.csv", {.select_columns = {"survived", "age", "fare"},
                                                 .column_defaults = {std::nullopt, "30", "0"}})
                .map([](const ingest::CsvRow& row) {
                  return std::tuple(row.get<float>("age"), row.get<float>("fare"),
                                    row.get<std::int64_t>("survived"));
                })
                .shuffle(1000, {.seed = 1})
                .batch(32);
  const auto batches = collect(ds);
  REQUIRE(batches.size() == 1);
  const auto& [age, fare, survived] = batches[0];
  REQUIRE(age.shape() == Shape{3});
  // Shuffled: compare as sums (22 + 30 + 26, 7.25 + 71.3 + 0, 0 + 1 + 1).
  float age_sum = 0;
  float fare_sum = 0;
  std::int64_t survived_sum = 0;
  for (std::int64_t i = 0; i < 3; ++i) {
    age_sum += age.data<float>()[i];
    fare_sum += fare.data<float>()[i];
    survived_sum += survived.data<std::int64_t>()[i];
  }
  CHECK(age_sum == 78.0f);
  CHECK(fare_sum == Approx(78.55f));
  CHECK(survived_sum == 2);
}
