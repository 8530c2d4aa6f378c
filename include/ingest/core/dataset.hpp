// The dataset base: every dataset derives from DatasetBase<Derived, T> (CRTP)
// and so gets the stage member functions (map, filter, batch, ...), each of
// which returns a new dataset wrapping a copy of this one. tf.data
// counterpart: DatasetBase plus the Python Dataset methods. A dataset is an
// immutable description and cheap to copy; iterator() starts a pass over it.
//
// The stage classes are declared here and defined in their own headers;
// include <ingest/ingest.hpp> to use them.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/iterator.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/core/options.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/serializer.hpp"
#include "ingest/core/state.hpp"
#include "ingest/core/world.hpp"

namespace ingest {

/// A dataset: has `element_type` and `make_iterator(const IteratorContext&)`.
template <class D>
concept dataset = requires(const D& d, const IteratorContext& ctx) {
  typename D::element_type;
  { d.make_iterator(ctx) } -> iterator;
};

template <class Input, class F>
class MapDataset;
template <class Input, class Pred>
class FilterDataset;
template <class Input>
class TakeDataset;
template <class Input, class Pred>
class TakeWhileDataset;
template <class Input, class S, class F>
class ScanDataset;
template <class Input>
class UniqueDataset;
template <class Input, class F>
class RejectionResampleDataset;
template <class Input>
class WindowDataset;
template <class Input, class F>
class FlatMapDataset;
template <class Input, class KeyFn, class ReduceFn, class SizeFn>
class GroupByWindowDataset;
template <class Input, class LengthFn>
class BucketBySequenceLengthDataset;
template <class Input>
class SkipDataset;
template <class Input>
class RepeatDataset;
template <class Input>
class EnumerateDataset;
template <class Input>
class BatchDataset;
template <class Input>
class PaddedBatchDataset;
template <class Input>
class UnbatchDataset;
template <class Input>
class RebatchDataset;
template <class Input, bool Marked = false>
class ShardDataset;
template <class Input>
class IgnoreErrorsDataset;
template <class... Inputs>
class ZipDataset;
template <class First, class Second>
class ConcatenateDataset;
template <class T>
class AnyDataset;
template <class B>
struct rebatch_traits;
template <class Input, class F>
class ParallelMapDataset;
template <class Input, class F>
class MapAndBatchDataset;
template <class Input, class F>
class InterleaveDataset;
template <class Input>
class PrefetchDataset;
template <class Input>
class ShuffleDataset;
template <class Input>
class WithOptionsDataset;
template <class Input>
class CacheDataset;
template <class Input>
class RandomSeedDataset;
template <class T>
struct padded_batch_traits;

namespace detail {
template <class F>
struct SeededCall;
/// The stage a map function's errors name: "random_map" for random_map's
/// calls (a SeededCall), else "map".
template <class F>
inline constexpr const char* map_stage_label = "map";
template <class G>
inline constexpr const char* map_stage_label<SeededCall<G>> = "random_map";
template <class T>
class NotADataset;

/// What f(T) returns, called as non-const (for a mutable lambda given to a
/// parallel map: the element type the user meant), or T if it cannot be called.
template <class F, class T>
struct result_or {
  using type = T;
};
template <class F, class T>
requires std::is_invocable_v<F&, T&&> &&
    (!std::is_void_v<std::invoke_result_t<F&, T&&>>)struct result_or<F, T> {
  using type = std::decay_t<std::invoke_result_t<F&, T&&>>;
};
template <class F, class T>
using result_or_t = typename result_or<F, T>::type;

template <class T>
    struct is_paddable : std::bool_constant < requires {
  padded_batch_traits<T>::components;
} > {};
template <class... Ts>
struct is_paddable<std::tuple<Ts...>> : std::bool_constant<(is_paddable<Ts>::value && ...)> {};
struct FixedWindowSize;
}  // namespace detail

/// Elements padded_batch can pad (padded_batch_traits<T>, see core/padding.hpp).
template <class T>
concept paddable = detail::is_paddable<T>::value;

/// cardinality(): the pass has no end (tf.data.experimental.INFINITE_CARDINALITY).
inline constexpr std::int64_t infinite_cardinality = -1;
/// cardinality(): the number of elements is not known without iterating
/// (tf.data.experimental.UNKNOWN_CARDINALITY).
inline constexpr std::int64_t unknown_cardinality = -2;

namespace detail {
/// Rejects a count below -1 (take, skip, repeat: -1 means "all" or "forever").
inline void check_count(const char* stage, std::int64_t count, const char* minus_one_means) {
  if (count < -1) {
    throw InvalidArgument(std::string(stage) + ": count must be >= 0, or -1 for " +
                              minus_one_means + "; got " + std::to_string(count),
                          {.stage = stage});
  }
}

/// Dataset d's cardinality() where it has one, else unknown_cardinality.
template <class D>
std::int64_t cardinality_of(const D& d) {
  if constexpr (requires {
                  { d.cardinality() } -> std::convertible_to<std::int64_t>;
                }) {
    return d.cardinality();
  } else {
    return unknown_cardinality;
  }
}

/// The cardinality of a stage that maps n input elements to f(n), passing
/// infinite and unknown through.
template <class F>
std::int64_t map_cardinality(std::int64_t n, F f) {
  return n < 0 ? n : f(n);
}

/// Batches of `size` out of n elements.
inline std::int64_t batched_cardinality(std::int64_t n, std::int64_t size, bool drop_remainder) {
  return map_cardinality(n,
                         [&](std::int64_t k) { return k / size + (!drop_remainder && k % size); });
}

/// The most elements a batch of `batch_size` over an input of cardinality n
/// can hold: batch buffers are never sized above what the input has
/// (tf.data's reserve_size).
inline std::int64_t batch_capacity(std::int64_t batch_size, std::int64_t n) {
  return n >= 0 ? std::min(batch_size, std::max<std::int64_t>(n, 1)) : batch_size;
}

template <class T>
struct is_pair : std::false_type {};
template <class A, class B>
struct is_pair<std::pair<A, B>> : std::true_type {};

template <class D>
struct is_parallel_map : std::false_type {};
template <class Input, class F>
struct is_parallel_map<ParallelMapDataset<Input, F>> : std::true_type {};
}  // namespace detail

namespace detail {
/// Starts a measured pass over `d` (iterator(), begin()): a model, the root
/// node, the iterators; defined by the runtime layer (runtime/pipeline.hpp),
/// which every source and stage header includes.
template <class D>
auto make_pipeline_iterator(const D& d);
/// The same, restored to `state` (a pass resumed where it was saved).
template <class D>
auto make_pipeline_iterator(const D& d, const IteratorState& state);
}  // namespace detail

/// The operations every dataset has (map, filter, batch, shuffle, prefetch,
/// iterator(), ...), shared through CRTP: `Derived` is the dataset class and
/// `T` its element type. Datasets are immutable and cheap to copy; each
/// operation returns a new dataset that holds a copy of this one.
template <class Derived, class T>
class DatasetBase {
 public:
  /// The type of the elements a pass produces.
  using element_type = T;

