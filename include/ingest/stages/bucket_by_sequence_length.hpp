// bucket_by_sequence_length(element_length_func, boundaries, batch_sizes,
// {.padded_shapes, .padding_values, .pad_to_bucket_boundary, .no_padding,
// .drop_remainder}): bucket i holds the elements whose length lies in
// [boundaries[i-1], boundaries[i]) (bucket 0 from minus infinity, the last to
// infinity); a bucket holding batch_sizes[i] elements becomes one batch,
// padded as padded_batch pads (the same batch type), or with no_padding
// stacked as batch() stacks; at the end of the input the partial buckets are
// batched in ascending bucket order (dropped with drop_remainder). tf.data
// counterpart: Dataset.bucket_by_sequence_length, which is group_by_window
// with key = bucket id, window size = the bucket's batch size and reduce = a
// padded batch of the window; so is this (runtime/window_groups.hpp), with
// the batch built straight from the window's elements, moved into it once.
// With pad_to_bucket_boundary, what padded_batch pads to the batch's longest
// (-1 in a padded shape, every dimension of a component without one: ingest
// has no static shapes, so give a Tensor [length, 3] the padded shape {-1, 3})
// pads to the bucket's boundary - 1.
// Runs on the iterating thread. Memory: each bucket holds its elements until
// it fills. Errors: an input element's error surfaces in its place; an
// exception from element_length_func, or with pad_to_bucket_boundary a length
// not below the last boundary (InvalidArgument; tf fails that bucket's whole
// batch instead), fails that element (stage "bucket_by_sequence_length", its
// index in the input) and drops it; a batch that cannot be padded or stacked
// fails as a whole (its first element's index). Iteration may continue.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/batch_traits.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/padding.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"
#include "ingest/runtime/window_groups.hpp"

namespace ingest {

namespace detail {

/// Whether padded_batch can pad elements of type T (padded_batch_traits<T>
/// is defined, for every field of a tuple or pair).
template <class T>
    struct paddable : std::bool_constant < requires {
  typename padded_batch_traits<T>::batch_type;
} > {};
template <class... Ts>
struct paddable<std::tuple<Ts...>> : std::bool_constant<(paddable<Ts>::value && ...)> {};
template <class A, class B>
struct paddable<std::pair<A, B>> : std::bool_constant<paddable<A>::value && paddable<B>::value> {};

/// A bucket's batch: padded_batch's type where T pads, else batch()'s.
template <class T, bool = paddable<T>::value>
struct bucket_batch {
  using type = typename batch_traits<T>::batch_type;
};
template <class T>
struct bucket_batch<T, true> {
  using type = typename padded_batch_traits<T>::batch_type;
};
template <class T>
using bucket_batch_t = typename bucket_batch<T>::type;
/// Whether no_padding can stack T as batch() does into bucket_batch_t<T>.
template <class T>
inline constexpr bool bucket_stacks =
    std::is_same_v<typename batch_traits<T>::batch_type, bucket_batch_t<T>>;

/// What every iterator of one bucket_by_sequence_length dataset shares.
struct BucketSpec {
  std::vector<std::int64_t> boundaries;
  std::vector<std::int64_t> batch_sizes;
  std::vector<PaddedBatchOptions> padding;  // per bucket (empty with no_padding)
  bool pad_to_bucket_boundary = false;
  bool no_padding = false;
  bool drop_remainder = false;
};

/// The key function: the element's bucket (tf: element_to_bucket_id).
template <class LengthFn>
struct BucketOf {
  std::shared_ptr<const BucketSpec> spec;
  LengthFn length_fn;

  template <class T>
  std::int64_t operator()(const T& element) {
    const auto length = static_cast<std::int64_t>(length_fn(element));
    const std::vector<std::int64_t>& b = spec->boundaries;
    const auto bucket =
        static_cast<std::int64_t>(std::upper_bound(b.begin(), b.end(), length) - b.begin());
    if (spec->pad_to_bucket_boundary && bucket == static_cast<std::int64_t>(b.size())) {
      throw InvalidArgument(
          "bucket_by_sequence_length: with pad_to_bucket_boundary, lengths "
          "must be < the last bucket boundary " +
          std::to_string(b.back()) + "; got " + std::to_string(length));
    }
    return bucket;
  }
};

/// The window size function: the bucket's batch size.
struct BucketBatchSize {
  std::shared_ptr<const BucketSpec> spec;
  std::int64_t operator()(std::int64_t bucket) const {
    return spec->batch_sizes[static_cast<std::size_t>(bucket)];
  }
};

}  // namespace detail

/// Iterator of BucketBySequenceLengthDataset: batches of elements bucketed by length.
template <class InputIt, class LengthFn>
class BucketBySequenceLengthIterator {
  using In = typename InputIt::value_type;
  static constexpr bool can_pad = detail::paddable<In>::value;

 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "the elements waiting in its buckets";
  /// The batch type: padded as padded_batch pads, or stacked as batch() with no_padding.
  using value_type = detail::bucket_batch_t<In>;

