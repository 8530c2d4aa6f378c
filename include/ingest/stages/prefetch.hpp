// prefetch(n): a producer on its own driver thread runs up to n elements
// ahead of the consumer, so the pipeline before it overlaps with whatever the
// consumer does between calls (the training step). tf.data counterpart:
// PrefetchDataset. The producer starts on the first next(). Errors arrive at
// their position. Destroying the iterator stops the producer after the
// element it is producing and waits for it: it stops its cancellation source
// first, whose token the stages before it check between elements (a batch
// being filled stops after the element in hand). prefetch(0) buffers nothing: the
// consumer pulls its input directly, on its own thread (tf.data accepts 0).
// Checkpoints store the input's state at the consumer's position (see
// runtime/anchors.hpp); the buffered elements are recomputed after a restore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/prefetcher.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// The largest buffer the autotuner may give a prefetch (further limited by
/// the pipeline's RAM budget).
inline constexpr std::int64_t max_tuned_buffer = 64;

/// The dataset of `ds.prefetch(n)`: a producer thread runs up to `n` elements ahead of the
/// consumer (ingest::autotune: a tuned buffer; 0: no buffer).
template <class Input>
class PrefetchDataset
    : public detail::UnaryStageBase<PrefetchDataset<Input>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "prefetch";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;
  /// Its state holds its input's state at an anchor (runtime/anchors.hpp).
  static constexpr bool anchors_input = true;
  /// Its model in the autotuner (a PrefetchNode): a producer thread with a tunable buffer.
  using model_node = detail::PrefetchNode;

  /// Prefetches up to `buffer_size` elements of `input`; throws InvalidArgument if it is
  /// negative and not ingest::autotune.
  PrefetchDataset(Input input, std::int64_t buffer_size)
      : PrefetchDataset::UnaryStageBase(std::move(input)), buffer_size_(buffer_size) {
    if (buffer_size != autotune && buffer_size < 0) {
      throw InvalidArgument("prefetch: buffer_size must be >= 0 or ingest::autotune; got " +
                                std::to_string(buffer_size),
                            {.stage = "prefetch"});
    }
  }

  /// A PrefetchIterator on the context's runtime; its producer starts on the first next().
  auto make_iterator(const IteratorContext& ctx) const {
    const auto& runtime = runtime_of(ctx);
    const std::size_t size =
        buffer_size_ == autotune ? 2 * runtime->threads() : static_cast<std::size_t>(buffer_size_);
    std::size_t capacity = size;
    if (ctx.node) {
      // A tuned buffer starts at two elements (with one, the producer stops
      // at every hand-off until the consumer takes it, and the stages it
      // drives stop launching work: W6 chained maps 0.90 -> 0.97 x the best
      // grid point) and grows only as the autotuner finds it pays within
      // the RAM budget.
      detail::configure_knob(ctx.node->buffer, buffer_size_, 2, max_tuned_buffer, 2);
      if (ctx.node->buffer.tunable()) capacity = static_cast<std::size_t>(max_tuned_buffer);
    }
    CancellationSource cancel(ctx.cancellation);
    const IteratorContext inner = ctx.cancellable_by(cancel);
    return PrefetchIterator<detail::child_iterator_t<Input>>(
        this->input_iterator(inner), capacity, runtime, ctx.node, std::move(cancel), "prefetch",
        detail::checkpoint_flag(ctx));
  }

  /// The input's (the buffer size is not part of the fingerprint: a state
  /// restores into any buffer size).
  std::int64_t cardinality() const { return this->input_cardinality(); }

 private:
  std::int64_t buffer_size_;
};

}  // namespace ingest
