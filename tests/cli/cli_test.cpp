// The `ingest` tool (tools/ingest), run as a user runs it: its output, its
// JSON and its exit codes on the fixtures and on corrupt copies of them; the
// files it writes read back by ingest's readers and by an independent
// decoder (cli/tfrecord_check.py, Python's standard library only).
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/sources/tfrecord_index_file.hpp>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/paths.hpp"
#include "support/sha256.hpp"

namespace ingest::testing {
extern const char* const cli_tool;    // the built tool (tests/CMakeLists.txt)
extern const char* const cli_python;  // python3
}  // namespace ingest::testing

namespace {

using namespace ingest;
using namespace ingest::testing;
using nlohmann::json;

struct CliRun {
  int code = -1;
  std::string out, err;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `program args...` with stderr to a file (not a terminal: plain progress lines).
CliRun run_program(const std::string& program, const std::vector<std::string>& args) {
  TempDir scratch;
  const std::string err_path = scratch / "stderr";
  std::string command = shell_quote(program);
  for (const std::string& a : args) command += " " + shell_quote(a);
  command += " 2>" + shell_quote(err_path) + " </dev/null";
  CliRun r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe);
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = file_contents(err_path);
  return r;
}

CliRun cli(const std::vector<std::string>& args) { return run_program(cli_tool, args); }

// The sorted names in a directory (no temporary left behind).
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string fixture(const std::string& name) { return fixture_dir() + "/" + name; }

// Every record of a TFRecord file, read by ingest::tfrecord.
std::vector<std::string> records_of(const std::string& path, Compression c = Compression::none) {
  std::vector<std::string> out;
  for (std::string& r : tfrecord(path, {.compression = c})) out.push_back(std::move(r));
  return out;
}

// The independent decoder's reading of `path` (one JSON document).
json python_check(const std::string& path) {
  const CliRun r = run_program(
      cli_python, {std::string(INGEST_FIXTURES_DIR) + "/../cli/tfrecord_check.py", path});
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// Checks every record of `path` as parsed by ingest against the decoder's JSON.
void check_against_python(const std::string& path, Compression c) {
  const json expected = python_check(path);
  CHECK(expected.at("compression") == std::string(compression_name(c)));
  const std::vector<std::string> records = records_of(path, c);
  REQUIRE(expected.at("num_records").get<std::size_t>() == records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const json& features = expected["records"][i].at("features");
    const ParsedExample parsed = parse_example(records[i], var_len_spec(features));
    check_features(features, parsed, path + " record " + std::to_string(i));
  }
}

std::string corrupt_copy(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir / name;
  write_file(path, bytes);
  return path;
}

}  // namespace

TEST_CASE("ingest CLI: --help, a command's --help, and usage errors exit 2", "[cli]") {
  const CliRun help = cli({"--help"});
  CHECK(help.code == 0);
  for (const char* c : {"inspect", "index", "write-tfrecords", "exit codes"}) {
    CHECK(help.out.find(c) != std::string::npos);
  }
  for (const char* c : {"inspect", "index", "write-tfrecords"}) {
    const CliRun r = cli({c, "--help"});
    CHECK(r.code == 0);
    CHECK(r.out.find(std::string("usage: ingest ") + c) != std::string::npos);
  }
  CHECK(cli({}).code == 2);
  const CliRun unknown = cli({"frobnicate"});
  CHECK(unknown.code == 2);
  CHECK(unknown.err.find("unknown command 'frobnicate'") != std::string::npos);
  const CliRun option = cli({"inspect", "--bogus", fixture("pwnall-tfrecord__singles.tfrecords")});
  CHECK(option.code == 2);
  CHECK(option.err.find("unknown option '--bogus'") != std::string::npos);
  CHECK(cli({"inspect"}).code == 2);
  CHECK(cli({"inspect", "--sample", "x", fixture("pwnall-tfrecord__singles.tfrecords")}).code == 2);
  CHECK(cli({"write-tfrecords", "--from", "parquet", "x", "--out", "y"}).code == 2);
  CHECK(cli({"write-tfrecords", "--from", "csv", "x.csv"}).code == 2);  // no --out
}

TEST_CASE("ingest CLI: inspect agrees with every fixture's reference decoding", "[cli]") {
  std::vector<std::string> args = {"inspect", "--json", "--sample", "5"};
  const std::vector<Fixture> fixtures = all_fixtures();
  for (const Fixture& f : fixtures) args.push_back(f.path);
  const CliRun r = cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json out = json::parse(r.out);
  REQUIRE(out.at("files").size() == fixtures.size());
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < fixtures.size(); ++i) {
    const Fixture& f = fixtures[i];
    const json& got = out["files"][i];
    INFO(f.name);
    CHECK(got.at("path") == f.path);
    CHECK(got.at("compression") == f.expected.at("compression"));
    CHECK(got.at("records") == f.expected.at("num_records"));
    CHECK(got.at("file_bytes") == f.expected.at("file_size"));
    CHECK(got.at("crc_ok") == true);
    CHECK(got.at("error").is_null());
    std::vector<std::uint64_t> sizes;
    std::uint64_t payload = 0;
    for (const json& rec : f.expected.at("records")) {
      sizes.push_back(rec.at("length"));
      payload += rec.at("length").get<std::uint64_t>();
    }
    std::sort(sizes.begin(), sizes.end());
    CHECK(got.at("payload_bytes") == payload);
    CHECK(got["record_bytes"].at("min") == sizes.front());
    CHECK(got["record_bytes"].at("median") == sizes[(sizes.size() - 1) / 2]);
    CHECK(got["record_bytes"].at("max") == sizes.back());
    const std::string kind = f.expected.at("payload_kind");
    const json& schema = got.at("schema");
    CHECK(schema.at("payload") == (kind == "example"            ? "tf.Example"
                                   : kind == "sequence_example" ? "tf.SequenceExample"
                                                                : "other"));
    // The schema's keys are those of the first 5 records.
    if (kind == "example") {
      std::map<std::string, std::string> keys;
      for (std::size_t k = 0; k < std::min<std::size_t>(5, sizes.size()); ++k) {
        for (const auto& [name, feature] : f.expected["records"][k].at("features").items()) {
          std::string& type = keys[name];
          const std::string t = feature.at("kind");
          if (type.empty() || type == "none") type = t;
        }
      }
      REQUIRE(schema.at("features").size() == keys.size());
      for (const json& feature : schema.at("features")) {
        CHECK(keys.at(feature.at("key").get<std::string>()) == feature.at("type"));
      }
    }
    total += f.expected.at("num_records").get<std::uint64_t>();
  }
  CHECK(out["total"].at("records") == total);
  CHECK(out.at("exit_code") == 0);
}