  /// Starts a pass over the dataset.
  auto iterator() const { return detail::make_pipeline_iterator(self()); }
  /// Resumes a pass where `state` (PipelineIterator::save(), possibly in
  /// another process) was saved: the elements that follow are those the
  /// saved iterator would have produced. Throws InvalidArgument if the state
  /// was saved from a different pipeline (stage kinds or parameters),
  /// DataLossError if it is corrupt, Unimplemented if a stage cannot restore.
  auto iterator(const IteratorState& state) const {
    return detail::make_pipeline_iterator(self(), state);
  }

  /// The number of elements of one pass when known without iterating (>= 0),
  /// else infinite_cardinality or unknown_cardinality (tf:
  /// tf.data.experimental.cardinality). A stage that knows its count hides
  /// this with its own cardinality().
  std::int64_t cardinality() const { return unknown_cardinality; }
  /// A range-for over one pass: `for (auto&& x : ds)`.
  auto begin() const { return detail::InputIterator(detail::make_pipeline_iterator(self())); }
  /// The end of a range-for pass (begin() knows when it is exhausted).
  std::default_sentinel_t end() const noexcept { return {}; }

  /// Applies `f` to every element (tf: map). `f` takes the element by value,
  /// rvalue or const reference; an exception from it surfaces from next() as
  /// the element's error (FunctionError wrapping it, with the element index).
  template <class F>
  auto map(F f) const {
    constexpr bool callable = std::is_invocable_v<F&, T&&>;
    static_assert(callable, "map: the function cannot be called with this dataset's element type");
    if constexpr (!callable) {
      return detail::NotADataset<T>();
    } else {
      constexpr bool returns = !std::is_void_v<std::invoke_result_t<F&, T&&>>;
      static_assert(returns, "map: the function must return the new element (it returns void)");
      if constexpr (!returns) {
        return detail::NotADataset<T>();
      } else {
        return MapDataset<Derived, F>(self(), std::move(f));
      }
    }
  }

