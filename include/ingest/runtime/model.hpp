// The control plane: one small non-template node per stage of a running
// pipeline, holding its knobs (as atomics the stage reads) and its
// measurements (atomics the stage adds to in batches, never per element).
// tf.data counterpart: model::Node and its subclasses. The autotuner,
// stats() and the trace see only these nodes, never a template. Iterators of
// the same stage (the datasets an interleave opens one after another, say)
// share one node.
//
// The node's type is the stage's model: a dataset names it as `model_node`
// (StageNode, the synchronous model, when it names none), and
// child_iterator() creates the node of that type. A node type overrides the
// few virtual functions below: its modelled time (its cost formula), the
// bytes its buffers hold, the cores its parallelism occupies (the CPU
// budget), where its inputs run, and which knobs stats() shows. The autotuner and
// stats() call only these, so a new async stage declares its node type here
// or in its own header and touches neither. They are called per tuning step,
// never per element. A dataset may also declare `batches = true` (it stacks
// elements: tracing records every call from there on) and `hidden = true`
// (configuration, not a stage: with_options, erase).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ingest/core/clock.hpp"
#include "ingest/core/context.hpp"

namespace ingest {

struct PipelineStats;

/// A trace event (Chrome trace-event format): a span of a stage's call, a
/// pool worker's chunk of a stage's work ("<stage> (work)"), the consumer's
/// own time between two calls ("consumer"), or an autotuner knob change.
struct TraceEvent {
  std::string name;      ///< the stage's name, as stats() shows it
  char phase;            ///< 'X' span, 'C' counter
  std::int64_t ts_ns;    ///< start (now_ns(); PipelineIterator::trace_events() makes it relative)
  std::int64_t dur_ns;   ///< duration (spans)
  std::uint64_t thread;  ///< a small id per thread
  std::string args;      ///< JSON object body for counters, e.g. `"map": 4`
};

}  // namespace ingest

namespace ingest::detail {

/// Probability that an M/M/1/n queue is empty, consumer time x, producer time y.
inline double probability_empty(double x, double y, double n) {
  if (y <= 0) return 0;
  if (x <= 0) return 1;
  const double r = x / y;
  if (std::abs(r - 1) < 1e-9) return 1 / (n + 1);
  const double rn = std::pow(r, n + 1);
  if (!std::isfinite(rn)) return 0;
  return (1 - r) / (1 - rn);
}

/// A node's modelled inputs: their time per element of this node, given the
/// time their consumer spends between calls (what the node's formula passes).
class InputsTime {
 public:
  template <class F>
  explicit InputsTime(const F& inputs) noexcept
      : f_(&inputs), call_([](const void* fn, double consumer_ns) {
          return (*static_cast<const F*>(fn))(consumer_ns);
        }) {}
  double operator()(double consumer_ns) const { return call_(f_, consumer_ns); }

 private:
  const void* f_;
  double (*call_)(const void*, double);
};

/// The values a tuning step tries for a node's knobs.
struct KnobValues {
  std::int64_t parallelism = 1;
  std::int64_t buffer = 1;
};

/// A value the autotuner may change while the stage runs. Every iterator of
/// a stage configures its node's knobs (an interleave opens many of the same
/// inner stage, on several threads) with the same settings, and the
/// autotuner reads them meanwhile: all atomics.
struct Knob {
  std::atomic<std::int64_t> value{0};

  std::int64_t get() const noexcept { return value.load(std::memory_order_relaxed); }
  /// The user passed ingest::autotune.
  bool tunable() const noexcept { return tunable_.load(std::memory_order_relaxed); }
  std::int64_t min() const noexcept { return min_.load(std::memory_order_relaxed); }
  std::int64_t max() const noexcept { return max_.load(std::memory_order_relaxed); }

