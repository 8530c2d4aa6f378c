// enumerate(start): each element paired with its index,
// std::pair<std::int64_t, T>. tf.data counterpart: Dataset.enumerate. A
// failed input element uses up its index, so indices keep matching input
// positions after an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of EnumerateDataset: pairs each input element with its index.
template <class InputIt>
class EnumerateIterator {
  using input_type = typename InputIt::value_type;

 public:
  /// `(index, element)`, the index counting from `start`.
  using value_type = std::pair<std::int64_t, input_type>;

  /// Owns the input iterator; the first element's index is `start`.
  EnumerateIterator(InputIt input, std::int64_t start) : input_(std::move(input)), index_(start) {}

  /// The next `(index, element)`, or std::nullopt at the end; a failed element throws and uses up
  /// its index.
  std::optional<value_type> next() {
    const std::int64_t i = index_++;
    std::optional<input_type> x = input_.next();
    if (!x) {
      --index_;
      return std::nullopt;
    }
    return value_type(i, std::move(*x));
  }

  /// Checkpoint: the next index, then the input.
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
  std::int64_t index_;
};

/// The dataset of `ds.enumerate(start)`: each element paired with its index, counting from `start`.
template <class Input>
class EnumerateDataset
    : public detail::UnaryStage<EnumerateDataset<Input>, Input,
                                std::pair<std::int64_t, typename Input::element_type>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "enumerate";

  /// Numbers the elements of `input` from `start`.
  EnumerateDataset(Input input, std::int64_t start)
      : EnumerateDataset::UnaryStage(std::move(input)), start_(start) {}
  /// Wraps the input's iterator in an EnumerateIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return EnumerateIterator<It>(std::move(input), start_);
  }

  /// Adds `start` to the pipeline's fingerprint.
  void fingerprint(Fingerprint& fp) const { fp.add(start_); }

  /// The input's cardinality.
  std::int64_t cardinality() const { return this->input_cardinality(); }

 private:
  std::int64_t start_;
};

}  // namespace ingest
