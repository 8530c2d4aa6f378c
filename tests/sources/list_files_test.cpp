#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::string>;

namespace {
V names(const TempDir& dir, const V& files) {
  V out;
  for (const auto& f : files) out.push_back(dir / f);
  return out;
}
}  // namespace

TEST_CASE("glob matching of one component", "[sources][list_files]") {
  using detail::glob_match;
  CHECK(glob_match("*.tfrecord", "a.tfrecord"));
  CHECK_FALSE(glob_match("*.tfrecord", "a.tfrecord.gz"));
  CHECK(glob_match("part-?????", "part-00001"));
  CHECK_FALSE(glob_match("part-?????", "part-0001"));
  CHECK(glob_match("[ab]*", "beta"));
  CHECK_FALSE(glob_match("[ab]*", "gamma"));
  CHECK(glob_match("[!ab]*", "gamma"));
  CHECK(glob_match("[^ab]*", "gamma"));
  CHECK(glob_match("x[0-9][0-9]", "x42"));
  CHECK_FALSE(glob_match("x[0-9]", "xa"));
  CHECK(glob_match("a\\*b", "a*b"));
  CHECK_FALSE(glob_match("a\\*b", "axb"));
  CHECK(glob_match("*", ""));
  CHECK(glob_match("**a*", "banana"));
  CHECK(glob_match("[]]", "]"));
  CHECK(glob_match("a[", "a["));  // unclosed bracket is literal
  CHECK_FALSE(glob_match("*", ".hidden"));
  CHECK(glob_match(".*", ".hidden"));
}

TEST_CASE("list_files globs files and directories, sorted", "[sources][list_files]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "d1");
  std::filesystem::create_directories(dir.path() / "d2/sub");
  std::filesystem::create_directories(dir.path() / "x.tfrecord");  // a directory: never listed
  for (const char* f : {"b.tfrecord", "a.tfrecord", "c.txt", ".hidden.tfrecord", "d1/s-1", "d1/s-2",
                        "d2/s-1", "d2/sub/s-9"}) {
    write_file(dir / f, "x");
  }
  CHECK(collect(list_files(dir / "*.tfrecord")) == names(dir, {"a.tfrecord", "b.tfrecord"}));
  CHECK(collect(list_files(dir / "?.t*")) == names(dir, {"a.tfrecord", "b.tfrecord", "c.txt"}));
  CHECK(collect(list_files(dir / "[ac].*")) == names(dir, {"a.tfrecord", "c.txt"}));
  CHECK(collect(list_files(dir / "d*/s-*")) == names(dir, {"d1/s-1", "d1/s-2", "d2/s-1"}));
  CHECK(collect(list_files(dir / "*/*/s-?")) == names(dir, {"d2/sub/s-9"}));
  CHECK(collect(list_files(dir / "d1/s-2")) == names(dir, {"d1/s-2"}));
  CHECK(collect(list_files({dir / "d1/*", dir / "d*/s-1"})) ==
        names(dir, {"d1/s-1", "d1/s-2", "d2/s-1"}));
  auto ds = list_files(dir / "*.tfrecord");
  CHECK(ds.matched().size() == 2);
  CHECK(collect(ds) == collect(ds));
}

TEST_CASE("list_files: no match is an error naming the pattern", "[sources][list_files]") {
  TempDir dir;
  write_file(dir / "a.txt", "x");
  const std::string pattern = dir / "*.tfrecord";
  try {
    list_files(pattern);
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.what(), Catch::Contains(pattern) && Catch::Contains("no files match"));
    CHECK(e.context().stage == "list_files");
  }
  CHECK_THROWS_AS(list_files(dir / "missing-dir/*"), InvalidArgument);
  CHECK_THROWS_AS(list_files({dir / "a.txt", dir / "*.nothing"}), InvalidArgument);
}

TEST_CASE("list_files: seeded shuffle, reshuffled each pass", "[sources][list_files]") {
  TempDir dir;
  V all;
  for (int i = 0; i < 50; ++i) {
    std::string name = "f";
    name += std::to_string(100 + i);
    write_file(dir / name, "x");
    all.push_back(dir / name);
  }
  auto sorted_of = [](V v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  auto a = list_files(dir / "f*", {.shuffle = true, .seed = 7});
  auto b = list_files(dir / "f*", {.shuffle = true, .seed = 7});
  const V a1 = collect(a), a2 = collect(a);
  CHECK(a1 == collect(b));  // same seed, same order
  CHECK(a2 == collect(b));  // ... epoch after epoch
  CHECK(a1 != a2);          // a new order each pass
  CHECK(a1 != all);
  CHECK(sorted_of(a1) == all);
  CHECK(sorted_of(a2) == all);
  auto fixed =
      list_files(dir / "f*", {.shuffle = true, .seed = 7, .reshuffle_each_iteration = false});
  CHECK(collect(fixed) == collect(fixed));
  CHECK(collect(list_files(dir / "f*", {.shuffle = true, .seed = 8})) != a1);
  CHECK(sorted_of(collect(list_files(dir / "f*", {.shuffle = true}))) == all);
  V order = all;
  detail::seeded_shuffle(order, 123);
  V again = all;
  detail::seeded_shuffle(again, 123);
  CHECK(order == again);
}
