#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

namespace {
auto failing_on(std::vector<std::int64_t> bad) {
  return range(10).map([bad](std::int64_t x) -> std::int64_t {
    if (std::find(bad.begin(), bad.end(), x) != bad.end()) throw Boom("bad " + std::to_string(x));
    return x;
  });
}
}  // namespace

TEST_CASE("ignore_errors drops failing elements and counts them", "[stages][ignore_errors]") {
  auto ds = failing_on({0, 3, 4, 9}).ignore_errors();
  CHECK(collect(ds) == V{1, 2, 5, 6, 7, 8});
  CHECK(ds.ignored_errors() == 4);
  auto copy = ds;
  collect(copy);
  CHECK(ds.ignored_errors() == 8);  // copies share the count

  auto it = failing_on({5}).ignore_errors().iterator();
  while (it.next()) {
  }
  CHECK(collect(failing_on({}).ignore_errors()) == iota(0, 10));
  CHECK(collect(range(0).ignore_errors()).empty());
}

TEST_CASE("ignore_errors reports each dropped error", "[stages][ignore_errors]") {
  std::vector<std::string> seen;
  auto ds = failing_on({2, 7}).ignore_errors(
      {.on_error = [&seen](const Error& e) { seen.push_back(e.what()); }});
  CHECK(collect(ds).size() == 8);
  CHECK(seen == std::vector<std::string>{"FunctionError: bad 2 [stage 'map', element 2]",
                                         "FunctionError: bad 7 [stage 'map', element 7]"});
}

TEST_CASE("ignore_errors over batches drops whole failed batches", "[stages][ignore_errors]") {
  auto batches = collect(failing_on({5}).batch(4).ignore_errors());
  REQUIRE(batches.size() == 2);
  CHECK(values_of(batches[1]) == V{8, 9});
  // Before batch: only the element is dropped.
  auto elems = collect(failing_on({5}).ignore_errors().batch(4));
  REQUIRE(elems.size() == 3);
  CHECK(values_of(elems[1]) == V{4, 6, 7, 8});
}

TEST_CASE("ignore_errors with bulk fill", "[stages][ignore_errors]") {
  CHECK(collect_bulk(failing_on({1, 2, 8}).ignore_errors(), 3) == V{0, 3, 4, 5, 6, 7, 9});
}

namespace {
// A hand-written source whose iterator throws a non-ingest exception.
struct Exploding : DatasetBase<Exploding, int> {
  struct Iterator {
    using value_type = int;
    std::optional<int> next() { throw std::logic_error("library bug"); }
  };
  Iterator make_iterator(const IteratorContext&) const { return {}; }
};
}  // namespace

TEST_CASE("exceptions that are not ingest::Errors are not swallowed", "[stages][ignore_errors]") {
  auto it = Exploding{}.ignore_errors().iterator();
  CHECK_THROWS_AS(it.next(), std::logic_error);
}
