// skip(count): all but the first `count` elements (-1: skip everything).
// tf.data counterpart: SkipDataset. The skipped elements are read on the
// first call to next(); an error among them surfaces from that call (the
// failed element counts as skipped), as in tf.data.
#pragma once

#include <string_view>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of SkipDataset: its input without the first `count` elements.
template <class InputIt>
class SkipIterator {
 public:
  /// The element type (the input's).
  using value_type = typename InputIt::value_type;

  /// Owns the input iterator; `count` -1 skips everything; `cancel` is checked while skipping.
  SkipIterator(InputIt input, std::int64_t count, CancellationToken cancel = {})
      : input_(std::move(input)), to_skip_(count), cancel_(std::move(cancel)) {}

  /// The next element after the skipped ones, or std::nullopt at the end; the first call
  /// reads the skipped elements and throws the first error among them.
  std::optional<value_type> next() {
    if (!skip_ahead()) return std::nullopt;
    return input_.next();
  }

  /// Bulk protocol: writes up to out.size() elements once skipping is done (0 before); returns how
  /// many.
  std::size_t fill(std::span<value_type> out) requires bulk_iterator<InputIt> {
    if (to_skip_ != 0) return 0;  // let next() do the skipping
    return input_.fill(out);
  }

  /// Checkpoint: the count still to skip, then the input.
  void save(StateWriter& w) const {
    w.write(to_skip_);
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(to_skip_);
    input_.restore(r);
  }

 private:
  // False when the input ended while skipping (or everything is skipped).
  bool skip_ahead() {
    if (to_skip_ < 0) return false;
    while (to_skip_ > 0) {
      detail::throw_if_cancelled(cancel_);
      --to_skip_;  // counts even if the element fails
      if (!input_.next()) {
        to_skip_ = -1;
        return false;
      }
    }
    return true;
  }

  InputIt input_;
  std::int64_t to_skip_;  // -1: everything
  CancellationToken cancel_;
};

/// The dataset of `ds.skip(count)`: all but the first `count` elements (-1: none).
template <class Input>
class SkipDataset
    : public detail::UnaryStage<SkipDataset<Input>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "skip";

  /// Skips the first `count` elements of `input`; throws InvalidArgument if `count` < -1.
  SkipDataset(Input input, std::int64_t count)
      : SkipDataset::UnaryStage(std::move(input)), count_(count) {
    detail::check_count("skip", count, "all");
  }
  /// Wraps the input's iterator in a SkipIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    return SkipIterator<It>(std::move(input), count_, ctx.cancellation);
  }

  /// Adds `count` to the pipeline's fingerprint (checked when a checkpoint is restored).
  void fingerprint(Fingerprint& fp) const { fp.add(count_); }

  /// The number of elements: the input's less `count` (at least 0), or as unknown or infinite as
  /// the input's.
  std::int64_t cardinality() const {
    const std::int64_t n = this->input_cardinality();
    return detail::map_cardinality(
        n, [&](std::int64_t k) { return count_ < 0 ? 0 : std::max<std::int64_t>(k - count_, 0); });
  }

 private:
  std::int64_t count_;
};

}  // namespace ingest
