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

/// The dataset a PipelineIterator keeps (a copy, which shares its
/// resources), or nothing (D = void).
template <class D>
struct PipelineDataset {
  D value;
};
template <>
struct PipelineDataset<void> {};

/// What a PipelineIterator does that does not depend on its stages: its
/// model, its autotuner, the consumer's measured time, progress, trace and
/// the pipeline section of its states. Non-template, so that it is compiled
/// once per translation unit, not once per pipeline.
struct PipelineControl {
  explicit PipelineControl(std::shared_ptr<Model> m) : model(std::move(m)) {}
  PipelineControl(PipelineControl&&) noexcept = default;
  PipelineControl& operator=(PipelineControl&&) = delete;

  // The first call of next(): what the pipeline measures, and its autotuner.
  void start() {
    started = true;
    tracing = model->tracing();
    progress = static_cast<bool>(model->on_progress);
    every_call = tracing || progress;
    if (every_call) countdown = 2;  // this call notes its end, the next measures the gap
    if (progress) next_progress_ns = now_ns() + model->progress_interval_ns;
    bool tunable = false;
    model->for_each([&](StageNode& n) {
      tunable |= n.parallelism.tunable() || n.buffer.tunable() || n.readahead.tunable();
    });
    if (tunable) start_tuner();
  }

  // Starts the autotuner, unless the pipeline turned autotuning off.
  void start_tuner() {
    if (model->autotune.load(std::memory_order_relaxed)) {
      const auto cpu = model->cpu_budget.load(std::memory_order_relaxed);
      tuner = std::make_unique<Autotuner>(
          model,
          cpu > 0 ? cpu : static_cast<std::int64_t>(max_tuned_parallelism(*default_runtime())));
    }
  }

  // Records the consumer's own time since the last measured call ended (the
  // training step), beside the stages' spans when traced, and reports
  // progress; true when every call is measured (traced or reporting).
  bool note_gap() {
    const std::int64_t gap = ticks_to_ns(ticks() - last_end);
    model->record_consumer(gap, 1);
    if (tracing) {
      const std::int64_t now = now_ns();
      model->trace({"consumer", 'X', now - gap, gap, thread_number(), {}});
    }
    if (progress) report_progress(false);
    // A knob became tunable since (a remote reader opened with an autotuned readahead).
    if (!tuner && model->tunable_added.load(std::memory_order_relaxed)) [[unlikely]]
      start_tuner();
    return every_call;
  }

  // Calls on_progress once the interval has passed, and once at the end of
  // the pass (`end`).
  void report_progress(bool end) {
    if (end ? ended : now_ns() < next_progress_ns) return;
    ended = end;
    next_progress_ns = now_ns() + model->progress_interval_ns;
    model->on_progress(make_stats(*model));
  }

  // The iterator's destruction, before its stages go: stops the autotuner
  // and writes the trace.
  void finish() {
    tuner.reset();
    if (model && !model->trace_path.empty()) {
      try {
        write_chrome_trace(*model, model->trace_path);
      } catch (const Error& e) {
        log_line(std::string("trace not written: ") + e.what());
      }
    }
  }

  // A save's figures, which stats() shows.
  void note_save(std::int64_t start_ns, const IteratorState& state) const {
    if (!model) return;
    model->last_state_bytes.store(static_cast<std::int64_t>(state.bytes().size()),
                                  std::memory_order_relaxed);
    model->last_save_ns.store(now_ns() - start_ns, std::memory_order_relaxed);
    model->saves.fetch_add(1, std::memory_order_relaxed);
  }

