// zip(a, b, ...): tuples of the inputs' elements, position by position,
// ending with the shortest input. tf.data counterpart: ZipDataset. Inputs are
// pulled in order; once one ends, the others are not pulled again. An error
// from any input fails that position (the other inputs' elements at that
// position are dropped) and iteration may continue.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <exception>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/runtime/pipeline.hpp"

namespace ingest {

/// Iterator of ZipDataset: tuples of its inputs' elements, position by position.
template <class... InputIts>
class ZipIterator {
 public:
  /// A tuple of the inputs' element types, in order.
  using value_type = std::tuple<typename InputIts::value_type...>;

  /// Owns the inputs' iterators.
  explicit ZipIterator(InputIts... inputs) : inputs_(std::move(inputs)...) {}

  /// The next tuple, or std::nullopt once any input ended; an error from any input fails that
  /// position (the others' elements there are dropped) and the next call goes on after it.
  std::optional<value_type> next() {
    if (done_) return std::nullopt;
    return pull(std::index_sequence_for<InputIts...>{});
  }

  /// Checkpoint: whether an input ended, then each input in order.
  void save(StateWriter& w) const {
    w.write(done_);
    std::apply([&](const auto&... in) { (in.save(w), ...); }, inputs_);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(done_);
    std::apply([&](auto&... in) { (in.restore(r), ...); }, inputs_);
  }

 private:
  template <std::size_t... I>
  std::optional<value_type> pull(std::index_sequence<I...>) {
    std::tuple<std::optional<typename InputIts::value_type>...> parts;
    std::exception_ptr error;
    // Pull every input at this position (so all advance together), stopping at the first end.
    const bool all = ([&]() -> bool {
      try {
        std::get<I>(parts) = std::get<I>(inputs_).next();
        return std::get<I>(parts).has_value();
      } catch (...) {
        if (!error) error = std::current_exception();
        return true;
      }
    }() && ...);
    if (!all) {
      done_ = true;
      return std::nullopt;
    }
    if (error) std::rethrow_exception(error);
    return value_type(std::move(*std::get<I>(parts))...);
  }

  std::tuple<InputIts...> inputs_;
  bool done_ = false;
};

/// The dataset of `zip(a, b, ...)`: tuples of the inputs' elements, ending with the shortest.
template <class... Inputs>
class ZipDataset
    : public DatasetBase<ZipDataset<Inputs...>, std::tuple<typename Inputs::element_type...>> {
  static_assert(sizeof...(Inputs) >= 1, "zip: needs at least one dataset");

 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "zip";

  /// Zips `inputs`, in order.
  explicit ZipDataset(Inputs... inputs) : inputs_(std::move(inputs)...) {}
  /// An iterator over the tuples, with each input's iterator made in `ctx`.
  auto make_iterator(const IteratorContext& ctx) const {
    return std::apply(
        [&ctx](const auto&... d) {
          return ZipIterator<detail::child_iterator_t<Inputs>...>(
              detail::child_iterator(d, ctx)...);
        },
        inputs_);
  }

  /// The shortest input's cardinality (infinite if all are); unknown if any input's is unknown.
  std::int64_t cardinality() const {
    // The shortest input; unknown if any input is unknown (tf.data).
    std::int64_t n = infinite_cardinality;
    const auto counts = std::apply(
        [](const auto&... d) { return std::array{detail::cardinality_of(d)...}; }, inputs_);
    for (const std::int64_t c : counts) {
      if (c == unknown_cardinality) return c;
      if (c != infinite_cardinality && (n == infinite_cardinality || c < n)) n = c;
    }
    return n;
  }

  /// The inputs' descriptions, in order.
  void fingerprint(Fingerprint& fp) const {
    fp.add(static_cast<std::uint64_t>(sizeof...(Inputs)));
    std::apply([&](const auto&... d) { (detail::fingerprint_of(d, fp), ...); }, inputs_);
  }

 private:
  std::tuple<Inputs...> inputs_;
};

/// Tuples of the datasets' elements; ends with the shortest (tf: Dataset.zip).
template <dataset... Ds>
ZipDataset<Ds...> zip(const Ds&... datasets) {
  return ZipDataset<Ds...>(datasets...);
}

}  // namespace ingest
