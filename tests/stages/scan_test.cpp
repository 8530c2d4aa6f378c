#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

namespace {
auto running_sum = [](const std::int64_t& sum, std::int64_t x) {
  return std::pair{sum + x, sum + x};
};
}  // namespace

TEST_CASE("scan carries its state through the elements", "[stages][scan]") {
  CHECK(collect(range(5).scan(std::int64_t{0}, running_sum)) == V{0, 1, 3, 6, 10});
  CHECK(collect(range(0).scan(std::int64_t{0}, running_sum)).empty());
  CHECK(collect(range(7, 8).scan(std::int64_t{100}, running_sum)) == V{107});
  // The output is the pair's second, of its own type: the state before each element.
  auto before = range(1, 4).scan(std::string("s"), [](const std::string& s, std::int64_t x) {
    return std::pair{s + std::to_string(x), s.size()};
  });
  CHECK(collect(before) == std::vector<std::size_t>{1, 2, 3});
  // Fibonacci: the state is a pair.
  auto fib = range(6).scan(std::pair<std::int64_t, std::int64_t>{0, 1},
                           [](const std::pair<std::int64_t, std::int64_t>& s, std::int64_t) {
                             return std::pair{std::pair{s.second, s.first + s.second}, s.first};
                           });
  CHECK(collect(fib) == V{0, 1, 1, 2, 3, 5});
}

TEST_CASE("scan's state converts to the initial state's type", "[stages][scan]") {
  // The function returns an int state; the state stays int64 (the initial state's type).
  auto ds = range(4).scan(std::int64_t{0}, [](const std::int64_t& s, std::int64_t x) {
    return std::pair{static_cast<int>(s + x), s};
  });
  CHECK(collect(ds) == V{0, 0, 1, 3});
}

TEST_CASE("every scan pass starts from the initial state", "[stages][scan]") {
  auto ds = range(3).scan(std::int64_t{10}, running_sum);
  CHECK(collect(ds) == V{10, 11, 13});
  CHECK(collect(ds) == V{10, 11, 13});
  // Two iterators at once keep their own states.
  auto a = ds.iterator();
  auto b = ds.iterator();
  CHECK(a.next() == 10);
  CHECK(a.next() == 11);
  CHECK(b.next() == 10);
  CHECK(a.next() == 13);
  CHECK(b.next() == 11);
}

TEST_CASE("scan's cardinality is its input's", "[stages][scan]") {
  CHECK(range(5).scan(std::int64_t{0}, running_sum).cardinality() == 5);
  CHECK(range(0).scan(std::int64_t{0}, running_sum).cardinality() == 0);
  CHECK(range(5).repeat().scan(std::int64_t{0}, running_sum).cardinality() == infinite_cardinality);
  CHECK(range(5)
            .filter([](std::int64_t) { return true; })
            .scan(std::int64_t{0}, running_sum)
            .cardinality() == unknown_cardinality);
}

TEST_CASE("an error from scan's function fails that element and keeps the state",
          "[stages][scan]") {
  auto ds = range(5).scan(std::int64_t{0}, [](const std::int64_t& sum, std::int64_t x) {
    if (x == 2) throw Boom("two");
    return std::pair{sum + x, sum + x};
  });
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 5);
  CHECK(out[0].value == 0);
  CHECK(out[1].value == 1);
  CHECK(out[2].error == "FunctionError: two [stage 'scan', element 2]");
  CHECK(out[3].value == 4);  // 1 + 3: element 2 never reached the state
  CHECK(out[4].value == 8);
}

TEST_CASE("an input error passes through scan in place, the state unchanged", "[stages][scan]") {
  auto input = range(5).map([](std::int64_t x) -> std::int64_t {
    if (x == 1) throw Boom("input");
    return x;
  });
  const auto out = collect_outcomes(input.scan(std::int64_t{0}, running_sum));
  REQUIRE(out.size() == 5);
  CHECK(out[0].value == 0);
  CHECK(out[1].error == "FunctionError: input [stage 'map', element 1]");
  CHECK(out[2].value == 2);
  CHECK(out[3].value == 5);
  CHECK(out[4].value == 9);
  // The function's errors are numbered by their position in scan's input, failed ones included.
  const auto numbered =
      collect_outcomes(input.scan(std::int64_t{0}, [](const std::int64_t& s, std::int64_t x) {
        if (x == 3) throw Boom("three");
        return std::pair{s, x};
      }));
  REQUIRE(numbered.size() == 5);
  CHECK(numbered[3].error == "FunctionError: three [stage 'scan', element 3]");
}

TEST_CASE("destroying a scan iterator mid-stream is clean", "[stages][scan]") {
  auto ds = from_vector<std::string>({"a", "b", "c"})
                .scan(std::string(), [](const std::string& s, std::string x) {
                  return std::pair{s + x, s + x};
                });
  {
    auto it = ds.iterator();
    CHECK(it.next() == "a");
    CHECK(it.next() == "ab");
  }
  CHECK(collect(ds) == std::vector<std::string>{"a", "ab", "abc"});
}

TEST_CASE("scan composes: a running sum over batches of a mapped range", "[stages][scan]") {
  auto ds = range(6)
                .map([](std::int64_t x) { return 2 * x; })
                .scan(std::int64_t{0}, running_sum)
                .batch(4);
  const auto batches = collect(ds);
  REQUIRE(batches.size() == 2);
  CHECK(values_of(batches[0]) == V{0, 2, 6, 12});
  CHECK(values_of(batches[1]) == V{20, 30});
}
