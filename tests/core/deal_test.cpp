#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <ingest/core/deal.hpp>

using namespace ingest;
using ingest::detail::Deal;
using ingest::detail::DealLevel;

namespace {

// What rank `rank` of `world` reads: (position, valid) per read.
std::vector<std::pair<std::uint64_t, bool>> reads(const Deal& d) {
  std::vector<std::pair<std::uint64_t, bool>> out;
  for (std::uint64_t k = 0; k < d.size(); ++k) out.emplace_back(d.position(k), d.valid(k));
  return out;
}

}  // namespace

TEST_CASE("a deal without resizes: rank r reads r, r + W, ...", "[core][deal]") {
  const Deal d(10, 3, 1, Remainder::uneven);
  CHECK(d.size() == 3);
  CHECK(reads(d) == std::vector<std::pair<std::uint64_t, bool>>{{1, true}, {4, true}, {7, true}});
  CHECK(Deal(10, 3, 0, Remainder::uneven).size() == 4);
  CHECK(Deal(10, 3, 0, Remainder::drop).size() == 3);
  CHECK(Deal(10, 3, 2, Remainder::pad).size() == 4);
  // The pad of rank 2 repeats the level's first item, marked.
  const Deal p(10, 3, 2, Remainder::pad);
  CHECK(p.position(3) == 1);  // item 11 wraps to 11 % 10
  CHECK_FALSE(p.valid(3));
  CHECK(p.valid(2));
  CHECK(Deal(0, 4, 3, Remainder::pad).size() == 0);
  CHECK(Deal(2, 4, 3, Remainder::uneven).size() == 0);
  CHECK(Deal(2, 4, 3, Remainder::pad).size() == 1);
  CHECK(Deal(2, 4, 3, Remainder::pad).position(0) == 1);
}

TEST_CASE("every policy covers the pass as it promises, for every size and world", "[core][deal]") {
  for (std::uint64_t n = 0; n <= 40; ++n) {
    for (std::uint64_t w = 1; w <= 9; ++w) {
      INFO("n " << n << ", world " << w);
      std::map<std::uint64_t, int> uneven, drop, pad_valid;
      std::uint64_t drop_reads = 0, pad_reads = 0;
      for (std::uint64_t r = 0; r < w; ++r) {
        for (auto [p, valid] : reads(Deal(n, w, r, Remainder::uneven))) {
          CHECK(valid);
          ++uneven[p];
        }
        const Deal dr(n, w, r, Remainder::drop);
        CHECK(dr.size() == n / w);
        drop_reads += dr.size();
        for (auto [p, valid] : reads(dr)) ++drop[p];
        const Deal pd(n, w, r, Remainder::pad);
        CHECK(pd.size() == (n + w - 1) / w);
        pad_reads += pd.size();
        for (auto [p, valid] : reads(pd)) {
          CHECK(p < n);
          if (valid) ++pad_valid[p];
        }
      }
      CHECK(uneven.size() == n);
      CHECK(pad_valid.size() == n);
      for (auto [p, c] : uneven) CHECK(c == 1);
      for (auto [p, c] : pad_valid) CHECK(c == 1);
      for (auto [p, c] : drop) CHECK((c == 1 && p < n / w * w));
      CHECK(drop_reads == n / w * w);
      CHECK(pad_reads == (n + w - 1) / w * w);
    }
  }
}

TEST_CASE("resizes in the middle of a pass deal every item left exactly once", "[core][deal]") {
  std::mt19937_64 rng(20261206);
  for (int trial = 0; trial < 300; ++trial) {
    const std::uint64_t n = rng() % 200;
    std::vector<DealLevel> levels;
    std::map<std::uint64_t, int> consumed;
    std::uint64_t world = rng() % 6 + 1;
    const int resizes = static_cast<int>(rng() % 4);
    const Remainder policies[] = {Remainder::uneven, Remainder::drop, Remainder::pad};
    for (int level = 0; level <= resizes; ++level) {
      const bool last = level == resizes;
      const Remainder policy = last ? Remainder::uneven : policies[rng() % 3];
      DealLevel done{.world_size = world, .consumed = {}};
      for (std::uint64_t r = 0; r < world; ++r) {
        const Deal d(n, world, r, policy, levels);
        const std::uint64_t take = last ? d.size() : rng() % (d.size() + 1);
        for (std::uint64_t k = 0; k < take; ++k) {
          REQUIRE(d.position(k) < n);
          if (d.valid(k)) ++consumed[d.position(k)];
        }
        done.consumed.push_back(take);
      }
      levels.push_back(done);
      world = rng() % 6 + 1;
    }
    INFO("trial " << trial << ", n " << n << ", resizes " << resizes);
    CHECK(consumed.size() == n);
    for (auto [p, c] : consumed) CHECK(c == 1);
  }
}

TEST_CASE("a deal refuses ranks outside the world and levels no pass could have", "[core][deal]") {
  CHECK_THROWS_AS(Deal(10, 3, 3, Remainder::drop), InvalidArgument);
  CHECK_THROWS_AS(Deal(10, 0, 0, Remainder::drop), InvalidArgument);
  CHECK_THROWS_WITH(
      Deal(10, 2, 0, Remainder::drop, {DealLevel{.world_size = 3, .consumed = {1, 1}}}),
      Catch::Contains("2 cursors for a world of 3"));
  CHECK_THROWS_WITH(
      Deal(10, 2, 0, Remainder::drop, {DealLevel{.world_size = 2, .consumed = {6, 1}}}),
      Catch::Contains("rank 0 consumed 6 of at most 5"));
  CHECK_THROWS_AS(detail::pad_needs_marks("shard"), InvalidArgument);
}

TEST_CASE("a deal's levels round-trip through a state, and a corrupt one is refused",
          "[core][deal]") {
  const std::vector<DealLevel> levels{{.world_size = 4, .consumed = {3, 2, 3, 1}},
                                      {.world_size = 2, .consumed = {0, 5}}};
  StateWriter w;
  detail::write_levels(w, levels);
  const IteratorState state(1, w);
  StateReader r(state.payload(), IteratorState::header_bytes, state.storage());
  CHECK(detail::read_levels(r) == levels);

  StateWriter bad;
  bad.write_u64(1);
  bad.write_u64(std::uint64_t{1} << 40);  // a world of 2^40 ranks in a few bytes
  const IteratorState huge(1, bad);
  StateReader rh(huge.payload(), IteratorState::header_bytes, huge.storage());
  CHECK_THROWS_AS(detail::read_levels(rh), DataLossError);
}
