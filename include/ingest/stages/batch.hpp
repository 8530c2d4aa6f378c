// batch(n): stacks n consecutive elements into one with batch_traits<T>
// (Tensors and scalars into a Tensor with a leading dimension n, tuples field
// by field, anything else into std::vector<T>). tf.data counterpart:
// BatchDataset. The last, smaller batch is kept unless drop_remainder. A batch
// containing a failed element fails as a whole: its remaining elements are
// still consumed, then the first error is thrown, so the next batch starts at
// the same position as without the error. Buffers come from the context's
// allocator (pooled host memory by default).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/batch_traits.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/chunking.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of BatchDataset: stacks consecutive input elements into batches with batch_traits.
template <class InputIt>
class BatchIterator {
  using element_type = typename InputIt::value_type;
  using traits = batch_traits<element_type>;
  using builder = typename traits::builder;
  // Scalars from a bulk source are written straight into the batch buffer.
  static constexpr bool bulk =
      detail::bulk_builder<builder, element_type> && bulk_iterator<InputIt>;

 public:
  /// The batch type: `batch_t<T>` of the input's element type `T`.
  using value_type = typename traits::batch_type;

  /// `capacity`: the most elements a batch can hold here (the batch size, or
  /// less when the input's cardinality is known to be smaller): the batch
  /// buffer of a bulk fill is allocated at this size.
  BatchIterator(InputIt input, std::size_t batch_size, std::size_t capacity, bool drop_remainder,
                Allocator* allocator, CancellationToken cancel = {})
      : input_(std::move(input)),
        batch_size_(batch_size),
        capacity_(std::min(capacity, batch_size)),
        drop_remainder_(drop_remainder),
        allocator_(allocator),
        cancel_(std::move(cancel)) {}

  /// The next batch, or std::nullopt at the end (or before a short last batch with
  /// drop_remainder); a batch holding a failed element throws that element's error.
  std::optional<value_type> next() {
    if (done_) return std::nullopt;
    if constexpr (bulk) {
      builder b = make_builder();
      const std::span<element_type> slots = b.slots();
      std::size_t count = 0;
      std::exception_ptr error;
      // Filled in pieces paced by their measured cost, with a
      // cancellation check between them.
      while (count < capacity_) {
        detail::throw_if_cancelled(cancel_);
        const std::size_t want = std::min(pacer_.piece(), capacity_ - count);
        const std::int64_t start = pacer_.start();
        const std::size_t got = input_.fill(slots.subspan(count, want));
        pacer_.done(start, got);
        count += got;
        consumed_ += static_cast<std::int64_t>(got);
        if (count == capacity_) break;
        if (got < want && !pull_one(&b, count, error)) break;  // fewer: an end or an error
      }
      if (error) std::rethrow_exception(error);
      if (!keep(count)) return std::nullopt;
      return std::move(b).finish(count);
    } else {
      // Elements are gathered first (the buffer grows with what arrives and
      // is reused), so a batch size far above the input's length allocates
      // nothing, then stacked into a batch of exactly their number.
      pending_.clear();
      const std::int64_t first = consumed_;
      std::size_t count = 0;
      std::exception_ptr error;
      while (count < batch_size_ && pull_one(nullptr, count, error)) {
      }
      if (error) {
        pending_.clear();
        std::rethrow_exception(error);
      }
      if (!keep(count)) return std::nullopt;
      builder b(BatchSpec{count, allocator_});
      for (std::size_t i = 0; i < count; ++i) {
        try {
          b.set(i, std::move(pending_[i]));
        } catch (...) {
          pending_.clear();
          detail::rethrow_with_context(
              {.stage = "batch", .element = first + static_cast<std::int64_t>(i)},
              detail::Raiser::internal);
        }
      }
      pending_.clear();
      return std::move(b).finish(count);
    }
  }

