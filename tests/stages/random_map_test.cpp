#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

namespace {
// x * 10^6 plus a draw from the element's generator, after `ns` of busy work
// (enough to send chunks to the pool).
struct Draw {
  std::int64_t ns = 0;
  std::int64_t operator()(std::int64_t x, Rng& rng) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
    while (std::chrono::steady_clock::now() < until) {
    }
    return x * 1'000'000 + static_cast<std::int64_t>(rng.uniform(1'000'000));
  }
};

V slice(const V& v, std::size_t from, std::size_t n) {
  return V(v.begin() + static_cast<std::ptrdiff_t>(from),
           v.begin() + static_cast<std::ptrdiff_t>(from + n));
}

template <class D>
struct is_map_and_batch : std::false_type {};
template <class Input, class F>
struct is_map_and_batch<MapAndBatchDataset<Input, F>> : std::true_type {};
}  // namespace

TEST_CASE("random_map seeds each element from (seed, epoch, position)",
          "[stages][random_map][concurrency]") {
  const V out = collect(range(100).random_map(Draw{}, {.seed = 7}));
  REQUIRE(out.size() == 100);
  for (std::int64_t i = 0; i < 100; ++i) {
    Rng rng(element_seed(7, 0, static_cast<std::uint64_t>(i)));
    CHECK(out[static_cast<std::size_t>(i)] == Draw{}(i, rng));
  }
  // Each element has its own generator: the draws are not all the same.
  std::set<std::int64_t> draws;
  for (std::int64_t v : out) draws.insert(v % 1'000'000);
  CHECK(draws.size() > 90);
}

TEST_CASE("random_map(f, seed) calls f on the consumer's thread, with the same results",
          "[stages][random_map]") {
  const auto consumer = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  auto f = [&](std::int64_t x, Rng& rng) {
    if (std::this_thread::get_id() != consumer) elsewhere.fetch_add(1);
    return Draw{}(x, rng);
  };
  const auto sync = range(200).random_map(f, 13);
  STATIC_REQUIRE(
      std::is_same_v<std::decay_t<decltype(sync)>,
                     MapDataset<RandomSeedDataset<RangeDataset>, detail::SeededCall<decltype(f)>>>);
  const V out = collect(sync);
  CHECK(elsewhere.load() == 0);
  CHECK(out == collect(range(200).random_map(Draw{}, {.seed = 13, .parallelism = 2})));
  // Epochs of a repeat differ as the parallel form's do.
  CHECK(collect(sync.repeat(2)) ==
        collect(range(200).random_map(Draw{}, {.seed = 13, .parallelism = 2}).repeat(2)));
  // Without a seed: one drawn per dataset.
  const auto drawn = range(64).random_map(Draw{});
  CHECK(collect(drawn) == collect(drawn));
  CHECK(collect(range(64).random_map(Draw{})) != collect(drawn));
  // A batch after it does not fuse (nothing runs on the pool).
  STATIC_REQUIRE(!is_map_and_batch<std::decay_t<decltype(sync.batch(8))>>::value);
}

