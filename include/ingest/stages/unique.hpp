// unique(): the elements not seen before in this pass, in order. tf.data
// counterpart: UniqueDataset (which takes only int32, int64 and string
// scalars; here any T with std::hash<T> and ==). Memory: each iterator keeps
// a copy of every distinct element it has produced, in a std::unordered_set,
// until it is destroyed, so use it on small or low-cardinality elements (ids,
// labels, paths). Runs on the iterating thread. An exception from the hash
// or == surfaces from next() as that element's error (stage "unique", its
// index in the input); an input error surfaces where it occurs.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of UniqueDataset: the input's elements not seen before in this pass.
template <class InputIt>
class UniqueIterator {
 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "the elements it has seen";
  /// The element type (the input's).
  using value_type = typename InputIt::value_type;

  /// Owns the input iterator; `cancel` is checked between repeated elements.
  UniqueIterator(InputIt input, CancellationToken cancel)
      : input_(std::move(input)), cancel_(std::move(cancel)) {}

  /// The next element not seen before, or std::nullopt at the end; throws an element's error (the
  /// input's, or the hash's or ==) and continues after it on the next call.
  std::optional<value_type> next() {
    auto insert = [this](const value_type& v) { return seen_.insert(v).second; };
    while (std::optional<value_type> x = detail::next_counted(input_, index_)) {
      const value_type& v = *x;
      if (detail::invoke_user("unique", index_++, insert, v)) return x;
      detail::throw_if_cancelled(cancel_);  // a long run of repeated elements
    }
    return std::nullopt;
  }

  /// Checkpoint: the input index and every distinct element seen (through
  /// ingest::serializer<T>, as tf.data stores them: the state grows with
  /// them), then the input.
  void save(StateWriter& w) const requires serializable<value_type> {
    w.write(index_, seen_.size());
    for (const value_type& v : seen_) w.write_element(v);
    input_.save(w);
  }
  /// Restores what save() wrote (the elements seen), on a fresh iterator of the same dataset.
  void restore(StateReader& r) requires serializable<value_type> { restore_seen(r); }

 private:
  void restore_seen(StateReader& r) {
    const std::uint64_t at = r.offset();
    std::size_t count = 0;
    r.read(index_, count);
    if (count > r.remaining() / 8) {  // each element takes its 8-byte length at least
      throw DataLossError("checkpoint: unique holds " + std::to_string(count) +
                              " elements, more than the state's bytes",
                          {.stage = "unique", .offset = at});
    }
    seen_.clear();
    seen_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) seen_.insert(r.read_element<value_type>("unique"));
    input_.restore(r);
  }

  InputIt input_;
  CancellationToken cancel_;
  std::unordered_set<value_type> seen_;  // one copy of every distinct element produced
  std::int64_t index_ = 0;
};

/// The dataset of `ds.unique()`: the elements not seen before in the pass, in order (each
/// iterator keeps a copy of every distinct element).
template <class Input>
class UniqueDataset
    : public detail::UnaryStage<UniqueDataset<Input>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "unique";

  /// Removes repeated elements of `input` (elements need std::hash and ==).
  explicit UniqueDataset(Input input) : UniqueDataset::UnaryStage(std::move(input)) {}
  /// Wraps the input's iterator in a UniqueIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    return UniqueIterator<It>(std::move(input), ctx.cancellation);
  }
};

}  // namespace ingest