  // The stages' names and parameters, first in a state: a restore into
  // another pipeline names the first stage that differs.
  static void write_stages(StateWriter& w, const std::vector<StageDescription>& stages) {
    w.section("pipeline", [&] {
      w.write(stages.size());
      for (const StageDescription& s : stages) {
        w.write_string(s.name);
        w.write(s.hash);
      }
    });
  }
  static std::vector<StageDescription> read_stages(StateReader& r) {
    std::vector<StageDescription> saved;
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
        StageDescription s;
        s.name = r.read_string();
        r.read(s.hash);
        saved.push_back(std::move(s));
      }
    });
    return saved;
  }

  // PipelineIterator::restore's work, whatever the stages: checks that
  // `state` is this pipeline's (its `description` and `fingerprint`),
  // restores the stages through `restore_stages(stages, reader)` and notes
  // what stats() shows.
  void restore(const IteratorState& state, const std::vector<StageDescription>& description,
               std::uint64_t fingerprint, void* stages,
               void (*restore_stages)(void*, StateReader&)) {
    StateReader r(state.payload(), IteratorState::header_bytes, state.storage());
    const std::vector<StageDescription> saved = read_stages(r);
    if (state.fingerprint() != fingerprint || saved != description)
      throw_other_pipeline(state, saved, description, fingerprint);
    if (model) model->checkpointed.store(true, std::memory_order_relaxed);
    const std::int64_t start = now_ns();
    restore_stages(stages, r);
    r.finish();
    if (model) {  // stats() shows what the restore replayed
      model->last_restore_ns.store(now_ns() - start, std::memory_order_relaxed);
      model->last_restore_replayed.store(r.replayed(), std::memory_order_relaxed);
      model->restored.store(true, std::memory_order_relaxed);
    }
  }

  // "checkpoint was saved from a different pipeline: stage 2 (from the last)
  // is 'batch' in both, with other parameters; saved: ..., this pipeline: ..."
  [[noreturn]] static void throw_other_pipeline(const IteratorState& state,
                                                const std::vector<StageDescription>& saved,
                                                const std::vector<StageDescription>& here,
                                                std::uint64_t fingerprint) {
    const auto chain = [](const std::vector<StageDescription>& stages) {
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
                              hex(fingerprint) + ")",
                          {.stage = i < here.size() ? here[i].name : std::string()});
  }

  static std::string hex(std::uint64_t v) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
    return s;
  }

  std::shared_ptr<Model> model;
  std::unique_ptr<Autotuner> tuner;
  bool started = false;
  bool tracing = false;
  bool progress = false;
  bool every_call = false;
  bool ended = false;
  std::int64_t next_progress_ns = 0;
  std::int64_t countdown = 16;
  std::int64_t last_end = 0;
};

template <class D>
auto restored_replica(const D& d, const IteratorState& state,
                      std::shared_ptr<CounterSandbox> sandbox, std::uint64_t fingerprint,
                      std::vector<StageDescription> description);
}  // namespace detail

/// The iterator handed to users by Dataset::iterator(): the pipeline's last
/// stage, plus what belongs to the whole pipeline: its model (measurements
/// and knobs), its autotuner, its trace.
///
/// `D`, the dataset it iterates, is kept for save() and restore(): they
/// describe it (on the first save or restore only: a long file list is
/// hashed only when it is needed) and compact states in a replica of it.
/// The checkpoint code is therefore compiled only for pipelines whose
/// iterators are saved or restored (members of a class template are
/// instantiated where they are used). D is void where the dataset cannot be
/// copied (its fingerprint and description are then computed up front) and
/// for a replica.
template <iterator It, class D = void>
class PipelineIterator {
 public:
  /// The element type.
  using value_type = typename It::value_type;

  /// Keeps `dataset` (the pipeline that made `it`) to describe it when saved.
  PipelineIterator(It it, std::shared_ptr<detail::Model> model,
                   detail::PipelineDataset<D> dataset) requires(!std::is_void_v<D>)
      : control_(std::move(model)), it_(std::move(it)), dataset_(std::move(dataset)) {}
  /// The pipeline's fingerprint and stages given up front.
  PipelineIterator(It it, std::shared_ptr<detail::Model> model, std::uint64_t fingerprint,
                   std::vector<detail::StageDescription> stages)
      : control_(std::move(model)),
        it_(std::move(it)),
        fingerprint_(fingerprint),
        description_(std::move(stages)) {}
  /// Takes over the pipeline of the iterator moved from (its threads keep
  /// running), which may then only be destroyed.
  PipelineIterator(PipelineIterator&&) noexcept = default;
  PipelineIterator& operator=(PipelineIterator&&) = delete;
  ~PipelineIterator() { control_.finish(); }

