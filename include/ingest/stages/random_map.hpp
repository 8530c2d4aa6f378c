// random_map(f, {.seed, .parallelism, .deterministic}): f(element, rng) with
// an ingest::Rng seeded by element_seed(seed, epoch, position) (core/random.hpp),
// so an element's randomness depends only on the seed, the pass of the
// enclosing repeats (IteratorContext::epoch) and its index in this stage's
// input: not on the parallelism, the threads' timing, or which iterator of the
// dataset runs it. tf.data counterpart: map with tf.random.stateless_* ops
// seeded per element. Without a seed, the dataset draws one when it is built.
//
// It is not an engine of its own: ds.random_map(f, seed) is
// ds -> RandomSeedDataset (pairs each element with its seed, on the
// consumer's thread) -> MapDataset with SeededCall<F> (builds the Rng and
// calls f, on the consumer's thread, as map(f)); ds.random_map(f, {.seed,
// .parallelism}) puts a ParallelMapDataset there instead (f on the pool). So
// threads, errors and cancellation are the parallel map's, a following
// .batch() fuses into map-and-batch, and a following .shuffle() moves the map
// after it while the seeds stay attached to their elements. An error from
// the input or from f surfaces at its element's position (the error context
// says stage 'random_map').
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/random.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

namespace detail {
/// random_map's function for the parallel map: f(element, Rng(seed)) over
/// (seed, element) pairs.
template <class F>
struct SeededCall {
  F f;
  template <class E>
  auto operator()(std::pair<std::uint64_t, E>&& x) const {
    Rng rng(x.first);
    return f(std::move(x.second), rng);
  }
};
}  // namespace detail

/// Iterator of RandomSeedDataset: pairs each input element with its generator's seed.
template <class InputIt>
class RandomSeedIterator {
  using input_type = typename InputIt::value_type;

 public:
  /// `(seed, element)`: the seed from element_seed(seed, epoch, position).
  using value_type = std::pair<std::uint64_t, input_type>;

  /// Owns the input iterator; `epoch` is the pass of the enclosing repeats.
  RandomSeedIterator(InputIt input, std::uint64_t seed, std::uint64_t epoch)
      : input_(std::move(input)), seed_(seed), epoch_(epoch) {}

  /// The next element with its seed, or std::nullopt at the end; a failed element throws and
  /// uses up its position.
  std::optional<value_type> next() {
    const std::uint64_t position = position_++;  // a failed input element uses up its position
    std::optional<input_type> x = input_.next();
    if (!x) {
      --position_;
      return std::nullopt;
    }
    return value_type(element_seed(seed_, epoch_, position), std::move(*x));
  }

  /// Checkpoint: the position, then the input (the epoch is the restored
  /// repeat's, which re-creates this stage for its pass).
  void save(StateWriter& w) const {
    w.write(position_);
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(position_);
    input_.restore(r);
  }

 private:
  InputIt input_;
  std::uint64_t seed_;
  std::uint64_t epoch_;
  std::uint64_t position_ = 0;
};

/// The first half of random_map: each element paired with its generator's seed.
template <class Input>
class RandomSeedDataset
    : public detail::UnaryStage<RandomSeedDataset<Input>, Input,
                                std::pair<std::uint64_t, typename Input::element_type>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "random_seed";

  /// Without `seed`, one is drawn now: every copy and iterator shares it.
  RandomSeedDataset(Input input, std::optional<std::uint64_t> seed)
      : RandomSeedDataset::UnaryStage(std::move(input)), seed_(seed ? *seed : random_seed()) {}

  /// Wraps the input's iterator in a RandomSeedIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    return RandomSeedIterator<It>(std::move(input), seed_, ctx.epoch);
  }

  /// The seed every element's seed derives from.
  std::uint64_t seed() const noexcept { return seed_; }
  /// The input's cardinality.
  std::int64_t cardinality() const { return this->input_cardinality(); }

  /// The seed (one drawn when the dataset was built differs between
  /// processes: such a state restores only into this dataset).
  void fingerprint(Fingerprint& fp) const { fp.add(seed_); }

 private:
  std::uint64_t seed_;
};

}  // namespace ingest
