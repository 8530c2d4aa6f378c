#include <catch2/catch.hpp>

#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("concatenate chains two datasets", "[stages][concatenate]") {
  CHECK(collect(range(3).concatenate(range(10, 12))) == V{0, 1, 2, 10, 11});
  CHECK(collect(range(0).concatenate(range(2))) == V{0, 1});
  CHECK(collect(range(2).concatenate(range(0))) == V{0, 1});
  CHECK(collect(range(0).concatenate(range(0))).empty());
  CHECK(collect_bulk(range(5).concatenate(range(5)), 3) == V{0, 1, 2, 3, 4, 0, 1, 2, 3, 4});
  // Different stage types, same element type.
  auto mixed = range(2).concatenate(range(5).filter([](std::int64_t x) { return x > 2; }));
  CHECK(collect(mixed) == V{0, 1, 3, 4});
}

TEST_CASE("concatenate re-iterates both parts", "[stages][concatenate]") {
  auto ds = range(2).concatenate(range(2)).repeat(2);
  CHECK(collect(ds) == V{0, 1, 0, 1, 0, 1, 0, 1});
}
