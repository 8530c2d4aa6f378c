// sample_from_datasets(datasets, weights, seed, {.stop_on_empty_dataset,
// .rerandomize_each_iteration}): each element is taken from an input drawn at
// random with probability proportional to its weight. tf.data counterpart:
// Dataset.sample_from_datasets (DirectedInterleaveDataset over a random
// selector). The inputs: a std::vector of datasets of one type (e.g.
// AnyDataset<T>), or a std::tuple of datasets of different types with the
// same element type. Weights default to uniform and are normalised; inputs of
// weight 0 are never opened (tf.data drops them). When the drawn input is
// exhausted: with stop_on_empty_dataset the pass ends; otherwise (the
// default) that input is dropped and the draws go on among the others with
// their weights renormalised (tf.data redraws, which gives the same
// distribution), until none is left. The draws come from an ingest::Rng:
// with a seed, every pass draws the same sequence unless
// rerandomize_each_iteration; without one, a seed is drawn when the dataset
// is built and every pass (each iterator, each epoch of a repeat) draws a new
// sequence from it, as shuffle does. Runs on the consumer's thread; an error
// from an input surfaces at its position and the pass goes on (the input
// stays open).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/options.hpp"
#include "ingest/core/random.hpp"
#include "ingest/runtime/directed_interleave.hpp"
#include "ingest/runtime/pipeline.hpp"

namespace ingest {

namespace detail {
/// sample_from_datasets' selector: an input drawn with probability
/// proportional to its weight, among the inputs not yet exhausted.
class WeightedSelector {
 public:
  /// `passes`, where the dataset draws anew each pass: its pass counter,
  /// this selector's pass being `pass` (a restore moves the counter on).
  WeightedSelector(const std::vector<double>& weights, std::uint64_t seed,
                   std::shared_ptr<std::atomic<std::uint64_t>> passes = nullptr,
                   std::uint64_t pass = 0)
      : weights_(weights),
        cumulative_(weights.size()),
        rng_(seed),
        passes_(std::move(passes)),
        pass_(pass) {
    rebuild();
  }

  std::optional<std::int64_t> next() {
    if (!(total_ > 0)) return std::nullopt;
    const double u = rng_.uniform01() * total_;
    auto i = static_cast<std::size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) -
                                      cumulative_.begin());
    if (i >= cumulative_.size()) i = last_;  // u rounded up to the total
    return static_cast<std::int64_t>(i);
  }

  void exhausted(std::size_t i) {
    weights_[i] = 0;
    rebuild();
  }

  /// Checkpoint: the pass, the generator's state and which inputs are
  /// exhausted (their weight is 0 now).
  void save(StateWriter& w) const {
    const auto& s = rng_.state();
    w.write(pass_, s[0], s[1], s[2], s[3]);
    for (const double x : weights_) w.write(x == 0);
  }
  void restore(StateReader& r) {
    std::uint64_t s[4];
    r.read(pass_, s[0], s[1], s[2], s[3]);
    rng_.set_state(s);
    for (double& x : weights_) {
      bool exhausted = false;
      r.read(exhausted);
      if (exhausted) x = 0;
    }
    rebuild();
    if (passes_) detail::restored_pass(passes_, pass_);
  }

 private:
  void rebuild() {
    double sum = 0;
    for (std::size_t i = 0; i < weights_.size(); ++i) {
      sum += weights_[i];
      cumulative_[i] = sum;
      if (weights_[i] > 0) last_ = i;
    }
    total_ = sum;
  }

  std::vector<double> weights_;
  std::vector<double> cumulative_;
  double total_ = 0;
  std::size_t last_ = 0;  // the last input with a weight
  Rng rng_;
  std::shared_ptr<std::atomic<std::uint64_t>> passes_;  // drawing anew: the dataset's counter
  std::uint64_t pass_;
};

/// Checks and normalises sample_from_datasets' weights (uniform when absent).
inline std::vector<double> sample_weights(std::size_t count,
                                          const std::optional<std::vector<double>>& weights) {
  constexpr const char* stage = "sample_from_datasets";
  if (count == 0) {
    throw InvalidArgument("sample_from_datasets: datasets is empty; give at least one dataset",
                          {.stage = stage});
  }
  if (!weights) return std::vector<double>(count, 1.0 / static_cast<double>(count));
  if (weights->size() != count) {
    throw InvalidArgument("sample_from_datasets: weights has " + std::to_string(weights->size()) +
                              " entries for " + std::to_string(count) +
                              " datasets; give one weight per dataset",
                          {.stage = stage});
  }
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double w = (*weights)[i];
    if (!std::isfinite(w) || w < 0) {
      throw InvalidArgument("sample_from_datasets: weights[" + std::to_string(i) +
                                "] must be finite and >= 0; got " + std::to_string(w),
                            {.stage = stage});
    }
    sum += w;
  }
  if (!(sum > 0) || !std::isfinite(sum)) {
    throw InvalidArgument(
        "sample_from_datasets: the weights are all 0 (or their sum is not finite); at least one "
        "must be > 0",
        {.stage = stage});
  }
  std::vector<double> out(*weights);
  for (double& w : out) w /= sum;
  return out;
}
}  // namespace detail

