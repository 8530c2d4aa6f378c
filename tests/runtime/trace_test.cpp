#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("a trace file is Chrome trace-event JSON with spans per batch and knob counters",
          "[runtime][trace][concurrency]") {
  const auto path = (std::filesystem::temp_directory_path() / "ingest_trace_test.json").string();
  std::filesystem::remove(path);
  {
    auto ds = range(2000)
                  .map(
                      [](std::int64_t x) {
                        const auto until =
                            std::chrono::steady_clock::now() + std::chrono::microseconds(20);
                        while (std::chrono::steady_clock::now() < until) {
                        }
                        return x;
                      },
                      {.parallelism = autotune})
                  .batch(50)
                  .prefetch(autotune)
                  .with_options({.threads = 2, .trace_path = path});
    auto it = ds.iterator();
    std::int64_t batches = 0;
    while (it.next()) ++batches;
    CHECK(batches == 40);
  }  // the iterator writes the file
  std::ifstream in(path);
  REQUIRE(in);
  const nlohmann::json trace = nlohmann::json::parse(in);
  REQUIRE(trace.contains("traceEvents"));
  std::set<std::string> span_stages;
  int prefetch_spans = 0, batch_spans = 0, counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      CHECK(e["dur"].get<double>() >= 0);
      CHECK(e["ts"].get<double>() >= 0);
      span_stages.insert(e["name"].get<std::string>());
      prefetch_spans += e["name"] == "prefetch";
      batch_spans += e["name"] == "map_and_batch";
    } else if (ph == "C") {
      ++counters;
      CHECK(e["args"].is_object());
    }
  }
  // Every batch leaves a span at each batched stage.
  CHECK(prefetch_spans == 40);
  CHECK(batch_spans == 40);
  CHECK(counters >= 2);  // the autotuned knobs' values, from the start
  std::filesystem::remove(path);
}

TEST_CASE("an unwritable trace path is reported, not fatal", "[runtime][trace]") {
  std::vector<std::string> lines;
  set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  {
    auto it =
        range(10).batch(2).with_options({.trace_path = "/nonexistent-dir/x/trace.json"}).iterator();
    while (it.next()) {
    }
  }
  set_log_sink(nullptr);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("trace not written") != std::string::npos);
}
