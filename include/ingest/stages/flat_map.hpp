// flat_map(f): f maps each input element to a dataset; that dataset's
// elements are produced in order, then the next input element's. tf.data
// counterpart: FlatMapDataset (interleave with cycle_length 1). Runs on the
// iterating thread; the datasets f returns run in this stage's context and
// appear in stats as its inputs. An exception from f surfaces from next() as
// that input element's error (stage "flat_map", its index in the input); an
// error from the input or from an opened dataset surfaces where it occurs.
// Iteration may continue after any of them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/flatten.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/probe.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of FlatMapDataset: the elements of the dataset `f` returns for each input element.
template <class InputIt, class F>
class FlatMapIterator {
  using In = typename InputIt::value_type;
  using Inner = std::decay_t<std::invoke_result_t<F&, In&&>>;

 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "the input element whose dataset is open";
  /// The element type of the datasets `f` returns.
  using value_type = typename Inner::element_type;

  /// `ctx` is the context the datasets f returns are iterated in.
  FlatMapIterator(InputIt input, F f, IteratorContext ctx,
                  std::shared_ptr<detail::ReturnedCounters::Record> returned =
                      std::make_shared<detail::ReturnedCounters::Record>())
      : input_(std::move(input)),
        f_(std::move(f)),
        returned_(std::move(returned), ctx),
        datasets_(std::move(ctx), " (each input)") {}

  /// The next element of the open dataset, opening f(next input element) when it ends;
  /// std::nullopt at the end of the input. Throws the error of f, of the input or of an opened
  /// dataset where it occurs, and goes on after it on the next call.
  std::optional<value_type> next() {
    return datasets_.next([&]() -> std::optional<Inner> {
      std::optional<In> x = detail::next_counted(input_, index_);
      if (!x) return std::nullopt;
      const std::int64_t index = index_++;
      if constexpr (keeps_source) source_ = *x;  // a copy per input element, for checkpoints
      return dataset_of(index, std::move(*x));
    });
  }

  /// Checkpoint: the counters the datasets f returns share
  /// (detail::ReturnedCounters), the input index, the input element whose
  /// dataset is open (through ingest::serializer, to call f on it again at a
  /// restore) and that dataset's state, then the input.
  void save(StateWriter& w) const requires(serializable<In>&& std::is_copy_constructible_v<In>) {
    returned_.save(w, "flat_map");
    w.write(index_, datasets_.open());
    if (datasets_.open()) {
      w.write_element(*source_);
      datasets_.save(w);
    }
    input_.save(w);
  }
  /// Restores what save() wrote (the input element whose dataset is open), on a fresh iterator
  /// of the same dataset.
  void restore(StateReader& r) requires(serializable<In>&& std::is_copy_constructible_v<In>) {
    returned_.restore(r);
    bool open = false;
    r.read(index_, open);
    if (open) {
      source_ = r.read_element<In>("flat_map");
      In x = *source_;
      datasets_.restore(dataset_of(index_ - 1, std::move(x)), r);
    }
    input_.restore(r);
  }

 private:
  // f's dataset for input element `x` (number `index`), its counters noted
  // (and a restore's values set on them).
  Inner dataset_of(std::int64_t index, In x) {
    Inner d = detail::invoke_user("flat_map", index, f_, std::move(x));
    returned_.note(d);
    return d;
  }

  static constexpr bool keeps_source = serializable<In> && std::is_copy_constructible_v<In>;

  InputIt input_;
  F f_;
  detail::ReturnedCounters returned_;  // of the datasets f returns
  detail::Flattener<Inner> datasets_;
  std::int64_t index_ = 0;
  std::optional<In> source_;  // the input element whose dataset is open
};

/// The dataset of `ds.flat_map(f)`: for each element, the elements of the dataset `f` returns.
template <class Input, class F>
class FlatMapDataset
    : public detail::UnaryStage<FlatMapDataset<Input, F>, Input,
                                typename std::decay_t<std::invoke_result_t<
                                    F&, typename Input::element_type&&>>::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "flat_map";

  /// Flat-maps `input` through `f` (copied into each iterator), which returns a dataset.
  FlatMapDataset(Input input, F f)
      : FlatMapDataset::UnaryStage(std::move(input)), f_(std::move(f)) {}
  /// Wraps the input's iterator in a FlatMapIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    return FlatMapIterator<It, F>(std::move(input), f_, ctx, returned_);
  }

 private:
  F f_;
  std::shared_ptr<detail::ReturnedCounters::Record> returned_ =
      std::make_shared<detail::ReturnedCounters::Record>();  // shared by copies and iterators
};

}  // namespace ingest