TEST_CASE("random_map gives the same results for every parallelism",
          "[stages][random_map][concurrency]") {
  for (std::int64_t cost : {0, 20'000}) {
    const std::int64_t n = cost > 0 ? 300 : 3000;
    const V reference = collect(range(n).random_map(Draw{cost}, {.seed = 11}));
    for (std::int64_t p : V{1, 2, 3, autotune}) {
      INFO("cost " << cost << " ns, parallelism " << p);
      CHECK(collect(range(n).random_map(Draw{cost}, {.seed = 11, .parallelism = p})) == reference);
      // Unordered results hold the same values.
      V unordered = collect(
          range(n).random_map(Draw{cost}, {.seed = 11, .parallelism = p, .deterministic = false}));
      std::sort(unordered.begin(), unordered.end());
      CHECK(unordered == reference);
    }
  }
}

TEST_CASE("random_map: every iterator of a dataset agrees", "[stages][random_map][concurrency]") {
  const auto ds = range(500).random_map(Draw{2'000}, {.seed = 3, .parallelism = 3});
  const V first = collect(ds);
  CHECK(collect(ds) == first);
  const auto copy = ds;
  CHECK(collect(copy) == first);
}

TEST_CASE("random_map: each epoch of a repeat differs, the same way in every run",
          "[stages][random_map][concurrency]") {
  const auto ds = range(50).random_map(Draw{}, {.seed = 5, .parallelism = 2});
  const V run1 = collect(ds.repeat(3));
  REQUIRE(run1.size() == 150);
  CHECK(collect(ds.repeat(3)) == run1);
  CHECK(slice(run1, 0, 50) == collect(ds));  // epoch 0 is a plain pass
  CHECK(slice(run1, 0, 50) != slice(run1, 50, 50));
  CHECK(slice(run1, 50, 50) != slice(run1, 100, 50));
  CHECK(slice(run1, 0, 50) != slice(run1, 100, 50));
  // Nested finite repeats number their passes consecutively.
  CHECK(collect(ds.repeat(2).repeat(3)) == collect(ds.repeat(6)));
}

TEST_CASE("random_map without a seed: one seed per dataset", "[stages][random_map][concurrency]") {
  const auto a = range(64).random_map(Draw{});
  const auto b = range(64).random_map(Draw{});
  const V first = collect(a);
  CHECK(collect(a) == first);
  CHECK(collect(a.repeat(2)) == collect(a.repeat(2)));
  CHECK(collect(b) != first);
}

TEST_CASE("random_map then batch fuses and gives the same values",
          "[stages][random_map][concurrency]") {
  const auto ds = range(100).random_map(Draw{1'000}, {.seed = 9, .parallelism = 2});
  const auto batched = ds.batch(8);
  STATIC_REQUIRE(is_map_and_batch<std::decay_t<decltype(batched)>>::value);
  V values;
  for (const Tensor& t : collect(batched)) {
    for (std::int64_t v : values_of(t)) values.push_back(v);
  }
  CHECK(values == collect(ds));
  // A shuffle after it runs the map after the shuffle: the seeds travel with
  // their elements, so the same values come out, in shuffled order.
  V shuffled = collect(ds.shuffle(30, {.seed = 1}));
  V plain = collect(ds);
  std::sort(shuffled.begin(), shuffled.end());
  std::sort(plain.begin(), plain.end());
  CHECK(shuffled == plain);
}

TEST_CASE("random_map: errors surface at their element's position",
          "[stages][random_map][concurrency]") {
  auto f = [](std::int64_t x, Rng& rng) {
    if (x % 7 == 3) throw Boom("bad " + std::to_string(x));
    return x * 1'000'000 + static_cast<std::int64_t>(rng.uniform(1'000'000));
  };
  const V clean = collect(range(60).random_map(Draw{}, {.seed = 4}));
  for (std::int64_t p : {1, 3}) {
    INFO("parallelism " << p);
    const auto out = collect_outcomes(range(60).random_map(f, {.seed = 4, .parallelism = p}));
    REQUIRE(out.size() == 60);
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (i % 7 == 3) {
        CHECK(out[i].error == "FunctionError: bad " + std::to_string(i) +
                                  " [stage 'random_map', element " + std::to_string(i) + "]");
      } else {
        CHECK(out[i].value == clean[i]);  // a failure does not shift the others' seeds
      }
    }
  }
  // The synchronous form, and fused with a batch, name their stage too.
  auto sync = range(5).random_map(f, 4).iterator();
  for (int i = 0; i < 3; ++i) CHECK(sync.next().has_value());
  CHECK_THROWS_WITH(sync.next(), Catch::Contains("[stage 'random_map', element 3]"));
  auto fused = range(8).random_map(f, {.seed = 4, .parallelism = 2}).batch(4).iterator();
  CHECK_THROWS_WITH(fused.next(), Catch::Contains("stage 'random_map'"));
}

TEST_CASE("random_map: destroying an iterator mid-stream", "[stages][random_map][concurrency]") {
  const auto ds = range(100'000).random_map(Draw{20'000}, {.seed = 2, .parallelism = 3});
  V head;
  {
    auto it = ds.iterator();
    for (int i = 0; i < 10; ++i) head.push_back(*it.next());
  }  // stops the work in flight and joins
  CHECK(head == collect(ds.take(10)));
}

TEST_CASE("random_map validates its options", "[stages][random_map][concurrency]") {
  CHECK_THROWS_WITH(range(3).random_map(Draw{}, {.parallelism = 0}),
                    Catch::Contains("random_map: parallelism must be >= 1 or ingest::autotune"));
}
