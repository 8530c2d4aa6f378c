// The iterator handed to users by Dataset::iterator() (PipelineIterator):
// the pipeline's last stage plus what belongs to the whole pipeline, its
// model (measurements and knobs), its autotuner thread and its trace; and
// detail::make_pipeline_iterator, which core/dataset.hpp declares. Every
// source and stage header includes this one, so iterator() works with any
// of them alone.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/iterator.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/autotuner.hpp"
#include "ingest/runtime/model.hpp"
#include "ingest/runtime/probe.hpp"
#include "ingest/runtime/runtime_core.hpp"
#include "ingest/runtime/stats.hpp"
#include "ingest/runtime/trace.hpp"

namespace ingest {

namespace detail {
/// PipelineIterator::save() compacts a state whose restore would pull more
/// than this many inputs again, summed over its stages (tests lower it, to
/// compact every state).
inline std::atomic<std::int64_t> compact_replay_pulls{4096};
/// Restores a state into a replica of a pipeline and saves it (see
/// PipelineIterator::save()), given the pipeline's fingerprint and description.
using CompactFn = std::function<IteratorState(const IteratorState&, std::uint64_t,
                                              const std::vector<StageDescription>&)>;
}  // namespace detail

/// The iterator handed to users by Dataset::iterator(): the pipeline's last
/// stage, plus what belongs to the whole pipeline: its model (measurements
/// and knobs), its autotuner, its trace.
template <iterator It>
class PipelineIterator {
 public:
  using value_type = typename It::value_type;

  /// `fingerprint` computes the pipeline's fingerprint and `describe` its
  /// stages' (on the first save or restore only: a long file list is hashed
  /// only when it is needed); `compact` restores a state into a replica of
  /// the pipeline and saves it (see save()), given this pipeline's
  /// fingerprint and description, so that it computes neither again.
  PipelineIterator(It it, std::shared_ptr<detail::Model> model,
                   std::function<std::uint64_t()> fingerprint = {},
                   std::function<std::vector<detail::StageDescription>()> describe = {},
                   detail::CompactFn compact = {})
      : model_(std::move(model)),
        it_(std::move(it)),
        fingerprint_fn_(std::move(fingerprint)),
        describe_fn_(std::move(describe)),
        compact_fn_(std::move(compact)) {}
  PipelineIterator(PipelineIterator&&) noexcept = default;
  PipelineIterator& operator=(PipelineIterator&&) = delete;
  ~PipelineIterator() {
    tuner_.reset();
    if (model_ && !model_->trace_path.empty()) {
      try {
        detail::write_chrome_trace(*model_, model_->trace_path);
      } catch (const Error& e) {
        log_line(std::string("trace not written: ") + e.what());
      }
    }
  }

  /// The next element, or std::nullopt at the end. Rethrows an element's error
  /// (an ingest::Error with its stage and position); iteration may continue.
  /// Always inlined into the consumer's loop, as Probe::next is (see there).
  [[gnu::always_inline]] std::optional<value_type> next() {
    if (!started_) [[unlikely]]
      start();
    if (--countdown_ > 1) [[likely]]
      return it_.next();
    return measured_next();
  }
  /// Bulk form of next(); see iterator.hpp.
  std::size_t fill(std::span<value_type> out) requires bulk_iterator<It> {
    if (!started_) [[unlikely]]
      start();
    return it_.fill(out);
  }

