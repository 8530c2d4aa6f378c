#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <vector>

#include <ingest/ingest.hpp>

using namespace ingest;

TEST_CASE("stage iterators satisfy the protocol concepts", "[core][iterator]") {
  using R = iterator_t<RangeDataset>;
  STATIC_REQUIRE(iterator<R>);
  STATIC_REQUIRE(bulk_iterator<R>);
  auto mapped = range(3).map([](std::int64_t x) { return x + 1; });
  STATIC_REQUIRE(bulk_iterator<iterator_t<decltype(mapped)>>);
  auto filtered = range(3).filter([](std::int64_t) { return true; });
  STATIC_REQUIRE(iterator<iterator_t<decltype(filtered)>>);
  STATIC_REQUIRE(!bulk_iterator<iterator_t<decltype(filtered)>>);
  STATIC_REQUIRE(std::input_iterator<detail::InputIterator<R>>);
}

TEST_CASE("range-for and standard algorithms over a dataset", "[core][iterator]") {
  std::vector<std::int64_t> seen;
  for (std::int64_t x : range(5)) seen.push_back(x);
  CHECK(seen == std::vector<std::int64_t>{0, 1, 2, 3, 4});

  auto ds = range(1, 5);
  std::int64_t sum = 0;
  for (auto it = ds.begin(); it != ds.end(); ++it) sum += *it;
  CHECK(sum == 10);

  int count = 0;
  for ([[maybe_unused]] auto x : range(0)) ++count;
  CHECK(count == 0);
}

TEST_CASE("next keeps returning nullopt after the end", "[core][iterator]") {
  auto it = range(1).map([](std::int64_t x) { return x; }).iterator();
  CHECK(it.next() == 0);
  CHECK_FALSE(it.next());
  CHECK_FALSE(it.next());
}