  /// Applies `f` on the runtime's pool, `options.parallelism` calls in flight
  /// (tf: map with num_parallel_calls). `f` is called concurrently, so it must
  /// be callable as const. Followed by .batch(), the two fuse into one stage.
  template <class F>
  auto map(F f, MapOptions options) const {
    constexpr bool callable = std::is_invocable_v<const F&, T&&>;
    static_assert(callable,
                  "map: with a parallelism, the function must be callable as const with this "
                  "dataset's element type (it runs on several threads; no mutable lambdas)");
    if constexpr (!callable) {
      return detail::NotADataset<detail::result_or_t<F, T>>();
    } else {
      constexpr bool returns = !std::is_void_v<std::invoke_result_t<const F&, T&&>>;
      static_assert(returns, "map: the function must return the new element (it returns void)");
      if constexpr (!returns) {
        return detail::NotADataset<T>();
      } else {
        return ParallelMapDataset<Derived, F>(self(), std::move(f), options);
      }
    }
  }

  /// random_map's compile-time checks of `f`, shared by both forms.
  template <class F>
  static constexpr void check_random_map_function() {
    static_assert(std::is_invocable_v<const F&, T&&, Rng&>,
                  "random_map: the function cannot be called as f(element, ingest::Rng&) with "
                  "this dataset's element type (it must be callable as const: no mutable "
                  "lambdas)");
    static_assert(!std::is_void_v<std::invoke_result_t<const F&, T&&, Rng&>>,
                  "random_map: the function must return the new element (it returns void)");
  }

  /// Applies `f(element, rng)` with an ingest::Rng seeded from (`seed`, the
  /// epoch, the element's position in this stage's input), on the consumer's
  /// thread (as map(f)): the results are the same for every iterator of the
  /// dataset, and differ between the epochs of an enclosing repeat (tf: map
  /// with tf.random.stateless_* ops). Without a seed, one is drawn when the
  /// dataset is built. See stages/random_map.hpp.
  template <class F>
  auto random_map(F f, std::optional<std::uint64_t> seed = std::nullopt) const {
    check_random_map_function<F>();
    return MapDataset<RandomSeedDataset<Derived>, detail::SeededCall<F>>(
        RandomSeedDataset<Derived>(self(), seed), detail::SeededCall<F>{std::move(f)});
  }

  /// random_map(f, seed) on the runtime's pool, `options.parallelism` calls
  /// in flight (tf: map with num_parallel_calls): the same results for every
  /// parallelism and thread timing. It is a parallel map (f callable as const)
  /// over the elements paired with their seeds, so .batch() after it fuses.
  template <class F>
  auto random_map(F f, RandomMapOptions options) const {
    check_random_map_function<F>();
    detail::check_knob_option("random_map", "parallelism", options.parallelism);
    return ParallelMapDataset<RandomSeedDataset<Derived>, detail::SeededCall<F>>(
        RandomSeedDataset<Derived>(self(), options.seed), detail::SeededCall<F>{std::move(f)},
        MapOptions{.parallelism = options.parallelism,
                   .deterministic = options.deterministic,
                   .name = std::move(options.name)});
  }