  /// The iterator's position, to resume from with Dataset::iterator(state)
  /// (in this process or another). Call between calls of next(). Throws
  /// Unimplemented naming the first stage that cannot be saved yet.
  ///
  /// A state whose restore would pull more than 4,096 inputs again, summed
  /// over its stages (an anchor taken long before the consumer's position:
  /// at the first save over a filled shuffle buffer, which declines anchors
  /// until the pipeline is saved) is restored here into a replica of the pipeline
  /// whose stages anchor their inputs where they stand, and the replica's
  /// state is returned: the replay is paid once, by this save, instead of
  /// by every restore. The replica counts on private copies of the
  /// datasets' pass counters (detail::CounterSandbox); where it cannot be
  /// kept apart from this pipeline (a cache, a generator, the datasets an
  /// interleave's function captures) or fails, the state is returned as
  /// written.
  IteratorState save() const {
    const std::int64_t start = detail::now_ns();
    // From the first save on, the stages keep what makes states quick to
    // restore (Model::checkpointed).
    if (model_) model_->checkpointed.store(true, std::memory_order_relaxed);
    std::int64_t replay = 0;
    IteratorState state = write_state(replay);
    if (compact_fn_ && replay > detail::compact_replay_pulls.load(std::memory_order_relaxed)) {
      try {
        state = compact_fn_(state, fingerprint(), description());
        if (model_) model_->compacted_saves.fetch_add(1, std::memory_order_relaxed);
      } catch (...) {
        // (detail::ReplicaRefused, or the replica's own failure): kept as written.
      }
    }
    if (model_) {  // stats() shows the last state's size and save time
      model_->last_state_bytes.store(static_cast<std::int64_t>(state.bytes().size()),
                                     std::memory_order_relaxed);
      model_->last_save_ns.store(detail::now_ns() - start, std::memory_order_relaxed);
      model_->saves.fetch_add(1, std::memory_order_relaxed);
    }
    return state;
  }

  /// The state at the consumer's position as the stages write it (save()
  /// without compaction); `replay`: the inputs its restore pulls again,
  /// summed over the stages (StateWriter::replay()).
  IteratorState write_state(std::int64_t& replay) const {
    StateWriter w;
    // The stages' names and parameters first: a restore into another
    // pipeline names the first stage that differs.
    w.section("pipeline", [&] {
      const std::vector<detail::StageDescription>& stages = description();
      w.write(stages.size());
      for (const detail::StageDescription& s : stages) {
        w.write_string(s.name);
        w.write(s.hash);
      }
    });
    it_.save(w);
    replay = w.replay();
    return IteratorState(fingerprint(), w);
  }
  /// The fingerprint of the pipeline's description (what a state must match).
  std::uint64_t fingerprint() const {
    if (!fingerprint_) fingerprint_ = fingerprint_fn_ ? fingerprint_fn_() : 0;
    return *fingerprint_;
  }

  /// Restores `state` into this fresh iterator (Dataset::iterator(state) does
  /// this). A state of another pipeline is InvalidArgument naming the first
  /// stage that differs.
  void restore(const IteratorState& state) {
    StateReader r(state.payload(), IteratorState::header_bytes, state.storage());
    std::vector<detail::StageDescription> saved;
    r.section("pipeline", [&] {
      const std::uint64_t at = r.offset();
      std::size_t n = 0;
      r.read(n);
      if (n > r.remaining() / 16) {
        throw DataLossError("checkpoint: the pipeline's description holds " + std::to_string(n) +
                                " stages, more than its bytes",
                            {.offset = at});
      }
      for (std::size_t i = 0; i < n; ++i) {
        detail::StageDescription s;
        s.name = r.read_string();
        r.read(s.hash);
        saved.push_back(std::move(s));
      }
    });
    if (state.fingerprint() != fingerprint() || saved != description())
      throw_other_pipeline(state, saved);
    if (model_) model_->checkpointed.store(true, std::memory_order_relaxed);
    const std::int64_t start = detail::now_ns();
    it_.restore(r);
    r.finish();
    if (model_) {  // stats() shows what the restore replayed
      model_->last_restore_ns.store(detail::now_ns() - start, std::memory_order_relaxed);
      model_->last_restore_replayed.store(r.replayed(), std::memory_order_relaxed);
      model_->restored.store(true, std::memory_order_relaxed);
    }
  }

  /// Per-stage statistics so far: elements, bytes, self time per element,
  /// knobs, how long consumers waited, and the bottleneck. Thread-safe.
  PipelineStats stats() const { return model_ ? detail::make_stats(*model_) : PipelineStats{}; }

