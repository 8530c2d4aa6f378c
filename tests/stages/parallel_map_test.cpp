#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace std::chrono_literals;
using V = std::vector<std::int64_t>;

namespace {
// A function whose cost is set per test: busy-waits `ns` nanoseconds.
struct Spin {
  std::int64_t ns;
  std::int64_t operator()(std::int64_t x) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
    while (std::chrono::steady_clock::now() < until) {
    }
    return x * 3 + 1;
  }
};
V expected(std::int64_t n) {
  V v;
  for (std::int64_t x = 0; x < n; ++x) v.push_back(x * 3 + 1);
  return v;
}
}  // namespace

TEST_CASE("parallel map keeps the input order in deterministic mode",
          "[stages][parallel_map][concurrency]") {
  for (std::int64_t cost : {0, 2000, 50000}) {
    for (std::int64_t p : {1, 2, 3, 8}) {
      INFO("cost " << cost << " ns, parallelism " << p);
      const std::int64_t n = cost > 10000 ? 300 : 3000;
      CHECK(collect(range(n).map(Spin{cost}, {.parallelism = p})) == expected(n));
    }
  }
}

TEST_CASE("non-deterministic mode yields every element once",
          "[stages][parallel_map][concurrency]") {
  auto ds = range(2000).map(Spin{1000}, {.parallelism = 4, .deterministic = false});
  auto got = collect(ds);
  std::sort(got.begin(), got.end());
  CHECK(got == expected(2000));
  // The pipeline option applies when the stage does not say.
  auto via_options =
      range(500).map(Spin{0}, {.parallelism = 2}).with_options({.deterministic = false});
  auto got2 = collect(via_options);
  std::sort(got2.begin(), got2.end());
  CHECK(got2 == expected(500));
}

TEST_CASE("parallel map edge cases", "[stages][parallel_map]") {
  CHECK(collect(range(0).map(Spin{0}, {.parallelism = 4})).empty());
  CHECK(collect(range(1).map(Spin{0}, {.parallelism = 4})) == V{1});
  CHECK(collect(range(5).map(Spin{0}, {.parallelism = autotune})) == expected(5));
  CHECK_THROWS_AS(range(5).map(Spin{0}, {.parallelism = 0}), InvalidArgument);
  CHECK_THROWS_AS(range(5).map(Spin{0}, {.parallelism = -3}), InvalidArgument);
  // Move-only results.
  auto ptrs = range(50).map([](std::int64_t x) { return std::make_unique<std::int64_t>(x); },
                            {.parallelism = 3});
  std::int64_t sum = 0;
  for (auto& p : ptrs) sum += *p;
  CHECK(sum == 49 * 50 / 2);
}

TEST_CASE("errors surface at their element's position, iteration continues",
          "[stages][parallel_map][concurrency]") {
  for (std::int64_t cost : {0, 20000}) {
    auto ds = range(100).map(
        [cost](std::int64_t x) -> std::int64_t {
          Spin{cost}(x);
          if (x % 10 == 7) throw Boom("bad " + std::to_string(x));
          return x;
        },
        {.parallelism = 3});
    auto out = collect_outcomes(ds);
    REQUIRE(out.size() == 100);
    for (std::int64_t x = 0; x < 100; ++x) {
      const auto& o = out[static_cast<std::size_t>(x)];
      if (x % 10 == 7) {
        CHECK(o.error == "FunctionError: bad " + std::to_string(x) + " [stage 'map', element " +
                             std::to_string(x) + "]");
      } else {
        CHECK(o.value == x);
      }
    }
  }
  // Errors from the input keep their position too.
  auto failing_input = range(10).map([](std::int64_t x) -> std::int64_t {
    if (x == 4) throw Boom("input");
    return x;
  });
  auto out = collect_outcomes(failing_input.map(Spin{0}, {.parallelism = 2}));
  REQUIRE(out.size() == 10);
  CHECK(out[4].error == "FunctionError: input [stage 'map', element 4]");
  CHECK(out[5].value == 16);
}

