// What the random-access sources share: `.global_shuffle()` (a pseudo-random
// order over every position, new each pass) and `.shard(world)` (the
// positions dealt to one rank: core/deal.hpp), which their iterators apply
// through one detail::PassOrder, so a rank reads only its own records and
// its checkpoint is the pass, the deal's levels and a position. Here too:
// PositionalDataset, the random-access form of range and from_vector
// (`range(n).global_shuffle()`, `from_vector(v).shard(world)`).
// indexed_tfrecord is the third such source.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/deal.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/options.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/state.hpp"
#include "ingest/core/world.hpp"

namespace ingest::detail {

/// What global_shuffle and shard(world) set on a random-access source.
struct PositionalSpec {
  std::optional<ShuffleOptions> shuffle{};
  std::uint64_t seed = 0;
  /// shard(world): this rank, its world and the remainder's policy.
  bool sharded = false;
  std::uint64_t rank = 0, world_size = 1;
  Remainder remainder = Remainder::drop;
  ElasticLink elastic{};
  /// The passes begun, shared by the dataset's copies (reshuffling or sharded).
  std::shared_ptr<std::atomic<std::uint64_t>> passes{};

  /// The order of pass `pass` of `n` positions after the resizes `levels`.
  PassOrder order(std::uint64_t n, std::uint64_t pass, std::vector<DealLevel> levels) const {
    std::optional<std::uint64_t> key;
    if (shuffle) key = shuffle->reshuffle_each_iteration ? derive_seed(seed, pass) : seed;
    std::optional<Deal> deal;
    if (sharded) deal.emplace(n, world_size, rank, remainder, std::move(levels));
    return {n, key, std::move(deal)};
  }

  /// The reads of one pass without a resize (unknown_cardinality while a
  /// resumed pass is pending).
  std::int64_t cardinality(std::uint64_t n) const {
    if (!sharded) return static_cast<std::int64_t>(n);
    if (elastic.resume) return unknown_cardinality;
    return static_cast<std::int64_t>(reads_of(n, world_size, rank, remainder));
  }

  /// The order's parameters (a seed drawn from the OS differs between
  /// processes: such a state restores only into this dataset). An unsharded
  /// source hashes what it hashed before shard(world) existed.
  void fingerprint(Fingerprint& fp) const {
    fp.add(shuffle.has_value());
    if (shuffle) fp.add(seed).add(shuffle->reshuffle_each_iteration);
    if (sharded) {
      fp.add("shard").add(world_size).add(rank).add(static_cast<std::uint64_t>(remainder));
    }
    fp.counter(passes);
  }

  /// This spec with a global shuffle.
  PositionalSpec shuffled(ShuffleOptions options) const {
    PositionalSpec out = *this;
    out.shuffle = options;
    out.seed = options.seed ? *options.seed : random_seed();
    out.passes = std::make_shared<std::atomic<std::uint64_t>>(0);
    return out;
  }
  /// This spec dealt to `world`'s rank (InvalidArgument for an impossible world).
  PositionalSpec dealt(const distributed::World& world, Remainder policy,
                       std::string_view stage) const {
    if (sharded) {
      throw InvalidArgument(std::string(stage) + ": shard(world) was applied already",
                            {.stage = std::string(stage)});
    }
    if (world.world_size < 1 || world.rank < 0 || world.rank >= world.world_size) {
      throw InvalidArgument(std::string(stage) + ": shard(world): rank " +
                                std::to_string(world.rank) + " is outside [0, " +
                                std::to_string(world.world_size) + ")",
                            {.stage = std::string(stage)});
    }
    PositionalSpec out = *this;
    out.sharded = true;
    out.rank = static_cast<std::uint64_t>(world.rank);
    out.world_size = static_cast<std::uint64_t>(world.world_size);
    out.remainder = policy;
    out.elastic = world.elastic;
    // A counter of its own: the pass a resumed world starts in is the
    // resumed one, and the dataset's passes count from there.
    out.passes = std::make_shared<std::atomic<std::uint64_t>>(
        world.elastic.resume ? world.elastic.resume->pass : 0);
    return out;
  }
};

/// One iterator's pass over a random-access source: its order, and the
/// checkpoint of everything but the position (the number of records, the
/// pass and, when sharded, the deal's levels).
class PassCursor {
 public:
  PassCursor(std::shared_ptr<const PositionalSpec> spec, std::uint64_t n,
             const IteratorContext& ctx)
      : spec_(std::move(spec)), n_(n) {
    if (spec_->passes) {
      passes_ = shared_counter(ctx, spec_->passes);
      pass_ = passes_->fetch_add(1, std::memory_order_relaxed);
    }
    // (Only distributed::restore's old ranks report, each restored in a
    // replica: detail::restored_replica.)
    report_ = spec_->elastic.report;
    std::vector<DealLevel> levels;
    if (const auto& resume = spec_->elastic.resume; resume && resume->pass == pass_) {
      levels = resume->levels;
    }
    order_ = spec_->order(n_, pass_, std::move(levels));
  }

