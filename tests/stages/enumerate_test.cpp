#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("enumerate pairs elements with their index", "[stages][enumerate]") {
  using P = std::pair<std::int64_t, std::string>;
  auto ds = from_vector<std::string>({"a", "b", "c"});
  CHECK(collect(ds.enumerate()) == std::vector<P>{{0, "a"}, {1, "b"}, {2, "c"}});
  CHECK(collect(ds.enumerate(10)) == std::vector<P>{{10, "a"}, {11, "b"}, {12, "c"}});
  CHECK(collect(range(0).enumerate()).empty());
}

TEST_CASE("a failed element uses up its index", "[stages][enumerate]") {
  auto ds = range(3).map([](std::int64_t x) -> std::int64_t {
    if (x == 1) throw Boom("b");
    return x * 5;
  });
  auto out = collect_outcomes(ds.enumerate());
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == std::pair<std::int64_t, std::int64_t>{0, 0});
  CHECK_FALSE(out[1].value);
  CHECK(out[2].value == std::pair<std::int64_t, std::int64_t>{2, 10});
}

TEST_CASE("enumerate then batch stacks both fields", "[stages][enumerate]") {
  auto batches = collect(range(10, 13).enumerate().batch(3));
  REQUIRE(batches.size() == 1);
  CHECK(values_of(batches[0].first) == std::vector<std::int64_t>{0, 1, 2});
  CHECK(values_of(batches[0].second) == std::vector<std::int64_t>{10, 11, 12});
}
