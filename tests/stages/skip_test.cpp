#include <catch2/catch.hpp>

#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("skip drops the first n elements", "[stages][skip]") {
  CHECK(collect(range(5).skip(2)) == V{2, 3, 4});
  CHECK(collect(range(5).skip(0)) == iota(0, 5));
  CHECK(collect(range(5).skip(5)).empty());
  CHECK(collect(range(5).skip(9)).empty());
  CHECK(collect(range(5).skip(-1)).empty());
  CHECK(collect(range(0).skip(1)).empty());
  CHECK_THROWS_AS(range(3).skip(-3), InvalidArgument);
  CHECK(collect_bulk(range(50).skip(20), 6) == iota(20, 50));
}

TEST_CASE("an error among skipped elements surfaces and counts as skipped", "[stages][skip]") {
  auto ds = range(6).map([](std::int64_t x) -> std::int64_t {
    if (x == 1) throw Boom("b");
    return x;
  });
  auto out = collect_outcomes(ds.skip(3));
  REQUIRE(out.size() == 4);
  CHECK_FALSE(out[0].value);
  CHECK(out[0].error.find("element 1") != std::string::npos);
  CHECK(out[1].value == 3);
  CHECK(out[3].value == 5);
}