  /// Keeps the elements for which `pred(const T&)` is true (tf: filter).
  template <class Pred>
  auto filter(Pred pred) const {
    constexpr bool ok = std::is_invocable_r_v<bool, Pred&, const T&>;
    static_assert(ok, "filter: the predicate must be callable with const element& and return bool");
    if constexpr (!ok) {
      return detail::NotADataset<T>();
    } else {
      return FilterDataset<Derived, Pred>(self(), std::move(pred));
    }
  }

  /// Carries a state through the elements (tf: scan): `f(const S& state,
  /// element)` returns std::pair{new_state, output}; the outputs in order,
  /// starting from a copy of `initial_state` on every pass. The state type S
  /// is initial_state's; the new state must convert to it. An exception from
  /// `f` fails that element and leaves the state unchanged.
  template <class S, class F>
  auto scan(S initial_state, F f) const {
    static_assert(std::is_copy_constructible_v<S>,
                  "scan: every pass starts from a copy of the initial state, so it must be "
                  "copyable");
    static_assert(std::is_invocable_v<F&, const S&, T&&>,
                  "scan: the function cannot be called as f(const state&, element) with this "
                  "initial state's type and this dataset's element type");
    if constexpr (std::is_invocable_v<F&, const S&, T&&>) {
      using R = std::decay_t<std::invoke_result_t<F&, const S&, T&&>>;
      static_assert(detail::is_pair<R>::value,
                    "scan: the function must return std::pair{new_state, output}");
      if constexpr (detail::is_pair<R>::value) {
        static_assert(
            std::is_convertible_v<typename R::first_type, S> && std::is_move_assignable_v<S>,
            "scan: the new state the function returns (the pair's first) cannot be "
            "converted to the initial state's type");
      }
    }
    return ScanDataset<Derived, S, F>(self(), std::move(initial_state), std::move(f));
  }

  /// The first `count` elements; -1 means all (tf: take).
  auto take(std::int64_t count) const { return TakeDataset<Derived>(self(), count); }
  /// The elements before the first for which `pred(const T&)` is false (tf:
  /// take_while); the input is not read past that element.
  template <class Pred>
  auto take_while(Pred pred) const {
    static_assert(std::is_invocable_r_v<bool, Pred&, const T&>,
                  "take_while: the predicate must be callable with const element& and return "
                  "bool");
    return TakeWhileDataset<Derived, Pred>(self(), std::move(pred));
  }
  /// Drops the elements equal to one seen before in the pass (tf: unique).
  /// Each iterator keeps a copy of every distinct element it has produced.
  auto unique() const {
    static_assert(std::is_default_constructible_v<std::hash<T>> &&
                      std::is_invocable_r_v<std::size_t, const std::hash<T>&, const T&>,
                  "unique: the element type needs a std::hash specialisation");
    static_assert(std::equality_comparable<T>,
                  "unique: the element type must be equality-comparable (operator==)");
    static_assert(std::is_copy_constructible_v<T>,
                  "unique: a copy of each distinct element is kept, so elements must be copyable");
    return UniqueDataset<Derived>(self());
  }
  /// Resamples so that the classes `class_func(const T&)` (integers in [0,
  /// target_dist.size())) follow `target_dist` (tf: rejection_resample):
  /// std::pair<std::int64_t, T>{class, element}, by tf.data's rejection
  /// sampling mixed with the input itself, the input's distribution given as
  /// `options.initial_dist` or estimated during the pass. Reads the input
  /// twice; an element may come out twice. Throws InvalidArgument for bad
  /// distributions. See stages/rejection_resample.hpp.
  template <class F>
  auto rejection_resample(F class_func, std::vector<double> target_dist,
                          RejectionResampleOptions options = {}) const {
    static_assert(std::is_invocable_v<F&, const T&>,
                  "rejection_resample: class_func cannot be called with const element&");
    if constexpr (std::is_invocable_v<F&, const T&>) {
      static_assert(std::is_integral_v<std::decay_t<std::invoke_result_t<F&, const T&>>>,
                    "rejection_resample: class_func must return an integer class in [0, "
                    "num_classes)");
    }
    return RejectionResampleDataset<Derived, F>(self(), std::move(class_func),
                                                std::move(target_dist), std::move(options));
  }
  /// All but the first `count` elements; -1 skips everything (tf: skip).
  auto skip(std::int64_t count) const { return SkipDataset<Derived>(self(), count); }
  /// The dataset `count` times over, -1 for forever (tf: repeat). Each epoch
  /// is a new pass over the input. Stops if an epoch is empty.
  auto repeat(std::int64_t count = -1) const { return RepeatDataset<Derived>(self(), count); }
  /// Pairs each element with its index: std::pair<std::int64_t, T> (tf: enumerate).
  auto enumerate(std::int64_t start = 0) const { return EnumerateDataset<Derived>(self(), start); }

