// repeat(count): the input `count` times over (-1: forever); each epoch is a
// new pass with a fresh input iterator. tf.data counterpart: RepeatDataset.
// If an epoch yields no element, iteration ends instead of spinning forever
// on an empty input. An epoch that raised only errors counts as empty too, as
// in tf.data: an input whose every element fails raises its errors once, not
// once per epoch forever. Each pass's input iterator gets the pass number as
// its context's epoch (IteratorContext::for_repeat_pass), which random_map
// mixes into its generators' seeds.
#pragma once

#include <string_view>

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

/// Iterator of RepeatDataset: passes over its input one after another, each with a fresh iterator.
template <class Input>
class RepeatIterator {
  using InputIt = detail::child_iterator_t<Input>;

 public:
  /// The element type (the input's).
  using value_type = typename Input::element_type;

  /// Copies the input dataset; each pass makes its iterator in `ctx` (with the pass number as
  /// epoch).
  RepeatIterator(Input input, std::int64_t count, IteratorContext ctx)
      : input_(std::move(input)), ctx_(ctx), count_(count) {}

  /// The next element, starting the next pass when one ends; std::nullopt after `count` passes or
  /// after a pass that yielded no element. Throws an element's error and continues after it.
  std::optional<value_type> next() {
    while (start_epoch()) {
      std::optional<value_type> x = current_->next();  // an error leaves produced_ as is
      if (x) {
        produced_ = true;
        return x;
      }
      end_epoch();
    }
    return std::nullopt;
  }

  /// Bulk protocol: writes up to out.size() elements, across passes; returns how many.
  std::size_t fill(std::span<value_type> out) requires bulk_iterator<InputIt> {
    std::size_t n = 0;
    while (n < out.size() && start_epoch()) {
      const std::size_t got = current_->fill(out.subspan(n));
      n += got;
      if (got == 0) break;  // end of epoch or an error: next() tells which
      produced_ = true;
    }
    return n;
  }

  /// Checkpoint: the pass counters of the input's datasets (the next pass's
  /// reshuffle), the epoch number and flags, then the current epoch's input
  /// (if one is open). Restore re-creates the input for that epoch (so its
  /// per-epoch reshuffle or seeds match) and restores its position.
  void save(StateWriter& w) const {
    counters().save(w);
    w.write_i64(epoch_);
    w.write_bool(produced_);
    w.write_bool(done_);
    w.write_bool(current_.has_value());
    if (current_) current_->save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    counters().read(r);
    epoch_ = r.read_i64();
    produced_ = r.read_bool();
    done_ = r.read_bool();
    current_.reset();
    if (r.read_bool()) {
      current_.emplace(detail::child_iterator(input_, ctx_.for_repeat_pass(count_, epoch_)));
      current_->restore(r);
    }
    counters().apply();
  }

 private:
  // Ensures an epoch is running; false when all epochs are done.
  bool start_epoch() {
    if (current_) return true;
    if (done_ || (count_ >= 0 && epoch_ >= count_)) return false;
    if (epoch_ > 0 && ctx_.model) ctx_.model->begin_pass();  // the autotuner measures it afresh
    current_.emplace(detail::child_iterator(input_, ctx_.for_repeat_pass(count_, epoch_)));
    produced_ = false;
    return true;
  }
  void end_epoch() {
    current_.reset();
    ++epoch_;
    if (!produced_) done_ = true;  // an empty epoch: every later one is empty too
  }

  // The pass counters below, found at the first save or restore (a save
  // finds them once, not at every anchor a prefetch above takes).
  detail::PassCounters& counters() const {
    if (!counters_) counters_.emplace(input_, ctx_);
    return *counters_;
  }

  Input input_;
  mutable std::optional<detail::PassCounters> counters_;
  IteratorContext ctx_;
  std::int64_t count_;
  std::int64_t epoch_ = 0;
  std::optional<InputIt> current_;
  bool produced_ = false;
  bool done_ = false;
};

/// The dataset of `ds.repeat(count)`: the input `count` times over (-1: forever).
template <class Input>
class RepeatDataset
    : public detail::UnaryStageBase<RepeatDataset<Input>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "repeat";
  /// It makes its input's iterators as it runs (Fingerprint::Below).
  static constexpr bool makes_input_iterators = true;

  /// Repeats `input` `count` times; throws InvalidArgument if `count` < -1.
  RepeatDataset(Input input, std::int64_t count)
      : RepeatDataset::UnaryStageBase(std::move(input)), count_(count) {
    detail::check_count("repeat", count, "forever");
  }
  /// Each pass opens a fresh iterator of the input (the iterator holds a
  /// copy of it).
  auto make_iterator(const IteratorContext& ctx) const {
    return RepeatIterator<Input>(this->input(), count_, ctx);
  }

  /// Adds `count` to the pipeline's fingerprint.
  void fingerprint(Fingerprint& fp) const { fp.add(count_); }

  /// The input's cardinality times `count`: 0 if either is 0; infinite_cardinality for `count` -1
  /// (unknown_cardinality if the input's is unknown).
  std::int64_t cardinality() const {
    const std::int64_t n = this->input_cardinality();
    if (n == 0 || count_ == 0) return 0;
    if (count_ < 0) return n == unknown_cardinality ? n : infinite_cardinality;
    return detail::map_cardinality(n, [&](std::int64_t k) { return k * count_; });
  }

 private:
  std::int64_t count_;
};

}  // namespace ingest
