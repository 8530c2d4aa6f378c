// scan(initial_state, f): f(state, element) returns std::pair{new_state,
// output}; the outputs, in order, with the state carried from one element to
// the next. tf.data counterpart: ScanDataset. Runs on the iterating thread;
// each iterator starts from its own copy of the initial state. f gets the
// state as `const S&` (take it by const reference to avoid a copy). An
// exception from f surfaces from next() as that element's error (stage
// "scan", its index in the input) and leaves the state as it was, as does an
// error from the input; iteration may continue after either.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

namespace detail {
template <class S, class F, class T>
using scan_result_t = std::decay_t<std::invoke_result_t<F&, const S&, T&&>>;
}  // namespace detail

/// Iterator of ScanDataset: the outputs of `f(state, element)`, carrying the state along.
template <class InputIt, class S, class F>
class ScanIterator {
  using In = typename InputIt::value_type;
  using Result = detail::scan_result_t<S, F, In>;

 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "the scan state";
  /// The output type: the second member of what `f` returns.
  using value_type = std::decay_t<typename Result::second_type>;

  /// Owns the input iterator, its own copy of the initial state, and `f`.
  ScanIterator(InputIt input, S state, F f)
      : input_(std::move(input)), state_(std::move(state)), f_(std::move(f)) {}

  /// The output for the next input element, or std::nullopt at the end; throws an element's
  /// error (f's exception, or the input's), leaving the state as it was, and goes on after it.
  std::optional<value_type> next() {
    std::optional<In> x = detail::next_counted(input_, index_);
    if (!x) return std::nullopt;
    Result r = detail::invoke_user("scan", index_++, f_, std::as_const(state_), std::move(*x));
    state_ = static_cast<S>(std::move(r.first));
    return std::optional<value_type>(std::move(r.second));
  }

  /// Checkpoint: the input index and the scan state through
  /// ingest::serializer<S> (user state: without a serializer, save() raises
  /// Unimplemented naming scan), then the input.
  void save(StateWriter& w) const requires serializable<S> {
    w.write(index_);
    w.write_element(state_);
    input_.save(w);
  }
  /// Restores what save() wrote (the state), on a fresh iterator of the same dataset.
  void restore(StateReader& r) requires serializable<S> {
    r.read(index_);
    state_ = r.read_element<S>("scan");
    input_.restore(r);
  }

 private:
  InputIt input_;
  S state_;
  F f_;
  std::int64_t index_ = 0;
};

/// The dataset of `ds.scan(initial_state, f)`: f(state, element) returns {new_state, output};
/// the outputs, in order.
template <class Input, class S, class F>
class ScanDataset
    : public detail::UnaryStage<ScanDataset<Input, S, F>, Input,
                                std::decay_t<typename detail::scan_result_t<
                                    S, F, typename Input::element_type>::second_type>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "scan";

  /// Scans `input` with `f` from `initial_state` (copied into each iterator).
  ScanDataset(Input input, S initial_state, F f)
      : ScanDataset::UnaryStage(std::move(input)),
        initial_state_(std::move(initial_state)),
        f_(std::move(f)) {}
  /// Wraps the input's iterator in a ScanIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return ScanIterator<It, S, F>(std::move(input), initial_state_, f_);
  }

  /// One output per input element.
  std::int64_t cardinality() const { return this->input_cardinality(); }

 private:
  S initial_state_;
  F f_;
};

}  // namespace ingest
