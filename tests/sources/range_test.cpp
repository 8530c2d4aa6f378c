#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using Ints = std::vector<std::int64_t>;

TEST_CASE("range follows Python/tf.data semantics", "[sources][range]") {
  CHECK(collect(range(5)) == Ints{0, 1, 2, 3, 4});
  CHECK(collect(range(2, 5)) == Ints{2, 3, 4});
  CHECK(collect(range(1, 10, 3)) == Ints{1, 4, 7});
  CHECK(collect(range(5, 0, -2)) == Ints{5, 3, 1});
  CHECK(collect(range(0)).empty());
  CHECK(collect(range(-3)).empty());
  CHECK(collect(range(3, 3)).empty());
  CHECK(collect(range(0, 5, -1)).empty());
  CHECK(collect(range(7, 8)) == Ints{7});
  CHECK_THROWS_AS(range(0, 5, 0), InvalidArgument);
}

TEST_CASE("range bulk fill matches next", "[sources][range]") {
  CHECK(collect_bulk(range(100), 7) == iota(0, 100));
  CHECK(collect_bulk(range(10, -10, -3), 4) == collect(range(10, -10, -3)));
  CHECK(collect_bulk(range(0), 4).empty());
}

TEST_CASE("range's fused fill_map consumes a failed element and resumes after it",
          "[sources][range]") {
  for (std::int64_t step : {1, 3, -2}) {
    INFO("step " << step);
    auto it = range(0, 100 * step, step).make_iterator({});
    auto f = [step](std::int64_t x) -> std::int64_t {
      if (x == 5 * step) throw std::runtime_error("five");
      return 2 * x + 1;
    };
    std::vector<std::int64_t> out(8);
    std::exception_ptr error;
    CHECK(it.fill_map(std::span(out), f, error) == 5);  // elements 0..4, then 5 fails
    CHECK(error);
    CHECK(out[4] == 2 * 4 * step + 1);
    error = nullptr;
    CHECK(it.fill_map(std::span(out), f, error) == 8);  // resumes at element 6
    CHECK_FALSE(error);
    CHECK(out[0] == 2 * 6 * step + 1);
    CHECK(out[7] == 2 * 13 * step + 1);
  }
}

TEST_CASE("range at the limits of int64 does not overflow", "[sources][range]") {
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  constexpr auto min = std::numeric_limits<std::int64_t>::min();
  CHECK(collect(range(max - 2, max)) == Ints{max - 2, max - 1});
  CHECK(collect(range(max - 1, max, 10)) == Ints{max - 1});
  CHECK(collect(range(min + 1, min, -5)) == Ints{min + 1});
  auto it = range(min, max, max).iterator();
  CHECK(it.next() == min);
  CHECK(it.next() == -1);
  CHECK(it.next() == max - 1);
  CHECK_FALSE(it.next());
}
