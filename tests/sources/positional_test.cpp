#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <ingest/sources/from_vector.hpp>
#include <ingest/sources/range.hpp>
#include <ingest/stages/batch.hpp>
#include <ingest/stages/repeat.hpp>

#include "support/checkpoint.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using Ints = std::vector<std::int64_t>;
using distributed::World;

namespace {

Ints sorted_ints(Ints v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("range(n).global_shuffle visits every element once, in a seeded order",
          "[sources][positional]") {
  const Ints a = collect(range(100).global_shuffle({.seed = 7}));
  CHECK(sorted_ints(a) == iota(0, 100));
  CHECK(a != iota(0, 100));
  CHECK(collect(range(100).global_shuffle({.seed = 7})) == a);
  CHECK(collect(range(100).global_shuffle({.seed = 8})) != a);
  // A new order each pass, the same one without reshuffling.
  const Ints two = collect(range(50).global_shuffle({.seed = 1}).repeat(2));
  REQUIRE(two.size() == 100);
  CHECK(Ints(two.begin(), two.begin() + 50) != Ints(two.begin() + 50, two.end()));
  const Ints same =
      collect(range(50).global_shuffle({.seed = 1, .reshuffle_each_iteration = false}).repeat(2));
  CHECK(Ints(same.begin(), same.begin() + 50) == Ints(same.begin() + 50, same.end()));
  CHECK(collect(range(3, 30, 3).global_shuffle({.seed = 2})).size() == 9);
  CHECK(sorted_ints(collect(range(3, 30, 3).global_shuffle({.seed = 2}))) ==
        collect(range(3, 30, 3)));
  CHECK(collect(range(0).global_shuffle()).empty());
  CHECK(collect(range(1).global_shuffle()) == Ints{0});
}

TEST_CASE("shard(world) on a random-access source deals the pass to the ranks",
          "[sources][positional]") {
  CHECK(collect(range(10).shard(World{.rank = 1, .world_size = 3},
                                {.remainder = Remainder::uneven})) == Ints{1, 4, 7});
  CHECK(collect(range(10).shard(World{.rank = 0, .world_size = 3},
                                {.remainder = Remainder::uneven})) == Ints{0, 3, 6, 9});
  CHECK(collect(range(10).shard(World{.rank = 0, .world_size = 3})) == Ints{0, 3, 6});  // drop
  CHECK(range(10).shard(World{.rank = 0, .world_size = 3}).cardinality() == 3);
  CHECK(range(10)
            .shard(World{.rank = 0, .world_size = 3}, {.remainder = Remainder::uneven})
            .cardinality() == 4);

  // After a global shuffle: the ranks' shares are disjoint and cover the pass.
  const std::vector<std::string> words{"a", "b", "c", "d", "e", "f", "g"};
  std::multiset<std::string> seen;
  for (int r = 0; r < 3; ++r) {
    auto ds = from_vector(words)
                  .global_shuffle({.seed = 3})
                  .shard(World{.rank = r, .world_size = 3}, {.remainder = Remainder::uneven});
    for (const std::string& w : ds) seen.insert(w);
  }
  CHECK(seen == std::multiset<std::string>(words.begin(), words.end()));
}

TEST_CASE("shard_padded marks the repeats, and batch carries the marks as a bool tensor",
          "[sources][positional]") {
  std::vector<std::pair<std::int64_t, bool>> all;
  for (int r = 0; r < 4; ++r) {
    auto ds = range(10).global_shuffle({.seed = 5}).shard_padded(World{.rank = r, .world_size = 4});
    CHECK(ds.cardinality() == 3);
    const auto got = collect(ds);
    CHECK(got.size() == 3);
    all.insert(all.end(), got.begin(), got.end());
  }
  Ints valid;
  int repeats = 0;
  for (auto [x, ok] : all) {
    if (ok) {
      valid.push_back(x);
    } else {
      ++repeats;
    }
  }
  CHECK(sorted_ints(valid) == iota(0, 10));
  CHECK(repeats == 2);

  auto batches = collect(range(5).shard_padded(World{.rank = 1, .world_size = 2}).batch(2));
  REQUIRE(batches.size() == 2);
  // Rank 1 of 2 reads 1 and 3, then repeats the pass's first element, marked.
  const Tensor& flags = std::get<1>(batches[1]);
  CHECK(flags.dtype() == DType::boolean);
  CHECK(flags.shape() == Shape{1});
  CHECK_FALSE(flags.data<bool>()[0]);
  CHECK(std::get<0>(batches[1]).data<std::int64_t>()[0] == 0);
  CHECK(std::get<1>(batches[0]).data<bool>()[0]);
  CHECK(std::get<1>(batches[0]).data<bool>()[1]);
  CHECK(std::get<0>(batches[0]).data<std::int64_t>()[1] == 3);
}

TEST_CASE("a sharded, shuffled source restores at every position", "[sources][positional]") {
  check_restore_everywhere([] {
    return range(23)
        .global_shuffle({.seed = 11})
        .shard(World{.rank = 2, .world_size = 3}, {.remainder = Remainder::uneven});
  });
  check_restore_everywhere([] { return range(9).global_shuffle({.seed = 4}).repeat(3); });
  check_restore_everywhere([] {
    return from_vector(std::vector<std::string>{"x", "y", "z", "w", "v"})
        .shard_padded(World{.rank = 1, .world_size = 3});
  });
}

TEST_CASE("global_shuffle and shard(world) refuse what they cannot do", "[sources][positional]") {
  const World w{.rank = 0, .world_size = 2};
  CHECK_THROWS_WITH(range(10).shard(w).global_shuffle(), Catch::Contains("before shard(world)"));
  CHECK_THROWS_WITH(range(10).shard(w).shard(w), Catch::Contains("applied already"));
  CHECK_THROWS_WITH(range(10).shard(w, {.remainder = Remainder::pad}),
                    Catch::Contains("shard_padded"));
  CHECK_THROWS_WITH(range(10).shard(World{.rank = 2, .world_size = 2}),
                    Catch::Contains("rank 2 is outside [0, 2)"));
  CHECK_THROWS_AS(from_vector(Ints{1, 2}).shard(World{.rank = -1, .world_size = 2}),
                  InvalidArgument);
}
