// with_options({.threads, .runtime, .deterministic, .autotune, .ram_budget_bytes,
// .trace_path, .on_progress, .progress_interval, .checkpointing, .auto_shard}): runs the
// stages before it with these settings. tf.data counterpart: Dataset.with_options. Put it
// last: it configures its input pipeline, not the stages that follow. With .threads, each
// iterator gets a private runtime of that many compute threads, released with the iterator.
// With .auto_shard, the first file source below shards by file or by element
// (core/context.hpp's auto_shard_by_file).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/runtime_core.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// The dataset of `ds.with_options(options)`: runs the stages before it with these settings
/// (threads, runtime, determinism, autotuning, RAM budget, tracing, checkpointing, auto_shard).
template <class Input>
class WithOptionsDataset : public detail::UnaryStageBase<WithOptionsDataset<Input>, Input,
                                                         typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "with_options";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;
  /// It configures its input and is no stage of its own: stats() shows no row for it.
  static constexpr bool hidden = true;  // configuration, not a stage

  /// Applies `options` to `input`; throws InvalidArgument for threads == 0 or an auto_shard rank
  /// outside [0, world_size).
  WithOptionsDataset(Input input, PipelineOptions options)
      : WithOptionsDataset::UnaryStageBase(std::move(input)), options_(std::move(options)) {
    if (options_.threads && *options_.threads == 0) {
      throw InvalidArgument("with_options: threads must be >= 1", {.stage = "with_options"});
    }
    if (const auto& w = options_.auto_shard;
        w && (w->world_size < 1 || w->rank < 0 || w->rank >= w->world_size)) {
      throw InvalidArgument("with_options: auto_shard: rank " + std::to_string(w->rank) +
                                " is outside [0, " + std::to_string(w->world_size) + ")",
                            {.stage = "with_options"});
    }
  }

  /// An iterator of the input made in a context with these options (and, with .threads, a
  /// private runtime released with the iterator).
  auto make_iterator(const IteratorContext& ctx) const {
    IteratorContext inner = ctx;
    if (options_.runtime) {
      inner.runtime = options_.runtime;
    } else if (options_.threads) {
      inner.runtime = std::make_shared<Runtime>(*options_.threads);
    }
    if (options_.deterministic) inner.deterministic = *options_.deterministic;
    if (ctx.model) {
      detail::Model& m = *ctx.model;
      if (options_.autotune) m.autotune.store(*options_.autotune, std::memory_order_relaxed);
      if (options_.ram_budget_bytes) {
        m.ram_budget_bytes.store(static_cast<std::int64_t>(*options_.ram_budget_bytes),
                                 std::memory_order_relaxed);
      }
      if (inner.runtime) {
        m.cpu_budget.store(static_cast<std::int64_t>(detail::max_tuned_parallelism(*inner.runtime)),
                           std::memory_order_relaxed);
      }
      if (!options_.trace_path.empty()) {
        m.trace_path = options_.trace_path;
        m.enable_trace();
      }
      if (options_.checkpointing.value_or(false)) {
        m.checkpointed.store(true, std::memory_order_relaxed);
      }
      if (options_.on_progress) {
        m.on_progress = options_.on_progress;
        m.progress_interval_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(options_.progress_interval)
                .count();
      }
    }
    if (options_.auto_shard && options_.auto_shard->world_size > 1) {
      inner.auto_shard =
          std::make_shared<detail::AutoShard>(detail::AutoShard{.world = *options_.auto_shard});
    }
    auto it = this->input_iterator(inner);
    if (inner.auto_shard && inner.auto_shard->decision == detail::AutoShard::undecided) {
      throw InvalidArgument(
          "with_options: auto_shard found no file source below it (list_files, tfrecord, "
          "text_lines, csv, fixed_length_records) to shard; shard the pipeline with "
          ".shard(world) instead",
          {.stage = "with_options"});
    }
    return it;
  }

  /// The rank and world of auto_shard, if set (a rank's state restores
  /// only into that rank); no other option changes what a state holds.
  void fingerprint(Fingerprint& fp) const {
    if (const auto& w = options_.auto_shard) {
      fp.add("auto_shard")
          .add(static_cast<std::uint64_t>(w->world_size))
          .add(static_cast<std::uint64_t>(w->rank));
    }
  }

  /// The input's (its description is the pipeline's fingerprint).
  std::int64_t cardinality() const {
    if (options_.auto_shard && options_.auto_shard->world_size > 1) {
      return unknown_cardinality;  // decided when iterated
    }
    return this->input_cardinality();
  }

 private:
  PipelineOptions options_;
};

}  // namespace ingest
