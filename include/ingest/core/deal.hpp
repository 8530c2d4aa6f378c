// The order of one pass over a random-access source (indexed_tfrecord, and
// range / from_vector after global_shuffle) and the positions of it one rank
// reads: detail::Deal deals a pass's positions to the ranks of a world, and
// detail::PassOrder maps the k-th read of an iterator to a record, through
// the deal and the global shuffle's permutation. Pure functions of their
// parameters, no I/O: every rank computes the same deal without talking to
// the others, and a checkpoint holds the deal's few numbers, not a list.
//
// Dealing: rank r of W reads the items r, r + W, r + 2W, ... of the pass.
// Remainder::uneven stops at the last item (ranks differ by at most one),
// ::drop gives every rank floor(n / W) items, ::pad ceil(n / W), the extra
// ones repeating items from the start of the pass and marked not valid.
//
// Elastic resume (distributed::restore): when a world of W ranks stops in
// the middle of a pass, rank r having consumed c_r of its items, the items
// left are, rank by rank, those past each cursor. They form the next level's
// items, dealt to the new world the same way; a level is (W, c_0..c_{W-1}).
// The k-th item of level i+1 is found by a binary search over level i's
// ranks, so a deal with L levels costs O(L log W) per read and nothing when
// no world was resized (L = 0).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/core/options.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/state.hpp"
#include "ingest/core/world.hpp"

namespace ingest::detail {

/// A pseudo-random bijection of [0, n) keyed by `key`: a four-round Feistel
/// network on the smallest power of four >= n, walking the cycle until the
/// value falls in [0, n) (fewer than 4 steps on average).
class IndexPermutation {
 public:
  IndexPermutation(std::uint64_t n, std::uint64_t key) noexcept : n_(n) {
    const int bits = n <= 1 ? 2 : std::bit_width(n - 1);
    half_ = std::max(1, (bits + 1) / 2);
    mask_ = (std::uint64_t{1} << half_) - 1;
    for (std::uint64_t& k : keys_) k = key = derive_seed(key, 0x5bd1e995);
  }
  std::uint64_t operator()(std::uint64_t i) const noexcept {
    std::uint64_t x = i;
    do {
      x = encrypt(x);
    } while (x >= n_);
    return x;
  }

 private:
  std::uint64_t encrypt(std::uint64_t x) const noexcept {
    std::uint64_t left = x >> half_, right = x & mask_;
    for (const std::uint64_t k : keys_) {
      const std::uint64_t next = left ^ (mix64(right ^ k) & mask_);
      left = right;
      right = next;
    }
    return (left << half_) | right;
  }

  std::uint64_t n_;
  int half_ = 1;
  std::uint64_t mask_ = 1;
  std::uint64_t keys_[4]{};
};

/// Remainder::pad in shard(world, options): its repeats need marks, which
/// change the element type.
[[noreturn]] inline void pad_needs_marks(std::string_view stage) {
  throw InvalidArgument(std::string(stage) +
                            ": shard(world) with Remainder::pad: use shard_padded(world), whose "
                            "elements are (element, valid) pairs, so that the repeats are marked",
                        {.stage = std::string(stage)});
}

/// Items dealt to rank `rank` of `world` out of `n`, up to the last item
/// (the uneven count).
constexpr std::uint64_t items_of(std::uint64_t n, std::uint64_t world,
                                 std::uint64_t rank) noexcept {
  return n > rank ? (n - rank - 1) / world + 1 : 0;
}

/// Reads of rank `rank` of `world` out of `n` items under `remainder`.
constexpr std::uint64_t reads_of(std::uint64_t n, std::uint64_t world, std::uint64_t rank,
                                 Remainder remainder) noexcept {
  switch (remainder) {
    case Remainder::drop: return n / world;
    case Remainder::pad: return (n + world - 1) / world;
    case Remainder::uneven: break;
  }
  return items_of(n, world, rank);
}

/// The positions of a pass of `n` that rank `rank` of `world` reads, after
/// the interrupted levels `levels` (oldest first).
class Deal {
 public:
  /// Throws InvalidArgument for a rank outside the world, and DataLossError
  /// for levels no pass of `n` positions could have (a count of cursors
  /// other than its world's size, a cursor past its rank's reads).
  Deal(std::uint64_t n, std::uint64_t world, std::uint64_t rank, Remainder remainder,
       std::vector<DealLevel> levels = {})
      : world_(world), rank_(rank), remainder_(remainder), levels_(std::move(levels)) {
    if (world == 0 || rank >= world) {
      throw InvalidArgument(
          "shard: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(world) + ")",
          {.stage = "shard"});
    }
    std::uint64_t items = n;
    steps_.reserve(levels_.size());
    for (std::size_t l = 0; l < levels_.size(); ++l) {
      const DealLevel& level = levels_[l];
      const std::string where = "shard: resize " + std::to_string(l + 1) + " of the pass";
      if (level.world_size == 0 || level.consumed.size() != level.world_size) {
        throw DataLossError(where + " has " + std::to_string(level.consumed.size()) +
                                " cursors for a world of " + std::to_string(level.world_size),
                            {.stage = "shard"});
      }
      Step step{.world = level.world_size, .prefix = {0}, .first = {}};
      step.first.reserve(level.consumed.size());
      step.prefix.reserve(level.consumed.size() + 1);
      for (std::uint64_t r = 0; r < level.world_size; ++r) {
        const std::uint64_t have = items_of(items, level.world_size, r);
        if (level.consumed[r] > (items + level.world_size - 1) / level.world_size) {
          throw DataLossError(
              where + ": rank " + std::to_string(r) + " consumed " +
                  std::to_string(level.consumed[r]) + " of at most " +
                  std::to_string((items + level.world_size - 1) / level.world_size) + " items",
              {.stage = "shard"});
        }
        const std::uint64_t done = std::min(level.consumed[r], have);
        step.first.push_back(done);
        step.prefix.push_back(step.prefix.back() + (have - done));
      }
      items = step.prefix.back();
      steps_.push_back(std::move(step));
    }
    items_ = items;
    reads_ = reads_of(items_, world_, rank_, remainder_);
  }