 private:
  friend void configure_knob(Knob&, std::int64_t, std::int64_t, std::int64_t,
                             std::int64_t) noexcept;
  std::atomic<std::int64_t> min_{1}, max_{1};
  std::atomic<bool> tunable_{false};
};

/// Sets up a knob from a stage's option: a fixed value, or ingest::autotune
/// (-1) for a tunable one in [min, max] starting at `initial`. Iterators of
/// the same stage share the node; the first one sets the value.
inline void configure_knob(Knob& k, std::int64_t requested, std::int64_t min, std::int64_t max,
                           std::int64_t initial) noexcept {
  const bool tunable = requested < 0;
  max = std::max(min, max);
  k.tunable_.store(tunable, std::memory_order_relaxed);
  k.min_.store(min, std::memory_order_relaxed);
  k.max_.store(max, std::memory_order_relaxed);
  std::int64_t unset = 0;
  k.value.compare_exchange_strong(unset, tunable ? std::clamp(initial, min, max) : requested,
                                  std::memory_order_relaxed);
}

/// The readahead of the remote objects (http://, https://, s3://) a stage
/// reads: its readers request `in_flight` blocks of `block_bytes` ahead of
/// where they read. Any stage may open remote readers, so every node has
/// one; a reader declares itself here when it opens (configuring the knobs:
/// tunable when the user left the scheme's readahead unset, fixed when set)
/// and reads the knobs each time it requests a block. The autotuner tunes
/// the tunable ones within the RAM budget (autotuner.hpp, next_readahead).
struct RemoteReadahead {
  static constexpr std::int64_t min_in_flight = 1, max_in_flight = 16, initial_in_flight = 2;
  static constexpr std::int64_t min_block_bytes = std::int64_t{1} << 20;
  static constexpr std::int64_t max_block_bytes = std::int64_t{16} << 20;
  static constexpr std::int64_t initial_block_bytes = std::int64_t{1} << 20;

  Knob in_flight;    ///< blocks requested ahead per reader (0: no reader declared itself yet)
  Knob block_bytes;  ///< bytes per ranged request
  /// Remote readers of this stage open now.
  std::atomic<std::int64_t> open_readers{0};

  /// A reader declared itself (the knobs are configured).
  bool used() const noexcept { return in_flight.get() > 0; }
  /// The autotuner may change a knob.
  bool tunable() const noexcept { return in_flight.tunable() || block_bytes.tunable(); }
  /// Bytes `readers` readers hold at most with these values: each keeps the
  /// block it reads plus `in_flight` requested ones.
  static double held_bytes(std::int64_t readers, std::int64_t in_flight,
                           std::int64_t block_bytes) noexcept {
    return static_cast<double>(readers) * static_cast<double>(in_flight + 1) *
           static_cast<double>(block_bytes);
  }
  /// Bytes the open readers hold at most now.
  double held_bytes() const noexcept {
    return held_bytes(open_readers.load(std::memory_order_relaxed), in_flight.get(),
                      block_bytes.get());
  }
};

/// How a stage registers: its traits (see the comment at the top).
struct NodeTraits {
  bool batches = false;
  bool hidden = false;
};

/// A stage's node; as a type, the model of a synchronous stage: it computes
/// on its consumer's thread, pulling its inputs on that thread too.
class StageNode {
 public:
  StageNode(std::string name, StageNode* parent, int depth, class Model* model = nullptr,
            NodeTraits traits = {})
      : name_(std::move(name)), parent_(parent), depth_(depth), model_(model), traits_(traits) {}
  StageNode(const StageNode&) = delete;
  StageNode& operator=(const StageNode&) = delete;
  virtual ~StageNode() = default;

  // ---- the model (per tuning step; see the comment at the top) ----

  /// Modelled time per element as its consumer sees it, when the consumer
  /// spends `consumer_ns` between calls, this stage's own time per element
  /// is `self_ns` and its knobs are `knobs`; `inputs` models its inputs.
  virtual double modelled_time(double self_ns, KnobValues, double consumer_ns,
                               const InputsTime& inputs) const {
    return self_ns + inputs(consumer_ns + self_ns);
  }
  /// Bytes its buffers hold at most with `knobs`, elements of `bytes` each.
  virtual double buffered_bytes(KnobValues, double) const { return 0; }
  /// Cores its parallelism keeps busy with `knobs`, beyond its consumer's
  /// thread: what it takes from the CPU budget. A synchronous stage runs on
  /// its consumer's thread and takes nothing.
  virtual double cpu_demand(KnobValues) const { return 0; }
  /// Its own time is its workers' (work_ns), not its consumer's calls.
  virtual bool async() const noexcept { return false; }
  /// Its inputs are pulled on its consumer's thread (their time is in its calls').
  virtual bool pulls_inputs_inline() const noexcept { return !async(); }
  /// Its inputs run on parallel threads of their own (a parallel interleave's
  /// datasets): a stage among them is made faster through this stage's knob.
  virtual bool runs_inputs_in_parallel() const noexcept { return false; }
  /// stats() shows its parallelism knob / its buffer knob.
  virtual bool shows_parallelism() const noexcept { return false; }
  virtual bool shows_buffer() const noexcept { return false; }

