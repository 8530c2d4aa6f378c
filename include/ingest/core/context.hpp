// What an iterator learns from the pipeline that creates it: the runtime
// (thread pool) its async stages use, whether order must be deterministic,
// and where batch buffers come from. tf.data counterpart: IteratorContext.
// with_options() overrides these for the stages before it. Stages copy what
// they need: an iterator must not keep a reference to the context.
#pragma once

#include <memory>

#include "ingest/core/allocator.hpp"
#include "ingest/runtime/runtime.hpp"

namespace ingest {

struct IteratorContext {
  /// The runtime of async stages; null means default_runtime().
  std::shared_ptr<Runtime> runtime{};
  /// Whether async stages must keep the input's order (tf: options.deterministic).
  bool deterministic = true;
  /// Where batch buffers (batch, padded_batch, map-and-batch) are allocated.
  Allocator* allocator = &default_allocator();

  /// The runtime to use: this context's, or the process-wide default.
  const std::shared_ptr<Runtime>& runtime_or_default() const {
    return runtime ? runtime : default_runtime();
  }
};

}  // namespace ingest
