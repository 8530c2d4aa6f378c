#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace std::chrono_literals;
using V = std::vector<std::int64_t>;

namespace {
struct Work {
  std::int64_t ns = 0;
  std::int64_t fail_every = 0;  // fail x where x % fail_every == fail_every - 1
  std::int64_t operator()(std::int64_t x) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
    while (std::chrono::steady_clock::now() < until) {
    }
    if (fail_every && x % fail_every == fail_every - 1) throw Boom("bad " + std::to_string(x));
    return x * 2;
  }
};

// Outcomes of a batched pipeline as comparable strings.
template <class D>
std::vector<std::string> render(const D& ds) {
  std::vector<std::string> out;
  for (auto& o : collect_outcomes(ds)) out.push_back(o.value ? o.value->to_string(1000) : o.error);
  return out;
}
}  // namespace

TEST_CASE("map(parallel).batch fuses into one stage", "[stages][map_and_batch]") {
  auto fused = range(10).map(Work{}, {.parallelism = 2}).batch(4);
  STATIC_REQUIRE(std::is_same_v<decltype(fused), MapAndBatchDataset<RangeDataset, Work>>);
  auto unfused = range(10).map(Work{}).batch(4);
  STATIC_REQUIRE(std::is_same_v<decltype(unfused), BatchDataset<MapDataset<RangeDataset, Work>>>);
}

TEST_CASE("the fused stage gives the unfused output", "[stages][map_and_batch][concurrency]") {
  for (std::int64_t cost : {0, 3000, 40000}) {
    for (std::int64_t p : {1, 2, 5}) {
      for (std::int64_t n : {1, 3, 64}) {
        for (bool drop : {false, true}) {
          for (std::int64_t fail_every : {0, 13}) {
            INFO("cost " << cost << " p " << p << " batch " << n << " drop " << drop << " fail "
                         << fail_every);
            const std::int64_t count = cost > 10000 ? 150 : 700;
            Work w{cost, fail_every};
            auto fused = range(count).map(w, {.parallelism = p}).batch(n, {.drop_remainder = drop});
            auto unfused = range(count).map(w).batch(n, {.drop_remainder = drop});
            CHECK(render(fused) == render(unfused));
          }
        }
      }
    }
  }
}

TEST_CASE("fused tensors, shape errors and input errors", "[stages][map_and_batch][concurrency]") {
  auto shapes = [](std::int64_t x) { return Tensor::zeros(DType::float32, Shape{x == 5 ? 3 : 2}); };
  auto fused = range(8).map(shapes, {.parallelism = 3}).batch(3);
  auto unfused = range(8).map(shapes).batch(3);
  CHECK(render(fused) == render(unfused));
  auto out = collect_outcomes(fused);
  REQUIRE(out.size() == 3);
  CHECK(out[1].error.find("stage 'batch', element 5") != std::string::npos);

  auto bad_input = range(9).map([](std::int64_t x) -> std::int64_t {
    if (x == 4) throw Boom("input");
    return x;
  });
  CHECK(render(bad_input.map(Work{}, {.parallelism = 2}).batch(3)) ==
        render(bad_input.map(Work{}).batch(3)));

  // Tuples stack field by field.
  auto pairs = range(5).map(
      [](std::int64_t x) {
        return std::pair{x, Tensor::scalar(float(x))};
      },
      {.parallelism = 2});
  auto batches = collect(pairs.batch(5));
  REQUIRE(batches.size() == 1);
  CHECK(values_of(batches[0].first) == iota(0, 5));
  CHECK(batches[0].second.shape() == Shape{5});
}

TEST_CASE("fused edge cases", "[stages][map_and_batch]") {
  CHECK(collect(range(0).map(Work{}, {.parallelism = 2}).batch(4)).empty());
  CHECK(
      collect(range(3).map(Work{}, {.parallelism = 2}).batch(4, {.drop_remainder = true})).empty());
  CHECK_THROWS_AS(range(3).map(Work{}, {.parallelism = 2}).batch(0), InvalidArgument);
  auto one = collect(range(1).map(Work{}, {.parallelism = 2}).batch(4));
  REQUIRE(one.size() == 1);
  CHECK(values_of(one[0]) == V{0});
}

TEST_CASE("fused non-deterministic mode yields every batch once",
          "[stages][map_and_batch][concurrency]") {
  auto ds = range(1000).map(Work{2000}, {.parallelism = 4, .deterministic = false}).batch(10);
  V all;
  for (const Tensor& b : ds) {
    CHECK(b.shape() == Shape{10});
    for (auto v : b.values<std::int64_t>()) all.push_back(v);
  }
  std::sort(all.begin(), all.end());
  V want;
  for (std::int64_t x = 0; x < 1000; ++x) want.push_back(2 * x);
  CHECK(all == want);
}

TEST_CASE("destroying a fused iterator mid-stream stops and joins",
          "[stages][map_and_batch][concurrency]") {
  std::atomic<int> calls{0};
  auto ds = range(1'000'000)
                .map(
                    [&calls](std::int64_t x) {
                      calls.fetch_add(1);
                      std::this_thread::sleep_for(200us);
                      return x;
                    },
                    {.parallelism = 4})
                .batch(32);
  {
    auto it = ds.iterator();
    CHECK(it.next()->shape() == Shape{32});
  }
  const int after = calls.load();
  std::this_thread::sleep_for(20ms);
  CHECK(calls.load() == after);
}

