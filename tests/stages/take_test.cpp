#include <catch2/catch.hpp>

#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("take returns the first n elements", "[stages][take]") {
  CHECK(collect(range(10).take(3)) == V{0, 1, 2});
  CHECK(collect(range(10).take(0)).empty());
  CHECK(collect(range(2).take(5)) == V{0, 1});
  CHECK(collect(range(4).take(-1)) == V{0, 1, 2, 3});
  CHECK(collect(range(0).take(3)).empty());
  CHECK_THROWS_AS(range(3).take(-2), InvalidArgument);
  CHECK(collect_bulk(range(100).take(33), 8) == iota(0, 33));
}

TEST_CASE("take stops pulling once satisfied", "[stages][take]") {
  int pulled = 0;
  auto ds = range(100).map([&pulled](std::int64_t x) {
    ++pulled;
    return x;
  });
  CHECK(collect(ds.take(0)).empty());
  CHECK(pulled == 0);
  CHECK(collect(ds.take(4)) == V{0, 1, 2, 3});
  CHECK(pulled == 4);
  // Infinite input.
  CHECK(collect(range(3).repeat().take(7)) == V{0, 1, 2, 0, 1, 2, 0});
}

TEST_CASE("a failed element counts toward take", "[stages][take]") {
  auto ds = range(10).map([](std::int64_t x) -> std::int64_t {
    if (x == 1) throw Boom("b");
    return x;
  });
  auto out = collect_outcomes(ds.take(3));
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == 0);
  CHECK_FALSE(out[1].value);
  CHECK(out[2].value == 2);
}
