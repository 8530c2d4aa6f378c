#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {
std::int64_t spin_us(std::int64_t x, int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
  return x;
}
}  // namespace

TEST_CASE("stats rows follow the pipeline and mark the bottleneck", "[runtime][stats]") {
  auto ds = range(2000)
                .map([](std::int64_t x) { return x + 1; })
                .map([](std::int64_t x) { return spin_us(x, 50); })  // 50 us against nanoseconds
                .batch(20);
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  REQUIRE(s.stages.size() == 4);
  CHECK(s.stages[0].name == "batch");
  CHECK(s.stages[0].depth == 0);
  CHECK(s.stages[1].name == "map");
  CHECK(s.stages[3].name == "range");
  CHECK(s.stages[0].elements == 100);
  CHECK(s.stages[1].elements == 2000);
  // The spinning map (the outer one) is the bottleneck; its self time is far
  // above the others'.
  CHECK(s.stages[1].bottleneck);
  CHECK(s.stages[1].self_us_per_element > 10 * s.stages[2].self_us_per_element);
  CHECK(s.stages[0].megabytes == Approx(100 * 20 * 8 / 1e6).epsilon(0.01));
  const std::string table = s.to_string();
  CHECK(table.find("stage") == 0);
  CHECK(table.find("map *") != std::string::npos);
  CHECK(table.find("  range") != std::string::npos);  // indented by depth
}

TEST_CASE("stats of async stages show knobs and waiting", "[runtime][stats][concurrency]") {
  auto ds = range(400)
                .map([](std::int64_t x) { return spin_us(x, 100); }, {.parallelism = 2})
                .prefetch(3)
                .with_options({.threads = 2});
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  const auto find = [&](const std::string& name) {
    for (const auto& r : s.stages) {
      if (r.name == name) return r;
    }
    FAIL("no stage " << name);
    return StageStats{};
  };
  CHECK(find("prefetch").buffer == 3);
  CHECK(find("prefetch").consumer_wait_percent > 0);  // the consumer did nothing but wait
  CHECK(find("parallel_map").parallelism == 2);
  CHECK(find("parallel_map").self_us_per_element > 50);
  CHECK_FALSE(find("parallel_map").autotuned);
  // with_options is configuration, not a stage.
  for (const auto& r : s.stages) CHECK(r.name != "with_options");
}

TEST_CASE("stats before any element and of an erased pipeline", "[runtime][stats]") {
  AnyDataset<std::int64_t> erased = range(10).map([](std::int64_t x) { return x; });
  auto it = erased.batch(5).iterator();
  CHECK(it.stats().stages.size() >= 1);
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  CHECK(s.stages[0].name == "batch");
  CHECK(s.stages[0].elements == 2);
}

