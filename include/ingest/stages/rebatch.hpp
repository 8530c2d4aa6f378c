// rebatch(batch_size) / rebatch(batch_sizes): re-cuts an already batched
// dataset into batches of new sizes along the first dimension, as
// unbatch().batch(n) would but without taking the rows apart: a batch type
// stays the same (a Tensor, a std::vector, tuples and pairs of those; see
// rebatch_traits in core/batch_traits.hpp). tf.data counterpart:
// Dataset.rebatch (RebatchDatasetV2). A list of sizes is cycled; a 0 in it
// gives an empty batch (tf.data's use: a replica that expects no rows). An
// output batch made of one input batch's rows is a view of it (no copy, as
// tf.data); one made of several is copied into one new batch from the
// context's allocator. The last, smaller batch is kept unless drop_remainder.
// Runs on the consumer's thread. An error from the input (or an input batch
// that cannot be cut: a scalar, fields of different lengths) fails the
// output batch being built, whose rows gathered so far are dropped, as
// tf.data does; the next call starts a new batch of the same size with the
// next input batch. Cardinality: unknown (as tf.data: it depends on the
// input's batch sizes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/batch_traits.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of RebatchDataset: re-cuts the input's batches into batches of the given sizes.
template <class InputIt>
class RebatchIterator {
  using traits = rebatch_traits<typename InputIt::value_type>;

 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "the input batch it is cutting";
  /// The batch type (the input's).
  using value_type = typename InputIt::value_type;

  /// Owns the input iterator; `sizes` are cycled; batches of several inputs come from `allocator`.
  RebatchIterator(InputIt input, std::shared_ptr<const std::vector<std::int64_t>> sizes,
                  bool drop_remainder, Allocator* allocator, CancellationToken cancel = {})
      : input_(std::move(input)),
        sizes_(std::move(sizes)),
        has_zero_(std::find(sizes_->begin(), sizes_->end(), 0) != sizes_->end()),
        drop_remainder_(drop_remainder),
        allocator_(allocator),
        cancel_(std::move(cancel)) {}

  /// The next batch of the next size in the cycle, or std::nullopt at the end (or before a short
  /// last batch with drop_remainder); throws an error of the input, or of a batch that cannot be
  /// cut, for the batch being built and starts the next one afresh on the next call.
  std::optional<value_type> next() {
    if (done_) return std::nullopt;
    const auto want = static_cast<std::size_t>((*sizes_)[size_index_]);
    if (want == 0) return empty_batch();
    pending_.clear();
    ranges_.clear();
    std::size_t gathered = 0;
    while (gathered < want) {
      if (!current_ && !pull()) break;
      const std::size_t take = std::min(want - gathered, rows_ - offset_);
      ranges_.push_back({offset_, take});
      offset_ += take;
      gathered += take;
      if (offset_ == rows_) {  // used up: it joins this batch only
        pending_.push_back(std::move(*current_));
        current_.reset();
      }
    }
    size_index_ = (size_index_ + 1) % sizes_->size();
    if (gathered == 0 || (drop_remainder_ && gathered < want)) {
      release();
      return std::nullopt;
    }
    // Piece j is pending_[j]; a last piece past them is the current batch,
    // whose later rows go on into the next output batch.
    auto at = [this](std::size_t j) {
      value_type* b = j < pending_.size() ? &pending_[j] : &*current_;
      return RowRange<value_type>{b, ranges_[j].first, ranges_[j].second};
    };
    try {
      // Before join, which may move the input batch out.
      if (has_zero_ && !pending_.empty()) prototype_.emplace(traits::empty_like(pending_.back()));
      value_type out = traits::join(ranges_.size(), at, gathered, *allocator_);
      pending_.clear();
      return out;
    } catch (...) {
      pending_.clear();
      detail::rethrow_with_context({.stage = "rebatch"}, detail::Raiser::internal);
    }
  }

  /// Checkpoint: the position in the sizes, the input batches read, the
  /// input batch being cut (through ingest::serializer: at most one input
  /// batch, which the input cannot give again without its state from before
  /// it) with its first row not yet taken, the empty batch kept for sizes of
  /// 0, then the input. Between calls no output batch is half built.
  void save(StateWriter& w) const requires serializable<value_type> {
    w.write(size_index_, done_, consumed_, current_.has_value(), prototype_.has_value());
    if (current_) {
      w.write_element(*current_);
      w.write(offset_);
    }
    if (prototype_) w.write_element(*prototype_);
    input_.save(w);
  }
  /// Restores what save() wrote (with the batch being cut), on a fresh iterator of the same
  /// dataset.
  void restore(StateReader& r) requires serializable<value_type> {
    const std::uint64_t at = r.offset();
    bool cutting = false, prototype = false;
    r.read(size_index_, done_, consumed_, cutting, prototype);
    if (size_index_ >= sizes_->size()) {
      throw DataLossError("checkpoint: rebatch size index " + std::to_string(size_index_) +
                              " is past its " + std::to_string(sizes_->size()) + " sizes",
                          {.stage = "rebatch", .offset = at});
    }
    release();
    if (cutting) {
      current_ = r.read_element<value_type>("rebatch");
      r.read(offset_);
      rows_ = traits::rows(*current_);
      if (offset_ >= rows_) {
        throw DataLossError("checkpoint: rebatch row " + std::to_string(offset_) +
                                " is past its input batch of " + std::to_string(rows_),
                            {.stage = "rebatch", .offset = at});
      }
    }
    if (prototype) prototype_ = r.read_element<value_type>("rebatch");
    input_.restore(r);
  }

