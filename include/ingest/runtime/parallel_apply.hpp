// The engine of every stage that applies a user function on the pool: the
// parallel map and the fused map-and-batch (the same machinery with two
// sinks: a parallel map's chunks keep their results in per-element slots,
// a map-and-batch's chunks write into the batch being built). One place for
// what both need:
// - the parallelism option: validated, resolved against the runtime, and
//   set up as the node's knob (fixed or ingest::autotune);
// - the plan: the knob re-read and the function's measured cost turned into
//   a chunk size, or into running inline on the consumer's thread;
// - the chunks: a ChunkRunner of the stage's Work, each run timed (the
//   planner learns the cost, the node gets its work time, the trace a span);
// - taking results: the oldest unit of chunks (deterministic) or any
//   finished one, with the consumer running pending chunks itself rather
//   than sleeping.
// A stage supplies its Work (a chunk's state) and Compute (how a chunk runs
// f and where results go), loads its units and consumes them; see
// stages/parallel_map.hpp and stages/map_and_batch.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "ingest/core/clock.hpp"
#include "ingest/core/context.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/options.hpp"
#include "ingest/runtime/chunk_runner.hpp"
#include "ingest/runtime/chunking.hpp"
#include "ingest/runtime/model.hpp"
#include "ingest/runtime/runtime_core.hpp"

namespace ingest::detail {

/// The parallelism a stage's options ask for, resolved against the runtime.
inline std::size_t resolve_parallelism(std::int64_t requested, const Runtime& runtime) {
  return requested == autotune ? runtime.threads() : static_cast<std::size_t>(requested);
}

/// A user-function stage's parallelism for an iterator made with `ctx`: the
/// option resolved against the runtime and set up as the node's knob (its
/// tuned range: 1 to the pool's threads + 1).
inline std::size_t configure_parallelism(const IteratorContext& ctx, std::int64_t requested) {
  const Runtime& runtime = *runtime_of(ctx);
  std::size_t parallelism = resolve_parallelism(requested, runtime);
  if (ctx.node) {
    configure_knob(ctx.node->parallelism, requested, 1,
                   static_cast<std::int64_t>(max_tuned_parallelism(runtime)),
                   static_cast<std::int64_t>(parallelism));
    parallelism = static_cast<std::size_t>(ctx.node->parallelism.get());
  }
  return parallelism;
}

/// A chunk's run, timed: `Compute` (`std::size_t operator()(Work&, const
/// std::atomic<bool>& cancelled) const`, returning the calls it made; it
/// must not throw) with the planner, the node's work time and the trace.
template <class Work, class Compute>
struct TimedCompute {
  Compute compute;
  std::unique_ptr<ChunkPlanner> planner;
  StageNode* node = nullptr;

  /// Measured work: `ns` for `elements` calls, standing for `scale` times as many.
  void record_work(std::size_t elements, std::int64_t ns, std::int64_t scale) const {
    planner->record(elements, ns);
    if (node) node->work_ns.fetch_add(ns * scale, std::memory_order_relaxed);
  }

  // Chunks last tens of microseconds: the two clock reads are noise.
  void operator()(Work& w, const std::atomic<bool>& cancelled) const {
    const std::int64_t start = now_ns();
    const std::size_t calls = compute(w, cancelled);
    const std::int64_t end = now_ns();
    record_work(calls, end - start, 1);
    trace_work(node, start, end);
  }
};

template <class Work, class Compute>
class ParallelApply {
 public:
  using Run = TimedCompute<Work, Compute>;
  using Runner = ChunkRunner<Work, Run>;
  static constexpr std::size_t none = Runner::none;

  /// `slots`: chunks that can exist at once; `max_chunk`: the most elements
  /// the planner puts in one chunk.
  ParallelApply(std::size_t slots, std::size_t max_chunk, Compute compute, std::size_t parallelism,
                bool deterministic, std::shared_ptr<Runtime> runtime, StageNode* node)
      : runtime_(std::move(runtime)),
        runner_(std::make_shared<Runner>(
            slots, Run{std::move(compute), std::make_unique<ChunkPlanner>(max_chunk), node},
            runtime_.get())),
        parallelism_(parallelism),
        deterministic_(deterministic),
        node_(node) {}
  ParallelApply(ParallelApply&&) noexcept = default;
  ParallelApply& operator=(ParallelApply&&) = delete;
  /// Stops new chunks and waits for the running ones.
  ~ParallelApply() {
    if (runner_) runner_->cancel_and_join();
  }