  /// Owns the input iterator; batches come from `allocator`; `cancel` is checked while reading.
  BucketBySequenceLengthIterator(InputIt input, LengthFn length_fn,
                                 std::shared_ptr<const detail::BucketSpec> spec,
                                 Allocator* allocator, CancellationToken cancel)
      : groups_(std::move(input), detail::BucketOf<LengthFn>{spec, std::move(length_fn)},
                detail::BucketBatchSize{spec}, "bucket_by_sequence_length", std::move(cancel)),
        spec_(std::move(spec)),
        allocator_(allocator) {}

  /// The next full bucket's batch (the partial buckets' at the end of the input, in ascending
  /// bucket order), or std::nullopt at the end; throws an element's error in its place.
  std::optional<value_type> next() {
    for (;;) {
      std::optional<detail::GroupWindow<In>> w = groups_.next();
      if (!w) return std::nullopt;
      // Only the partial buckets flushed at the end of the input are short.
      if (spec_->drop_remainder && w->elements.size() < static_cast<std::size_t>(w->size)) continue;
      std::optional<value_type> out;
      const std::int64_t first = w->first;  // the window's first element
      try {
        out.emplace(build(*w));
      } catch (...) {
        detail::rethrow_with_context({.stage = "bucket_by_sequence_length", .element = first},
                                     detail::Raiser::internal);
      }
      groups_.recycle(w->key, std::move(w->elements));
      return out;
    }
  }

  /// Checkpoint: the buckets and the elements waiting in them, then the
  /// input (between calls no batch is half built).
  void save(StateWriter& w) const requires serializable<In> { groups_.save(w); }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) requires serializable<In> { groups_.restore(r); }

 private:
  value_type build(detail::GroupWindow<In>& w) {
    const std::size_t n = w.elements.size();
    if constexpr (can_pad) {
      if (!spec_->no_padding) {
        return padded_batch_traits<In>::build(
            n, [&w](std::size_t i) -> In& { return w.elements[i]; },
            spec_->padding[static_cast<std::size_t>(w.key)], 0, *allocator_);
      }
    }
    if constexpr (std::is_same_v<value_type, std::vector<In>>) {
      return std::move(w.elements);  // batch() collects these into a vector: the window is one
    } else if constexpr (detail::bucket_stacks<In>) {
      typename batch_traits<In>::builder builder(BatchSpec{n, allocator_});
      for (std::size_t i = 0; i < n; ++i) builder.set(i, std::move(w.elements[i]));
      return std::move(builder).finish(n);
    } else {
      // The dataset rejects no_padding for these element types.
      throw InternalError("bucket_by_sequence_length: no way to batch this element type");
    }
  }

  detail::WindowGroups<InputIt, detail::BucketOf<LengthFn>, detail::BucketBatchSize> groups_;
  std::shared_ptr<const detail::BucketSpec> spec_;
  Allocator* allocator_;
};