TEST_CASE("ingest CLI: inspect prints the schema as text and progress as plain lines", "[cli]") {
  const CliRun r = cli({"inspect", fixture("pwnall-tfrecord__singles.tfrecords")});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("compression    none") != std::string::npos);
  CHECK(r.out.find("records        3") != std::string::npos);
  CHECK(r.out.find("crc            ok (every record)") != std::string::npos);
  CHECK(r.out.find("int_feature    int64_list  1") != std::string::npos);
  CHECK(r.out.find("float_feature  float_list  1         1/3") != std::string::npos);
  CHECK(r.err.find("inspect: 130 B of 130 B (100%)\n") != std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);  // not a terminal: no bar
  CHECK(cli({"inspect", "--quiet", fixture("pwnall-tfrecord__singles.tfrecords")}).err.empty());
}

TEST_CASE("ingest CLI: inspect finds truncated, bad-CRC and bad-length records and exits 1",
          "[cli]") {
  TempDir dir;
  const std::string good = file_contents(fixture("tfrecord_lite__test.tfrecord"));
  const std::vector<std::string> records = records_of(fixture("tfrecord_lite__test.tfrecord"));
  const std::uint64_t second = 16 + records[0].size();  // where record 1 starts

  std::string bad_crc = good;
  bad_crc[second + 12 + 3] ^= 0x40;  // a payload byte of record 1
  std::string bad_length = good;
  bad_length[second] ^= 0x01;  // record 1's length, its CRC now wrong
  const std::string truncated = good.substr(0, good.size() - 7);
  const std::uint64_t last = good.size() - 16 - records.back().size();
  // Record 1's length grown past the end of the file, with a CRC that holds.
  std::string long_length = good;
  detail::store_le64(long_length.data() + second, std::uint64_t{1} << 20);
  detail::store_le32(long_length.data() + second + 8,
                     masked_crc32c(long_length.data() + second, 8));

  struct Case {
    std::string name, bytes, message;
    std::uint64_t offset, records_before;
  };
  const std::vector<Case> cases = {
      {"bad_crc.tfrecord", bad_crc, "data checksum mismatch", second + 12, 1},
      {"bad_length.tfrecord", bad_length, "length checksum mismatch", second, 1},
      {"truncated.tfrecord", truncated, "truncated record", last + 12, records.size() - 1},
      {"long_length.tfrecord", long_length, "truncated record", second + 12, 1},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string path = corrupt_copy(dir, c.name, c.bytes);
    const CliRun r = cli({"inspect", "--json", path});
    CHECK(r.code == 1);
    const json out = json::parse(r.out);
    const json& f = out["files"][0];
    CHECK(f.at("crc_ok") == false);
    CHECK(f.at("records") == c.records_before);
    CHECK(f["error"].at("offset") == c.offset);
    CHECK(f["error"].at("message").get<std::string>().find(c.message) != std::string::npos);
    CHECK(out.at("exit_code") == 1);
    // stderr names the file and the offset.
    CHECK(r.err.find(path + ": ") != std::string::npos);
    CHECK(r.err.find("at " + std::to_string(c.offset)) != std::string::npos);
    // The text form says the same.
    const CliRun text = cli({"inspect", "--quiet", path});
    CHECK(text.code == 1);
    CHECK(text.out.find("BAD at offset " + std::to_string(c.offset)) != std::string::npos);
  }
  // A bad file among good ones: every file is still reported, and the exit code is 1.
  const CliRun mixed = cli({"inspect", "--json", "--quiet", dir / "bad_crc.tfrecord",
                            fixture("pwnall-tfrecord__singles.tfrecords")});
  CHECK(mixed.code == 1);
  const json out = json::parse(mixed.out);
  CHECK(out["files"][1].at("records") == 3);
  CHECK(out["total"].at("files_with_errors") == 1);
  // A missing file: exit 3, named.
  const CliRun missing = cli({"inspect", "--quiet", dir / "nope.tfrecord"});
  CHECK(missing.code == 3);
  CHECK(missing.err.find("nope.tfrecord: cannot open file") != std::string::npos);
}

