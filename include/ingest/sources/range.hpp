// range(stop), range(start, stop, step): the int64 sequence start, start+step,
// ... up to (not including) stop. tf.data counterpart: Dataset.range. No
// threads; supports the bulk fill protocol, so range -> map -> batch runs as
// loops over contiguous buffers.
#pragma once

#include <string_view>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/sources/positional.hpp"

namespace ingest {

/// Iterator of RangeDataset: start, start + step, ... up to (not including) stop.
class RangeIterator {
 public:
  /// The element type.
  using value_type = std::int64_t;

  /// The values from `start` up to `stop` (exclusive) by `step` (not 0).
  RangeIterator(std::int64_t start, std::int64_t stop, std::int64_t step)
      : next_(static_cast<std::uint64_t>(start)),
        step_(static_cast<std::uint64_t>(step)),
        left_(count(start, stop, step)) {}

  /// The next value, or std::nullopt at the end.
  std::optional<std::int64_t> next() noexcept {
    if (left_ == 0) return std::nullopt;
    --left_;
    const auto v = static_cast<std::int64_t>(next_);
    next_ += step_;  // unsigned: wraps harmlessly past the last element
    return v;
  }

  /// Bulk protocol: writes the next up to out.size() values to `out`; returns how many.
  std::size_t fill(std::span<std::int64_t> out) noexcept {
    // An additive induction (not base + i * step): GCC vectorises it without
    // a 64-bit vector multiply, which x86-64's baseline lacks.
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left_, out.size()));
    std::uint64_t v = next_;
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = static_cast<std::int64_t>(v);
      v += step_;
    }
    next_ = v;
    left_ -= n;
    return n;
  }

  /// Checkpoint: the next value and the count left.
  void save(StateWriter& w) const { w.write(next_, left_); }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) { r.read(next_, left_); }

  /// fill with `f` applied in the same loop (see iterator.hpp).
  template <class U, class F>
  std::size_t fill_map(std::span<U> out, F& f, std::exception_ptr& error) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left_, out.size()));
    const std::uint64_t step = step_;
    std::uint64_t v = next_;
    std::size_t i = 0;
    try {
      if (step == 1) {
        // base + i: vectorises (with f) where the additive induction below does not.
        for (; i < n; ++i) out[i] = f(static_cast<std::int64_t>(v + i));
        v += n;
      } else {
        for (; i < n; ++i) {
          out[i] = f(static_cast<std::int64_t>(v));
          v += step;
        }
      }
    } catch (...) {
      error = std::current_exception();
      next_ += (i + 1) * step;  // element i failed, and is consumed
      left_ -= i + 1;
      return i;
    }
    next_ = v;
    left_ -= n;
    return n;
  }

 private:
  // Number of elements, in unsigned arithmetic so extreme bounds cannot overflow.
  static std::uint64_t count(std::int64_t start, std::int64_t stop, std::int64_t step) noexcept {
    if (step > 0) {
      if (start >= stop) return 0;
      const auto span = static_cast<std::uint64_t>(stop) - static_cast<std::uint64_t>(start);
      return (span - 1) / static_cast<std::uint64_t>(step) + 1;
    }
    if (start <= stop) return 0;
    const auto span = static_cast<std::uint64_t>(start) - static_cast<std::uint64_t>(stop);
    const auto magnitude = static_cast<std::uint64_t>(-(step + 1)) + 1;
    return (span - 1) / magnitude + 1;
  }

  std::uint64_t next_, step_, left_;
};

/// The dataset of `range(stop)` and `range(start, stop, step)`: an int64 arithmetic sequence.
class RangeDataset : public DatasetBase<RangeDataset, std::int64_t> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "range";

  /// The values from `start` up to `stop` (exclusive) by `step`; throws InvalidArgument if `step`
  /// is 0.
  RangeDataset(std::int64_t start, std::int64_t stop, std::int64_t step)
      : start_(start), stop_(stop), step_(step) {
    if (step == 0) throw InvalidArgument("range: step must not be 0", {.stage = "range"});
  }
  /// An iterator over the values (no threads).
  RangeIterator make_iterator(const IteratorContext&) const { return {start_, stop_, step_}; }

  /// Adds start, stop and step to the pipeline's fingerprint.
  void fingerprint(Fingerprint& fp) const { fp.add(start_).add(stop_).add(step_); }

  /// The number of values (0 when `stop` is not beyond `start` in the direction of `step`).
  std::int64_t cardinality() const {
    const std::int64_t span = step_ > 0 ? stop_ - start_ : start_ - stop_;
    const std::int64_t step = step_ > 0 ? step_ : -step_;
    return span <= 0 ? 0 : (span - 1) / step + 1;
  }

  /// The same elements by position, once per pass in a pseudo-random order
  /// (tf: Dataset.global_shuffle); see PositionalDataset.
  PositionalDataset<detail::RangeAccess> global_shuffle(ShuffleOptions options = {}) const {
    return positional().global_shuffle(options);
  }
  using RangeDataset::DatasetBase::shard;
  /// The positions dealt to `world`'s rank (PositionalDataset::shard): this
  /// rank computes its elements without producing the others'.
  PositionalDataset<detail::RangeAccess> shard(const distributed::World& world,
                                               ShardOptions options = {}) const {
    return positional().shard(world, options);
  }
  /// The positions dealt to `world`'s rank, as `(element, valid)` pairs padded so that every
  /// rank gets as many (PositionalDataset::shard_padded).
  PositionalDataset<detail::RangeAccess, true> shard_padded(const distributed::World& world) const {
    return positional().shard_padded(world);
  }

 private:
  PositionalDataset<detail::RangeAccess> positional() const {
    return {detail::RangeAccess{
                .start = start_, .step = step_, .count = static_cast<std::uint64_t>(cardinality())},
            {}};
  }

  std::int64_t start_, stop_, step_;
};

/// 0, 1, ..., stop-1.
inline RangeDataset range(std::int64_t stop) { return {0, stop, 1}; }
/// start, start+step, ... while < stop (> stop for a negative step). Throws InvalidArgument if step
/// == 0.
inline RangeDataset range(std::int64_t start, std::int64_t stop, std::int64_t step = 1) {
  return {start, stop, step};
}

}  // namespace ingest