TEST_CASE("calls run on several threads at once", "[stages][parallel_map][concurrency]") {
  // Each call waits up to 200 ms for a second call to be inside at the same
  // time, until two calls have met. The stage's first calls run inline on
  // the consumer's thread (their cost is not yet measured), alone, so a pass
  // may end with none met: passes repeat until two calls meet, up to 100.
  std::atomic<int> inside{0};
  std::atomic<int> met{0};
  auto f = [&](std::int64_t x) {
    inside.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + 200ms;
    while (inside.load() < 2 && met.load() < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    if (inside.load() >= 2) met.fetch_add(1);
    std::this_thread::sleep_for(1ms);
    inside.fetch_sub(1);
    return x;
  };
  for (int pass = 0; pass < 100 && met.load() < 2; ++pass) {
    auto got = collect(range(8).map(f, {.parallelism = 2}).with_options({.threads = 2}));
    CHECK(got == iota(0, 8));
  }
  CHECK(met.load() >= 2);
}

TEST_CASE("destroying the iterator mid-stream stops and joins the work",
          "[stages][parallel_map][concurrency]") {
  std::atomic<int> calls{0};
  auto ds = range(1'000'000).map(
      [&calls](std::int64_t x) {
        calls.fetch_add(1);
        std::this_thread::sleep_for(1ms);
        return x;
      },
      {.parallelism = 4});
  {
    auto it = ds.iterator();
    CHECK(it.next() == 0);
    CHECK(it.next() == 1);
  }
  const int after = calls.load();
  std::this_thread::sleep_for(20ms);
  CHECK(calls.load() == after);  // nothing runs once the iterator is gone
  CHECK(after < 1000);
}

TEST_CASE("a one-thread runtime completes parallel maps", "[stages][parallel_map][concurrency]") {
  auto ds = range(500).map(Spin{5000}, {.parallelism = 8}).with_options({.threads = 1});
  CHECK(collect(ds) == expected(500));
}

TEST_CASE("at most `parallelism` calls run at once", "[stages][parallel_map][concurrency]") {
  for (std::int64_t p : {1, 2, 3}) {
    std::atomic<int> inside{0}, peak{0};
    auto f = [&](std::int64_t x) {
      const int now = inside.fetch_add(1) + 1;
      int seen = peak.load();
      while (now > seen && !peak.compare_exchange_weak(seen, now)) {
      }
      Spin{20000}(x);
      inside.fetch_sub(1);
      return x;
    };
    CHECK(collect(range(300).map(f, {.parallelism = p}).with_options({.threads = 4})) ==
          iota(0, 300));
    CHECK(peak.load() <= p);
    peak = 0;
    CHECK(collect(range(300).map(f, {.parallelism = p}).batch(16).with_options({.threads = 4}))
              .size() == 19);
    CHECK(peak.load() <= p);
  }
}

TEST_CASE("a cheap map over a bulk source runs inline in blocks, element by element",
          "[stages][parallel_map][concurrency]") {
  // range and from_vector apply f in their own loop: inline mode runs a block
  // of calls at once and hands the results out one per next().
  const std::int64_t n = 20000;
  auto it = range(n).map([](std::int64_t x) { return x * 3 + 1; }, {.parallelism = 2}).iterator();
  V got;
  while (auto x = it.next()) got.push_back(*x);
  CHECK(got == expected(n));
  CHECK_FALSE(it.next());

  // Non-trivial results (strings), a remainder block, one element, none.
  std::vector<std::string> words;
  for (int i = 0; i < 1001; ++i)
    words.push_back(std::string(static_cast<std::size_t>(i % 40), 'w'));
  auto lengths = collect(
      from_vector(words).map([](std::string s) { return s + "!"; }, {.parallelism = autotune}));
  REQUIRE(lengths.size() == words.size());
  for (std::size_t i = 0; i < words.size(); ++i) CHECK(lengths[i] == words[i] + "!");
  CHECK(collect(range(1).map([](std::int64_t x) { return x + 1; }, {.parallelism = 2})) == V{1});
  CHECK(collect(range(0).map([](std::int64_t x) { return x + 1; }, {.parallelism = 2})).empty());

  // Destroyed in the middle of a block.
  auto partial = range(n).map([](std::int64_t x) { return x + 1; }, {.parallelism = 2}).iterator();
  for (std::int64_t i = 0; i < 5000 + 17; ++i) REQUIRE(partial.next() == i + 1);
}

TEST_CASE("inline blocks keep errors at their position, also when the mode changes",
          "[stages][parallel_map][concurrency]") {
  // Cheap at first (inline blocks; each error's cost may send it to the pool
  // for a while), then expensive (the pool): the order, the errors' positions
  // and their context survive every change of mode.
  const std::int64_t n = 12000;
  const auto fails = [](std::int64_t x) { return x >= 3000 && x % 1000 == 999; };
  auto ds = range(n).map(
      [&fails](std::int64_t x) -> std::int64_t {
        if (x >= 9000) Spin{3000}(x);
        if (fails(x)) throw Boom("bad " + std::to_string(x));
        return x * 3 + 1;
      },
      {.parallelism = 2});
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == static_cast<std::size_t>(n));
  for (std::int64_t x = 0; x < n; ++x) {
    const auto& o = out[static_cast<std::size_t>(x)];
    if (fails(x)) {
      CHECK(o.error == "FunctionError: bad " + std::to_string(x) + " [stage 'map', element " +
                           std::to_string(x) + "]");
    } else {
      CHECK(o.value == x * 3 + 1);
    }
  }
  // The first and the last element of a block failing (blocks are 64 int64s;
  // by element 8192 a cheap map normally runs inline).
  for (std::int64_t bad : {8192, 8192 + 63, 8192 + 64, 8192 + 127}) {
    auto single = collect_outcomes(range(8400).map(
        [bad](std::int64_t x) -> std::int64_t {
          if (x == bad) throw Boom("bad");
          return x;
        },
        {.parallelism = 2}));
    REQUIRE(single.size() == 8400);
    CHECK(single[static_cast<std::size_t>(bad)].error ==
          "FunctionError: bad [stage 'map', element " + std::to_string(bad) + "]");
    CHECK(single[8399].value == 8399);
    CHECK(single[static_cast<std::size_t>(bad) + 1].value == bad + 1);
  }
}

