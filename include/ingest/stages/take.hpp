// take(count): the first `count` elements (-1: all). tf.data counterpart:
// TakeDataset. A failed element counts toward `count`, as it does in tf.data.
// Stops pulling from its input once `count` is reached.
#pragma once

#include <string_view>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of TakeDataset: the first `count` elements of its input.
template <class InputIt>
class TakeIterator {
 public:
  /// The element type (the input's).
  using value_type = typename InputIt::value_type;

  /// Owns the input iterator; `count` -1 takes every element.
  TakeIterator(InputIt input, std::int64_t count) : input_(std::move(input)), left_(count) {}

  /// The next element, or std::nullopt once `count` elements (failed ones included) were read.
  std::optional<value_type> next() {
    if (left_ == 0) return std::nullopt;
    if (left_ > 0) --left_;  // a failed element counts too
    std::optional<value_type> x = input_.next();
    if (!x) left_ = 0;
    return x;
  }

  /// Bulk protocol: writes up to out.size() elements, never past `count`; returns how many.
  std::size_t fill(std::span<value_type> out) requires bulk_iterator<InputIt> {
    const std::size_t want =
        left_ < 0 ? out.size() : std::min(out.size(), static_cast<std::size_t>(left_));
    const std::size_t got = want == 0 ? 0 : input_.fill(out.first(want));
    if (left_ > 0) left_ -= static_cast<std::int64_t>(got);
    return got;
  }

  /// Checkpoint: the count left, then the input.
  void save(StateWriter& w) const {
    w.write(left_);
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(left_);
    input_.restore(r);
  }

 private:
  InputIt input_;
  std::int64_t left_;  // -1: unlimited
};

/// The dataset of `ds.take(count)`: the first `count` elements (-1: all).
template <class Input>
class TakeDataset
    : public detail::UnaryStage<TakeDataset<Input>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "take";

  /// Takes the first `count` elements of `input`; throws InvalidArgument if `count` < -1.
  TakeDataset(Input input, std::int64_t count)
      : TakeDataset::UnaryStage(std::move(input)), count_(count) {
    detail::check_count("take", count, "all");
  }
  /// Wraps the input's iterator in a TakeIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return TakeIterator<It>(std::move(input), count_);
  }

  /// Adds `count` to the pipeline's fingerprint (checked when a checkpoint is restored).
  void fingerprint(Fingerprint& fp) const { fp.add(count_); }

  /// The number of elements: min(count, the input's cardinality); unknown_cardinality if the
  /// input's is unknown.
  std::int64_t cardinality() const {
    const std::int64_t n = this->input_cardinality();
    if (count_ < 0) return n;
    if (n == infinite_cardinality) return count_;
    return detail::map_cardinality(n, [&](std::int64_t k) { return std::min(k, count_); });
  }

 private:
  std::int64_t count_;
};

}  // namespace ingest
