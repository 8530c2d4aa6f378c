// Options of the stages, gathered in one place so that the dataset base can
// declare every stage's member function. Designated initializers keep call
// sites readable: ds.batch(32, {.drop_remainder = true}).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/core/shape.hpp"
#include "ingest/core/world.hpp"

namespace ingest {

class Runtime;
struct PipelineStats;

/// A knob value that hands the knob to the autotuner (tf: tf.data.AUTOTUNE).
/// Until a pipeline's autotuner is enabled, an autotuned parallelism is the
/// runtime's thread count and an autotuned prefetch buffer holds 2 elements
/// per runtime thread.
inline constexpr std::int64_t autotune = -1;

namespace detail {
/// Throws InvalidArgument unless a knob option (a map's or interleave's
/// parallelism, a loader's depth, ...) is >= 1 or ingest::autotune: "<stage>:
/// <what> must be >= 1 or ingest::autotune; got <value>".
inline void check_knob_option(const char* stage, const char* what, std::int64_t value) {
  if (value != autotune && value < 1) {
    throw InvalidArgument(std::string(stage) + ": " + what +
                              " must be >= 1 or ingest::autotune; got " + std::to_string(value),
                          {.stage = stage});
  }
}
}  // namespace detail

/// Options of map with a parallelism (tf: map with num_parallel_calls).
struct MapOptions {
  /// Calls of the function in flight at once; ingest::autotune to let the
  /// autotuner choose. 1 still runs the function asynchronously to the consumer.
  std::int64_t parallelism = 1;
  /// Keep the input's order (default: the pipeline's setting, which defaults
  /// to true). Non-deterministic order returns whichever results are ready.
  std::optional<bool> deterministic{};
  /// The stage's name in stats() and the trace (tf: map's `name`); empty:
  /// "parallel_map", or "<name> + batch" where a batch() after it fuses.
  std::string name{};
};

/// Options of random_map.
struct RandomMapOptions {
  /// Seed of the per-element generators; without one, each random_map()
  /// call draws one from ingest::random_seed() (getrandom; shared by the dataset's copies
  /// and all their iterators).
  std::optional<std::uint64_t> seed{};
  /// As MapOptions::parallelism; the results do not depend on it.
  std::int64_t parallelism = 1;
  /// As MapOptions::deterministic (the order of the results, not their values).
  std::optional<bool> deterministic{};
  /// As MapOptions::name.
  std::string name{};
};

/// Options of interleave.
struct InterleaveOptions {
  /// Input elements whose datasets are open at once (default: runtime threads).
  std::int64_t cycle_length = autotune;
  /// Consecutive elements taken from each open dataset in turn.
  std::int64_t block_length = 1;
  /// Open datasets fetched from concurrently, on their own threads; 1 (the
  /// default) reads them one at a time on the iterating thread.
  std::int64_t parallelism = 1;
  /// Keep tf.data's round-robin order (default: the pipeline's setting).
  std::optional<bool> deterministic{};
};

/// Options of shuffle.
struct ShuffleOptions {
  /// Seed of the order; without one, every run gets a fresh random order.
  std::optional<std::uint64_t> seed{};
  /// A new order for every pass over the dataset (each repeat epoch).
  bool reshuffle_each_iteration = true;
};

/// What shard(world) does with the elements left over when the ranks
/// cannot all get the same number (n not a multiple of the world's size).
enum class Remainder {
  /// Every rank gets floor(n / world_size) elements, so the same number of
  /// batches: collectives never wait on a rank that ran out. Up to
  /// world_size - 1 elements of the pass are not read.
  drop,
  /// Every rank gets ceil(n / world_size): the ranks short of one repeat an
  /// element from the start of the pass, marked not valid (shard_padded's
  /// elements are (element, valid) pairs; batch stacks the flags into a
  /// bool tensor), so an evaluation counts each element once.
  pad,
  /// The true split: the first n % world_size ranks get one element more.
  uneven,
};

/// Options of shard(world).
struct ShardOptions {
  /// What to do with the elements that do not divide evenly.
  Remainder remainder = Remainder::drop;
};

/// Options of rejection_resample; see stages/rejection_resample.hpp.
struct RejectionResampleOptions {
  /// The input's class distribution (weights, one per class, normalised);
  /// without it, estimated from the classes seen as the pass goes.
  std::optional<std::vector<double>> initial_dist{};
  /// Seed of the sampler's draws; without one, each rejection_resample() call
  /// draws one (shared by the dataset's copies and all their iterators).
  std::optional<std::uint64_t> seed{};
};

/// Options applied to the stages before with_options() (tf: Dataset.with_options).
struct PipelineOptions {
  /// Compute threads of a runtime private to each iterator of this pipeline.
  std::optional<std::size_t> threads{};
  /// A runtime to share between pipelines (takes precedence over threads).
  std::shared_ptr<Runtime> runtime{};
  /// Whether async stages keep order unless a stage says otherwise.
  std::optional<bool> deterministic{};
  /// Let the autotuner tune the knobs set to ingest::autotune and the
  /// readahead of remote readers left unset (default true); with false they
  /// keep their documented defaults.
  std::optional<bool> autotune{};
  /// Memory the autotuner may fill with buffered elements and remote
  /// readers' readahead blocks (default: half of the memory available when
  /// iteration starts).
  std::optional<std::size_t> ram_budget_bytes{};
  /// Write a Chrome trace-event JSON file (Perfetto, chrome://tracing) of the
  /// pipeline's activity here when the iterator is destroyed (and whenever
  /// the iterator's write_trace() is called).
  std::string trace_path{};
  /// Called with the pipeline's stats() while iterating, at most once per
  /// progress_interval and once at the end of the pass, on the thread that
  /// calls next() (inside next(), before it takes the next element). An
  /// exception it throws leaves next() before any element is taken.
  std::function<void(const PipelineStats&)> on_progress{};
  /// The least time between two on_progress calls while iterating (10 s).
  std::chrono::milliseconds progress_interval{std::chrono::seconds(10)};
  /// The pipeline will be saved (tf: experimental_symbolic_checkpoint, in
  /// spirit): from its start the stages keep what quick saves and restores
  /// need (shuffle's buffer, serialized as elements enter it), so every
  /// save is quick, the first one too. Unset or false: that starts at the
  /// iterator's first save() or restore, and the first save over a filled
  /// shuffle buffer restores its state into a replica to anchor it (README,
  /// "Large shuffle buffers" and "Compacted saves").
  std::optional<bool> checkpointing{};
  /// Shard the pipeline for this rank of a job (tf: the AUTO auto-shard
  /// policy): by file when the first file source below (list_files, or
  /// tfrecord / text_lines / csv / fixed_length_records over a file list)
  /// has at least one file per rank, each rank reading every world_size-th
  /// file; by element otherwise, each rank reading everything and keeping
  /// every world_size-th element of the pipeline's output. Logs which and
  /// why. Counts per rank may differ by a file's records: where collectives
  /// need equal counts, use shard(world, {.remainder = Remainder::drop}).
  std::optional<distributed::World> auto_shard{};
};

/// Options of cache(path).
struct CacheOptions {
  /// Permissions of the cache file (masked by the umask): only its owner
  /// reads it unless this says otherwise (the elements may be private).
  unsigned file_mode = 0600;
};

/// Options of batch.
struct BatchOptions {
  /// Drop a last batch smaller than the batch size.
  bool drop_remainder = false;
};

/// Options of window(size, ...); see stages/window.hpp.
struct WindowOptions {
  /// Input elements between the starts of two windows; unset: the window size.
  std::optional<std::int64_t> shift{};
  /// Input elements between two elements of a window.
  std::int64_t stride = 1;
  /// Drop the last windows when they are shorter than the window size.
  bool drop_remainder = false;
};

/// Options of padded_batch.
struct PaddedBatchOptions {
  /// Per component: the shape to pad to (without the batch dimension), -1 for
  /// "the longest in the batch". Missing entries (or an empty list) pad every
  /// dimension to the longest in the batch.
  std::vector<Shape> padded_shapes{};
  /// Per component: the value padding is filled with (converted to the
  /// component's dtype). Missing entries pad with 0.
  std::vector<double> padding_values{};
  /// Drop a last batch smaller than the batch size.
  bool drop_remainder = false;
  /// When set, the dimensions that would pad to the longest in the batch (-1
  /// in a padded shape, every dimension of a component without one) pad to
  /// this size instead (an element larger than it fails the batch, as a
  /// padded shape does). ingest's own: bucket_by_sequence_length's
  /// pad_to_bucket_boundary sets it to the bucket's boundary - 1 (tf fills
  /// the unknown dimensions of the padded shapes with it).
  std::optional<std::int64_t> pad_unknown_dims_to{};
};

/// Options of bucket_by_sequence_length (tf: its keyword arguments).
struct BucketOptions {
  /// As PaddedBatchOptions::padded_shapes (ignored with no_padding).
  std::vector<Shape> padded_shapes{};
  /// As PaddedBatchOptions::padding_values (ignored with no_padding).
  std::vector<double> padding_values{};
  /// Pad the dimensions without a padded size to the bucket's boundary - 1
  /// instead of the batch's longest; an element whose length is not below
  /// the last boundary then fails with InvalidArgument.
  bool pad_to_bucket_boundary = false;
  /// Stack buckets as batch() does (elements of equal shape), unpadded.
  bool no_padding = false;
  /// Drop the partial buckets left at the end of the input.
  bool drop_remainder = false;
};

/// Options of sample_from_datasets; see stages/sample_from_datasets.hpp.
struct SampleFromDatasetsOptions {
  /// End the pass when the input drawn is exhausted (tf's default, false:
  /// drop that input and go on drawing among the others).
  bool stop_on_empty_dataset = false;
  /// Draw a new sequence for every pass over the dataset (each iterator,
  /// each repeat epoch), derived from the seed (tf's
  /// rerandomize_each_iteration). Unset: false with a seed (every pass draws
  /// the same sequence, as tf.data), true without one.
  std::optional<bool> rerandomize_each_iteration{};
};

/// Options of choose_from_datasets; see stages/choose_from_datasets.hpp.
struct ChooseFromDatasetsOptions {
  /// End the pass when the input chosen is exhausted (tf's default); with
  /// false, a choice of an exhausted input is skipped.
  bool stop_on_empty_dataset = true;
};

/// Options of ignore_errors.
struct IgnoreErrorsOptions {
  /// Called with each dropped error (on the iterating thread), e.g. to log it.
  std::function<void(const Error&)> on_error{};
};

}  // namespace ingest