  const std::string& name() const noexcept { return name_; }
  StageNode* parent() const noexcept { return parent_; }
  /// The model this node belongs to (null for a free-standing node).
  class Model* model() const noexcept {
    return model_;
  }
  /// Configuration rather than a stage (with_options, erase): not shown.
  bool hidden() const noexcept { return traits_.hidden; }
  /// The stage stacks elements (batch, padded_batch, map-and-batch).
  bool batches() const noexcept { return traits_.batches; }
  int depth() const noexcept { return depth_; }

  // ---- measurements (all relaxed atomics; readers take snapshots) ----

  /// Elements this stage produced (seen by its consumer) by probes that have
  /// ended; element_count() adds the running ones'.
  std::atomic<std::int64_t> elements{0};
  /// The estimated total time of all calls of next()/fill() (inclusive of
  /// inputs pulled on the same thread): each sampled call's time weighted by
  /// the number of calls it stands for. And the number of sampled calls.
  std::atomic<std::int64_t> estimated_ns{0}, samples{0};
  /// Sampled element sizes.
  std::atomic<std::int64_t> sampled_bytes{0}, bytes_samples{0};
  /// Async stages: time spent on the stage's own work by its workers, and the
  /// elements it covered (e.g. the calls of a parallel map's function).
  std::atomic<std::int64_t> work_ns{0}, work_elements{0};
  /// Buffered stages: how long consumers waited for an element, elements
  /// buffered now and at most.
  std::atomic<std::int64_t> wait_ns{0};
  std::atomic<std::int64_t> buffered{0}, buffered_peak{0};
  /// Stages pulling on driver threads (a parallel interleave's fetchers):
  /// sampled time the fetchers pulled (less the time they waited for a core
  /// held by other threads), and of it the time they were on a CPU. Reading
  /// from the page cache or inflating is all CPU; waiting on the network is not.
  std::atomic<std::int64_t> driver_wall_ns{0}, driver_cpu_ns{0};
  /// Readers of remote objects (http://, s3://) opened by this stage: bytes
  /// fetched, requests sent, of them retries, and the time the readers
  /// waited for the network (storage/file.hpp adds these).
  std::atomic<std::int64_t> net_bytes{0}, net_requests{0}, net_retries{0}, net_wait_ns{0};

  /// The share of its driver threads' pulling spent on a CPU (1 until measured).
  double driver_cpu_share() const noexcept {
    const auto wall = driver_wall_ns.load(std::memory_order_relaxed);
    if (wall <= 0) return 1;
    const double share = static_cast<double>(driver_cpu_ns.load(std::memory_order_relaxed)) /
                         static_cast<double>(wall);
    return std::clamp(share, 0.05, 1.0);
  }

  void set_buffered(std::int64_t n) noexcept {
    buffered.store(n, std::memory_order_relaxed);
    std::int64_t peak = buffered_peak.load(std::memory_order_relaxed);
    while (n > peak && !buffered_peak.compare_exchange_weak(peak, n, std::memory_order_relaxed)) {
    }
  }

  // ---- knobs (set by the stage's iterators) ----

  // Atomic: repeat() makes a new iterator (which sets them again) each
  // epoch while the autotuner thread reads them.
  Knob parallelism;
  Knob buffer;
  /// The readahead of the remote objects this stage opens (see RemoteReadahead).
  RemoteReadahead readahead;
  /// This stage or one before it batches (tracing records every call then).
  std::atomic<bool> batched{false};
  /// Input elements per element produced, when measurements do not tell yet
  /// (a batch stage sets its batch size).
  std::atomic<double> nominal_ratio{1.0};