/// The dataset of `sample_from_datasets(datasets, weights, seed, options)`: each element from
/// an input drawn at random with probability proportional to its weight.
template <class Inputs>
class SampleFromDatasetsDataset
    : public DatasetBase<SampleFromDatasetsDataset<Inputs>,
                         typename detail::dataset_list<Inputs>::element_type> {
  using list = detail::dataset_list<Inputs>;

 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "sample_from_datasets";

  /// Samples from `inputs` with `weights` (uniform when absent; normalised); without `seed`, one
  /// is drawn now. Throws InvalidArgument if `inputs` is empty, or for weights of the wrong
  /// number, negative or not finite, or all 0.
  SampleFromDatasetsDataset(Inputs inputs, std::optional<std::vector<double>> weights,
                            std::optional<std::uint64_t> seed, SampleFromDatasetsOptions options)
      : inputs_(std::move(inputs)),
        weights_(std::make_shared<const std::vector<double>>(
            detail::sample_weights(list::size(inputs_), weights))),
        stop_on_empty_(options.stop_on_empty_dataset),
        rerandomize_(options.rerandomize_each_iteration.value_or(!seed)),
        base_seed_(seed ? *seed : random_seed()),
        passes_(std::make_shared<std::atomic<std::uint64_t>>(0)) {}

  /// An iterator over the inputs of weight > 0, drawing with the seed of the next pass.
  auto make_iterator(const IteratorContext& ctx) const {
    // Every pass over the dataset (and its copies) gets its own stream.
    const auto passes = detail::shared_counter(ctx, passes_);
    const std::uint64_t pass = passes->fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t seed = rerandomize_ ? derive_seed(base_seed_, pass) : base_seed_;
    const std::vector<double>& w = *weights_;
    const auto open =
        static_cast<std::size_t>(std::count_if(w.begin(), w.end(), [](double x) { return x > 0; }));
    return detail::DirectedInterleaveIterator<Inputs, detail::WeightedSelector>(
        detail::DirectedInputs<Inputs>(inputs_, ctx, [&w](std::size_t i) { return w[i] > 0; }),
        detail::WeightedSelector(w, seed, rerandomize_ ? passes : nullptr, pass), open,
        stop_on_empty_, "sample_from_datasets", ctx.cancellation);
  }

  /// The inputs, weights and seed (a seed drawn from the OS differs between
  /// processes: such a state restores only into this dataset).
  void fingerprint(Fingerprint& fp) const {
    list::fingerprint(inputs_, fp);
    for (const double x : *weights_) fp.add(x);
    fp.add(stop_on_empty_).add(rerandomize_).add(base_seed_);
    fp.counter(passes_);
  }

  /// Over the inputs of weight > 0: with stop_on_empty_dataset, infinite if
  /// all are, else unknown (the end comes at a random draw) unless there is
  /// only one; without it, the sum of theirs (every element of each is
  /// drawn), infinite if any is. tf.data's kernel says infinite whenever any
  /// input is, else unknown: the same where it knows, and wrong where a
  /// finite input ends the pass.
  std::int64_t cardinality() const {
    const std::vector<std::int64_t> counts = list::cardinalities(inputs_);
    std::int64_t sum = 0;
    bool any_infinite = false, all_infinite = true, any_unknown = false;
    std::size_t used = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (!((*weights_)[i] > 0)) continue;
      ++used;
      const std::int64_t c = counts[i];
      any_infinite |= c == infinite_cardinality;
      all_infinite &= c == infinite_cardinality;
      any_unknown |= c == unknown_cardinality;
      if (c >= 0) sum += c;
    }
    if (stop_on_empty_ && used > 1)
      return all_infinite ? infinite_cardinality : unknown_cardinality;
    if (any_infinite) return infinite_cardinality;
    return any_unknown ? unknown_cardinality : sum;
  }

  /// The normalised weights.
  const std::vector<double>& weights() const noexcept { return *weights_; }

 private:
  Inputs inputs_;
  std::shared_ptr<const std::vector<double>> weights_;
  bool stop_on_empty_;
  bool rerandomize_;
  std::uint64_t base_seed_;
  std::shared_ptr<std::atomic<std::uint64_t>> passes_;
};

/// Each element from one of `datasets` drawn with probability proportional
/// to `weights` (uniform if absent), the draws seeded by `seed` (tf:
/// Dataset.sample_from_datasets). Throws InvalidArgument for no datasets, a
/// weight count other than the datasets', a negative or non-finite weight,
/// or all weights 0 (tf.data gives an empty dataset there). See
/// stages/sample_from_datasets.hpp.
template <dataset D>
SampleFromDatasetsDataset<std::vector<D>> sample_from_datasets(
    std::vector<D> datasets, std::optional<std::vector<double>> weights = std::nullopt,
    std::optional<std::uint64_t> seed = std::nullopt, SampleFromDatasetsOptions options = {}) {
  return SampleFromDatasetsDataset<std::vector<D>>(std::move(datasets), std::move(weights), seed,
                                                   options);
}

/// The same over datasets of different types with one element type:
/// `sample_from_datasets(std::tuple{a, b, c}, {{0.5, 0.3, 0.2}}, seed)`.
template <dataset... Ds>
SampleFromDatasetsDataset<std::tuple<Ds...>> sample_from_datasets(
    std::tuple<Ds...> datasets, std::optional<std::vector<double>> weights = std::nullopt,
    std::optional<std::uint64_t> seed = std::nullopt, SampleFromDatasetsOptions options = {}) {
  static_assert(sizeof...(Ds) >= 1, "sample_from_datasets: give at least one dataset");
  return SampleFromDatasetsDataset<std::tuple<Ds...>>(std::move(datasets), std::move(weights), seed,
                                                      options);
}

}  // namespace ingest