namespace {
// Every error of one pass as (stage, element position), in order.
template <class D>
std::vector<std::pair<std::string, std::int64_t>> error_positions(const D& ds) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  auto it = ds.iterator();
  for (;;) {
    try {
      if (!it.next()) break;
    } catch (const Error& e) {
      out.emplace_back(e.context().stage, e.context().element.value_or(-1));
    }
  }
  return out;
}
}  // namespace

TEST_CASE("an element's position counts the failed elements before it, on every path",
          "[stages][parallel_map][concurrency]") {
  // Element 10 fails upstream; the stage under test fails on the input 50,
  // which is at position 50 of its input whichever path runs it.
  auto upstream = range(100).map([](std::int64_t x) {
    if (x == 10) throw Boom("upstream");
    return x;
  });
  auto f = [](std::int64_t x) {
    if (x == 50) throw Boom("here");
    return x;
  };
  using P = std::vector<std::pair<std::string, std::int64_t>>;
  const P expected{{"map", 10}, {"map", 50}};
  CHECK(error_positions(upstream.map(f)) == expected);                      // sequential
  CHECK(error_positions(upstream.map(f, {.parallelism = 1})) == expected);  // inline
  CHECK(error_positions(upstream.map(f, {.parallelism = 3})) == expected);  // parallel
  CHECK(error_positions(upstream.map(f, {.parallelism = autotune})) == expected);
  CHECK(error_positions(upstream.filter([&](std::int64_t x) { return f(x) >= 0; })) ==
        P{{"map", 10}, {"filter", 50}});
  // Fused map-and-batch: the batches holding 10 and 50 fail.
  CHECK(error_positions(upstream.map(f, {.parallelism = 2}).batch(8)) == expected);
  // Through the bulk fill of a sequential map.
  CHECK(error_positions(upstream.map(f).batch(8)) == expected);
}

TEST_CASE("a parallel map's name names its node in stats, also fused with a batch",
          "[stages][parallel_map]") {
  auto names = [](const PipelineStats& s) {
    std::vector<std::string> out;
    for (const StageStats& st : s.stages) out.push_back(st.name);
    return out;
  };
  auto twice = [](std::int64_t x) { return 2 * x; };
  auto it = range(100)
                .map(twice, {.parallelism = 2, .name = "decode"})
                .map(twice, {.parallelism = 2})
                .iterator();
  while (it.next()) {
  }
  CHECK(names(it.stats()) == std::vector<std::string>{"parallel_map", "decode", "range"});
  auto fused = range(100).map(twice, {.parallelism = 2, .name = "augment"}).batch(10).iterator();
  while (fused.next()) {
  }
  CHECK(names(fused.stats()) == std::vector<std::string>{"augment + batch", "range"});
  auto seeded = range(10)
                    .random_map([](std::int64_t x, Rng&) { return x; },
                                {.seed = 1, .parallelism = 2, .name = "crop"})
                    .iterator();
  while (seeded.next()) {
  }
  CHECK(names(seeded.stats()).front() == "crop");
}

TEST_CASE("a parallel map gives the strings it is done with back", "[stages][parallel_map]") {
  // Wherever f ran (a pool thread, or inline on the caller), each input's
  // buffer went to that thread's magazine; full magazines spill into the
  // shared lists a reader's thread refills from.
  auto& recycler = detail::StringRecycler::instance();
  const std::size_t here = recycler.cached_here(4096);
  const std::uint64_t spilled = recycler.stats().spilled;
  constexpr std::size_t n = 3000;
  auto ds = from_vector(std::vector<std::string>(n, std::string(4096, 'p')))
                .map([](const std::string& s) { return s.size(); }, {.parallelism = 2});
  std::size_t sum = 0;
  for (std::size_t x : collect(ds)) sum += x;
  CHECK(sum == n * 4096);
  // At most a magazine (16) stays with each thread that ran f.
  const std::size_t threads = std::thread::hardware_concurrency() + 1;
  CHECK(recycler.stats().spilled - spilled + (recycler.cached_here(4096) - here) >=
        n - 16 * threads);
}
