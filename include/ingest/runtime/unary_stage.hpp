// The shell every one-input stage shares, in the spirit of range-v3's
// view_adaptor: it holds the input dataset, registers it in the pipeline's
// model and wraps its iterator (child_iterator: the probe), and hands that
// iterator to the stage's own
//
//     template <class It>
//     auto make_stage_iterator(It input, const IteratorContext& ctx) const;
//
// so a stage's header holds only its own logic: its iterator, its
// parameters and their checks, its cardinality. A stage that runs its input
// in a context of its own (prefetch, interleave and the loaders: a
// cancellable one; with_options: other options) or chooses per pass whether
// to iterate its input at all (cache) derives from UnaryStageBase instead,
// defines make_iterator and opens the input with input_iterator(its
// context); one that re-creates its input's iterator for each pass (repeat)
// hands input() to its iterator. Every one-input stage derives from one of
// the two, so input() (which the pipeline's fingerprint and description
// walk) exists on all of them.
#pragma once

#include <cstdint>
#include <utility>

#include "ingest/core/context.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/runtime/probe.hpp"

namespace ingest::detail {

/// The input, its iterator and its cardinality, without make_iterator: the
/// base of stages that define make_iterator themselves. (Kept apart from
/// UnaryStage so that no base class has a make_iterator its derived stage
/// hides: clang checks the dataset concept on a base when converting a
/// stage to AnyDataset, which would instantiate a body that cannot compile.)
template <class Derived, class Input, class T>
class UnaryStageBase : public DatasetBase<Derived, T> {
 public:
  explicit UnaryStageBase(Input input) : input_(std::move(input)) {}

  const Input& input() const noexcept { return input_; }

 protected:
  /// The input's iterator in `ctx`, registered in the model and probed.
  auto input_iterator(const IteratorContext& ctx) const { return child_iterator(input_, ctx); }
  /// The input's cardinality() (unknown_cardinality when it has none).
  std::int64_t input_cardinality() const { return cardinality_of(input_); }

 private:
  Input input_;
};

/// The shell of a stage whose iterator wraps its input's: make_iterator
/// hands the input's iterator to Derived::make_stage_iterator.
template <class Derived, class Input, class T>
class UnaryStage : public UnaryStageBase<Derived, Input, T> {
 public:
  using UnaryStageBase<Derived, Input, T>::UnaryStageBase;

  auto make_iterator(const IteratorContext& ctx) const {
    return static_cast<const Derived&>(*this).make_stage_iterator(this->input_iterator(ctx), ctx);
  }
};

}  // namespace ingest::detail
