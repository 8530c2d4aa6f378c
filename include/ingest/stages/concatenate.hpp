// concatenate(other): this dataset's elements, then the other's. tf.data
// counterpart: ConcatenateDataset. The second input's iterator is created
// when the first ends, with the same context.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/runtime/pipeline.hpp"

namespace ingest {

/// Iterator of ConcatenateDataset: the first input's elements, then the second's.
template <class FirstIt, class Second>
class ConcatenateIterator {
  using SecondIt = detail::child_iterator_t<Second>;

 public:
  /// The element type (the first input's).
  using value_type = typename FirstIt::value_type;

  /// Owns the first input's iterator; the second's is made in `ctx` once the first ends.
  ConcatenateIterator(FirstIt first, Second second, IteratorContext ctx)
      : first_(std::move(first)), second_(std::move(second)), ctx_(ctx) {}

  /// The next element of the first input, then of the second; std::nullopt when both ended.
  std::optional<value_type> next() {
    if (!second_it_) {
      if (std::optional<value_type> x = first_->next()) return x;
      first_.reset();  // release the first input's resources now
      second_it_.emplace(detail::child_iterator(second_, ctx_));
    }
    return second_it_->next();
  }

  /// Checkpoint: which input is being read, then that input; while it is
  /// the first, also the pass counters of the second's datasets (so that
  /// the second, made after a restore, reshuffles as in the saved run).
  void save(StateWriter& w) const {
    w.write(second_it_.has_value());
    if (second_it_) {
      second_it_->save(w);
    } else {
      first_->save(w);
      counters().save(w);
    }
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    bool second = false;
    r.read(second);
    if (second) {
      first_.reset();
      second_it_.emplace(detail::child_iterator(second_, ctx_));
      second_it_->restore(r);
    } else {
      first_->restore(r);
      counters().read(r);
      counters().apply();
    }
  }

  /// Bulk protocol: writes up to out.size() elements of the current input; returns how many.
  std::size_t fill(std::span<value_type> out) requires bulk_iterator<FirstIt> &&
      bulk_iterator<SecondIt> {
    return second_it_ ? second_it_->fill(out) : first_->fill(out);
  }

 private:
  // The second input's pass counters, found at the first save or restore.
  detail::PassCounters& counters() const {
    if (!counters_) counters_.emplace(second_, ctx_);
    return *counters_;
  }

  std::optional<FirstIt> first_;
  Second second_;
  mutable std::optional<detail::PassCounters> counters_;
  IteratorContext ctx_;
  std::optional<SecondIt> second_it_;
};

/// The dataset of `a.concatenate(b)`: `a`'s elements, then `b`'s.
template <class First, class Second>
class ConcatenateDataset
    : public DatasetBase<ConcatenateDataset<First, Second>, typename First::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "concatenate";

  /// Concatenates `first` and `second` (whose element types must match).
  ConcatenateDataset(First first, Second second)
      : first_(std::move(first)), second_(std::move(second)) {}
  /// An iterator of the first input, then (made when that one ends) of the second.
  auto make_iterator(const IteratorContext& ctx) const {
    return ConcatenateIterator<detail::child_iterator_t<First>, Second>(
        detail::child_iterator(first_, ctx), second_, ctx);
  }

  /// The sum of the inputs' cardinalities: infinite if either is, else unknown if either is.
  std::int64_t cardinality() const {
    const std::int64_t a = detail::cardinality_of(first_), b = detail::cardinality_of(second_);
    if (a == infinite_cardinality || b == infinite_cardinality) return infinite_cardinality;
    if (a == unknown_cardinality || b == unknown_cardinality) return unknown_cardinality;
    return a + b;
  }

  /// Both inputs' descriptions (the second's iterator is made later).
  void fingerprint(Fingerprint& fp) const {
    detail::fingerprint_of(first_, fp);
    const Fingerprint::Below later(fp, Fingerprint::Below::maker);
    detail::fingerprint_of(second_, fp);
  }

 private:
  First first_;
  Second second_;
};

}  // namespace ingest
