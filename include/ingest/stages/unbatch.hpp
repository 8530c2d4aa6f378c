// unbatch(): splits each batch back into its elements with unbatch_traits
// (a Tensor into views of its rows, a std::vector into its elements, tuples
// field by field). tf.data counterpart: UnbatchDataset. Tensor rows are views
// sharing the batch's storage, not copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/batch_traits.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of UnbatchDataset: the rows of each input batch, one at a time.
template <class InputIt>
class UnbatchIterator {
  using batch_type = typename InputIt::value_type;
  using traits = unbatch_traits<batch_type>;

 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "the batch it is splitting";
  /// The row type (unbatch_traits of the batch type).
  using value_type = typename traits::element_type;

  /// Owns the input iterator.
  explicit UnbatchIterator(InputIt input) : input_(std::move(input)) {}

  /// The next row, reading the next batch when one is used up; std::nullopt at the end. A failed
  /// input batch throws its error and the next call goes on with the following batch.
  std::optional<value_type> next() {
    while (!current_ || pos_ == size_) {
      current_.reset();
      current_ = input_.next();
      if (!current_) return std::nullopt;
      pos_ = 0;
      try {
        size_ = traits::size(*current_);
      } catch (...) {
        current_.reset();
        detail::rethrow_with_context({.stage = "unbatch"}, detail::Raiser::internal);
      }
    }
    return traits::get(*current_, pos_++);
  }

  /// Checkpoint: the batch being split (through ingest::serializer: at most
  /// one input batch, which the input cannot give again without its state
  /// from before it) and the position in it, then the input.
  void save(StateWriter& w) const requires serializable<batch_type> {
    const bool splitting = current_ && pos_ < size_;
    w.write(splitting);
    if (splitting) {
      w.write_element(*current_);
      w.write(pos_);
    }
    input_.save(w);
  }
  /// Restores what save() wrote (with the batch being split), on a fresh iterator of the same
  /// dataset.
  void restore(StateReader& r) requires serializable<batch_type> {
    bool splitting = false;
    r.read(splitting);
    current_.reset();
    pos_ = size_ = 0;
    if (splitting) {
      const std::uint64_t at = r.offset();
      current_ = r.read_element<batch_type>("unbatch");
      r.read(pos_);
      size_ = traits::size(*current_);
      if (pos_ >= size_) {
        throw DataLossError("checkpoint: unbatch position " + std::to_string(pos_) +
                                " is past its batch of " + std::to_string(size_),
                            {.stage = "unbatch", .offset = at});
      }
    }
    input_.restore(r);
  }

 private:
  InputIt input_;
  std::optional<batch_type> current_;
  std::size_t pos_ = 0, size_ = 0;
};

/// The dataset of `ds.unbatch()`: each batch split back into its rows (Tensor rows are views).
template <class Input>
class UnbatchDataset : public detail::UnaryStage<
                           UnbatchDataset<Input>, Input,
                           typename unbatch_traits<typename Input::element_type>::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "unbatch";

  /// Splits the batches of `input`.
  explicit UnbatchDataset(Input input) : UnbatchDataset::UnaryStage(std::move(input)) {}
  /// Wraps the input's iterator in an UnbatchIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return UnbatchIterator<It>(std::move(input));
  }
};

}  // namespace ingest
