// take_while(pred): the elements up to, not including, the first for which
// pred(const T&) is false. tf.data counterpart: TakeWhileDataset. Runs on the
// iterating thread and never reads past the first rejected element. An
// exception from pred surfaces from next() as that element's error (stage
// "take_while", its index in the input) and, as in tf.data, does not end the
// pass: the next call tests the next element.
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

/// Iterator of TakeWhileDataset: the input's elements up to the first the predicate rejects.
template <class InputIt, class Pred>
class TakeWhileIterator {
 public:
  /// The element type (the input's).
  using value_type = typename InputIt::value_type;

  /// Owns the input iterator and the predicate.
  TakeWhileIterator(InputIt input, Pred pred) : input_(std::move(input)), pred_(std::move(pred)) {}

  /// The next element if it passes, else std::nullopt (and so on from then); throws an element's
  /// error (the predicate's exception, or the input's) and tests the next element on the next call.
  std::optional<value_type> next() {
    if (done_) return std::nullopt;
    std::optional<value_type> x = detail::next_counted(input_, index_);
    if (x) {
      const value_type& v = *x;
      if (detail::invoke_user("take_while", index_++, pred_, v)) return x;
    }
    done_ = true;
    return std::nullopt;
  }

  /// Checkpoint: the input index and whether the predicate ended the pass,
  /// then the input.
  void save(StateWriter& w) const {
    w.write(index_, done_);
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(index_, done_);
    input_.restore(r);
  }

 private:
  InputIt input_;
  Pred pred_;
  std::int64_t index_ = 0;
  bool done_ = false;
};

/// The dataset of `ds.take_while(pred)`: the elements before the first for which `pred` is false.
template <class Input, class Pred>
class TakeWhileDataset : public detail::UnaryStage<TakeWhileDataset<Input, Pred>, Input,
                                                   typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "take_while";

  /// Takes elements of `input` while `pred` (copied into each iterator) holds.
  TakeWhileDataset(Input input, Pred pred)
      : TakeWhileDataset::UnaryStage(std::move(input)), pred_(std::move(pred)) {}
  /// Wraps the input's iterator in a TakeWhileIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return TakeWhileIterator<It, Pred>(std::move(input), pred_);
  }

 private:
  Pred pred_;
};

}  // namespace ingest
