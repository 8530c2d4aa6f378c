#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("take_while stops at the first element failing the predicate", "[stages][take_while]") {
  auto below3 = [](std::int64_t x) { return x < 3; };
  CHECK(collect(range(10).take_while(below3)) == V{0, 1, 2});
  CHECK(collect(range(0).take_while(below3)).empty());
  CHECK(collect(range(1).take_while(below3)) == V{0});
  CHECK(collect(range(5, 6).take_while(below3)).empty());
  CHECK(collect(range(3).take_while(below3)) == V{0, 1, 2});  // never false
  // Stops at the first false even when later elements pass again.
  CHECK(collect(from_vector<std::int64_t>({1, 2, 5, 1, 2}).take_while(below3)) == V{1, 2});
  // On an infinite input.
  CHECK(collect(range(4).repeat().take_while(below3)) == V{0, 1, 2});
}

TEST_CASE("take_while never reads past the first rejected element", "[stages][take_while]") {
  int pulled = 0;
  auto ds = range(100).map([&pulled](std::int64_t x) {
    ++pulled;
    return x;
  });
  auto it = ds.take_while([](std::int64_t x) { return x < 4; }).iterator();
  while (it.next()) {
  }
  CHECK(pulled == 5);
  CHECK_FALSE(it.next());  // the end stays the end, with no more reads
  CHECK(pulled == 5);
}

TEST_CASE("take_while's cardinality is unknown, as tf.data's", "[stages][take_while]") {
  auto all = [](std::int64_t) { return true; };
  CHECK(range(4).take_while(all).cardinality() == unknown_cardinality);
  CHECK(range(0).take_while(all).cardinality() == unknown_cardinality);
  CHECK(range(4).repeat().take_while(all).cardinality() == unknown_cardinality);
}

TEST_CASE("a throwing take_while predicate fails that element and the pass goes on",
          "[stages][take_while]") {
  auto ds = range(6).take_while([](std::int64_t x) {
    if (x == 1) throw Boom("pred");
    return x < 3;
  });
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == 0);
  CHECK(out[1].error == "FunctionError: pred [stage 'take_while', element 1]");
  CHECK(out[2].value == 2);
}

TEST_CASE("an input error passes through take_while in place", "[stages][take_while]") {
  auto input = range(6).map([](std::int64_t x) -> std::int64_t {
    if (x == 2) throw Boom("input");
    return x;
  });
  const auto out = collect_outcomes(input.take_while([](std::int64_t x) { return x < 4; }));
  REQUIRE(out.size() == 4);
  CHECK(out[1].value == 1);
  CHECK(out[2].error == "FunctionError: input [stage 'map', element 2]");
  CHECK(out[3].value == 3);
  // The predicate numbers elements by their position in its input, failed ones included.
  const auto numbered = collect_outcomes(input.take_while([](std::int64_t x) {
    if (x == 3) throw Boom("pred");
    return true;
  }));
  REQUIRE(numbered.size() == 6);
  CHECK(numbered[3].error == "FunctionError: pred [stage 'take_while', element 3]");
  CHECK(numbered[5].value == 5);
}

TEST_CASE("destroying a take_while iterator mid-stream is clean", "[stages][take_while]") {
  auto ds = from_vector<std::string>({"a", "b", "stop", "c"}).take_while([](const std::string& s) {
    return s != "stop";
  });
  {
    auto it = ds.iterator();
    CHECK(it.next() == "a");
  }
  CHECK(collect(ds) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("take_while composes with map and batch", "[stages][take_while]") {
  auto ds = range(100)
                .map([](std::int64_t x) { return x * x; })
                .take_while([](std::int64_t x) { return x < 30; })
                .batch(4);
  const auto batches = collect(ds);
  REQUIRE(batches.size() == 2);
  CHECK(values_of(batches[0]) == V{0, 1, 4, 9});
  CHECK(values_of(batches[1]) == V{16, 25});
}
