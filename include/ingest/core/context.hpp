// What an iterator learns from the pipeline that creates it: where batch
// buffers come from and (as the runtime grows) the thread pool, the options
// of with_options() and the autotuner's model. tf.data counterpart:
// IteratorContext. Stages copy what they need: an iterator must not keep a
// reference to the context it was created with.
#pragma once

#include "ingest/core/allocator.hpp"

namespace ingest {

struct IteratorContext {
  /// Where batch buffers (batch, padded_batch) are allocated.
  Allocator* allocator = &default_allocator();
};

}  // namespace ingest