TEST_CASE("ingest CLI: index writes sidecar indexes that indexed_tfrecord reads", "[cli]") {
  TempDir dir;
  const std::vector<std::string> names = {"tfrecord_lite__test.tfrecord",
                                          "tfx-mnist__mnist.tfrecord",
                                          "pwnall-tfrecord__singles.tfrecords"};
  std::vector<std::string> paths;
  for (const std::string& n : names) {
    paths.push_back(dir / n);
    write_file(paths.back(), file_contents(fixture(n)));
  }
  std::vector<std::string> args = {"index", "--jobs", "2", "--json"};
  args.insert(args.end(), paths.begin(), paths.end());
  const CliRun r = cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json out = json::parse(r.out);
  std::vector<std::string> expected;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::vector<std::string> records = records_of(paths[i]);
    expected.insert(expected.end(), records.begin(), records.end());
    CHECK(out["files"][i].at("records") == records.size());
    CHECK(out["files"][i].at("index") == paths[i] + ".idx");
    // DALI's format: "offset size" per record, the records back to back.
    const std::string idx = file_contents(paths[i] + ".idx");
    CHECK(idx.substr(0, idx.find('\n')) == "0 " + std::to_string(16 + records[0].size()));
  }
  CHECK(r.err.find("index: 3 of 3 files (100%)") != std::string::npos);
  // The sidecars give indexed_tfrecord every record, in order and shuffled.
  const TFRecordIndex index = read_tfrecord_index(paths);
  CHECK(index.size() == expected.size());
  std::vector<std::string> got;
  for (std::string& rec : indexed_tfrecord(index)) got.push_back(std::move(rec));
  CHECK(got == expected);
  std::vector<std::string> shuffled;
  for (std::string& rec : indexed_tfrecord(index).global_shuffle({.seed = 7})) {
    shuffled.push_back(std::move(rec));
  }
  CHECK(shuffled != expected);
  std::sort(shuffled.begin(), shuffled.end());
  std::sort(expected.begin(), expected.end());
  CHECK(shuffled == expected);
  // A stale index (the file grew) is caught when the file is read.
  {
    std::string grown = file_contents(paths[2]) + file_contents(paths[2]);
    write_file(paths[2], grown);
    auto it = indexed_tfrecord(read_tfrecord_index(paths)).iterator();
    CHECK_THROWS_AS(
        [&] {
          while (it.next()) {
          }
        }(),
        DataLossError);
  }
  // A malformed index names itself and its line.
  write_file(paths[0] + ".idx", "0 103\n103 x\n");
  try {
    (void)read_tfrecord_index(paths);
    FAIL("no error");
  } catch (const DataLossError& e) {
    CHECK(e.context().file == paths[0] + ".idx");
    CHECK(e.context().line == 2);
  }
}