  /// Stacks `batch_size` consecutive elements with batch_traits<T> (tf: batch).
  /// A batch containing a failed element fails as a whole.
  auto batch(std::int64_t batch_size, BatchOptions options = {}) const {
    if constexpr (detail::is_parallel_map<Derived>::value) {
      // map(f, {parallel}).batch(n): one stage writing results into the batch buffer.
      return MapAndBatchDataset<std::decay_t<decltype(self().input())>,
                                std::decay_t<decltype(self().function())>>(
          self().input(), self().function(), self().options(), batch_size, options);
    } else {
      return BatchDataset<Derived>(self(), batch_size, options);
    }
  }
  /// Like batch, padding elements of varying shape (tf: padded_batch).
  auto padded_batch(std::int64_t batch_size, PaddedBatchOptions options = {}) const {
    static_assert(paddable<T>,
                  "padded_batch: the element type cannot be padded; it pads Tensors, arithmetic "
                  "scalars, std::vector of arithmetic values and std::tuple of these (specialise "
                  "ingest::padded_batch_traits for another type, see core/padding.hpp)");
    if constexpr (!paddable<T>) {
      return detail::NotADataset<T>();
    } else {
      return PaddedBatchDataset<Derived>(self(), batch_size, std::move(options));
    }
  }
  /// Sliding windows as std::vector<T> (tf: window, which yields a dataset per
  /// window): window i holds elements i*shift, i*shift + stride, ..., at most
  /// `size` of them; shorter last windows are kept unless drop_remainder.
  /// Throws InvalidArgument unless size, shift and stride are > 0. See
  /// stages/window.hpp.
  auto window(std::int64_t size, WindowOptions options = {}) const {
    return WindowDataset<Derived>(self(), size, options);
  }
  /// Splits each batch back into elements with unbatch_traits<T> (tf: unbatch).
  auto unbatch() const { return UnbatchDataset<Derived>(self()); }
  /// Re-cuts batches into batches of `batch_size` rows along the first
  /// dimension, the batch type unchanged (tf: rebatch): as unbatch().batch(n),
  /// without taking rows apart. Throws InvalidArgument unless batch_size > 0.
  /// See stages/rebatch.hpp.
  auto rebatch(std::int64_t batch_size, BatchOptions options = {}) const {
    check_rebatch_element();
    return RebatchDataset<Derived>(self(), batch_size, options);
  }
  /// rebatch with the sizes cycled batch by batch (tf: rebatch with a list);
  /// a 0 gives an empty batch. Throws InvalidArgument for an empty list, a
  /// negative size, or only zeros.
  auto rebatch(std::vector<std::int64_t> batch_sizes, BatchOptions options = {}) const {
    check_rebatch_element();
    return RebatchDataset<Derived>(self(), std::move(batch_sizes), options);
  }

