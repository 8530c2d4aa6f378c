#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("AnyDataset erases the pipeline type", "[core][any_dataset]") {
  AnyDataset<std::int64_t> ds = range(5).map([](std::int64_t x) { return x * x; });
  CHECK(collect(ds) == std::vector<std::int64_t>{0, 1, 4, 9, 16});
  // Pipelines of different types behind one type.
  std::vector<AnyDataset<std::int64_t>> choices{
      range(3), range(10).filter([](std::int64_t x) { return x > 7; })};
  CHECK(collect(choices[0]) == std::vector<std::int64_t>{0, 1, 2});
  CHECK(collect(choices[1]) == std::vector<std::int64_t>{8, 9});
}

TEST_CASE("stages chain onto an erased dataset", "[core][any_dataset]") {
  auto ds = range(7).erase().batch(3);
  auto batches = collect(ds);
  REQUIRE(batches.size() == 3);
  CHECK(values_of(batches[2]) == std::vector<std::int64_t>{6});
}

TEST_CASE("erased bulk fill keeps errors at their element", "[core][any_dataset]") {
  // The inner pipeline has no bulk fill (filter); the erased iterator adds it.
  auto ds = range(10)
                .filter([](std::int64_t) { return true; })
                .map([](std::int64_t x) -> std::int64_t {
                  if (x == 4) throw Boom("four");
                  return x;
                })
                .erase();
  auto it = ds.iterator();
  std::vector<std::int64_t> buf(8);
  const std::size_t n = it.fill(buf);
  CHECK(n == 4);
  CHECK_THROWS_WITH(it.next(), Catch::Contains("four") && Catch::Contains("element 4"));
  CHECK(it.next() == 5);
  CHECK(collect_bulk(range(20).erase(), 6) == iota(0, 20));
}

TEST_CASE("an erased dataset re-iterates and its copies share it", "[core][any_dataset]") {
  AnyDataset<std::string> ds = from_vector<std::string>({"a", "b"});
  AnyDataset<std::string> copy = ds;
  CHECK(collect(ds) == collect(copy));
  CHECK(collect(ds) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("a default-constructed AnyDataset is empty and can be assigned later",
          "[core][any_dataset]") {
  static_assert(std::is_default_constructible_v<AnyDataset<int>>);
  static_assert(std::is_copy_assignable_v<AnyDataset<int>>);
  static_assert(std::is_move_assignable_v<AnyDataset<int>>);
  AnyDataset<std::int64_t> ds;
  CHECK(ds.cardinality() == 0);
  CHECK(collect(ds).empty());
  CHECK(collect(ds.batch(2)).empty());
  CHECK(collect(ds.map([](std::int64_t x) { return x + 1; }).repeat(3)).empty());
  CHECK(collect_bulk(ds, 4).empty());

  ds = range(3);  // a different dataset type, erased on assignment
  CHECK(ds.cardinality() == 3);
  CHECK(collect(ds) == std::vector<std::int64_t>{0, 1, 2});
  ds = range(2).map([](std::int64_t x) { return 10 * x; });
  CHECK(collect(ds) == std::vector<std::int64_t>{0, 10});

  AnyDataset<std::int64_t> other;
  other = ds;  // copies share the erased dataset
  CHECK(collect(other) == std::vector<std::int64_t>{0, 10});
  ds = AnyDataset<std::int64_t>();
  CHECK(collect(ds).empty());
  CHECK(collect(other) == std::vector<std::int64_t>{0, 10});

  // Move-only elements, and an empty dataset's iterator after a stats query.
  AnyDataset<std::unique_ptr<int>> moves;
  auto it = moves.iterator();
  CHECK_FALSE(it.next().has_value());
  CHECK_FALSE(it.next().has_value());
}