 private:
  // Reads the next input batch with rows into current_; false at the end
  // (done_ is set). A failed input fails the batch being built.
  bool pull() {
    for (;;) {
      detail::throw_if_cancelled(cancel_);  // a long run of empty input batches
      std::optional<value_type> b;
      try {
        b = detail::next_counted(input_, consumed_);
      } catch (...) {
        pending_.clear();
        throw;
      }
      if (!b) {
        done_ = true;
        return false;
      }
      const std::int64_t index = consumed_++;
      std::size_t rows = 0;
      try {
        rows = traits::rows(*b);
      } catch (...) {
        pending_.clear();
        detail::rethrow_with_context({.stage = "rebatch", .element = index},
                                     detail::Raiser::internal);
      }
      if (has_zero_ && !prototype_) prototype_.emplace(traits::empty_like(*b));
      if (rows == 0) continue;
      current_.emplace(std::move(*b));
      rows_ = rows;
      offset_ = 0;
      return true;
    }
  }

  // A batch of size 0: no rows, the kind of the last input batch (tf.data
  // takes it from the static shape; before any input batch was seen, one is
  // read ahead, and an empty input ends the pass).
  std::optional<value_type> empty_batch() {
    if (!prototype_ && !current_ && !pull()) {
      release();
      return std::nullopt;
    }
    size_index_ = (size_index_ + 1) % sizes_->size();
    return traits::empty_like(current_ ? *current_ : *prototype_);
  }

  void release() noexcept {
    pending_.clear();
    current_.reset();
    prototype_.reset();
  }

  InputIt input_;
  std::shared_ptr<const std::vector<std::int64_t>> sizes_;
  bool has_zero_;
  bool drop_remainder_;
  Allocator* allocator_;
  CancellationToken cancel_;
  std::size_t size_index_ = 0;
  bool done_ = false;
  std::int64_t consumed_ = 0;          // input batches read so far
  std::optional<value_type> current_;  // the input batch being cut
  std::size_t rows_ = 0, offset_ = 0;  // its rows, and the first not yet taken
  std::vector<value_type> pending_;    // input batches used up by this output batch
  std::vector<std::pair<std::size_t, std::size_t>> ranges_;  // (start, count) per piece
  std::optional<value_type> prototype_;                      // an empty batch, for sizes of 0
};

/// The dataset of `ds.rebatch(n)` or `ds.rebatch(sizes)`: the input's batches re-cut into
/// batches of new sizes along their first dimension.
template <class Input>
class RebatchDataset
    : public detail::UnaryStage<RebatchDataset<Input>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "rebatch";
  /// It makes batches: tracing records every call from this stage on.
  static constexpr bool batches = true;

  /// One size for every batch.
  RebatchDataset(Input input, std::int64_t batch_size, BatchOptions options)
      : RebatchDataset::UnaryStage(std::move(input)), options_(options) {
    if (batch_size <= 0) {
      throw InvalidArgument("rebatch: batch_size must be > 0; got " + std::to_string(batch_size),
                            {.stage = "rebatch"});
    }
    sizes_ = std::make_shared<const std::vector<std::int64_t>>(1, batch_size);
  }
  /// Sizes cycled batch by batch.
  RebatchDataset(Input input, std::vector<std::int64_t> batch_sizes, BatchOptions options)
      : RebatchDataset::UnaryStage(std::move(input)), options_(options) {
    if (batch_sizes.empty()) {
      throw InvalidArgument("rebatch: batch_sizes is empty; give at least one size",
                            {.stage = "rebatch"});
    }
    for (std::size_t i = 0; i < batch_sizes.size(); ++i) {
      if (batch_sizes[i] < 0) {
        throw InvalidArgument("rebatch: batch_sizes[" + std::to_string(i) + "] must be >= 0; got " +
                                  std::to_string(batch_sizes[i]),
                              {.stage = "rebatch"});
      }
    }
    if (std::all_of(batch_sizes.begin(), batch_sizes.end(),
                    [](std::int64_t s) { return s == 0; })) {
      throw InvalidArgument(
          "rebatch: batch_sizes are all 0; at least one must be > 0 (else the batches would be "
          "empty forever)",
          {.stage = "rebatch"});
    }
    sizes_ = std::make_shared<const std::vector<std::int64_t>>(std::move(batch_sizes));
  }

  /// Wraps the input's iterator in a RebatchIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    return RebatchIterator<It>(std::move(input), sizes_, options_.drop_remainder, ctx.allocator,
                               ctx.cancellation);
  }

  /// The batch sizes, cycled.
  const std::vector<std::int64_t>& batch_sizes() const noexcept { return *sizes_; }

  /// The batch sizes and drop_remainder.
  void fingerprint(Fingerprint& fp) const {
    fp.add(static_cast<std::uint64_t>(sizes_->size()));
    for (const std::int64_t n : *sizes_) fp.add(n);
    fp.add(options_.drop_remainder);
  }

 private:
  std::shared_ptr<const std::vector<std::int64_t>> sizes_;
  BatchOptions options_;
};

}  // namespace ingest