  /// Tuples of this dataset's and the others' elements; stops at the shortest (tf: zip).
  template <dataset... Others>
  auto zip(const Others&... others) const {
    return ZipDataset<Derived, Others...>(self(), others...);
  }
  /// This dataset's elements, then `other`'s (tf: concatenate).
  template <dataset Other>
  auto concatenate(const Other& other) const {
    static_assert(std::is_same_v<T, typename Other::element_type>,
                  "concatenate: both datasets must have the same element type");
    return ConcatenateDataset<Derived, Other>(self(), other);
  }
  /// Every num_shards-th element starting at `index` (tf: shard). Throws
  /// InvalidArgument unless 0 <= index < num_shards.
  auto shard(std::int64_t num_shards, std::int64_t index) const {
    return ShardDataset<Derived>(self(), num_shards, index);
  }
  /// The elements of `world`'s rank (distributed::world()): every
  /// world_size-th from its rank on, with `options.remainder` deciding what
  /// happens to the elements left over (Remainder). Throws InvalidArgument
  /// for a rank outside the world and for Remainder::pad (shard_padded).
  auto shard(const distributed::World& world, ShardOptions options = {}) const {
    return ShardDataset<Derived>(self(), world, options.remainder);
  }
  /// As shard(world) with Remainder::pad: (element, valid) pairs, where the
  /// repeats that even the ranks' counts have valid == false.
  auto shard_padded(const distributed::World& world) const {
    return ShardDataset<Derived, true>(self(), world, Remainder::pad);
  }
  /// Drops elements whose production threw an ingest::Error, counting them (tf: ignore_errors).
  auto ignore_errors(IgnoreErrorsOptions options = {}) const {
    return IgnoreErrorsDataset<Derived>(self(), std::move(options));
  }

  /// Maps each element to a dataset with `f` and interleaves their elements:
  /// `cycle_length` open at once, `block_length` from each in turn (tf: interleave).
  template <class F>
  auto interleave(F f, InterleaveOptions options = {}) const {
    constexpr bool callable = std::is_invocable_v<F&, T&&>;
    static_assert(callable,
                  "interleave: the function cannot be called with this dataset's element type");
    if constexpr (!callable) {
      return detail::NotADataset<T>();
    } else {
      constexpr bool returns_dataset = dataset<std::decay_t<std::invoke_result_t<F&, T&&>>>;
      static_assert(
          returns_dataset,
          "interleave: the function must return a dataset (e.g. ingest::tfrecord({path}))");
      if constexpr (!returns_dataset) {
        return detail::NotADataset<T>();
      } else {
        return InterleaveDataset<Derived, F>(self(), std::move(f), options);
      }
    }
  }

  /// Maps each element to a dataset with `f` and produces its elements, then
  /// the next element's dataset's (tf: flat_map; interleave with cycle_length 1).
  template <class F>
  auto flat_map(F f) const {
    constexpr bool callable = std::is_invocable_v<F&, T&&>;
    static_assert(callable,
                  "flat_map: the function cannot be called with this dataset's element type");
    if constexpr (!callable) {
      return detail::NotADataset<T>();
    } else {
      constexpr bool returns_dataset = dataset<std::decay_t<std::invoke_result_t<F&, T&&>>>;
      static_assert(returns_dataset,
                    "flat_map: the function must return a dataset (e.g. ingest::range(n))");
      if constexpr (!returns_dataset) {
        return detail::NotADataset<T>();
      } else {
        return FlatMapDataset<Derived, F>(self(), std::move(f));
      }
    }
  }

  /// group_by_window's compile-time checks of key_func and reduce_func.
  template <class KeyFn, class ReduceFn>
  static constexpr void check_group_by_window_functions() {
    static_assert(std::is_invocable_v<KeyFn&, const T&>,
                  "group_by_window: key_func cannot be called with const element&");
    if constexpr (std::is_invocable_v<KeyFn&, const T&>) {
      static_assert(std::is_integral_v<std::decay_t<std::invoke_result_t<KeyFn&, const T&>>>,
                    "group_by_window: key_func must return an integer (the element's int64 key)");
    }
    static_assert(std::is_invocable_v<ReduceFn&, std::int64_t, std::vector<T>&&>,
                  "group_by_window: reduce_func cannot be called as f(std::int64_t key, "
                  "std::vector<element>&& window)");
    if constexpr (std::is_invocable_v<ReduceFn&, std::int64_t, std::vector<T>&&>) {
      static_assert(
          dataset<std::decay_t<std::invoke_result_t<ReduceFn&, std::int64_t, std::vector<T>&&>>>,
          "group_by_window: reduce_func must return a dataset (e.g. "
          "ingest::from_vector(std::move(window)).batch(n))");
    }
  }

