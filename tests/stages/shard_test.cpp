#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("shard keeps every num_shards-th element from index", "[stages][shard]") {
  CHECK(collect(range(10).shard(3, 0)) == V{0, 3, 6, 9});
  CHECK(collect(range(10).shard(3, 1)) == V{1, 4, 7});
  CHECK(collect(range(10).shard(3, 2)) == V{2, 5, 8});
  CHECK(collect(range(10).shard(1, 0)) == iota(0, 10));
  CHECK(collect(range(2).shard(5, 3)).empty());
  CHECK(collect(range(0).shard(2, 0)).empty());
}

TEST_CASE("shard rejects invalid arguments with InvalidArgument", "[stages][shard]") {
  CHECK_THROWS_AS(range(10).shard(3, 3), InvalidArgument);
  CHECK_THROWS_AS(range(10).shard(3, 7), InvalidArgument);
  CHECK_THROWS_AS(range(10).shard(3, -1), InvalidArgument);
  CHECK_THROWS_AS(range(10).shard(0, 0), InvalidArgument);
  CHECK_THROWS_WITH(range(10).shard(2, 2), Catch::Contains("[0, 2)"));
}

TEST_CASE("every error surfaces in exactly the shard that owns its position", "[stages][shard]") {
  auto ds = range(9).map([](std::int64_t x) -> std::int64_t {
    if (x == 4) throw Boom("four");
    return x;
  });
  auto s0 = collect_outcomes(ds.shard(2, 0));
  auto s1 = collect_outcomes(ds.shard(2, 1));
  REQUIRE(s0.size() == 5);
  CHECK_FALSE(s0[2].value);
  CHECK(s0[3].value == 6);
  REQUIRE(s1.size() == 4);
  CHECK(std::all_of(s1.begin(), s1.end(), [](auto& o) { return o.value.has_value(); }));
}