TEST_CASE("ingest CLI: index refuses compressed files (exit 3) and corrupt ones (exit 1)",
          "[cli]") {
  TempDir dir;
  const std::string gz = dir / "data.tfrecord.gz";
  write_file(gz, file_contents(fixture("tfx-tfjs__data.tfrecord.gz")));
  const CliRun compressed = cli({"index", "--quiet", gz});
  CHECK(compressed.code == 3);
  CHECK(compressed.err.find("gzip-compressed") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(gz + ".idx"));

  const std::string good = file_contents(fixture("tfrecord_lite__test.tfrecord"));
  const std::string cut = corrupt_copy(dir, "cut.tfrecord", good.substr(0, 1000));
  const std::string fine = corrupt_copy(dir, "fine.tfrecord", good);
  const CliRun r = cli({"index", "--json", "--quiet", cut, fine});
  CHECK(r.code == 1);
  const json out = json::parse(r.out);
  CHECK(out["files"][0]["error"].at("message").get<std::string>().find("truncated record") !=
        std::string::npos);
  CHECK(out["files"][0]["error"].at("offset").is_number());
  CHECK_FALSE(std::filesystem::exists(cut + ".idx"));
  CHECK(std::filesystem::exists(fine + ".idx"));  // the other file is indexed all the same
}