  /// Checkpoint: the input count and whether the input ended, then the input.
  /// Between calls of next() a batch holds no partial batch (pending_ is
  /// emptied before next() returns), so nothing else is stored.
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
  // The bulk path's buffer, sized by capacity_: an impossible size is
  // InvalidArgument from the stage, not std::bad_alloc.
  builder make_builder() const {
    try {
      return builder(BatchSpec{capacity_, allocator_});
    } catch (...) {
      detail::rethrow_with_context({.stage = "batch"}, detail::Raiser::internal);
    }
  }
  // The first element of a gathered batch shows the element size: a full
  // batch that could never be allocated stops gathering with InvalidArgument.
  std::exception_ptr refuse_batch_size(const element_type& first) const {
    try {
      detail::check_batch_bytes(capacity_, detail::element_bytes(first));
      return nullptr;
    } catch (...) {
      return detail::capture_with_context({.stage = "batch"}, detail::Raiser::internal);
    }
  }

  bool keep(std::size_t count) const noexcept {
    return count != 0 && !(count < batch_size_ && drop_remainder_);
  }

  // Pulls one element into slot `count` of `b` (bulk) or onto pending_;
  // false at the end of the input. A failed element takes its slot.
  // Unwinds (detail::Cancelled) between elements once the consumer is gone.
  bool pull_one(builder* b, std::size_t& count, std::exception_ptr& error) {
    detail::throw_if_cancelled(cancel_);
    ++consumed_;
    try {
      std::optional<element_type> x = input_.next();
      if (!x) {
        --consumed_;
        done_ = true;
        return false;
      }
      if (b) {
        b->set(count, std::move(*x));
      } else if (!error) {
        if (pending_.empty() && (error = refuse_batch_size(*x))) return false;
        pending_.push_back(std::move(*x));
      }
    } catch (const detail::Cancelled&) {
      throw;
    } catch (...) {
      if (!error) error = std::current_exception();
    }
    ++count;
    return true;
  }

  InputIt input_;
  std::size_t batch_size_;
  std::size_t capacity_;
  bool drop_remainder_;
  Allocator* allocator_;
  CancellationToken cancel_;
  detail::CheckPacer pacer_;  // bulk fills
  bool done_ = false;
  std::int64_t consumed_ = 0;          // input elements read so far
  std::vector<element_type> pending_;  // the batch being gathered (non-bulk)
};

/// The dataset of `ds.batch(n, options)`: consecutive elements stacked `n` at a time.
template <class Input>
class BatchDataset
    : public detail::UnaryStage<BatchDataset<Input>, Input, batch_t<typename Input::element_type>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "batch";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;
  /// It stacks elements: tracing records every call from this stage on.
  static constexpr bool batches = true;

  /// Batches `input` `batch_size` elements at a time; throws InvalidArgument if `batch_size` <= 0.
  BatchDataset(Input input, std::int64_t batch_size, BatchOptions options)
      : BatchDataset::UnaryStage(std::move(input)), batch_size_(batch_size), options_(options) {
    if (batch_size <= 0) {
      throw InvalidArgument("batch: batch_size must be > 0; got " + std::to_string(batch_size),
                            {.stage = "batch"});
    }
  }
  /// Wraps the input's iterator in a BatchIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    if (ctx.node) ctx.node->nominal_ratio = static_cast<double>(batch_size_);
    const std::int64_t capacity = detail::batch_capacity(batch_size_, this->input_cardinality());
    return BatchIterator<It>(std::move(input), static_cast<std::size_t>(batch_size_),
                             static_cast<std::size_t>(capacity), options_.drop_remainder,
                             ctx.allocator, ctx.cancellation);
  }

  /// The number of elements per batch (the last may hold fewer).
  std::int64_t batch_size() const noexcept { return batch_size_; }
  /// The options it was made with.
  const BatchOptions& options() const noexcept { return options_; }

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
  BatchOptions options_;
};

}  // namespace ingest