  /// Groups the elements by `key_func(const T&)` (an integer) into windows of
  /// `window_size` per key; each full window goes to `reduce_func(key,
  /// std::vector<T>&& window)`, which returns a dataset whose elements are
  /// produced in order (tf: group_by_window). At the end of the input the
  /// partial windows are reduced in ascending key order. Throws
  /// InvalidArgument unless window_size > 0. See stages/group_by_window.hpp.
  template <class KeyFn, class ReduceFn>
  auto group_by_window(KeyFn key_func, ReduceFn reduce_func, std::int64_t window_size) const {
    check_group_by_window_functions<KeyFn, ReduceFn>();
    return GroupByWindowDataset<Derived, KeyFn, ReduceFn, detail::FixedWindowSize>(
        self(), std::move(key_func), std::move(reduce_func), window_size);
  }
  /// group_by_window with each key's window size given by
  /// `window_size_func(std::int64_t key)` (an integer > 0, else the element
  /// that brought the key fails with InvalidArgument), asked once per key and
  /// iterator (tf: group_by_window's window_size_func).
  template <class KeyFn, class ReduceFn, class SizeFn>
  requires(!std::is_convertible_v<SizeFn, std::int64_t>) auto group_by_window(
      KeyFn key_func, ReduceFn reduce_func, SizeFn window_size_func) const {
    check_group_by_window_functions<KeyFn, ReduceFn>();
    static_assert(std::is_invocable_v<SizeFn&, std::int64_t>,
                  "group_by_window: window_size_func cannot be called with a std::int64_t key");
    if constexpr (std::is_invocable_v<SizeFn&, std::int64_t>) {
      static_assert(std::is_integral_v<std::decay_t<std::invoke_result_t<SizeFn&, std::int64_t>>>,
                    "group_by_window: window_size_func must return an integer (the window size)");
    }
    return GroupByWindowDataset<Derived, KeyFn, ReduceFn, SizeFn>(
        self(), std::move(key_func), std::move(reduce_func), std::move(window_size_func));
  }

  /// Batches elements of similar length together (tf: bucket_by_sequence_length):
  /// bucket i holds the elements whose `element_length_func(const T&)` lies in
  /// [bucket_boundaries[i-1], bucket_boundaries[i]) (the first bucket from
  /// minus infinity, the last to infinity), and a bucket is padded and batched
  /// as padded_batch does once it holds bucket_batch_sizes[i] elements
  /// (boundaries.size() + 1 of them); the partial buckets at the end of the
  /// input in ascending bucket order. With options.no_padding, buckets stack
  /// as batch() does. Throws InvalidArgument for bad arguments. See
  /// stages/bucket_by_sequence_length.hpp.
  template <class LengthFn>
  auto bucket_by_sequence_length(LengthFn element_length_func,
                                 std::vector<std::int64_t> bucket_boundaries,
                                 std::vector<std::int64_t> bucket_batch_sizes,
                                 BucketOptions options = {}) const {
    static_assert(std::is_invocable_v<LengthFn&, const T&>,
                  "bucket_by_sequence_length: element_length_func cannot be called with const "
                  "element&");
    if constexpr (std::is_invocable_v<LengthFn&, const T&>) {
      static_assert(
          std::is_integral_v<std::decay_t<std::invoke_result_t<LengthFn&, const T&>>>,
          "bucket_by_sequence_length: element_length_func must return an integer (the length)");
    }
    return BucketBySequenceLengthDataset<Derived, LengthFn>(
        self(), std::move(element_length_func), std::move(bucket_boundaries),
        std::move(bucket_batch_sizes), std::move(options));
  }

