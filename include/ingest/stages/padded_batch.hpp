// padded_batch(n, {padded_shapes, padding_values, drop_remainder}): like
// batch, but elements may differ in shape; each component is padded to the
// longest in the batch (or to its padded shape) with its padding value (0 by
// default). tf.data counterpart: PaddedBatchDataset. Works on Tensors,
// std::vector of arithmetic values, arithmetic scalars, and tuples / pairs of
// these (see core/padding.hpp). Errors behave as in batch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/padding.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of PaddedBatchDataset: batches of elements padded to a common shape.
template <class InputIt>
class PaddedBatchIterator {
  using element_type = typename InputIt::value_type;
  using traits = padded_batch_traits<element_type>;

 public:
  /// The padded batch type (padded_batch_traits of the input's element type).
  using value_type = typename traits::batch_type;

  /// Owns the input iterator; batches come from `allocator`; `cancel` is checked while gathering.
  PaddedBatchIterator(InputIt input, std::size_t batch_size, PaddedBatchOptions options,
                      Allocator* allocator, CancellationToken cancel = {})
      : input_(std::move(input)),
        batch_size_(batch_size),
        options_(std::move(options)),
        allocator_(allocator),
        cancel_(std::move(cancel)) {
    // Grows with what arrives beyond this: not sized by the batch size alone.
    elements_.reserve(std::min<std::size_t>(batch_size, 64));
  }

  /// The next padded batch, or std::nullopt at the end (or before a short last batch with
  /// drop_remainder); a batch holding a failed element throws that element's error.
  std::optional<value_type> next() {
    if (done_) return std::nullopt;
    elements_.clear();
    const std::int64_t first = consumed_;  // the batch's first input element
    std::size_t count = 0;
    std::exception_ptr error;
    while (count < batch_size_) {
      detail::throw_if_cancelled(cancel_);  // between elements, once the consumer is gone
      try {
        std::optional<element_type> x = input_.next();
        if (!x) {
          done_ = true;
          break;
        }
        elements_.push_back(std::move(*x));
      } catch (const detail::Cancelled&) {
        throw;
      } catch (...) {
        if (!error) error = std::current_exception();
      }
      ++count;
      ++consumed_;
    }
    if (error) std::rethrow_exception(error);
    if (count == 0 || (count < batch_size_ && options_.drop_remainder)) return std::nullopt;
    try {
      return traits::build(
          elements_.size(), [this](std::size_t i) -> element_type& { return elements_[i]; },
          options_, 0, *allocator_);
    } catch (...) {
      // The batch's first input element; the message names the element
      // within the batch ("element 3 of the batch").
      detail::rethrow_with_context({.stage = "padded_batch", .element = first},
                                   detail::Raiser::internal);
    }
  }

  /// Checkpoint: the input count and whether the input ended, then the
  /// input. Between calls a padded batch holds no partial batch (elements_
  /// only lives within one next()), so nothing else is stored.
  void save(StateWriter& w) const {
    w.write(consumed_, done_);
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(consumed_, done_);
    input_.restore(r);
  }

 private:
  InputIt input_;
  std::size_t batch_size_;
  PaddedBatchOptions options_;
  Allocator* allocator_;
  CancellationToken cancel_;
  std::vector<element_type> elements_;  // reused across batches
  std::int64_t consumed_ = 0;           // input elements taken, failed ones included
  bool done_ = false;
};

/// The dataset of `ds.padded_batch(n, options)`: batches whose components are padded to a
/// common shape.
template <class Input>
class PaddedBatchDataset
    : public detail::UnaryStage<
          PaddedBatchDataset<Input>, Input,
          typename padded_batch_traits<typename Input::element_type>::batch_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "padded_batch";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;
  /// It stacks elements: tracing records every call from this stage on.
  static constexpr bool batches = true;

  /// Batches `input` `batch_size` elements at a time, padded as `options` says; throws
  /// InvalidArgument if `batch_size` <= 0 or the padded shapes or values do not fit the element.
  PaddedBatchDataset(Input input, std::int64_t batch_size, PaddedBatchOptions options)
      : PaddedBatchDataset::UnaryStage(std::move(input)),
        batch_size_(batch_size),
        options_(std::move(options)) {
    if (batch_size <= 0) {
      throw InvalidArgument(
          "padded_batch: batch_size must be > 0; got " + std::to_string(batch_size),
          {.stage = "padded_batch"});
    }
    detail::check_padded_batch_options(
        batch_size, options_, padded_batch_traits<typename Input::element_type>::components);
  }
  /// Wraps the input's iterator in a PaddedBatchIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    if (ctx.node) ctx.node->nominal_ratio = static_cast<double>(batch_size_);
    return PaddedBatchIterator<It>(std::move(input), static_cast<std::size_t>(batch_size_),
                                   options_, ctx.allocator, ctx.cancellation);
  }

  /// Adds the batch size and drop_remainder to the pipeline's fingerprint.
  void fingerprint(Fingerprint& fp) const { fp.add(batch_size_).add(options_.drop_remainder); }

  /// The number of batches: the input's cardinality divided by the batch size, rounded up
  /// (down with drop_remainder); infinite or unknown as the input's.
  std::int64_t cardinality() const {
    return detail::batched_cardinality(this->input_cardinality(), batch_size_,
                                       options_.drop_remainder);
  }

 private:
  std::int64_t batch_size_;
  PaddedBatchOptions options_;
};

}  // namespace ingest
