// PipelineIterator (runtime/pipeline.hpp): what belongs to a whole pass —
// progress reports while iterating and the trace written on demand.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace std::chrono_literals;

namespace {
std::int64_t elements_of(const PipelineStats& s, const std::string& name) {
  const StageStats* r = find_stage(s, name);
  return r ? r->elements : -1;
}
}  // namespace

TEST_CASE("on_progress reports at the end of the pass, and each interval", "[runtime][pipeline]") {
  SECTION("a long interval: one report, at the end, with the final counts") {
    std::vector<PipelineStats> reports;
    auto ds = range(100).batch(10).with_options(
        {.on_progress = [&](const PipelineStats& s) { reports.push_back(s); },
         .progress_interval = 1h});
    auto it = ds.iterator();
    std::int64_t n = 0;
    while (it.next()) ++n;
    CHECK(n == 10);
    CHECK_FALSE(it.next().has_value());  // past the end: no second final report
    REQUIRE(reports.size() == 1);
    CHECK(elements_of(reports[0], "batch") == 10);
    CHECK(elements_of(reports[0], "range") == 100);
  }
  SECTION("a zero interval: a report before every element, counts never going back") {
    std::vector<std::int64_t> seen;
    auto ds = range(30)
                  .map([](std::int64_t x) { return x; })
                  .with_options(
                      {.on_progress =
                           [&](const PipelineStats& s) { seen.push_back(elements_of(s, "map")); },
                       .progress_interval = 0ms});
    auto it = ds.iterator();
    std::int64_t n = 0;
    while (it.next()) ++n;
    CHECK(n == 30);
    // Every call but the first (which starts the measurements) reports
    // before taking its element, and the end reports once more.
    REQUIRE(seen.size() >= 30);
    for (std::size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] >= seen[i - 1]);
    CHECK(seen.back() == 30);
  }
}

TEST_CASE("mid-run counts are consistent across stages", "[runtime][pipeline][concurrency]") {
  bool checked = false;
  std::int64_t reports = 0;
  auto ds = range(3000)
                .map([](std::int64_t x) { return x * 2; }, {.parallelism = 2})
                .filter([](std::int64_t x) { return x % 3 != 0; })
                .batch(16)
                .prefetch(2)
                .with_options({.threads = 2,
                               .on_progress =
                                   [&](const PipelineStats& s) {
                                     // Read consumer first: an input has counted every
                                     // element its consumer has.
                                     const auto fetched = elements_of(s, "prefetch");
                                     const auto batches = elements_of(s, "batch");
                                     const auto kept = elements_of(s, "filter");
                                     const auto mapped = elements_of(s, "parallel_map");
                                     const auto read = elements_of(s, "range");
                                     CHECK(fetched <= batches);
                                     CHECK(16 * batches <= kept + 15);
                                     CHECK(kept <= mapped);
                                     CHECK(mapped <= read);
                                     checked = true;
                                     ++reports;
                                   },
                               .progress_interval = 0ms});
  std::int64_t n = 0;
  for (auto&& b : ds) n += b.dim(0);
  CHECK(checked);
  CHECK(reports > 100);
  CHECK(n == 2000);
}

TEST_CASE("an exception from on_progress leaves next() before an element is taken",
          "[runtime][pipeline]") {
  int calls = 0;
  auto ds = range(5).with_options({.on_progress =
                                       [&](const PipelineStats&) {
                                         if (++calls == 2) throw std::runtime_error("full disk");
                                       },
                                   .progress_interval = 0ms});
  auto it = ds.iterator();
  std::vector<std::int64_t> got;
  CHECK(it.next() == 0);
  CHECK(it.next() == 1);  // the first report
  CHECK_THROWS_WITH(it.next(), "full disk");
  while (auto x = it.next()) got.push_back(*x);
  CHECK(got == std::vector<std::int64_t>{2, 3, 4});  // nothing lost
}

TEST_CASE("write_trace() writes the trace so far while iterating", "[runtime][pipeline]") {
  const auto path = (std::filesystem::temp_directory_path() / "ingest_pipeline_test.json").string();
  std::filesystem::remove(path);
  {
    auto it = range(100)
                  .map([](std::int64_t x) { return x; })
                  .batch(10)
                  .with_options({.trace_path = path})
                  .iterator();
    for (int i = 0; i < 3; ++i) REQUIRE(it.next());
    it.write_trace();
    std::ifstream in(path);
    REQUIRE(in);
    const nlohmann::json trace = nlohmann::json::parse(in);
    int batch_spans = 0;
    for (const auto& e : trace["traceEvents"]) batch_spans += e["name"] == "batch";
    CHECK(batch_spans >= 2);
    CHECK(batch_spans <= 3);
  }
  std::filesystem::remove(path);
  auto untraced = range(3).iterator();
  CHECK_THROWS_AS(untraced.write_trace(), InvalidArgument);
}