TEST_CASE("ingest CLI: write-tfrecords from an image folder, read back by ingest and by Python",
          "[cli]") {
  TempDir dir;
  const std::string root = dir / "images";
  const std::string jpeg = std::string(INGEST_FIXTURES_DIR) + "/image/jpeg/";
  const std::map<std::string, std::vector<std::string>> classes = {
      {"cat", {"rgb420_17x13.jpg", "gray_45x33.jpg", "rgb444_61x47.jpg"}},
      {"dog", {"rgb422_64x48.jpg", "rgb420_1x1.jpg"}},
      {"emu", {"progressive420_99x75.jpg"}}};
  std::map<std::string, std::pair<std::string, std::int64_t>> files;  // name -> bytes, label
  std::int64_t label = 0;
  for (const auto& [cls, names] : classes) {
    std::filesystem::create_directories(root + "/" + cls);
    for (const std::string& n : names) {
      const std::string bytes = file_contents(jpeg + n);
      write_file(root + "/" + cls + "/" + n, bytes);
      files[n] = {bytes, label};
    }
    ++label;
  }
  const std::string prefix = dir / "out/train";
  const CliRun r = cli({"write-tfrecords", "--from", "image-folder", root, "--out", prefix,
                        "--shards", "2", "--gzip", "--label-offset", "1", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json out = json::parse(r.out);
  CHECK(out.at("records") == 6);
  CHECK(out.at("classes") == json::array({"cat", "dog", "emu"}));
  const std::vector<std::string> shards = {prefix + "-00000-of-00002", prefix + "-00001-of-00002"};
  CHECK(out["shards"][0].at("path") == shards[0]);
  CHECK(out["shards"][0].at("records") == 3);
  CHECK(names_in(dir / "out") ==
        std::vector<std::string>{"train-00000-of-00002", "train-00001-of-00002"});
  CHECK(r.err.find("write-tfrecords: 6 of 6 images (100%)") != std::string::npos);

  const ExampleSpec spec({{"image/encoded", FixedLenFeature{.dtype = FeatureType::bytes}},
                          {"image/class/label", FixedLenFeature{.dtype = FeatureType::int64}},
                          {"image/class/text", FixedLenFeature{.dtype = FeatureType::bytes}},
                          {"image/filename", FixedLenFeature{.dtype = FeatureType::bytes}},
                          {"image/format", FixedLenFeature{.dtype = FeatureType::bytes}}});
  std::set<std::string> seen;
  for (const std::string& shard : shards) {
    for (const std::string& rec : records_of(shard, Compression::gzip)) {
      const ParsedExample e = parse_example(rec, spec);
      const std::string name(e.bytes("image/filename")[0]);
      INFO(name);
      REQUIRE(files.count(name) == 1);
      CHECK(e.bytes("image/encoded")[0] == files[name].first);
      CHECK(e["image/class/label"].values.data<std::int64_t>()[0] == files[name].second + 1);
      CHECK(e.bytes("image/format")[0] == "JPEG");
      const std::int64_t l = files[name].second;
      CHECK(e.bytes("image/class/text")[0] == (l == 0 ? "cat" : l == 1 ? "dog" : "emu"));
      seen.insert(name);
    }
    check_against_python(shard, Compression::gzip);
  }
  CHECK(seen.size() == files.size());
  // The tool's own inspect agrees.
  const CliRun inspect = cli({"inspect", "--json", "--quiet", shards[0], shards[1]});
  CHECK(inspect.code == 0);
  CHECK(json::parse(inspect.out)["total"].at("records") == 6);
  // The same seed deals the same shards.
  const CliRun again =
      cli({"write-tfrecords", "--from", "image-folder", root, "--out", dir / "again/train",
           "--shards", "2", "--gzip", "--label-offset", "1", "--quiet"});
  CHECK(again.code == 0);
  CHECK(records_of(dir / "again/train-00000-of-00002", Compression::gzip) ==
        records_of(shards[0], Compression::gzip));
  // A folder without class directories: exit 3, nothing written.
  std::filesystem::create_directories(dir / "empty");
  const CliRun empty =
      cli({"write-tfrecords", "--from", "image-folder", dir / "empty", "--out", dir / "e/x"});
  CHECK(empty.code == 3);
  CHECK(empty.err.find("no class directory") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "e/x-00000-of-00001"));
}

TEST_CASE("ingest CLI: write-tfrecords from a CSV file types its columns", "[cli]") {
  TempDir dir;
  const std::string csv = dir / "people.csv";
  write_file(csv,
             "name,age,height,city\n"
             "ann,31,1.75,\"Paris, FR\"\n"
             "bob,,1.8,Berlin\n"
             "cid,40,,\n"
             "dee,-7,2,\"say \"\"hi\"\"\"\n");
  const std::string prefix = dir / "csv";
  const CliRun r = cli({"write-tfrecords", "--from", "csv", csv, "--out", prefix, "--shards", "3",
                        "--json", "--quiet"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json out = json::parse(r.out);
  CHECK(out.at("columns") == json::parse(R"([{"name": "name", "type": "bytes"},
      {"name": "age", "type": "int64"}, {"name": "height", "type": "float"},
      {"name": "city", "type": "bytes"}])"));
  std::vector<std::string> records;
  for (int s = 0; s < 3; ++s) {
    const std::string shard = prefix + "-0000" + std::to_string(s) + "-of-00003";
    for (std::string& rec : records_of(shard)) records.push_back(std::move(rec));
    check_against_python(shard, Compression::none);
  }
  REQUIRE(records.size() == 4);
  const ExampleSpec spec({{"name", VarLenFeature{.dtype = FeatureType::bytes}},
                          {"age", VarLenFeature{.dtype = FeatureType::int64}},
                          {"height", VarLenFeature{.dtype = FeatureType::float32}},
                          {"city", VarLenFeature{.dtype = FeatureType::bytes}}});
  const ParsedExample ann = parse_example(records[0], spec);
  CHECK(ann.bytes("name")[0] == "ann");
  CHECK(ann["age"].values.data<std::int64_t>()[0] == 31);
  CHECK(ann["height"].values.data<float>()[0] == 1.75f);
  CHECK(ann.bytes("city")[0] == "Paris, FR");
  const ParsedExample bob = parse_example(records[1], spec);
  CHECK(bob["age"].shape[0] == 0);  // an empty cell: no value
  const ParsedExample dee = parse_example(records[3], spec);
  CHECK(dee["age"].values.data<std::int64_t>()[0] == -7);
  CHECK(dee["height"].values.data<float>()[0] == 2.0f);
  CHECK(dee.bytes("city")[0] == "say \"hi\"");

  // A record with the wrong number of fields: exit 1, file and line named, nothing written.
  const std::string bad = dir / "bad.csv";
  write_file(bad, "a,b\n1,2\n3\n");
  const CliRun broken = cli({"write-tfrecords", "--from", "csv", bad, "--out", dir / "bad/x"});
  CHECK(broken.code == 1);
  CHECK(broken.err.find("record has 1 fields; the header has 2") != std::string::npos);
  CHECK(broken.err.find("line 3") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "bad/x-00000-of-00001"));
}

TEST_CASE("ingest CLI: on a terminal, progress is a bar redrawn in place", "[cli]") {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    std::puts("SKIPPED: util-linux's script (a pseudo-terminal) is not installed");
    return;
  }
  // script(1) runs the tool on a pseudo-terminal and copies what it shows.
  const std::string command = shell_quote(cli_tool) + " inspect " +
                              shell_quote(fixture("tfx-mnist__mnist.tfrecord")) + " >/dev/null";
  const CliRun r = run_program("script", {"-qec", command, "/dev/null"});
  CHECK(r.code == 0);
  CHECK(r.out.find("\rinspect [##############################] 100% 3.1 MiB of 3.1 MiB") !=
        std::string::npos);
  CHECK(r.out.find("inspect: ") == std::string::npos);  // no plain lines
}

TEST_CASE("ingest CLI: ZLIB shards are detected by inspect and read by both readers", "[cli]") {
  TempDir dir;
  const std::string csv = dir / "n.csv";
  std::string text = "i,sq\n";
  for (int i = 0; i < 50; ++i) text += std::to_string(i) + "," + std::to_string(i * i) + "\n";
  write_file(csv, text);
  const CliRun w =
      cli({"write-tfrecords", "--from", "csv", csv, "--out", dir / "z", "--zlib", "--quiet"});
  REQUIRE(w.code == 0);
  const std::string shard = dir / "z-00000-of-00001";
  const CliRun r = cli({"inspect", "--json", "--quiet", shard});
  REQUIRE(r.code == 0);
  const json out = json::parse(r.out);
  CHECK(out["files"][0].at("compression") == "zlib");
  CHECK(out["files"][0].at("records") == 50);
  CHECK(records_of(shard, Compression::zlib).size() == 50);
  check_against_python(shard, Compression::zlib);
}
