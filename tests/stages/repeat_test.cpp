#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("repeat runs the input count times", "[stages][repeat]") {
  CHECK(collect(range(3).repeat(2)) == V{0, 1, 2, 0, 1, 2});
  CHECK(collect(range(3).repeat(1)) == V{0, 1, 2});
  CHECK(collect(range(3).repeat(0)).empty());
  CHECK(collect(range(1).repeat(3)) == V{0, 0, 0});
  CHECK_THROWS_AS(range(3).repeat(-2), InvalidArgument);
  CHECK(collect_bulk(range(5).repeat(3), 4) == collect(range(5).repeat(3)));
}

TEST_CASE("repeat forever and repeat of an empty dataset", "[stages][repeat]") {
  CHECK(collect(range(2).repeat().take(5)) == V{0, 1, 0, 1, 0});
  // Forever over nothing ends instead of spinning.
  CHECK(collect(range(0).repeat()).empty());
  CHECK(collect(range(0).repeat(5)).empty());
  CHECK(collect(range(3).filter([](std::int64_t) { return false; }).repeat()).empty());
}

TEST_CASE("each epoch is a new pass over the input", "[stages][repeat]") {
  int passes = 0;
  auto ds = from_generator([&passes] {
    const int p = passes++;
    return [p, i = 0]() mutable -> std::optional<int> {
      if (i == 2) return std::nullopt;
      return p * 10 + i++;
    };
  });
  CHECK(collect(ds.repeat(3)) == std::vector<int>{0, 1, 10, 11, 20, 21});
}

TEST_CASE("an epoch with only errors counts as empty (tf.data)", "[stages][repeat]") {
  auto fails = range(2).map([](std::int64_t) -> std::int64_t { throw Boom("always"); });
  for (std::int64_t count : {3, -1}) {
    auto out = collect_outcomes(fails.repeat(count));
    REQUIRE(out.size() == 2);  // the first epoch's errors, then the end
    for (auto& o : out) CHECK_FALSE(o.value);
  }
  // An epoch with an error and an element is not empty: every epoch runs.
  auto some = range(2).map([](std::int64_t x) -> std::int64_t {
    if (x == 0) throw Boom("first");
    return x;
  });
  auto out = collect_outcomes(some.repeat(3));
  CHECK(out.size() == 6);
}

TEST_CASE("map(fails) -> cache() -> shuffle -> repeat() raises once, then ends (tf.data)",
          "[stages][repeat]") {
  auto ds = range(1)
                .map([](std::int64_t) -> std::int64_t { throw Boom("always"); })
                .cache()
                .shuffle(10, {.seed = 1})
                .repeat();
  auto it = ds.iterator();
  CHECK_THROWS_AS(it.next(), Error);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(it.next());
}

TEST_CASE(
    "repeat over every autotuned async stage: each epoch's iterator sets up its node while "
    "the autotuner reads it",
    "[stages][repeat][concurrency]") {
  // A data race under ThreadSanitizer before StageNode::kind and
  // nominal_ratio were atomic: epochs are short so new iterators keep coming
  // while the autotuner thread runs its first periods (20, 40, 80 ms).
  const auto add_one = [](std::int64_t x) { return x + 1; };
  const auto run_for = [](auto ds) {
    std::size_t n = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
    auto it = ds.repeat().iterator();
    while (std::chrono::steady_clock::now() < until) {
      REQUIRE(it.next().has_value());
      ++n;
    }
    return n;
  };
  const PipelineOptions tuned{.autotune = true};
  CHECK(run_for(range(20).map(add_one, {.parallelism = autotune}).with_options(tuned)) > 0);
  CHECK(run_for(range(20).map(add_one, {.parallelism = autotune}).batch(4).with_options(tuned)) >
        0);
  CHECK(run_for(range(4)
                    .interleave([](std::int64_t x) { return range(x, x + 3); },
                                {.cycle_length = 2, .parallelism = autotune})
                    .with_options(tuned)) > 0);
  CHECK(run_for(range(20).prefetch(autotune).with_options(tuned)) > 0);
}