  /// Writes the trace recorded so far to `path`; callable while iterating.
  void write_trace(const std::string& path) const { detail::write_chrome_trace(*model_, path); }
  /// Writes the trace recorded so far to PipelineOptions::trace_path (which
  /// the iterator's destruction overwrites with the whole trace); throws
  /// InvalidArgument when the pipeline has no trace_path.
  void write_trace() const {
    if (!model_ || model_->trace_path.empty()) {
      throw InvalidArgument("write_trace(): the pipeline has no trace_path (with_options)");
    }
    detail::write_chrome_trace(*model_, model_->trace_path);
  }

  /// The trace events recorded so far (with PipelineOptions::trace_path set),
  /// in the order they were recorded, their times in ns from the iterator's
  /// creation: what write_trace writes, for programs that draw their own.
  std::vector<TraceEvent> trace_events() const {
    if (!model_) return {};
    std::vector<TraceEvent> events = model_->trace_events();
    for (TraceEvent& e : events) e.ts_ns -= model_->start_ns();
    return events;
  }

 private:
  const std::vector<detail::StageDescription>& description() const {
    if (!description_) {
      description_ = describe_fn_ ? describe_fn_() : std::vector<detail::StageDescription>{};
    }
    return *description_;
  }

  // "checkpoint was saved from a different pipeline: stage 2 (from the last)
  // is 'batch' in both, with other parameters; saved: ..., this pipeline: ..."
  [[noreturn]] void throw_other_pipeline(const IteratorState& state,
                                         const std::vector<detail::StageDescription>& saved) const {
    const std::vector<detail::StageDescription>& here = description();
    const auto chain = [](const std::vector<detail::StageDescription>& stages) {
      std::string out;
      for (const auto& s : stages) out += (out.empty() ? "" : " <- ") + s.name;
      return out.empty() ? std::string("(none)") : out;
    };
    std::size_t i = 0;
    while (i < saved.size() && i < here.size() && saved[i] == here[i]) ++i;
    std::string which;
    if (i < saved.size() && i < here.size()) {
      which = "stage " + std::to_string(i + 1) + " from the last differs: '" + saved[i].name +
              "' in the state, '" + here[i].name + "' here" +
              (saved[i].name == here[i].name ? " (other parameters or inputs)" : "");
    } else if (saved.size() != here.size()) {
      which = "the state has " + std::to_string(saved.size()) + " stages, this pipeline " +
              std::to_string(here.size());
    } else {
      which = "the stages match but the fingerprints differ";
    }
    throw InvalidArgument("checkpoint was saved from a different pipeline: " + which +
                              "; saved: " + chain(saved) + ", this pipeline: " + chain(here) +
                              " (fingerprint " + hex(state.fingerprint()) + ", this pipeline " +
                              hex(fingerprint()) + ")",
                          {.stage = i < here.size() ? here[i].name : std::string()});
  }

  void start() {
    started_ = true;
    tracing_ = model_->tracing();
    progress_ = static_cast<bool>(model_->on_progress);
    every_call_ = tracing_ || progress_;
    if (every_call_) countdown_ = 2;  // this call notes its end, the next measures the gap
    if (progress_) next_progress_ns_ = detail::now_ns() + model_->progress_interval_ns;
    bool tunable = false;
    model_->for_each([&](detail::StageNode& n) {
      tunable |= n.parallelism.tunable() || n.buffer.tunable() || n.readahead.tunable();
    });
    if (tunable) start_tuner();
  }

  // Starts the autotuner, unless the pipeline turned autotuning off.
  void start_tuner() {
    if (model_->autotune.load(std::memory_order_relaxed)) {
      const auto cpu = model_->cpu_budget.load(std::memory_order_relaxed);
      tuner_ = std::make_unique<detail::Autotuner>(
          model_,
          cpu > 0 ? cpu
                  : static_cast<std::int64_t>(detail::max_tuned_parallelism(*default_runtime())));
    }
  }