TEST_CASE("map-and-batch and parallel map allocate by what arrives, not by their knobs",
          "[stages][map_and_batch][concurrency]") {
  auto str = [](std::int64_t x) { return std::to_string(x); };
  auto unknown = range(10).filter([](std::int64_t) { return true; });
  for (std::int64_t p : {std::int64_t{2}, std::int64_t{1'000'000}, std::int64_t{1} << 40}) {
    auto out = collect(unknown.map(str, {.parallelism = p}).batch(std::int64_t{1} << 40));
    REQUIRE(out.size() == 1);
    CHECK(out[0].size() == 10);
    CHECK(collect(unknown.map(str, {.parallelism = p})).size() == 10);
    auto fused = collect(range(10)
                             .map([](std::int64_t x) { return x; }, {.parallelism = p})
                             .batch(std::int64_t{1} << 40));
    REQUIRE(fused.size() == 1);
    CHECK(values_of(fused[0]) == iota(0, 10));
  }
}

TEST_CASE("an impossible batch_size is InvalidArgument from the fused stage (issue 10 item 4)",
          "[stages][map_and_batch]") {
  constexpr std::int64_t huge = std::int64_t{1} << 40;
  for (std::int64_t p : {std::int64_t{1}, std::int64_t{2}}) {
    // Was: std::bad_alloc from a batch buffer sized by the batch size.
    auto out = collect_outcomes(
        range(10).repeat().map([](std::int64_t x) { return x; }, {.parallelism = p}).batch(huge),
        1);
    REQUIRE(out.size() == 1);
    CHECK(out[0].error.find("InvalidArgument: batch_size 1099511627776 x 8-byte") == 0);
    CHECK(out[0].error.find("stage 'batch'") != std::string::npos);
  }
}

TEST_CASE("a batch's first chunks reach the pool while the rest of it loads",
          "[stages][map_and_batch][concurrency]") {
  // The input's element 200 waits (up to 10 s) for f's first call: before,
  // f was first called once all 256 inputs of the batch were pulled.
  std::atomic<bool> called{false};
  bool waited_out = false;
  auto ds = range(512)
                .map([&](std::int64_t x) {
                  const auto until = std::chrono::steady_clock::now() + 10s;
                  while (x == 200 && !called.load() && std::chrono::steady_clock::now() < until)
                    std::this_thread::sleep_for(100us);
                  if (x == 200 && !called.load()) waited_out = true;
                  return x;
                })
                .map(
                    [&](std::int64_t x) {
                      called.store(true);
                      return x + 1;
                    },
                    {.parallelism = 2})
                .batch(256);
  const auto out = collect(ds);
  CHECK_FALSE(waited_out);
  REQUIRE(out.size() == 2);
  CHECK(values_of(out[0]) == iota(1, 257));
  CHECK(values_of(out[1]) == iota(257, 513));
}

TEST_CASE("the first batch is handed out before the next one loads",
          "[stages][map_and_batch][concurrency]") {
  // A pipeline's start and a restore wait for the first batch alone: its
  // inputs are pulled, and the stage waits for its chunks rather than
  // pulling the next batch's inputs meanwhile (it did, while f ran); the
  // batches after it load ahead as before.
  std::atomic<std::int64_t> pulled{0};
  auto ds = range(640)
                .map([&](std::int64_t x) {
                  pulled.fetch_add(1);
                  return x;
                })
                .map(
                    [](std::int64_t x) {
                      std::this_thread::sleep_for(200us);
                      return x + 1;
                    },
                    {.parallelism = 2})
                .batch(64);
  auto it = ds.iterator();
  const auto first = it.next();
  REQUIRE(first);
  CHECK(values_of(*first) == iota(1, 65));
  CHECK(pulled.load() == 64);
  std::vector<std::int64_t> rest;
  while (auto b = it.next())
    for (std::int64_t v : values_of(*b)) rest.push_back(v);
  CHECK(rest == iota(65, 641));
}

TEST_CASE("input and function errors in batches whose chunks left while they loaded",
          "[stages][map_and_batch][concurrency]") {
  // Chunks of 8 go to the pool as they fill (batch 64, parallelism 2); an
  // input that fails after them fails its batch as the unfused stages do.
  auto input = range(300).map([](std::int64_t x) -> std::int64_t {
    if (x == 50 || x == 130 || x == 131 || x == 299) throw Boom("input " + std::to_string(x));
    return x;
  });
  for (std::int64_t fail_every : {0, 97}) {
    for (bool drop : {false, true}) {
      INFO("fail_every " << fail_every << " drop " << drop);
      const Work w{1000, fail_every};
      CHECK(render(input.map(w, {.parallelism = 2}).batch(64, {.drop_remainder = drop})) ==
            render(input.map(w).batch(64, {.drop_remainder = drop})));
    }
  }
}

TEST_CASE("map_and_batch gives the strings its function read back", "[stages][map_and_batch]") {
  auto& recycler = detail::StringRecycler::instance();
  const std::size_t here = recycler.cached_here(4096);
  const std::uint64_t spilled = recycler.stats().spilled;
  constexpr std::size_t n = 3000;
  // (A source whose strings are made one by one: from_vector would hand
  // map_and_batch copies it makes inside its own loop.)
  auto ds = range(static_cast<std::int64_t>(n))
                .map([](std::int64_t) { return std::string(4096, 'b'); })
                .map([](const std::string& s) { return static_cast<std::int64_t>(s.size()); },
                     {.parallelism = 2})
                .batch(100);
  std::int64_t sum = 0;
  for (const Tensor& b : collect(ds))
    for (std::int64_t x : b.values<std::int64_t>()) sum += x;
  CHECK(sum == static_cast<std::int64_t>(n) * 4096);
  const std::size_t threads = std::thread::hardware_concurrency() + 1;
  CHECK(recycler.stats().spilled - spilled + (recycler.cached_here(4096) - here) >=
        n - 16 * threads);
}
