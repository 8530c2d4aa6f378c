#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("zip pairs positions and stops at the shortest", "[stages][zip]") {
  using T = std::tuple<std::int64_t, std::string>;
  auto z = range(10).zip(from_vector<std::string>({"a", "b", "c"}));
  CHECK(collect(z) == std::vector<T>{{0, "a"}, {1, "b"}, {2, "c"}});
  CHECK(collect(zip(range(0), range(5))).empty());
  auto three = collect(zip(range(2), range(10, 20), range(100, 103)));
  CHECK(three == std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{{0, 10, 100},
                                                                                   {1, 11, 101}});
}

TEST_CASE("zip does not pull the others once one ends", "[stages][zip]") {
  int pulled = 0;
  auto counting = range(100).map([&pulled](std::int64_t x) {
    ++pulled;
    return x;
  });
  CHECK(collect(zip(range(2), counting)).size() == 2);
  CHECK(pulled == 2);
}

TEST_CASE("an error in one input fails that position and all inputs advance", "[stages][zip]") {
  auto bad = range(4).map([](std::int64_t x) -> std::int64_t {
    if (x == 1) throw Boom("b");
    return x;
  });
  auto out = collect_outcomes(zip(range(10, 14), bad));
  REQUIRE(out.size() == 4);
  CHECK_FALSE(out[1].value);
  CHECK(out[2].value == std::tuple<std::int64_t, std::int64_t>{12, 2});
}