  // Once every 16 calls (every call when traced): the consumer's own time
  // between two calls (the end of one is noted, the start of the next
  // measures the gap).
  [[gnu::noinline]] std::optional<value_type> measured_next() {
    if (countdown_ == 1) {
      std::optional<value_type> x = it_.next();
      last_end_ = detail::ticks();
      return x;
    }
    const std::int64_t gap = detail::ticks_to_ns(detail::ticks() - last_end_);
    model_->record_consumer(gap, 1);
    if (tracing_) {
      // The consumer's own time (the training step), beside the stages' spans.
      const std::int64_t now = detail::now_ns();
      model_->trace({"consumer", 'X', now - gap, gap, detail::thread_number(), {}});
    }
    if (progress_) report_progress(false);
    // A knob became tunable since (a remote reader opened with an autotuned readahead).
    if (!tuner_ && model_->tunable_added.load(std::memory_order_relaxed)) [[unlikely]]
      start_tuner();
    if (every_call_) {
      // Traced or reporting, every gap is measured: this call's end starts the next one.
      std::optional<value_type> x = it_.next();
      last_end_ = detail::ticks();
      countdown_ = 1;
      if (!x && progress_) report_progress(true);
      return x;
    }
    countdown_ = 16;
    return it_.next();
  }

  // Calls on_progress once the interval has passed, and once at the end of
  // the pass (`end`).
  void report_progress(bool end) {
    if (end ? ended_ : detail::now_ns() < next_progress_ns_) return;
    ended_ = end;
    next_progress_ns_ = detail::now_ns() + model_->progress_interval_ns;
    model_->on_progress(detail::make_stats(*model_));
  }

  static std::string hex(std::uint64_t v) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
    return s;
  }

  std::shared_ptr<detail::Model> model_;
  It it_;
  std::function<std::uint64_t()> fingerprint_fn_;
  mutable std::optional<std::uint64_t> fingerprint_;
  std::function<std::vector<detail::StageDescription>()> describe_fn_;
  mutable std::optional<std::vector<detail::StageDescription>> description_;
  detail::CompactFn compact_fn_;
  std::unique_ptr<detail::Autotuner> tuner_;
  bool started_ = false;
  bool tracing_ = false;
  bool progress_ = false;
  bool every_call_ = false;
  bool ended_ = false;
  std::int64_t next_progress_ns_ = 0;
  std::int64_t countdown_ = 16;
  std::int64_t last_end_ = 0;
};

namespace detail {
template <class D>
auto make_pipeline_iterator(const D& d) {
  auto model = std::make_shared<Model>();
  IteratorContext ctx;
  ctx.model = model;
  auto it = child_iterator(d, ctx);
  std::function<std::uint64_t()> fingerprint;
  std::function<std::vector<StageDescription>()> describe;
  CompactFn compact;
  if constexpr (std::is_copy_constructible_v<D>) {
    fingerprint = [d] { return fingerprint_value(d); };
    describe = [d] { return description_of(d); };
    // See PipelineIterator::save(): no model (nothing measured, no
    // autotuner), private counters.
    compact = [d](const IteratorState& state, std::uint64_t fp,
                  const std::vector<StageDescription>& stages) {
      IteratorContext replica_ctx;
      replica_ctx.replica = std::make_shared<CounterSandbox>();
      auto replica_it = child_iterator(d, replica_ctx);
      PipelineIterator<decltype(replica_it)> replica(
          std::move(replica_it), nullptr, [fp] { return fp; }, [&stages] { return stages; });
      replica.restore(state);
      std::int64_t replay = 0;
      IteratorState compacted = replica.write_state(replay);
      // A refusal a stage took for an element's error (the replay skips
      // those) still refuses.
      if (replica_ctx.replica->refused()) throw ReplicaRefused{};
      return compacted;
    };
  } else {
    fingerprint = [value = fingerprint_value(d)] { return value; };
    describe = [stages = description_of(d)] { return stages; };
  }
  return PipelineIterator<decltype(it)>(std::move(it), std::move(model), std::move(fingerprint),
                                        std::move(describe), std::move(compact));
}

template <class D>
auto make_pipeline_iterator(const D& d, const IteratorState& state) {
  auto it = make_pipeline_iterator(d);
  it.restore(state);
  return it;
}
}  // namespace detail

}  // namespace ingest
