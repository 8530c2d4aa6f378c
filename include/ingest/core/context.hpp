// What an iterator learns from the pipeline that creates it: the runtime
// (thread pool) its async stages use, whether order must be deterministic,
// and where batch buffers come from. tf.data counterpart: IteratorContext.
// with_options() overrides these for the stages before it. Stages copy what
// they need: an iterator must not keep a reference to the context.
#pragma once

#include <memory>
#include <utility>

#include "ingest/core/allocator.hpp"
#include "ingest/runtime/model.hpp"
#include "ingest/runtime/runtime.hpp"

namespace ingest {

struct IteratorContext {
  /// The runtime of async stages; null means default_runtime().
  std::shared_ptr<Runtime> runtime{};
  /// Whether async stages must keep the input's order (tf: options.deterministic).
  bool deterministic = true;
  /// Where batch buffers (batch, padded_batch, map-and-batch) are allocated.
  Allocator* allocator = &default_allocator();
  /// The pipeline's model (measurements, knobs), or null when not measured.
  std::shared_ptr<detail::Model> model{};
  /// The model node of the stage whose make_iterator receives this context.
  detail::StageNode* node = nullptr;

  /// The runtime to use: this context's, or the process-wide default.
  const std::shared_ptr<Runtime>& runtime_or_default() const {
    return runtime ? runtime : default_runtime();
  }
};

/// The iterator type of dataset D.
template <class D>
using iterator_t =
    decltype(std::declval<const D&>().make_iterator(std::declval<const IteratorContext&>()));

}  // namespace ingest