  const PassOrder& order() const noexcept { return order_; }
  std::uint64_t pass() const noexcept { return pass_; }

  /// Notes that `reads` reads of the pass are taken (for an elastic restore).
  void note(std::uint64_t reads) const noexcept {
    if (report_) report_->consumed = reads;
  }

  void write(StateWriter& w) const {
    w.write(n_, pass_);
    if (spec_->sharded) write_levels(w, order_.deal()->levels());
  }
  void read(StateReader& r, std::string_view stage, std::string_view items) {
    const std::uint64_t at = r.offset();
    std::uint64_t count = 0;
    r.read(count);
    if (count != n_) {
      throw DataLossError("checkpoint: " + std::string(stage) + " had " + std::to_string(count) +
                              " " + std::string(items) + " at the save, it has " +
                              std::to_string(n_) + " now",
                          {.stage = std::string(stage), .offset = at});
    }
    std::uint64_t pass = 0;
    r.read(pass);
    std::vector<DealLevel> levels;
    if (spec_->sharded) levels = read_levels(r);
    if (passes_) {
      pass_ = pass;
      restored_pass(passes_, pass);
    }
    if (report_) {
      report_->restored = true;
      report_->pass = pass_;
      report_->records = n_;
      report_->levels = levels;
    }
    order_ = spec_->order(n_, pass_, std::move(levels));
  }

 private:
  std::shared_ptr<const PositionalSpec> spec_;
  std::uint64_t n_;
  std::shared_ptr<std::atomic<std::uint64_t>> passes_;
  std::uint64_t pass_ = 0;
  std::shared_ptr<ElasticLink::Report> report_;
  PassOrder order_;
};

/// The element of read `k` as a shard_padded source yields it: (element,
/// valid), or the element alone.
template <bool Marked, class T>
auto mark_read(T&& value, const PassOrder& order, std::uint64_t k) {
  if constexpr (Marked) {
    return std::pair<std::remove_cvref_t<T>, bool>(std::forward<T>(value), order.valid(k));
  } else {
    return std::remove_cvref_t<T>(std::forward<T>(value));
  }
}
template <bool Marked, class T>
using marked_t = std::conditional_t<Marked, std::pair<T, bool>, T>;

/// range's elements by position.
struct RangeAccess {
  using value_type = std::int64_t;
  static constexpr std::string_view stage_name = "range";
  std::int64_t start = 0, step = 1;
  std::uint64_t count = 0;
  std::uint64_t size() const noexcept { return count; }
  std::int64_t get(std::uint64_t i) const noexcept {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(start) +
                                     i * static_cast<std::uint64_t>(step));
  }
  void fingerprint(Fingerprint& fp) const {
    fp.add(static_cast<std::uint64_t>(start)).add(static_cast<std::uint64_t>(step)).add(count);
  }
};

/// from_vector's elements by position.
template <class T>
struct VectorAccess {
  using value_type = T;
  static constexpr std::string_view stage_name = "from_vector";
  std::shared_ptr<const std::vector<T>> data;
  std::uint64_t size() const noexcept { return data->size(); }
  const T& get(std::uint64_t i) const noexcept { return (*data)[i]; }
  void fingerprint(Fingerprint& fp) const { fp.add(static_cast<std::uint64_t>(data->size())); }
};

template <class Access, bool Marked>
class PositionalIterator {
 public:
  using value_type = marked_t<Marked, typename Access::value_type>;

