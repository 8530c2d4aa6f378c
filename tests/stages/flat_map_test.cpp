#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("flat_map produces each dataset's elements in turn", "[stages][flat_map]") {
  auto upto = [](std::int64_t n) { return range(n); };
  CHECK(collect(range(4).flat_map(upto)) == V{0, 0, 1, 0, 1, 2});
  CHECK(collect(range(0).flat_map(upto)).empty());
  CHECK(collect(range(1, 2).flat_map(upto)) == V{0});
  // Only empty datasets, and empty ones between others.
  CHECK(collect(range(5).flat_map([](std::int64_t) { return range(0); })).empty());
  CHECK(collect(from_vector<std::int64_t>({0, 2, 0, 0, 3, 0}).flat_map(upto)) == V{0, 1, 0, 1, 2});
  // The element type is the inner dataset's.
  auto words = from_vector<std::string>({"ab", "", "c"}).flat_map([](const std::string& s) {
    std::vector<std::string> chars;
    for (char c : s) chars.emplace_back(1, c);
    return from_vector(chars);
  });
  CHECK(collect(words) == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("flat_map composes: ranges of ranges, then map and batch", "[stages][flat_map]") {
  auto ds = range(1, 4)
                .flat_map([](std::int64_t n) {
                  return range(n).map([n](std::int64_t x) { return 10 * n + x; });
                })
                .batch(4);
  const auto batches = collect(ds);
  REQUIRE(batches.size() == 2);
  CHECK(values_of(batches[0]) == V{10, 20, 21, 30});
  CHECK(values_of(batches[1]) == V{31, 32});
  // flat_map of flat_maps, and a second pass gives the same.
  auto nested = range(3).flat_map([](std::int64_t n) {
    return range(n).flat_map([](std::int64_t m) { return range(m + 1); });
  });
  CHECK(collect(nested) == V{0, 0, 0, 1});
  CHECK(collect(nested) == V{0, 0, 0, 1});
}

TEST_CASE("flat_map's cardinality is unknown, as tf.data's", "[stages][flat_map]") {
  auto upto = [](std::int64_t n) { return range(n); };
  CHECK(range(4).flat_map(upto).cardinality() == unknown_cardinality);
  CHECK(range(0).flat_map(upto).cardinality() == unknown_cardinality);
  CHECK(range(2).repeat().flat_map(upto).cardinality() == unknown_cardinality);
}

TEST_CASE("an error from flat_map's function fails that input element only", "[stages][flat_map]") {
  auto ds = range(4).flat_map([](std::int64_t n) {
    if (n == 2) throw Boom("two");
    return range(n);
  });
  // Input 0 opens an empty dataset, 1 gives 0, 2 fails, and the pass goes
  // on with input 3: 0, 1, 2.
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 5);
  CHECK(out[0].value == 0);
  CHECK(out[1].error == "FunctionError: two [stage 'flat_map', element 2]");
  CHECK(out[2].value == 0);
  CHECK(out[3].value == 1);
  CHECK(out[4].value == 2);
}

TEST_CASE("errors from flat_map's input and from an inner dataset surface in place",
          "[stages][flat_map]") {
  auto upto = [](std::int64_t n) { return range(n); };
  auto input = range(4).map([](std::int64_t x) -> std::int64_t {
    if (x == 2) throw Boom("input");
    return x;
  });
  const auto out = collect_outcomes(input.flat_map(upto));
  REQUIRE(out.size() == 5);
  CHECK(out[0].value == 0);
  CHECK(out[1].error == "FunctionError: input [stage 'map', element 2]");
  CHECK(out[2].value == 0);
  CHECK(out[4].value == 2);
  // An inner element's error leaves that dataset open: its next element follows.
  auto inner_fails = range(3).flat_map([](std::int64_t n) {
    return range(n).map([](std::int64_t x) -> std::int64_t {
      if (x == 0) throw Boom("inner");
      return x;
    });
  });
  const auto in = collect_outcomes(inner_fails);
  REQUIRE(in.size() == 3);
  CHECK(in[0].error == "FunctionError: inner [stage 'map', element 0]");
  CHECK(in[1].error == "FunctionError: inner [stage 'map', element 0]");
  CHECK(in[2].value == 1);
}

TEST_CASE("flat_map opens each input element's dataset only when needed", "[stages][flat_map]") {
  int opened = 0;
  auto ds = range(100).flat_map([&opened](std::int64_t n) {
    ++opened;
    return range(n % 3);
  });
  CHECK(collect(ds.take(2)) == V{0, 0});  // from inputs 1 and 2
  CHECK(opened == 3);
}

TEST_CASE("destroying a flat_map iterator mid-stream is clean", "[stages][flat_map]") {
  auto ds = from_vector<std::string>({"x", "yy"}).flat_map([](const std::string& s) {
    return from_vector(std::vector<std::string>(3, s));
  });
  {
    auto it = ds.iterator();
    CHECK(it.next() == "x");
    CHECK(it.next() == "x");
  }
  CHECK(collect(ds).size() == 6);
}

TEST_CASE("flat_map's datasets appear in stats under it", "[stages][flat_map]") {
  auto ds = range(3).flat_map(
      [](std::int64_t n) { return range(n).map([](std::int64_t x) { return x; }); });
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  const auto has = [&](const std::string& name) {
    return std::any_of(s.stages.begin(), s.stages.end(),
                       [&](const StageStats& st) { return st.name == name; });
  };
  CHECK(has("flat_map"));
  CHECK(has("map (each input)"));
}

TEST_CASE("flat_map unwinds between empty datasets once its consumer is gone",
          "[stages][flat_map]") {
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  source.request_stop();
  int opened = 0;
  auto ds = range(1000).flat_map([&opened](std::int64_t) {
    ++opened;
    return range(0);
  });
  CHECK_THROWS_AS(ds.make_iterator(ctx).next(), detail::Cancelled);
  CHECK(opened == 1);
}
