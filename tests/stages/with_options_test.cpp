#include <catch2/catch.hpp>

#include <mutex>
#include <set>
#include <thread>

#include "support/checkpoint.hpp"
#include "support/files.hpp"
#include "support/records.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("with_options threads gives the pipeline its own pool",
          "[stages][with_options][concurrency]") {
  std::mutex mu;
  std::set<std::thread::id> ids;
  auto ds = range(2000)
                .map(
                    [&](std::int64_t x) {
                      std::lock_guard lock(mu);
                      ids.insert(std::this_thread::get_id());
                      return x;
                    },
                    {.parallelism = 8})
                .with_options({.threads = 2});
  CHECK(collect(ds) == iota(0, 2000));
  ids.erase(std::this_thread::get_id());  // the consumer may help
  CHECK(ids.size() <= 2);
  CHECK_THROWS_AS(range(3).with_options({.threads = 0}), InvalidArgument);
}

TEST_CASE("with_options shares a given runtime", "[stages][with_options][concurrency]") {
  auto rt = std::make_shared<Runtime>(1);
  auto ds = range(100).map([](std::int64_t x) { return x + 1; }, {.parallelism = 4}).prefetch(2);
  auto a = ds.with_options({.runtime = rt});
  auto b = ds.with_options({.runtime = rt});
  auto ia = a.iterator();
  auto ib = b.iterator();
  std::int64_t sa = 0, sb = 0;
  while (auto x = ia.next()) sa += *x;
  while (auto x = ib.next()) sb += *x;
  CHECK(sa == 5050);
  CHECK(sb == 5050);
}

TEST_CASE("options apply only to the stages before with_options", "[stages][with_options]") {
  // Deterministic order is the default and survives an explicit true.
  auto ds = range(300)
                .map([](std::int64_t x) { return x; }, {.parallelism = 3})
                .with_options({.deterministic = true});
  CHECK(collect(ds) == iota(0, 300));
}

namespace {

// Files of records "f<file>r<record>", `records[f]` records in file f.
struct RecordFiles {
  TempDir dir;
  std::vector<std::string> paths;
  std::multiset<std::string> all;
  explicit RecordFiles(std::vector<int> records) {
    for (std::size_t f = 0; f < records.size(); ++f) {
      std::vector<std::string> payloads;
      for (int r = 0; r < records[f]; ++r) {
        payloads.push_back("f" + std::to_string(f) + "r" + std::to_string(r));
        all.insert(payloads.back());
      }
      paths.push_back(dir / ("part-" + std::to_string(f) + ".tfrecord"));
      write_file(paths.back(), frame_records(payloads));
    }
  }
};

struct LogCapture {
  std::vector<std::string> lines;
  LogCapture() {
    set_log_sink([this](std::string_view l) { lines.emplace_back(l); });
  }
  ~LogCapture() { set_log_sink({}); }
  bool has(const std::string& text) const {
    for (const auto& l : lines)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
};

}  // namespace

TEST_CASE("auto_shard shards by file when every rank gets a file", "[stages][with_options]") {
  RecordFiles files({3, 4, 5, 6, 7});
  LogCapture log;
  std::multiset<std::string> seen;
  for (int r = 0; r < 2; ++r) {
    const distributed::World w{.rank = r, .world_size = 2};
    const auto got = collect(tfrecord(files.paths).with_options({.auto_shard = w}));
    for (const auto& x : got) {
      CHECK(x[1] - '0' == (x[1] - '0') / 2 * 2 + r);  // file f % 2 == rank
      seen.insert(x);
    }
  }
  CHECK(seen == files.all);
  CHECK(
      log.has("tfrecord has 5 files for 2 ranks: by file: rank 1 reads 1 file in 2, from file 1"));
  CHECK(tfrecord(files.paths)
            .with_options({.auto_shard = distributed::World{.rank = 0, .world_size = 2}})
            .cardinality() == unknown_cardinality);
}

TEST_CASE("auto_shard shards by element when there are fewer files than ranks",
          "[stages][with_options]") {
  RecordFiles files({10, 7});
  LogCapture log;
  std::multiset<std::string> seen;
  for (int r = 0; r < 3; ++r) {
    const distributed::World w{.rank = r, .world_size = 3};
    for (const auto& x : collect(tfrecord(files.paths).with_options({.auto_shard = w})))
      seen.insert(x);
  }
  CHECK(seen == files.all);
  CHECK(log.has(
      "by element (fewer files than ranks): rank 2 reads every file and keeps 1 record in 3"));
}

TEST_CASE("auto_shard on list_files: by file, or by element in the files it opens",
          "[stages][with_options]") {
  for (const int num_files : {5, 2}) {
    INFO(num_files << " files");
    std::vector<int> counts(static_cast<std::size_t>(num_files), 6);
    RecordFiles files(counts);
    std::multiset<std::string> seen;
    for (int r = 0; r < 3; ++r) {
      const distributed::World w{.rank = r, .world_size = 3};
      auto ds =
          list_files(files.dir / "part-*.tfrecord", {.shuffle = true, .seed = 4})
              .interleave([](const std::string& p) { return tfrecord(p); }, {.cycle_length = 2})
              .with_options({.auto_shard = w});
      for (const auto& x : collect(ds)) seen.insert(x);
      check_restore_everywhere([&] {
        return list_files(files.dir / "part-*.tfrecord", {.shuffle = true, .seed = 4})
            .interleave([](const std::string& p) { return tfrecord(p); }, {.cycle_length = 2})
            .with_options({.auto_shard = w});
      });
    }
    CHECK(seen == files.all);
  }
}

TEST_CASE("auto_shard refuses what it cannot shard", "[stages][with_options]") {
  const distributed::World w{.rank = 1, .world_size = 2};
  CHECK_THROWS_WITH(range(10).with_options({.auto_shard = w}).iterator(),
                    Catch::Contains("no file source"));
  RecordFiles files({2, 2});
  CHECK_THROWS_WITH(list_files(files.dir / "part-*", {.shuffle = true})
                        .interleave([](const std::string& p) { return tfrecord(p); })
                        .with_options({.auto_shard = w})
                        .iterator(),
                    Catch::Contains("give list_files a seed"));
  CHECK_THROWS_WITH(
      range(3).with_options({.auto_shard = distributed::World{.rank = 2, .world_size = 2}}),
      Catch::Contains("outside [0, 2)"));
  // A single rank: nothing to shard.
  CHECK(collect(range(3).with_options({.auto_shard = distributed::World{}})) == iota(0, 3));
  check_restore_everywhere([&] { return tfrecord(files.paths).with_options({.auto_shard = w}); });
}