  /// Reads of this rank in the pass.
  std::uint64_t size() const noexcept { return reads_; }
  /// Items of the pass still to deal at this level (the whole pass without levels).
  std::uint64_t items() const noexcept { return items_; }
  /// The pass position of read `k` (< size()).
  std::uint64_t position(std::uint64_t k) const noexcept {
    std::uint64_t t = rank_ + k * world_;
    if (t >= items_) t %= items_;  // a pad: an item from the start of the level
    for (std::size_t l = steps_.size(); l-- > 0;) t = steps_[l].item(t);
    return t;
  }
  /// Whether read `k` is an item of its own (false: a pad's repeat).
  bool valid(std::uint64_t k) const noexcept { return rank_ + k * world_ < items_; }

  std::uint64_t world_size() const noexcept { return world_; }
  std::uint64_t rank() const noexcept { return rank_; }
  Remainder remainder() const noexcept { return remainder_; }
  const std::vector<DealLevel>& levels() const noexcept { return levels_; }

 private:
  // Level l's items in the order the next level numbers them: rank by rank,
  // each rank's items from its cursor on.
  struct Step {
    std::uint64_t world = 1;
    std::vector<std::uint64_t> prefix;  // items left before rank r (world + 1 entries)
    std::vector<std::uint64_t> first;   // rank r's first item left (its valid consumed count)
    std::uint64_t item(std::uint64_t t) const noexcept {
      const auto r = static_cast<std::uint64_t>(
          std::upper_bound(prefix.begin() + 1, prefix.end(), t) - (prefix.begin() + 1));
      return r + (first[r] + (t - prefix[r])) * world;
    }
  };

  std::uint64_t world_, rank_;
  Remainder remainder_;
  std::vector<DealLevel> levels_;
  std::vector<Step> steps_;
  std::uint64_t items_ = 0, reads_ = 0;
};

/// Writes and reads the levels of a deal (a checkpoint's part of it).
inline void write_levels(StateWriter& w, const std::vector<DealLevel>& levels) {
  w.write_u64(levels.size());
  for (const DealLevel& level : levels) {
    w.write_u64(level.world_size);
    for (const std::uint64_t c : level.consumed) w.write_u64(c);
  }
}
inline std::vector<DealLevel> read_levels(StateReader& r) {
  const std::uint64_t at = r.offset();
  const std::uint64_t n = r.read_u64();
  if (n > r.remaining() / 16) throw_state_error("a deal of " + std::to_string(n) + " levels", at);
  std::vector<DealLevel> levels(static_cast<std::size_t>(n));
  for (DealLevel& level : levels) {
    const std::uint64_t level_at = r.offset();
    level.world_size = r.read_u64();
    if (level.world_size == 0 || level.world_size > r.remaining() / 8)
      throw_state_error("a resize to a world of " + std::to_string(level.world_size), level_at);
    level.consumed.resize(static_cast<std::size_t>(level.world_size));
    for (std::uint64_t& c : level.consumed) c = r.read_u64();
  }
  return levels;
}

/// Which record the k-th read of one pass of a random-access source reads:
/// the position the deal gives (all positions in order without one), then
/// the global shuffle's permutation of it (none: the position itself).
class PassOrder {
 public:
  PassOrder() = default;
  PassOrder(std::uint64_t n, std::optional<std::uint64_t> shuffle_key, std::optional<Deal> deal)
      : n_(n), deal_(std::move(deal)) {
    if (shuffle_key) permutation_.emplace(n, *shuffle_key);
  }

  /// Reads in the pass.
  std::uint64_t size() const noexcept { return deal_ ? deal_->size() : n_; }
  /// The record of read `k` (< size()).
  std::uint64_t record(std::uint64_t k) const noexcept {
    const std::uint64_t position = deal_ ? deal_->position(k) : k;
    return permutation_ ? (*permutation_)(position) : position;
  }
  /// Whether read `k` is its rank's own (false: a pad's repeat).
  bool valid(std::uint64_t k) const noexcept { return !deal_ || deal_->valid(k); }
  const std::optional<Deal>& deal() const noexcept { return deal_; }
  /// Whether the reads jump around the pass (a global shuffle).
  bool shuffled() const noexcept { return permutation_.has_value(); }

 private:
  std::uint64_t n_ = 0;
  std::optional<IndexPermutation> permutation_;
  std::optional<Deal> deal_;
};

}  // namespace ingest::detail