  PositionalIterator(Access access, std::shared_ptr<const PositionalSpec> spec,
                     const IteratorContext& ctx)
      : access_(std::move(access)), cursor_(std::move(spec), access_.size(), ctx) {}

  std::optional<value_type> next() {
    if (pos_ == cursor_.order().size()) return std::nullopt;
    const std::uint64_t k = pos_++;
    cursor_.note(pos_);
    return mark_read<Marked>(access_.get(cursor_.order().record(k)), cursor_.order(), k);
  }

  /// Checkpoint: the elements, the pass (and the deal's levels), the position.
  void save(StateWriter& w) const {
    cursor_.write(w);
    w.write(pos_);
  }
  void restore(StateReader& r) {
    cursor_.read(r, Access::stage_name, "elements");
    pos_ = r.read_position(static_cast<std::size_t>(cursor_.order().size()), Access::stage_name,
                           "elements");
    cursor_.note(pos_);
  }

 private:
  Access access_;
  PassCursor cursor_;
  std::uint64_t pos_ = 0;
};

}  // namespace ingest::detail

namespace ingest {

/// range or from_vector read by position: after global_shuffle or
/// shard(world) (tf: a random-access dataset's global_shuffle; Grain's
/// MapDataset with an IndexSampler).
template <class Access, bool Marked = false>
class PositionalDataset
    : public DatasetBase<PositionalDataset<Access, Marked>,
                         detail::marked_t<Marked, typename Access::value_type>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints (the source's).
  static constexpr std::string_view stage_name = Access::stage_name;

  /// The elements of `access` in the order `spec` sets.
  PositionalDataset(Access access, detail::PositionalSpec spec)
      : access_(std::move(access)),
        spec_(std::make_shared<const detail::PositionalSpec>(std::move(spec))) {}

  /// Every element once per pass in a pseudo-random order (tf:
  /// Dataset.global_shuffle). Without `.seed`, one is drawn for this
  /// dataset; with `.reshuffle_each_iteration` every pass gets its own order.
  /// Before shard(world): every rank must use the same seed.
  PositionalDataset global_shuffle(ShuffleOptions options = {}) const {
    if (spec_->sharded) {
      throw InvalidArgument(std::string(stage_name) +
                                ": global_shuffle goes before shard(world) (the ranks deal one "
                                "order of the whole pass)",
                            {.stage = std::string(stage_name)});
    }
    return {access_, spec_->shuffled(options)};
  }

  using PositionalDataset::DatasetBase::shard;
  /// The positions of each pass dealt to `world`'s rank, reading no other
  /// rank's elements (see Remainder). Throws InvalidArgument for
  /// Remainder::pad (use shard_padded) and for a rank outside the world.
  PositionalDataset shard(const distributed::World& world, ShardOptions options = {}) const {
    if (options.remainder == Remainder::pad) detail::pad_needs_marks(stage_name);
    return {access_, spec_->dealt(world, options.remainder, stage_name)};
  }
  /// As shard(world, {.remainder = Remainder::pad}), each element paired
  /// with whether it is its rank's own (false: a repeat that evens the counts).
  PositionalDataset<Access, true> shard_padded(const distributed::World& world) const {
    static_assert(!Marked, "shard_padded: the dataset is sharded already");
    return {access_, spec_->dealt(world, Remainder::pad, stage_name)};
  }

  /// An iterator over this pass's positions.
  detail::PositionalIterator<Access, Marked> make_iterator(const IteratorContext& ctx) const {
    return {access_, spec_, ctx};
  }
  /// The number of elements this pass yields (this rank's after shard(world)).
  std::int64_t cardinality() const { return spec_->cardinality(access_.size()); }
  /// What global_shuffle and shard(world) set (distributed::restore reads it).
  const detail::PositionalSpec& positional_spec() const noexcept { return *spec_; }
  /// Adds the source's and the order's parameters to the pipeline's fingerprint.
  void fingerprint(Fingerprint& fp) const {
    access_.fingerprint(fp);
    spec_->fingerprint(fp);
  }

 private:
  Access access_;
  std::shared_ptr<const detail::PositionalSpec> spec_;
};

}  // namespace ingest