  /// Elements produced so far, exact at any moment: the closed probes'
  /// counts plus the live counts of the probes still running.
  std::int64_t element_count() const {
    std::lock_guard lock(counts_mu_);
    std::int64_t n = elements.load(std::memory_order_acquire);
    for (const auto& c : counts_) n += c->load(std::memory_order_acquire);
    return n;
  }
  /// A live count for a probe of this node, which stores its count there
  /// after every element it produces (a plain store, no atomic read-modify-write).
  std::atomic<std::int64_t>* open_count() {
    std::lock_guard lock(counts_mu_);
    if (free_counts_.empty()) {
      counts_.push_back(std::make_unique<std::atomic<std::int64_t>>(0));
      return counts_.back().get();
    }
    std::atomic<std::int64_t>* c = free_counts_.back();
    free_counts_.pop_back();
    return c;
  }
  /// It had iterators, and none is open now: e.g. the stages before a
  /// cache that a later pass reads instead of them.
  bool closed() const {
    std::lock_guard lock(counts_mu_);
    return !counts_.empty() && free_counts_.size() == counts_.size();
  }
  /// The probe ends: its count moves into `elements`, and the slot is reused.
  void close_count(std::atomic<std::int64_t>* c) noexcept {
    std::lock_guard lock(counts_mu_);
    elements.fetch_add(c->exchange(0, std::memory_order_relaxed), std::memory_order_release);
    free_counts_.push_back(c);
  }

  /// Average bytes of an element, from samples (0 if none yet).
  double bytes_per_element() const noexcept {
    const auto n = bytes_samples.load(std::memory_order_relaxed);
    return n ? static_cast<double>(sampled_bytes.load(std::memory_order_relaxed)) /
                   static_cast<double>(n)
             : 0.0;
  }

 private:
  friend class Model;
  std::string name_;
  StageNode* parent_;
  int depth_;
  class Model* model_;
  NodeTraits traits_;
  std::vector<StageNode*> inputs_;  // guarded by the model's mutex
  mutable std::mutex counts_mu_;
  std::vector<std::unique_ptr<std::atomic<std::int64_t>>> counts_;  // live and free slots
  std::vector<std::atomic<std::int64_t>*> free_counts_;
};

/// A map with a parallelism (and the fused map-and-batch): the function runs
/// on the pool, `parallelism` calls at once, while the consumer pulls the
/// inputs; results wait in about 2 x parallelism slots.
class ParallelMapNode : public StageNode {
 public:
  using StageNode::StageNode;
  double modelled_time(double self_ns, KnobValues k, double consumer_ns,
                       const InputsTime& inputs) const override {
    const double pull = inputs(consumer_ns + self_ns);
    const double y = self_ns / static_cast<double>(k.parallelism);
    return pull +
           probability_empty(consumer_ns + pull, y, static_cast<double>(2 * k.parallelism)) * y;
  }
  double buffered_bytes(KnobValues k, double bytes) const override {
    return static_cast<double>(2 * k.parallelism + 1) * bytes;
  }
  /// `parallelism` calls at once, on the pool (and the consumer's thread, which helps).
  double cpu_demand(KnobValues k) const override { return static_cast<double>(k.parallelism); }
  bool async() const noexcept override { return true; }
  bool pulls_inputs_inline() const noexcept override { return true; }
  bool shows_parallelism() const noexcept override { return true; }
};

/// A producer thread running its input ahead of the consumer into a buffer
/// of `buffer` elements (prefetch).
class PrefetchNode : public StageNode {
 public:
  using StageNode::StageNode;
  double modelled_time(double self_ns, KnobValues k, double consumer_ns,
                       const InputsTime& inputs) const override {
    const double y = self_ns + inputs(0);  // the producer pulls back to back
    return probability_empty(consumer_ns, y, static_cast<double>(k.buffer)) * y;
  }
  double buffered_bytes(KnobValues k, double bytes) const override {
    return static_cast<double>(k.buffer) * bytes;
  }
  bool async() const noexcept override { return true; }
  bool shows_buffer() const noexcept override { return true; }
};

/// A loader: a producer thread copying batches ahead of the consumer, at
/// most `buffer` (its depth) in flight; modelled as a prefetch of that depth.
class LoaderNode : public PrefetchNode {
 public:
  using PrefetchNode::PrefetchNode;
};

/// An interleave: with parallelism > 1, `parallelism` fetchers pull its open
/// inputs on driver threads into small buffers; with parallelism 1 (fixed,
/// or tuned down to 1 for the inputs it opens next) it pulls them itself. Its fetchers take from
/// the CPU budget the share of their time they spend computing (reading the page cache, inflating,
/// checking CRCs), not the time they wait for I/O.
class InterleaveNode : public StageNode {
 public:
  using StageNode::StageNode;
  double modelled_time(double self_ns, KnobValues k, double consumer_ns,
                       const InputsTime& inputs) const override {
    if (!parallel(k.parallelism)) return self_ns + inputs(consumer_ns);
    const double y = (self_ns + inputs(0)) / static_cast<double>(k.parallelism);
    return probability_empty(consumer_ns, y, static_cast<double>(2 * k.parallelism)) * y;
  }
  double buffered_bytes(KnobValues k, double bytes) const override {
    return static_cast<double>(2 * k.parallelism + 1) * bytes;
  }
  double cpu_demand(KnobValues k) const override {
    return parallel(k.parallelism) ? static_cast<double>(k.parallelism) * driver_cpu_share() : 0;
  }
  bool async() const noexcept override { return true; }
  bool runs_inputs_in_parallel() const noexcept override { return shows_parallelism(); }
  bool shows_parallelism() const noexcept override {
    return parallel(parallelism.get()) || parallelism.tunable();
  }

