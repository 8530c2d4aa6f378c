#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("filter keeps elements where the predicate holds", "[stages][filter]") {
  auto even = [](std::int64_t x) { return x % 2 == 0; };
  CHECK(collect(range(7).filter(even)) == V{0, 2, 4, 6});
  CHECK(collect(range(0).filter(even)).empty());
  CHECK(collect(range(1, 2).filter(even)).empty());
  CHECK(collect(range(5).filter([](std::int64_t) { return true; })) == iota(0, 5));
  CHECK(collect(range(5).filter([](std::int64_t) { return false; })).empty());
}

TEST_CASE("a throwing predicate fails that element only", "[stages][filter]") {
  auto ds = range(5).filter([](std::int64_t x) {
    if (x == 1) throw Boom("pred");
    return x != 3;
  });
  auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 4);
  CHECK(out[0].value == 0);
  CHECK(out[1].error == "FunctionError: pred [stage 'filter', element 1]");
  CHECK(out[2].value == 2);
  CHECK(out[3].value == 4);
}