  /// The next element, or std::nullopt at the end. Rethrows an element's error
  /// (an ingest::Error with its stage and position); iteration may continue.
  /// Always inlined into the consumer's loop, as Probe::next is (see there).
  [[gnu::always_inline]] std::optional<value_type> next() {
    if (!control_.started) [[unlikely]]
      control_.start();
    if (--control_.countdown > 1) [[likely]]
      return it_.next();
    return measured_next();
  }
  /// Bulk form of next(); see iterator.hpp.
  std::size_t fill(std::span<value_type> out) requires bulk_iterator<It> {
    if (!control_.started) [[unlikely]]
      control_.start();
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
    if (control_.model) control_.model->checkpointed.store(true, std::memory_order_relaxed);
    std::int64_t replay = 0;
    IteratorState state = write_state(replay);
    if constexpr (!std::is_void_v<D>) {
      if (replay > detail::compact_replay_pulls.load(std::memory_order_relaxed)) {
        try {
          state = compact(state);
          if (control_.model)
            control_.model->compacted_saves.fetch_add(1, std::memory_order_relaxed);
        } catch (...) {
          // (detail::ReplicaRefused, or the replica's own failure): kept as written.
        }
      }
    }
    control_.note_save(start, state);
    return state;
  }

  /// The state at the consumer's position as the stages write it (save()
  /// without compaction); `replay`: the inputs its restore pulls again,
  /// summed over the stages (StateWriter::replay()).
  IteratorState write_state(std::int64_t& replay) const {
    StateWriter w;
    detail::PipelineControl::write_stages(w, description());
    it_.save(w);
    replay = w.replay();
    return IteratorState(fingerprint(), w);
  }
  /// The fingerprint of the pipeline's description (what a state must match).
  std::uint64_t fingerprint() const {
    if (!fingerprint_) {
      if constexpr (std::is_void_v<D>) {
        fingerprint_ = 0;
      } else {
        fingerprint_ = detail::fingerprint_value(dataset_.value);
      }
    }
    return *fingerprint_;
  }

  /// Restores `state` into this fresh iterator (Dataset::iterator(state) does
  /// this). A state of another pipeline is InvalidArgument naming the first
  /// stage that differs.
  void restore(const IteratorState& state) {
    control_.restore(state, description(), fingerprint(), std::addressof(it_),
                     [](void* it, StateReader& r) { static_cast<It*>(it)->restore(r); });
  }

  /// Per-stage statistics so far: elements, bytes, self time per element,
  /// knobs, how long consumers waited, and the bottleneck. Thread-safe.
  PipelineStats stats() const {
    return control_.model ? detail::make_stats(*control_.model) : PipelineStats{};
  }

  /// Writes the trace recorded so far to `path`; callable while iterating.
  void write_trace(const std::string& path) const {
    detail::write_chrome_trace(*control_.model, path);
  }
  /// Writes the trace recorded so far to PipelineOptions::trace_path (which
  /// the iterator's destruction overwrites with the whole trace); throws
  /// InvalidArgument when the pipeline has no trace_path.
  void write_trace() const {
    if (!control_.model || control_.model->trace_path.empty()) {
      throw InvalidArgument("write_trace(): the pipeline has no trace_path (with_options)");
    }
    detail::write_chrome_trace(*control_.model, control_.model->trace_path);
  }