 private:
  static bool parallel(std::int64_t p) noexcept { return p > 1; }
};

/// The nodes of one running pipeline, plus its pipeline-wide settings.
class Model {
 public:
  Model() : start_ns_(now_ns()) {
    ns_per_tick();  // calibrates the tick clock once per process, off the hot path
  }

  /// The node of stage `name` under `parent` (null: the root), of type
  /// `Node` (the stage's model); iterators of the same stage share it (the
  /// first one creates it). Thread-safe.
  template <class Node = StageNode>
  StageNode* node(StageNode* parent, std::string_view name, NodeTraits traits = {}) {
    static_assert(std::is_base_of_v<StageNode, Node>, "a model node derives from StageNode");
    std::lock_guard lock(mu_);
    const auto& siblings = parent ? parent->inputs_ : roots_;
    for (StageNode* n : siblings) {
      if (n->name() == name) return n;
    }
    nodes_.push_back(std::make_unique<Node>(std::string(name), parent,
                                            parent ? parent->depth() + 1 : 0, this, traits));
    StageNode* n = nodes_.back().get();
    (parent ? parent->inputs_ : roots_).push_back(n);
    return n;
  }

  /// Nodes in depth-first order (the root first), with a lock held around `f`.
  template <class F>
  void for_each(F&& f) const {
    std::lock_guard lock(mu_);
    for (StageNode* r : roots_) visit(r, f);
  }

  /// A node's inputs (copy, taken under the lock).
  std::vector<StageNode*> inputs(const StageNode* n) const {
    std::lock_guard lock(mu_);
    return n->inputs_;
  }

  std::int64_t start_ns() const noexcept { return start_ns_; }

  /// A repeat starts a later pass: the stages that run, and their costs,
  /// may differ from the last pass's (the stages before a cache stop). Wakes
  /// the autotuner, which measures the new pass on its own at once, unless
  /// it did for a pass that began less than min_pass_wake_ns ago (short
  /// passes). Thread-safe; the cost per pass is a clock read.
  void begin_pass() {
    const std::int64_t now = now_ns();
    std::int64_t last = last_pass_wake_ns_.load(std::memory_order_relaxed);
    if (now - last < min_pass_wake_ns ||
        !last_pass_wake_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      return;
    }
    passes_.fetch_add(1, std::memory_order_release);
    std::lock_guard lock(waker_mu_);
    if (pass_waker_) pass_waker_();
  }
  /// Passes begun that woke the autotuner.
  std::int64_t passes() const noexcept { return passes_.load(std::memory_order_acquire); }
  /// The autotuner's wake-up for begin_pass (empty: none). Thread-safe.
  void set_pass_waker(std::function<void()> waker) {
    std::lock_guard lock(waker_mu_);
    pass_waker_ = std::move(waker);
  }
  static constexpr std::int64_t min_pass_wake_ns = 5'000'000;

