#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

namespace {
/// An endless dataset of `value`.
auto always(std::int64_t value) { return from_vector<std::int64_t>({value}).repeat(); }

/// The elements of `out` that lie in [lo, hi), in their order.
V between(const V& out, std::int64_t lo, std::int64_t hi) {
  V v;
  for (std::int64_t x : out)
    if (x >= lo && x < hi) v.push_back(x);
  return v;
}

std::string error_of(auto make) {
  try {
    make();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("sample_from_datasets draws inputs in proportion to their weights",
          "[stages][sample_from_datasets]") {
  const int draws = 100000;
  auto ds =
      sample_from_datasets(std::vector{always(0), always(1), always(2)}, {{0.5, 0.3, 0.2}}, 42)
          .take(draws);
  std::vector<int> counts(3);
  for (std::int64_t x : ds) ++counts[static_cast<std::size_t>(x)];
  // Binomial standard deviations are at most 0.0016 here: 0.01 is > 6 of them.
  CHECK(std::abs(counts[0] / double(draws) - 0.5) < 0.01);
  CHECK(std::abs(counts[1] / double(draws) - 0.3) < 0.01);
  CHECK(std::abs(counts[2] / double(draws) - 0.2) < 0.01);
  // Uniform without weights.
  auto uniform =
      sample_from_datasets(std::vector{always(0), always(1)}, std::nullopt, 7).take(draws);
  int ones = 0;
  for (std::int64_t x : uniform) ones += static_cast<int>(x);
  CHECK(std::abs(ones / double(draws) - 0.5) < 0.01);
}

TEST_CASE("sample_from_datasets normalises its weights", "[stages][sample_from_datasets]") {
  auto make = [](std::vector<double> w) {
    return collect(
        sample_from_datasets(std::vector{always(0), always(1), always(2)}, w, 3).take(500));
  };
  // 5/10 and 50/100 are the same doubles, so the same draws.
  CHECK(make({5, 3, 2}) == make({50, 30, 20}));
  CHECK(sample_from_datasets(std::vector{always(0), always(1)}, {{1, 3}}, 1).weights() ==
        std::vector<double>{0.25, 0.75});
}

TEST_CASE("sample_from_datasets with a seed draws the same sequence every time",
          "[stages][sample_from_datasets]") {
  auto make = [](std::uint64_t seed, SampleFromDatasetsOptions options = {}) {
    return sample_from_datasets(std::vector{always(0), always(1), always(2)}, {{1, 1, 1}}, seed,
                                options)
        .take(200);
  };
  const V first = collect(make(11));
  CHECK(first == collect(make(11)));  // another dataset with the seed
  auto ds = make(11);
  CHECK(collect(ds) == first);  // each pass of one dataset
  CHECK(collect(ds) == first);
  CHECK(collect(make(12)) != first);
  // Each epoch of a repeat too (tf's rerandomize_each_iteration=False).
  const V twice = collect(ds.repeat(2));
  CHECK(V(twice.begin(), twice.begin() + 200) == first);
  CHECK(V(twice.begin() + 200, twice.end()) == first);
  // With rerandomize_each_iteration, each pass draws anew from the seed,
  // and the same passes again for another dataset with the seed.
  auto re = make(11, {.rerandomize_each_iteration = true});
  const V a = collect(re), b = collect(re);
  CHECK(a != b);
  auto again = make(11, {.rerandomize_each_iteration = true});
  CHECK(collect(again) == a);
  CHECK(collect(again) == b);
}

TEST_CASE("sample_from_datasets without a seed draws a new sequence every pass",
          "[stages][sample_from_datasets]") {
  auto ds = sample_from_datasets(std::vector{always(0), always(1)}).take(64);
  CHECK(collect(ds) != collect(ds));
  const V epochs = collect(ds.repeat(2));
  REQUIRE(epochs.size() == 128);
  CHECK(V(epochs.begin(), epochs.begin() + 64) != V(epochs.begin() + 64, epochs.end()));
  // Unless told to repeat its sequence.
  auto same = sample_from_datasets(std::vector{always(0), always(1)}, std::nullopt, std::nullopt,
                                   {.rerandomize_each_iteration = false})
                  .take(64);
  CHECK(collect(same) == collect(same));
}

TEST_CASE("sample_from_datasets drops an exhausted input and samples the rest",
          "[stages][sample_from_datasets]") {
  // tf's default: every element of every input, each input's in order.
  auto ds = sample_from_datasets(std::vector{range(0, 3), range(10, 15), range(20, 30)},
                                 {{0.2, 0.3, 0.5}}, 5);
  const V out = collect(ds);
  CHECK(out.size() == 18);
  CHECK(between(out, 0, 10) == iota(0, 3));
  CHECK(between(out, 10, 20) == iota(10, 15));
  CHECK(between(out, 20, 30) == iota(20, 30));
  CHECK(ds.cardinality() == 18);
  // After the short inputs are gone, only the long one remains.
  auto lopsided =
      sample_from_datasets(std::vector{range(0, 1), range(10, 1000)}, {{0.99, 0.01}}, 5);
  const V l = collect(lopsided);
  REQUIRE(l.size() == 991);
  CHECK(between(l, 10, 1000) == iota(10, 1000));
}

TEST_CASE("sample_from_datasets with stop_on_empty_dataset ends at the first exhausted draw",
          "[stages][sample_from_datasets]") {
  for (std::uint64_t seed : {1, 2, 3, 4, 5}) {
    auto make = [seed](bool stop) {
      return sample_from_datasets(std::vector{range(0, 3), range(10, 15)}, std::nullopt, seed,
                                  {.stop_on_empty_dataset = stop});
    };
    const V stopped = collect(make(true));
    const V all = collect(make(false));
    // The same draws up to the one that found an input exhausted.
    REQUIRE(stopped.size() < all.size());
    CHECK(V(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(stopped.size())) == stopped);
    const bool a_done = between(stopped, 0, 10) == iota(0, 3);
    const bool b_done = between(stopped, 10, 20) == iota(10, 15);
    CHECK((a_done || b_done));
  }
  // An empty input ends the pass the first time it is drawn.
  auto empty_first = sample_from_datasets(std::vector{range(0), range(10, 1000)}, {{0.5, 0.5}}, 3,
                                          {.stop_on_empty_dataset = true});
  CHECK(collect(empty_first).size() < 100);
  // One input with a weight: all of it.
  auto single = sample_from_datasets(std::vector{range(0, 4), range(10, 20)}, {{1, 0}}, 3,
                                     {.stop_on_empty_dataset = true});
  CHECK(collect(single) == iota(0, 4));
}

TEST_CASE("sample_from_datasets never opens an input of weight 0",
          "[stages][sample_from_datasets]") {
  int read = 0;
  auto counted = [&read](std::int64_t x) {
    ++read;
    return x;
  };
  auto ds = sample_from_datasets(std::tuple{range(3), range(10, 20).map(counted)}, {{1, 0}}, 9);
  CHECK(collect(ds) == iota(0, 3));
  CHECK(read == 0);
  CHECK(ds.cardinality() == 3);
}

TEST_CASE("sample_from_datasets over datasets of different types",
          "[stages][sample_from_datasets]") {
  auto ds = sample_from_datasets(std::tuple{range(3), from_vector<std::int64_t>({10, 11}),
                                            range(20, 22).map([](std::int64_t x) { return x; })},
                                 {{1, 2, 3}}, 17);
  const V out = collect(ds);
  CHECK(out.size() == 7);
  CHECK(between(out, 0, 10) == iota(0, 3));
  CHECK(between(out, 10, 20) == V{10, 11});
  CHECK(between(out, 20, 30) == V{20, 21});
  CHECK(ds.cardinality() == 7);
  // Type-erased datasets in a vector.
  std::vector<AnyDataset<std::string>> erased{from_vector<std::string>({"a", "b"}).erase(),
                                              from_vector<std::string>({"c"}).erase()};
  auto words = collect(sample_from_datasets(erased, std::nullopt, 1));
  std::sort(words.begin(), words.end());
  CHECK(words == std::vector<std::string>{"a", "b", "c"});
  // One dataset: itself.
  CHECK(collect(sample_from_datasets(std::vector{range(5)})) == iota(0, 5));
}

TEST_CASE("sample_from_datasets checks its arguments", "[stages][sample_from_datasets]") {
  using Ds = std::vector<decltype(range(1))>;
  const Ds two{range(1), range(2)};
  CHECK(error_of([] { sample_from_datasets(Ds{}); }) ==
        "InvalidArgument: sample_from_datasets: datasets is empty; give at least one dataset "
        "[stage 'sample_from_datasets']");
  CHECK(error_of([&] {
          sample_from_datasets(two, {{1, 2, 3}});
        }).find("weights has 3 entries for 2 datasets") != std::string::npos);
  CHECK(error_of([&] {
          sample_from_datasets(two, {{1, -0.5}});
        }).find("weights[1] must be finite and >= 0; got -0.5") != std::string::npos);
  CHECK(error_of([&] {
          sample_from_datasets(two, {{std::nan(""), 1}});
        }).find("weights[0] must be finite") != std::string::npos);
  CHECK(error_of([&] {
          sample_from_datasets(two, {{INFINITY, 1}});
        }).find("weights[0] must be finite") != std::string::npos);
  CHECK(error_of([&] {
          sample_from_datasets(two, {{0, 0}});
        }).find("the weights are all 0") != std::string::npos);
  CHECK(error_of([&] {
          sample_from_datasets(two, {{1e308, 1e308}});
        }).find("sum is not finite") != std::string::npos);
}

TEST_CASE("sample_from_datasets' cardinality", "[stages][sample_from_datasets]") {
  auto inf = [] { return range(1).repeat(); };
  using Fin = decltype(range(1));
  CHECK(sample_from_datasets(std::vector{inf(), inf()}).cardinality() == infinite_cardinality);
  CHECK(sample_from_datasets(std::tuple{range(3), inf()}).cardinality() == infinite_cardinality);
  CHECK(sample_from_datasets(std::vector<Fin>{range(3), range(4)}).cardinality() == 7);
  CHECK(sample_from_datasets(std::tuple{range(3), range(4).filter([](auto) { return true; })})
            .cardinality() == unknown_cardinality);
  // Ending at a random draw: unknown, unless every input is endless.
  const SampleFromDatasetsOptions stop{.stop_on_empty_dataset = true};
  CHECK(sample_from_datasets(std::vector<Fin>{range(3), range(4)}, std::nullopt, 1, stop)
            .cardinality() == unknown_cardinality);
  CHECK(sample_from_datasets(std::tuple{range(3), inf()}, std::nullopt, 1, stop).cardinality() ==
        unknown_cardinality);
  CHECK(sample_from_datasets(std::vector{inf(), inf()}, std::nullopt, 1, stop).cardinality() ==
        infinite_cardinality);
  // Inputs of weight 0 do not count.
  CHECK(sample_from_datasets(std::tuple{range(3), inf()}, {{1, 0}}, 1).cardinality() == 3);
  CHECK(sample_from_datasets(std::tuple{range(3), inf()}, {{1, 0}}, 1, stop).cardinality() == 3);
}

TEST_CASE("an error from an input surfaces in place and the pass goes on",
          "[stages][sample_from_datasets]") {
  auto failing = range(3).map([](std::int64_t x) -> std::int64_t {
    if (x == 1) throw Boom("one");
    return x;
  });
  auto ds = sample_from_datasets(std::tuple{failing, range(10, 12)}, std::nullopt, 4);
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 5);
  V values;
  int errors = 0;
  for (const auto& o : out) {
    if (o.value) {
      values.push_back(*o.value);
    } else {
      ++errors;
      CHECK(o.error == "FunctionError: one [stage 'map', element 1]");
    }
  }
  CHECK(errors == 1);
  CHECK(between(values, 0, 10) == V{0, 2});
  CHECK(between(values, 10, 20) == V{10, 11});
}

TEST_CASE("destroying a sample_from_datasets iterator mid-stream is clean",
          "[stages][sample_from_datasets]") {
  auto ds = sample_from_datasets(
      std::vector{from_vector<std::string>({"a", "b", "c"}), from_vector<std::string>({"d"})},
      std::nullopt, 2);
  {
    auto it = ds.iterator();
    CHECK(it.next().has_value());
  }
  CHECK(collect(ds).size() == 4);
}

TEST_CASE("sample_from_datasets' inputs appear in stats apart", "[stages][sample_from_datasets]") {
  auto ds = sample_from_datasets(std::vector{range(3), range(4)}, std::nullopt, 1);
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  const auto has = [&](const std::string& name) {
    return std::any_of(s.stages.begin(), s.stages.end(),
                       [&](const StageStats& st) { return st.name == name; });
  };
  CHECK(has("sample_from_datasets"));
  CHECK(has("range [0]"));
  CHECK(has("range [1]"));
}

TEST_CASE("sample_from_datasets unwinds between exhausted inputs once its consumer is gone",
          "[stages][sample_from_datasets]") {
  // Many empty inputs: each draw finds one exhausted and draws again.
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  source.request_stop();
  std::vector<decltype(range(0))> empties(1000, range(0));
  auto ds = sample_from_datasets(empties, std::nullopt, 1);
  auto it = ds.make_iterator(ctx);
  CHECK_THROWS_AS(it.next(), detail::Cancelled);
  // Not stopped: the pass ends once every input is found exhausted.
  CHECK(collect(ds).empty());
}