/// The dataset of `ds.bucket_by_sequence_length(length_func, boundaries, batch_sizes, options)`:
/// batches of elements of similar length.
template <class Input, class LengthFn>
class BucketBySequenceLengthDataset
    : public detail::UnaryStage<BucketBySequenceLengthDataset<Input, LengthFn>, Input,
                                detail::bucket_batch_t<typename Input::element_type>> {
  using In = typename Input::element_type;

 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "bucket_by_sequence_length";
  /// It makes batches: tracing records every call from this stage on.
  static constexpr bool batches = true;

  /// Throws InvalidArgument unless batch_sizes has boundaries.size() + 1
  /// entries, each > 0, the boundaries increase strictly (tf does not check;
  /// its rule assumes it), pad_to_bucket_boundary has a first boundary >= 1,
  /// and the element type can be padded (or stacked, with no_padding) into
  /// this dataset's batch type.
  BucketBySequenceLengthDataset(Input input, LengthFn length_fn,
                                std::vector<std::int64_t> boundaries,
                                std::vector<std::int64_t> batch_sizes, BucketOptions options)
      : BucketBySequenceLengthDataset::UnaryStage(std::move(input)),
        length_fn_(std::move(length_fn)) {
    auto spec = std::make_shared<detail::BucketSpec>();
    // As tf: no_padding batches before pad_to_bucket_boundary is looked at.
    spec->pad_to_bucket_boundary = options.pad_to_bucket_boundary && !options.no_padding;
    spec->no_padding = options.no_padding;
    spec->drop_remainder = options.drop_remainder;
    check(boundaries, batch_sizes, options);
    if (!options.no_padding) {
      const std::int64_t largest = *std::max_element(batch_sizes.begin(), batch_sizes.end());
      PaddedBatchOptions padding{.padded_shapes = std::move(options.padded_shapes),
                                 .padding_values = std::move(options.padding_values)};
      detail::check_padded_batch_options(largest, padding, padded_components(),
                                         std::string(stage_name));
      spec->padding.assign(batch_sizes.size(), padding);
      if (options.pad_to_bucket_boundary) {
        for (std::size_t i = 0; i < boundaries.size(); ++i)
          spec->padding[i].pad_unknown_dims_to = boundaries[i] - 1;
      }
    }
    spec->boundaries = std::move(boundaries);
    spec->batch_sizes = std::move(batch_sizes);
    spec_ = std::move(spec);
  }

  /// Wraps the input's iterator in a BucketBySequenceLengthIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    return BucketBySequenceLengthIterator<It, LengthFn>(std::move(input), length_fn_, spec_,
                                                        ctx.allocator, ctx.cancellation);
  }

  /// As tf.data (group_by_window's): infinite after an infinite input, else unknown.
  /// The buckets' boundaries and batch sizes, padding and drop_remainder
  /// (pad values are not: they change elements, not positions).
  void fingerprint(Fingerprint& fp) const {
    for (const auto* v : {&spec_->boundaries, &spec_->batch_sizes}) {
      fp.add(static_cast<std::uint64_t>(v->size()));
      for (const std::int64_t x : *v) fp.add(x);
    }
    fp.add(spec_->pad_to_bucket_boundary).add(spec_->no_padding).add(spec_->drop_remainder);
  }

  /// infinite_cardinality for an infinite input, else unknown_cardinality (the buckets' fill
  /// depends on the lengths).
  std::int64_t cardinality() const {
    const std::int64_t n = this->input_cardinality();
    return n == infinite_cardinality ? n : unknown_cardinality;
  }

 private:
  static constexpr std::size_t padded_components() {
    if constexpr (detail::paddable<In>::value) {
      return padded_batch_traits<In>::components;
    } else {
      return 0;
    }
  }

  static std::string list(const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }

  static void check(const std::vector<std::int64_t>& boundaries,
                    const std::vector<std::int64_t>& batch_sizes, const BucketOptions& options) {
    auto fail = [](const std::string& what) {
      throw InvalidArgument("bucket_by_sequence_length: " + what,
                            {.stage = "bucket_by_sequence_length"});
    };
    if (batch_sizes.size() != boundaries.size() + 1) {
      fail("bucket_batch_sizes must have one entry more than bucket_boundaries; got " +
           std::to_string(batch_sizes.size()) + " batch sizes " + list(batch_sizes) + " and " +
           std::to_string(boundaries.size()) + " boundaries " + list(boundaries));
    }
    for (std::size_t i = 0; i < batch_sizes.size(); ++i) {
      if (batch_sizes[i] <= 0) {
        fail("bucket_batch_sizes[" + std::to_string(i) + "] must be > 0; got " +
             std::to_string(batch_sizes[i]));
      }
    }
    for (std::size_t i = 1; i < boundaries.size(); ++i) {
      if (boundaries[i] <= boundaries[i - 1]) {
        fail("bucket_boundaries must increase strictly; got " + list(boundaries));
      }
    }
    if (options.pad_to_bucket_boundary && !options.no_padding) {
      if (boundaries.empty()) fail("pad_to_bucket_boundary needs at least one bucket boundary");
      if (boundaries[0] < 1) {
        fail(
            "with pad_to_bucket_boundary, bucket_boundaries[0] must be >= 1 (bucket 0 pads to "
            "it - 1); got " +
            std::to_string(boundaries[0]));
      }
    }
    if (!options.no_padding && !detail::paddable<In>::value) {
      fail(
          "padded_batch cannot pad this element type (no padded_batch_traits); set no_padding "
          "to stack each bucket as batch() does");
    }
    if (options.no_padding && !detail::bucket_stacks<In>) {
      fail(
          "no_padding: batch() stacks this element type into another type than padded_batch's "
          "(a std::vector element into a vector of vectors, not a Tensor); use Tensor "
          "elements, or group_by_window with a reduce_func of your own");
    }
  }

  LengthFn length_fn_;
  std::shared_ptr<const detail::BucketSpec> spec_;
};

}  // namespace ingest