  /// Shuffles with a buffer of `buffer_size` elements (tf: shuffle).
  ///
  /// After a parallel map, `map(f, {...}).shuffle(n)` shuffles the map's
  /// inputs and applies `f` after the shuffle: the same elements in the same
  /// order (a shuffle's draws depend only on how many elements it holds), but
  /// the buffer holds the inputs (records or paths, usually far smaller than
  /// decoded tensors) and a following batch() fuses with the map, so results
  /// are written into the batch while still in cache instead of going cold
  /// in a large buffer. A parallel map's `f` is already called in no
  /// particular order on several threads; an error from it surfaces at the
  /// element's shuffled position. Use a sequential map to keep the outputs in
  /// the buffer (for a function that shrinks its elements a lot).
  auto shuffle(std::int64_t buffer_size, ShuffleOptions options = {}) const {
    if constexpr (detail::is_parallel_map<Derived>::value) {
      using Input = std::decay_t<decltype(self().input())>;
      using F = std::decay_t<decltype(self().function())>;
      return ParallelMapDataset<ShuffleDataset<Input>, F>(
          ShuffleDataset<Input>(self().input(), buffer_size, options), self().function(),
          self().options());
    } else {
      return ShuffleDataset<Derived>(self(), buffer_size, options);
    }
  }

  /// Keeps the elements of the first complete pass in memory for later passes
  /// (tf: cache()). Elements are copied into the cache.
  auto cache() const {
    static_assert(std::is_copy_constructible_v<T>,
                  "cache(): elements are copied into a memory cache, so they must be copyable");
    if constexpr (!std::is_copy_constructible_v<T>) {
      return detail::NotADataset<T>();
    } else {
      return CacheDataset<Derived>(self(), std::string());
    }
  }
  /// Keeps the elements of the first complete pass in a file for later passes,
  /// runs and processes (tf: cache(filename)); written to a temporary file and
  /// renamed into place when the pass completes, with permissions
  /// options.file_mode (0600 unless set). See stages/cache.hpp.
  auto cache(std::string path, CacheOptions options = {}) const {
    static_assert(serializable<T>,
                  "cache(path): no ingest::serializer<T> for this element type; specialise it "
                  "(see core/serializer.hpp)");
    if constexpr (!serializable<T>) {
      return detail::NotADataset<T>();
    } else {
      if (path.empty()) throw InvalidArgument("cache: the path is empty", {.stage = "cache"});
      return CacheDataset<Derived>(self(), std::move(path), options);
    }
  }

  /// Produces up to `buffer_size` elements ahead of the consumer on a
  /// background thread; ingest::autotune lets the runtime size it (tf: prefetch).
  auto prefetch(std::int64_t buffer_size) const {
    return PrefetchDataset<Derived>(self(), buffer_size);
  }

  /// Runs the stages before this one with `options` (tf: with_options). Put it last.
  auto with_options(PipelineOptions options) const {
    return WithOptionsDataset<Derived>(self(), std::move(options));
  }

  /// Type-erases the dataset: AnyDataset<T>, one virtual call per element (or
  /// per bulk chunk) at this boundary, none inside the erased pipeline.
  AnyDataset<T> erase() const { return AnyDataset<T>(self()); }

 protected:
  /// This dataset as its derived class.
  const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }

 private:
  static constexpr void check_rebatch_element() {
    static_assert(
        requires(const T& b) {
          { rebatch_traits<T>::rows(b) } -> std::convertible_to<std::size_t>;
        },
        "rebatch: the elements must be batches (a Tensor, a std::vector, or tuples and pairs of "
        "them; batch() the dataset first, or specialise ingest::rebatch_traits)");
  }
};

namespace detail {
/// What a stage function returns after one of its static_asserts failed: a
/// dataset of the element type the user meant, so that the rest of their
/// chain compiles quietly and the assertion's message is the error they read
/// (the program does not compile, so it is never iterated).
template <class T>
class NotADataset : public DatasetBase<NotADataset<T>, T> {
 public:
  EmptyIterator<T> make_iterator(const IteratorContext&) const { return {}; }
};
}  // namespace detail

}  // namespace ingest
