#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "support/checkpoint.hpp"
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

TEST_CASE("shard(world) on a stream: drop, uneven and pad", "[stages][shard]") {
  using distributed::World;
  // A stream (map hides the random access of range).
  auto stream = range(10).map([](std::int64_t x) { return x; });
  const World r0{.rank = 0, .world_size = 3}, r2{.rank = 2, .world_size = 3};
  CHECK(collect(stream.shard(r0)) == V{0, 3, 6});
  CHECK(collect(stream.shard(r2)) == V{2, 5, 8});
  CHECK(collect(stream.shard(r0, {.remainder = Remainder::uneven})) == V{0, 3, 6, 9});
  CHECK(stream.shard(r0).cardinality() == 3);
  CHECK(stream.shard(r0, {.remainder = Remainder::uneven}).cardinality() == 4);
  CHECK(collect(range(2).map([](std::int64_t x) { return x; }).shard(r2)).empty());

  using P = std::vector<std::pair<std::int64_t, bool>>;
  CHECK(collect(stream.shard_padded(r0)) == P{{0, true}, {3, true}, {6, true}, {9, true}});
  CHECK(collect(stream.shard_padded(r2)) == P{{2, true}, {5, true}, {8, true}, {0, false}});
  CHECK(stream.shard_padded(r2).cardinality() == 4);
  CHECK(collect(range(0).map([](std::int64_t x) { return x; }).shard_padded(r2)).empty());
  CHECK_THROWS_WITH(stream.shard(r0, {.remainder = Remainder::pad}),
                    Catch::Contains("shard_padded"));
  CHECK_THROWS_AS(stream.shard(World{.rank = 3, .world_size = 3}), InvalidArgument);
}

TEST_CASE("shard(world) with drop: an error in an incomplete last group is dropped with it",
          "[stages][shard]") {
  using distributed::World;
  auto ds = range(8).map([](std::int64_t x) -> std::int64_t {
    if (x == 1 || x == 7) throw Boom("bad " + std::to_string(x));
    return x;
  });
  auto r1 = collect_outcomes(ds.shard(World{.rank = 1, .world_size = 3}));
  REQUIRE(r1.size() == 2);  // positions 1 and 4; 7 is in the incomplete group
  CHECK_FALSE(r1[0].value);
  CHECK(r1[1].value == 4);
  auto r0 = collect_outcomes(ds.shard(World{.rank = 0, .world_size = 3}));
  REQUIRE(r0.size() == 2);
  CHECK(r0[0].value == 0);
  CHECK(r0[1].value == 3);
}

TEST_CASE("shard(world) restores at every position, in every policy", "[stages][shard]") {
  using distributed::World;
  const auto stream = [] { return range(11).map([](std::int64_t x) { return x * 2; }); };
  for (const Remainder policy : {Remainder::drop, Remainder::uneven}) {
    check_restore_everywhere(
        [&] { return stream().shard(World{.rank = 1, .world_size = 4}, {.remainder = policy}); });
  }
  check_restore_everywhere(
      [&] { return stream().shard_padded(World{.rank = 3, .world_size = 4}); });
}
