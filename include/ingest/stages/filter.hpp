// filter(pred): the elements for which pred(const T&) is true, in order.
// tf.data counterpart: FilterDataset. Runs on the iterating thread. An
// exception from pred surfaces from next() as that element's error (stage
// "filter", the element's index in the filter's input).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of FilterDataset: yields the input's elements for which the predicate is true.
template <class InputIt, class Pred>
class FilterIterator {
 public:
  /// The element type (the input's).
  using value_type = typename InputIt::value_type;

  /// Owns the input iterator and the predicate; `cancel` is checked between rejected elements.
  FilterIterator(InputIt input, Pred pred, CancellationToken cancel = {})
      : input_(std::move(input)), pred_(std::move(pred)), cancel_(std::move(cancel)) {}

  /// The next element that passes, or std::nullopt at the end; throws an element's error
  /// (the predicate's exception, or the input's) and continues after it on the next call.
  std::optional<value_type> next() {
    while (std::optional<value_type> x = detail::next_counted(input_, index_)) {
      const value_type& v = *x;
      if (detail::invoke_user("filter", index_++, pred_, v)) return x;
      detail::throw_if_cancelled(cancel_);  // a long run of rejected elements
    }
    return std::nullopt;
  }

  /// Checkpoint: the input index, then the input.
  void save(StateWriter& w) const {
    w.write(index_);
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(index_);
    input_.restore(r);
  }

 private:
  InputIt input_;
  Pred pred_;
  CancellationToken cancel_;
  std::int64_t index_ = 0;
};

/// The dataset of `ds.filter(pred)`: the elements for which `pred(const T&)` is true, in order.
template <class Input, class Pred>
class FilterDataset
    : public detail::UnaryStage<FilterDataset<Input, Pred>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "filter";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;

  /// Filters `input` by `pred` (copied into each iterator).
  FilterDataset(Input input, Pred pred)
      : FilterDataset::UnaryStage(std::move(input)), pred_(std::move(pred)) {}
  /// Wraps the input's iterator in a FilterIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    return FilterIterator<It, Pred>(std::move(input), pred_, ctx.cancellation);
  }

 private:
  Pred pred_;
};

}  // namespace ingest