  /// The final consumer's own time between calls of next(), sampled by
  /// PipelineIterator (what the training step costs per element).
  void record_consumer(std::int64_t ns, std::int64_t elements) noexcept {
    consumer_ns_.fetch_add(ns, std::memory_order_relaxed);
    consumer_elements_.fetch_add(elements, std::memory_order_relaxed);
  }
  double consumer_ns_per_element() const noexcept {
    const auto n = consumer_elements_.load(std::memory_order_relaxed);
    return n ? static_cast<double>(consumer_ns_.load(std::memory_order_relaxed)) /
                   static_cast<double>(n)
             : 0;
  }

  // ---- pipeline settings (from with_options, set while iterators are created) ----
  std::atomic<bool> autotune{true};
  std::atomic<std::int64_t> ram_budget_bytes{0};  // 0: the default fraction of available memory
  std::atomic<std::int64_t> cpu_budget{0};        // 0: the runtime's threads + 1
  /// A knob became tunable after the pipeline started (a remote reader's
  /// readahead): the pipeline iterator starts its autotuner if it has none.
  std::atomic<bool> tunable_added{false};

  /// Checkpoints: the last state's size and how long its save() took.
  std::atomic<std::int64_t> saves{0}, last_state_bytes{0}, last_save_ns{0};
  /// Of the saves, those whose state a replica compacted (PipelineIterator::save).
  std::atomic<std::int64_t> compacted_saves{0};
  /// The restore this iterator started from (PipelineIterator::restore): how
  /// long it took and the inputs its stages pulled again and discarded.
  std::atomic<bool> restored{false};
  std::atomic<std::int64_t> last_restore_ns{0}, last_restore_replayed{0};
  /// Set by the pipeline's first save() or restore, or from the start with
  /// PipelineOptions::checkpointing: from then on the
  /// stages keep what makes later states quick to restore (shuffle's
  /// serialized buffer), and the anchors take one at once (anchors.hpp).
  std::atomic<bool> checkpointed{false};

  std::string trace_path;  // written when the pipeline iterator is destroyed
  std::function<void(const PipelineStats&)> on_progress;  // see PipelineOptions
  std::int64_t progress_interval_ns = 0;

  // ---- tracing ----
  bool tracing() const noexcept { return tracing_.load(std::memory_order_relaxed); }
  void enable_trace() noexcept { tracing_.store(true, std::memory_order_relaxed); }
  void trace(TraceEvent e) {
    std::lock_guard lock(trace_mu_);
    if (events_.size() < max_trace_events) events_.push_back(std::move(e));
  }
  std::vector<TraceEvent> trace_events() const {
    std::lock_guard lock(trace_mu_);
    return events_;
  }
  static constexpr std::size_t max_trace_events = 2'000'000;

 private:
  template <class F>
  static void visit(StageNode* n, F& f) {
    f(*n);
    for (StageNode* c : n->inputs_) visit(c, f);
  }

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<StageNode>> nodes_;
  std::vector<StageNode*> roots_;
  std::int64_t start_ns_;
  std::atomic<std::int64_t> consumer_ns_{0}, consumer_elements_{0};
  std::atomic<bool> tracing_{false};
  mutable std::mutex trace_mu_;
  std::vector<TraceEvent> events_;
  std::atomic<std::int64_t> passes_{0}, last_pass_wake_ns_{0};
  std::mutex waker_mu_;
  std::function<void()> pass_waker_;
};

/// A small stable id for the calling thread (trace "tid").
inline std::uint64_t thread_number() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

/// Records a span of a stage's work done off the consumer's thread (a pool
/// worker's chunk), when the pipeline is traced. `end_ns` is now_ns().
inline void trace_work(StageNode* node, std::int64_t start_ns, std::int64_t end_ns) {
  if (!node || !node->model() || !node->model()->tracing()) return;
  node->model()->trace(
      {node->name() + " (work)", 'X', start_ns, end_ns - start_ns, thread_number(), {}});
}

/// The pipeline's Model::checkpointed flag, sharing the model's ownership
/// (null without a model); a replica's (replica_checkpoint_flag) in one.
inline std::shared_ptr<const std::atomic<bool>> checkpoint_flag(const IteratorContext& ctx) {
  if (ctx.replica) return replica_checkpoint_flag();
  if (!ctx.model) return nullptr;
  return {ctx.model, &ctx.model->checkpointed};
}

}  // namespace ingest::detail