  const Compute& compute() const noexcept { return runner_->run().compute; }
  const Run& run() const noexcept { return runner_->run(); }
  ChunkPlanner& planner() noexcept { return *runner_->run().planner; }
  const Runtime& runtime() const noexcept { return *runtime_; }
  std::size_t parallelism() const noexcept { return parallelism_; }
  StageNode* node() const noexcept { return node_; }
  std::size_t slots() const noexcept { return runner_->capacity(); }
  Work& work(std::size_t slot) noexcept { return runner_->work(slot); }
  /// A slot's work, for the consumer's own fields (what it loaded).
  const Work& work(std::size_t slot) const noexcept { return runner_->work(slot); }
  bool done(std::size_t slot) const noexcept { return runner_->state(slot) == Runner::done; }

  /// Re-reads a tuned parallelism and the function's measured cost; true
  /// while the function is too cheap to hand to the pool (run it inline).
  bool replan() {
    if (node_ && node_->parallelism.tunable()) {
      parallelism_ = static_cast<std::size_t>(node_->parallelism.get());
    }
    planner().update();
    inline_ = planner().prefer_inline(inline_);
    return inline_;
  }
  bool inline_mode() const noexcept { return inline_; }

  /// A launch loop, having loaded one unit, stops loading once the unit
  /// needed next (`slots`) is ready, so that pulling inputs that take long
  /// (a batch waiting for its elements) does not hold back a result the
  /// consumer could have (filling 33 slots with 6 ms batches delayed the
  /// first result by 200 ms); each call still loads one, so the units in
  /// flight do not drain, and they grow while the next one is not ready.
  /// Before the first result is handed out it stops after that one unit:
  /// the first result's latency is a pipeline's start or a restore's (on
  /// W3 restored, loading a second and third batch of 256 before handing
  /// out the first took half of the first next()), and take_ready runs the
  /// unit's pending chunks on the calling thread meanwhile.
  bool loaded_enough(std::span<const std::size_t> slots) const noexcept {
    return !handed_out_ || unit_done(slots);
  }

  /// An idle chunk slot, or `none`.
  std::size_t find_idle() const noexcept { return runner_->find_idle(); }
  /// Hands a loaded chunk to the pool.
  void submit(std::size_t slot) { runner_->submit(slot, parallelism_); }
  /// Makes a consumed chunk's slot reusable.
  void release(std::size_t slot) noexcept { runner_->release(slot); }

  /// The unit to consume next among `units` units in flight, in launch order
  /// (a unit is the chunks `slots_of(k)` returns, a std::span of slots):
  /// the oldest when deterministic, else any finished one. Runs pending
  /// chunks on the calling thread rather than sleeping: those of the unit
  /// needed first if possible, else the oldest.
  template <class SlotsOf>
  std::size_t take_ready(std::size_t units, SlotsOf slots_of) {
    handed_out_ = true;
    for (;;) {
      for (std::size_t k = 0; k < units; ++k) {
        if (unit_done(slots_of(k))) return k;
        if (deterministic_) break;
      }
      if (deterministic_ && help_unit(slots_of(0))) continue;
      if (runner_->help_oldest()) continue;
      runner_->wait_until([&] {
        if (runner_->can_help()) return true;
        for (std::size_t k = 0; k < units; ++k) {
          if (unit_done(slots_of(k))) return true;
          if (deterministic_) return false;
        }
        return false;
      });
    }
  }

 private:
  bool unit_done(std::span<const std::size_t> slots) const noexcept {
    return std::all_of(slots.begin(), slots.end(), [this](std::size_t s) { return done(s); });
  }
  bool help_unit(std::span<const std::size_t> slots) {
    return std::any_of(slots.begin(), slots.end(),
                       [this](std::size_t s) { return runner_->help(s); });
  }

  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<Runner> runner_;
  std::size_t parallelism_;
  bool deterministic_;
  StageNode* node_;
  bool inline_ = false;
  bool handed_out_ = false;  // take_ready was called: a result was handed out
};

}  // namespace ingest::detail
