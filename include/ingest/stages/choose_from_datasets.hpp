// choose_from_datasets(datasets, choice_dataset, {.stop_on_empty_dataset}):
// element k is the next element of datasets[c_k], c_k the k-th element of
// choice_dataset (integers). tf.data counterpart:
// Dataset.choose_from_datasets (DirectedInterleaveDataset). The inputs: a
// std::vector of datasets of one type (e.g. AnyDataset<T>), or a std::tuple
// of datasets of different types with the same element type. The pass ends
// with the choice dataset; when the chosen input is exhausted, it ends too
// (stop_on_empty_dataset, tf's default) or the choice is skipped (false), and
// it ends once every input is exhausted. A choice out of [0, number of
// datasets) is an InvalidArgument at that position, naming the index and the
// number of datasets. Runs on the consumer's thread; a long run of skipped
// choices checks the consumer's cancellation between them. Errors from the
// choice dataset and the inputs surface from next() at their position, and
// the pass goes on.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/options.hpp"
#include "ingest/runtime/directed_interleave.hpp"
#include "ingest/runtime/pipeline.hpp"

namespace ingest {

namespace detail {
/// choose_from_datasets' selector: the choice dataset's elements.
template <class ChoiceIt>
class ChoiceSelector {
 public:
  explicit ChoiceSelector(ChoiceIt choices) : choices_(std::move(choices)) {}

  std::optional<std::int64_t> next() {
    auto c = choices_.next();
    if (!c) return std::nullopt;
    if constexpr (std::is_unsigned_v<std::decay_t<decltype(*c)>>) {
      // An index past int64's range is out of range all the same.
      constexpr auto max = std::numeric_limits<std::int64_t>::max();
      if (*c > static_cast<std::uint64_t>(max)) return max;
    }
    return static_cast<std::int64_t>(*c);
  }
  void exhausted(std::size_t) noexcept {}

  /// Checkpoint: the choices' state.
  void save(StateWriter& w) const { choices_.save(w); }
  void restore(StateReader& r) { choices_.restore(r); }

 private:
  ChoiceIt choices_;
};
}  // namespace detail

/// The dataset of `choose_from_datasets(datasets, choices, options)`: element k is the next
/// element of `datasets[c_k]`, c_k the k-th element of `choices`.
template <class Inputs, class Choice>
class ChooseFromDatasetsDataset
    : public DatasetBase<ChooseFromDatasetsDataset<Inputs, Choice>,
                         typename detail::dataset_list<Inputs>::element_type> {
  using list = detail::dataset_list<Inputs>;
  using ChoiceIt = detail::child_iterator_t<Choice>;

 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "choose_from_datasets";

  /// Chooses among `inputs` by `choices` (a dataset of integers); throws InvalidArgument if
  /// `inputs` is empty.
  ChooseFromDatasetsDataset(Inputs inputs, Choice choices, ChooseFromDatasetsOptions options)
      : inputs_(std::move(inputs)), choices_(std::move(choices)), options_(options) {
    if (list::size(inputs_) == 0) {
      throw InvalidArgument("choose_from_datasets: datasets is empty; give at least one dataset",
                            {.stage = "choose_from_datasets"});
    }
  }

  /// An iterator that opens every input and the choices in `ctx`.
  auto make_iterator(const IteratorContext& ctx) const {
    return detail::DirectedInterleaveIterator<Inputs, detail::ChoiceSelector<ChoiceIt>>(
        detail::DirectedInputs<Inputs>(inputs_, ctx, [](std::size_t) { return true; }),
        detail::ChoiceSelector<ChoiceIt>(detail::child_iterator(choices_, ctx, " (choices)")),
        list::size(inputs_), options_.stop_on_empty_dataset, "choose_from_datasets",
        ctx.cancellation);
  }

  /// The inputs and the choices.
  void fingerprint(Fingerprint& fp) const {
    list::fingerprint(inputs_, fp);
    detail::fingerprint_of(choices_, fp);
    fp.add(options_.stop_on_empty_dataset);
  }

  /// The choice dataset's when every input is infinite (each choice gives an
  /// element or an error), else unknown (0 for no choices). tf.data's kernel
  /// says infinite whenever any input is, whatever the choices, else unknown.
  std::int64_t cardinality() const {
    const std::int64_t c = detail::cardinality_of(choices_);
    if (c == 0) return 0;
    for (const std::int64_t n : list::cardinalities(inputs_)) {
      if (n != infinite_cardinality) return unknown_cardinality;
    }
    return c;
  }

 private:
  Inputs inputs_;
  Choice choices_;
  ChooseFromDatasetsOptions options_;
};

namespace detail {
template <class Choice>
constexpr void check_choice_dataset() {
  static_assert(std::integral<typename Choice::element_type> &&
                    !std::same_as<typename Choice::element_type, bool>,
                "choose_from_datasets: the choice dataset's elements must be integers (indices "
                "into the datasets), e.g. ingest::range(...) or from_vector<std::int64_t>");
}
}  // namespace detail

/// Element k from datasets[choice k] (tf: Dataset.choose_from_datasets).
/// Throws InvalidArgument for no datasets. See stages/choose_from_datasets.hpp.
template <dataset D, dataset Choice>
ChooseFromDatasetsDataset<std::vector<D>, Choice> choose_from_datasets(
    std::vector<D> datasets, Choice choice_dataset, ChooseFromDatasetsOptions options = {}) {
  detail::check_choice_dataset<Choice>();
  return ChooseFromDatasetsDataset<std::vector<D>, Choice>(std::move(datasets),
                                                           std::move(choice_dataset), options);
}

/// The same over datasets of different types with one element type:
/// `choose_from_datasets(std::tuple{a, b}, choices)`.
template <dataset... Ds, dataset Choice>
ChooseFromDatasetsDataset<std::tuple<Ds...>, Choice> choose_from_datasets(
    std::tuple<Ds...> datasets, Choice choice_dataset, ChooseFromDatasetsOptions options = {}) {
  static_assert(sizeof...(Ds) >= 1, "choose_from_datasets: give at least one dataset");
  detail::check_choice_dataset<Choice>();
  return ChooseFromDatasetsDataset<std::tuple<Ds...>, Choice>(std::move(datasets),
                                                              std::move(choice_dataset), options);
}

}  // namespace ingest
