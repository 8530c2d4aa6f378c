// Options of the stages, gathered in one place so that the dataset base can
// declare every stage's member function. Designated initializers keep call
// sites readable: ds.batch(32, {.drop_remainder = true}).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/core/shape.hpp"

namespace ingest {

/// Options of batch.
struct BatchOptions {
  /// Drop a last batch smaller than the batch size.
  bool drop_remainder = false;
};

/// Options of padded_batch.
struct PaddedBatchOptions {
  /// Per component: the shape to pad to (without the batch dimension), -1 for
  /// "the longest in the batch". Missing entries (or an empty list) pad every
  /// dimension to the longest in the batch.
  std::vector<Shape> padded_shapes{};
  /// Per component: the value padding is filled with (converted to the
  /// component's dtype). Missing entries pad with 0.
  std::vector<double> padding_values{};
  /// Drop a last batch smaller than the batch size.
  bool drop_remainder = false;
};

/// Options of ignore_errors.
struct IgnoreErrorsOptions {
  /// Called with each dropped error (on the iterating thread), e.g. to log it.
  std::function<void(const Error&)> on_error{};
};

}  // namespace ingest