  /// The trace events recorded so far (with PipelineOptions::trace_path set),
  /// in the order they were recorded, their times in ns from the iterator's
  /// creation: what write_trace writes, for programs that draw their own.
  std::vector<TraceEvent> trace_events() const {
    if (!control_.model) return {};
    std::vector<TraceEvent> events = control_.model->trace_events();
    for (TraceEvent& e : events) e.ts_ns -= control_.model->start_ns();
    return events;
  }

 private:
  const std::vector<detail::StageDescription>& description() const {
    if (!description_) {
      if constexpr (std::is_void_v<D>) {
        description_.emplace();
      } else {
        description_ = detail::description_of(dataset_.value);
      }
    }
    return *description_;
  }

  // Restores `state` into a replica of the pipeline and saves it (see
  // save()): no model (nothing measured, no autotuner), private counters.
  IteratorState compact(const IteratorState& state) const requires(!std::is_void_v<D>) {
    const auto sandbox = std::make_shared<detail::CounterSandbox>();
    auto replica =
        detail::restored_replica(dataset_.value, state, sandbox, fingerprint(), description());
    std::int64_t replay = 0;
    IteratorState compacted = replica.write_state(replay);
    // A refusal a stage took for an element's error (the replay skips
    // those) still refuses.
    if (sandbox->refused()) throw detail::ReplicaRefused{};
    return compacted;
  }

  // Once every 16 calls (every call when traced): the consumer's own time
  // between two calls (the end of one is noted, the start of the next
  // measures the gap).
  [[gnu::noinline]] std::optional<value_type> measured_next() {
    if (control_.countdown == 1) {
      std::optional<value_type> x = it_.next();
      control_.last_end = detail::ticks();
      return x;
    }
    if (control_.note_gap()) {
      // Traced or reporting, every gap is measured: this call's end starts the next one.
      std::optional<value_type> x = it_.next();
      control_.last_end = detail::ticks();
      control_.countdown = 1;
      if (!x && control_.progress) control_.report_progress(true);
      return x;
    }
    control_.countdown = 16;
    return it_.next();
  }

  // Destroyed last: the stages (it_) stop before the model goes.
  detail::PipelineControl control_;
  It it_;
  [[no_unique_address]] detail::PipelineDataset<D> dataset_;
  mutable std::optional<std::uint64_t> fingerprint_;
  mutable std::optional<std::vector<detail::StageDescription>> description_;
};

namespace detail {
/// `state` restored into a replica of `d`'s pipeline: no model, the pass
/// counters `sandbox`'s private copies, and every stage pulling nothing
/// ahead of the consumer's position (the user-function stages run inline,
/// no producer starts), so each source stands where the state's consumer
/// had read it. PipelineIterator::save compacts a state through one;
/// distributed::restore reads the old ranks' positions through one.
template <class D>
auto restored_replica(const D& d, const IteratorState& state,
                      std::shared_ptr<CounterSandbox> sandbox, std::uint64_t fingerprint,
                      std::vector<StageDescription> description) {
  IteratorContext ctx;
  ctx.replica = std::move(sandbox);
  auto it = child_iterator(d, ctx);
  PipelineIterator<decltype(it)> replica(std::move(it), nullptr, fingerprint,
                                         std::move(description));
  replica.restore(state);
  return replica;
}

template <class D>
auto make_pipeline_iterator(const D& d) {
  auto model = std::make_shared<Model>();
  IteratorContext ctx;
  ctx.model = model;
  auto it = child_iterator(d, ctx);
  if constexpr (std::is_copy_constructible_v<D>) {
    return PipelineIterator<decltype(it), D>(std::move(it), std::move(model),
                                             PipelineDataset<D>{d});
  } else {
    return PipelineIterator<decltype(it)>(std::move(it), std::move(model), fingerprint_value(d),
                                          description_of(d));
  }
}

template <class D>
auto make_pipeline_iterator(const D& d, const IteratorState& state) {
  auto it = make_pipeline_iterator(d);
  it.restore(state);
  return it;
}
}  // namespace detail

}  // namespace ingest