TEST_CASE("the stats table's columns align whatever the stage names", "[runtime][stats]") {
  PipelineStats s;
  s.stages.push_back({.name = "prefetch", .depth = 0, .elements = 5, .buffer = 4});
  s.stages.push_back({.name = "a stage with a rather long name indeed", .depth = 1, .elements = 7});
  s.stages.push_back({.name = "tfrecord (each input)", .depth = 4, .elements = 123456});
  const std::string table = s.to_string();
  std::vector<std::string> lines;
  for (std::size_t at = 0, end; (end = table.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(table.substr(at, end - at));
  REQUIRE(lines.size() == 5);  // the header, three stages, the footer
  // Every row ends its "elements" column at the same place as the header's.
  const std::size_t column_end = lines[0].find("elements") + std::string("elements").size();
  for (std::size_t i = 1; i <= 3; ++i) {
    INFO(lines[i]);
    CHECK(lines[i].size() == lines[0].size());
    CHECK(lines[i][column_end] == ' ');
    CHECK(lines[i][column_end - 1] != ' ');
  }
  CHECK(lines[3].find("        tfrecord (each input)") == 0);
}

TEST_CASE("an erased boundary is a row, and hidden configuration leaves no gap in depths",
          "[runtime][stats]") {
  AnyDataset<std::int64_t> erased = range(10).map([](std::int64_t x) { return x; });
  auto it = erased.batch(5).with_options({.autotune = false}).iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  REQUIRE(s.stages.size() == 4);
  CHECK(s.stages[0].name == "batch");
  CHECK(s.stages[1].name == "erase");
  CHECK(s.stages[2].name == "map");
  CHECK(s.stages[3].name == "range");
  for (int i = 0; i < 4; ++i) CHECK(s.stages[static_cast<std::size_t>(i)].depth == i);
  CHECK(s.stages[1].elements == 10);
  const std::string table = s.to_string();
  CHECK(table.find("\n  erase ") != std::string::npos);
  CHECK(table.find("\n    map ") != std::string::npos);
}

TEST_CASE("the bottleneck is marked only when the consumer waits, with its reason",
          "[runtime][stats]") {
  SECTION("a slow stage the consumer waits for") {
    auto it = range(300).map([](std::int64_t x) { return spin_us(x, 50); }).batch(10).iterator();
    while (it.next()) {
    }
    const PipelineStats s = it.stats();
    CHECK(s.input_wait_percent > 50);
    CHECK(s.stages[1].bottleneck);
    CHECK_THAT(s.bottleneck_reason, Catch::StartsWith("* bottleneck: map, ") &&
                                        Catch::Contains("of the pipeline's work per element") &&
                                        Catch::Contains("runs sequentially"));
    CHECK_THAT(s.to_string(), Catch::Contains("* bottleneck: map"));
  }
  SECTION("a parallel stage names its parallelism") {
    auto it = range(400)
                  .map([](std::int64_t x) { return spin_us(x, 50); }, {.parallelism = 2})
                  .with_options({.threads = 2})
                  .iterator();
    while (it.next()) {
    }
    const PipelineStats s = it.stats();
    CHECK_THAT(s.bottleneck_reason, Catch::StartsWith("* bottleneck: parallel_map, ") &&
                                        Catch::Contains("at parallelism 2; raise .parallelism"));
  }
  SECTION("a consumer slower than its input: no stage is marked") {
    // The rule on measured counters, free of the machine's timing: range ->
    // map, the map taking 2 us per element of its own, the range 1 us.
    const auto build = [](detail::Model& model, std::int64_t consumer_ns) {
      detail::StageNode* map = model.node(nullptr, "map");
      detail::StageNode* src = model.node(map, "range");
      map->elements = 100;
      map->estimated_ns = 100 * 3'000;
      src->elements = 100;
      src->estimated_ns = 100 * 1'000;
      model.record_consumer(consumer_ns, 100);
    };
    // The consumer's own time covers the whole run: it never waited.
    detail::Model model;
    build(model, std::int64_t{1} << 50);
    const PipelineStats s = detail::make_stats(model);
    CHECK(s.input_wait_percent == 0);
    REQUIRE(s.stages.size() == 2);
    for (const StageStats& r : s.stages) CHECK_FALSE(r.bottleneck);
    CHECK_THAT(s.bottleneck_reason, Catch::StartsWith("no bottleneck: the input kept up"));
    CHECK_THAT(s.to_string(), Catch::Contains("no bottleneck"));
    // A consumer that spent no time of its own waited all the time, and the
    // stage doing the work is marked.
    detail::Model waiting;
    build(waiting, 0);
    const PipelineStats w = detail::make_stats(waiting);
    CHECK(w.input_wait_percent > 99);
    REQUIRE(w.stages.size() == 2);
    CHECK(w.stages[0].bottleneck);
    CHECK_FALSE(w.stages[1].bottleneck);
    CHECK_THAT(w.bottleneck_reason, Catch::StartsWith("* bottleneck: map, 66.7% of the pipeline"));
  }
  SECTION("a live slow consumer: the verdict agrees with the measured wait") {
    // How long a loaded machine delays the prefetch thread is not the test's
    // to assert; the verdict must follow the wait that was measured.
    auto it = range(100).map([](std::int64_t x) { return x + 1; }).prefetch(4).iterator();
    while (it.next()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const PipelineStats s = it.stats();
    bool marked = false;
    for (const StageStats& r : s.stages) marked = marked || r.bottleneck;
    if (s.input_wait_percent < 5) {
      CHECK_FALSE(marked);
      CHECK_THAT(s.bottleneck_reason, Catch::StartsWith("no bottleneck: the input kept up"));
    } else {
      CHECK(marked);
      CHECK_THAT(s.bottleneck_reason, Catch::StartsWith("* bottleneck: "));
    }
  }
  SECTION("before any element") {
    auto it = range(3).iterator();
    CHECK_THAT(it.stats().bottleneck_reason, Catch::Contains("nothing measured"));
  }
}

TEST_CASE("a bottleneck inside a parallel interleave names the interleave's knob",
          "[runtime][stats]") {
  // The reader of each input does the work, under an interleave at fixed
  // parallelism 2; the consumer waited all the time.
  const auto build = [](detail::Model& model, std::int64_t parallelism) {
    detail::StageNode* il = model.node<detail::InterleaveNode>(nullptr, "interleave");
    detail::configure_knob(il->parallelism, parallelism, 1, 4, 2);
    detail::StageNode* files = model.node(il, "from_vector");
    detail::StageNode* reader = model.node(il, "tfrecord (each input)");
    il->elements = 100;
    il->work_ns = 100 * 100;
    files->elements = 4;
    files->estimated_ns = 4 * 1'000;
    reader->elements = 100;
    reader->estimated_ns = 100 * 50'000;
    model.record_consumer(0, 100);
  };
  detail::Model fixed;
  build(fixed, 2);
  PipelineStats s = detail::make_stats(fixed);
  REQUIRE(find_stage(s, "tfrecord (each input)") != nullptr);
  CHECK(find_stage(s, "tfrecord (each input)")->bottleneck);
  CHECK_THAT(s.bottleneck_reason,
             Catch::StartsWith("* bottleneck: tfrecord (each input), ") &&
                 Catch::EndsWith("; it runs in interleave's parallel inputs (parallelism 2): raise "
                                 "interleave's .parallelism or use ingest::autotune"));
  detail::Model tuned;
  build(tuned, autotune);
  s = detail::make_stats(tuned);
  CHECK_THAT(
      s.bottleneck_reason,
      Catch::EndsWith("; it runs in interleave's parallel inputs (parallelism 2, autotuned)"));
  // A sequential interleave runs its inputs on its consumer's thread: the
  // advice stays to move the work into a parallel stage.
  detail::Model sequential;
  build(sequential, 1);
  s = detail::make_stats(sequential);
  CHECK_THAT(s.bottleneck_reason, Catch::EndsWith("it runs sequentially: move its work into a "
                                                  "parallel map or interleave"));
}

TEST_CASE("the network line shows the readahead a stage's remote readers use", "[runtime][stats]") {
  detail::Model model;
  detail::StageNode* n = model.node(nullptr, "tfrecord");
  n->net_bytes = 3'000'000;
  n->net_requests = 5;
  detail::configure_knob(n->readahead.in_flight, -1, 1, 16, 6);
  detail::configure_knob(n->readahead.block_bytes, -1, 1 << 20, 16 << 20, 8 << 20);
  PipelineStats s = detail::make_stats(model);
  REQUIRE(s.stages.size() == 1);
  CHECK(s.stages[0].readahead_in_flight == 6);
  CHECK(s.stages[0].readahead_block_bytes == 8 << 20);
  CHECK(s.stages[0].readahead_autotuned);
  CHECK_THAT(s.to_string(),
             Catch::Contains("network: tfrecord fetched 3.00 MB in 5 requests (0 retries), its "
                             "readers waited") &&
                 Catch::Contains("of the time, readahead 6 x 8 MiB (autotuned)\n"));
  // Fixed values, and a block size that is no whole MiB.
  detail::StageNode* fixed = model.node(nullptr, "csv");
  fixed->net_requests = 1;
  detail::configure_knob(fixed->readahead.in_flight, 3, 1, 1, 1);
  detail::configure_knob(fixed->readahead.block_bytes, 100'000, 1, 1, 1);
  s = detail::make_stats(model);
  CHECK_THAT(s.to_string(), Catch::Contains("readahead 3 x 100000 B\n"));
  CHECK(detail::format_bytes(512 << 10) == "512 KiB");
}
