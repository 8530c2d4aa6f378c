// The dataset of a loader (ingest::HostLoader, ingest::cuda::DeviceLoader):
// wraps a dataset of host batches and yields the backend's batches, produced
// by runtime/loader_core.hpp's LoadStep on a driver thread through a
// PrefetchIterator. A backend supplies the engine and the batch type.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/context.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/loader_core.hpp"
#include "ingest/runtime/model.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/prefetcher.hpp"
#include "ingest/runtime/probe.hpp"
#include "ingest/runtime/runtime_core.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest::detail {

/// The dataset of a loader: wraps a dataset of host batches; its elements
/// are the backend's batches. Registers as a prefetch-like node whose
/// buffer knob is the depth, so the autotuner tunes it when depth is
/// ingest::autotune.
template <class Derived, class Backend, class Input>
class LoaderDataset : public UnaryStageBase<Derived, Input, typename Backend::batch_type> {
 public:
  using options_type = typename Backend::options_type;
  static constexpr std::string_view stage_name = Backend::stage_name;
  /// Its state holds its input's state at an anchor (runtime/anchors.hpp).
  static constexpr bool anchors_input = true;
  using model_node = LoaderNode;
  /// The depth an autotuned loader starts with (and keeps without an autotuner).
  static constexpr std::int64_t default_depth = 2;

  /// Throws InvalidArgument for a depth below 1 (other than ingest::autotune).
  explicit LoaderDataset(Input input, options_type options = {})
      : LoaderDataset::UnaryStageBase(std::move(input)), options_(std::move(options)) {
    check_knob_option(std::string(Backend::stage_name).c_str(), "depth", options_.depth);
  }

  /// The options (the depth is not part of the fingerprint).
  const options_type& options() const noexcept { return options_; }

  /// Throws what the backend throws when it cannot run here (e.g.
  /// ingest::Unavailable without a CUDA device), before starting anything.
  auto make_iterator(const IteratorContext& ctx) const {
    const bool tuned = options_.depth == autotune;
    std::int64_t depth = tuned ? default_depth : options_.depth;
    const std::atomic<std::int64_t>* knob = nullptr;
    std::int64_t capacity = depth;
    if (ctx.node) {
      configure_knob(ctx.node->buffer, options_.depth, 1, max_tuned_loader_depth, default_depth);
      if (ctx.node->buffer.tunable()) {
        knob = &ctx.node->buffer.value;
        capacity = max_tuned_loader_depth;
      }
    }
    auto shared = std::make_shared<LoaderShared<Backend>>(
        options_, static_cast<std::size_t>(std::max(capacity, depth)) + 2);
    const auto& runtime = runtime_of(ctx);
    typename Backend::Engine engine(shared->resources, options_, *runtime);
    CancellationSource cancel(ctx.cancellation);
    IteratorContext inner = ctx.cancellable_by(cancel);
    Backend::adapt_input_context(inner, options_);
    using Step = LoadStep<Backend, child_iterator_t<Input>>;
    return PrefetchIterator<Step>(
        Step(this->input_iterator(inner), std::move(shared), std::move(engine), depth, knob),
        static_cast<std::size_t>(capacity), runtime, ctx.node, std::move(cancel),
        Backend::stage_name, checkpoint_flag(ctx));
  }

 private:
  options_type options_;
};

}  // namespace ingest::detail
