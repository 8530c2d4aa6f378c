// What a running pipeline spends its time on: a snapshot of the model with
// each stage's costs derived from its measurements, shared by the
// autotuner and by PipelineIterator::stats(). A stage's self time is its
// measured time per element minus the time of its inputs (those it pulls
// on the same thread), scaled by how many input elements make one of its
// own; for async stages it is the time their workers spend on the stage's
// own work (a parallel map's function, say).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "ingest/core/clock.hpp"
#include "ingest/runtime/model.hpp"

namespace ingest {

namespace detail {
/// A percentage with one decimal ("42.0"), without the sign.
inline std::string format_percent(double p) {
  char b[16];
  std::snprintf(b, sizeof b, "%.1f", p);
  return b;
}
/// A size in bytes as "8 MiB", "256 KiB" or "1000 B" (the largest unit
/// that divides it).
inline std::string format_bytes(std::int64_t n) {
  if (n > 0 && n % (1 << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n > 0 && n % (1 << 10) == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " B";
}
}  // namespace detail

/// One row of PipelineStats.
struct StageStats {
  std::string name;                ///< the stage ("map", "prefetch", ...)
  int depth = 0;                   ///< 0 for the last stage, +1 per input level
  std::int64_t elements = 0;       ///< elements produced
  double megabytes = 0;            ///< payload produced (sampled element sizes x elements)
  double self_us_per_element = 0;  ///< this stage's own time per element it produced
  std::int64_t parallelism = 0;    ///< current parallelism (0: not a parallel stage)
  std::int64_t buffer = 0;         ///< current buffer size in elements (0: unbuffered)
  std::int64_t buffered = 0;       ///< elements buffered now
  double consumer_wait_percent =
      0;                    ///< share of the time its consumer waited for it (async stages)
  bool autotuned = false;   ///< a knob of this stage is tuned by the autotuner
  bool bottleneck = false;  ///< the stage that limits throughput
  /// Remote reads (http://, https://, s3://) by this stage: megabytes
  /// fetched, requests (retries included), retries, and the share of the
  /// time its readers waited for the network (summed over its readers, so
  /// parallel readers can exceed 100%).
  double net_megabytes = 0;
  std::int64_t net_requests = 0;  ///< requests, retries included
  std::int64_t net_retries = 0;   ///< requests that were retries
  double net_wait_percent = 0;    ///< share of the time its readers waited (summed)
  /// The readahead of its remote readers: blocks in flight per reader and
  /// bytes per block (0: none opened), and whether the autotuner tunes it.
  std::int64_t readahead_in_flight = 0;
  std::int64_t readahead_block_bytes = 0;  ///< bytes per block
  bool readahead_autotuned = false;        ///< the autotuner tunes the readahead
};

/// Per-stage statistics of a running pipeline (PipelineIterator::stats()).
struct PipelineStats {
  std::vector<StageStats> stages;  ///< the last stage first, inputs after their consumer
  double seconds = 0;              ///< since the iterator was created
  /// Share of the time the consumer spent waiting in next() for the pipeline.
  double input_wait_percent = 0;
  /// Checkpoints taken (PipelineIterator::save), the last state's size and
  /// how long that save() took.
  std::int64_t checkpoints = 0;
  std::int64_t last_state_bytes = 0;  ///< size of the last state
  double last_save_ms = 0;            ///< how long the last save() took
  /// Of the checkpoints, those a replica compacted (PipelineIterator::save:
  /// a state that would have replayed over 4,096 inputs).
  std::int64_t compacted_checkpoints = 0;
  /// For an iterator restored from a state (Dataset::iterator(state)): how
  /// long the restore took, and the inputs its stages pulled again and
  /// discarded on the way to the saved position, summed over the stages
  /// (0 for a state anchored at the position, as compacted ones are).
  bool restored = false;
  double restore_ms = 0;                     ///< how long the restore took
  std::int64_t restore_replayed_inputs = 0;  ///< inputs pulled again and discarded
  /// Why the stage marked as the bottleneck is marked, or why none is (the
  /// consumer hardly waited, or nothing was measured yet).
  std::string bottleneck_reason{};

  /// The stages as an aligned text table (the stage column as wide as its
  /// longest name), the bottleneck marked with '*'.
  std::string to_string() const {
    std::vector<std::string> names;
    int width = 28;
    for (const StageStats& s : stages) {
      names.push_back(std::string(static_cast<std::size_t>(2 * s.depth), ' ') + s.name +
                      (s.autotuned ? " (auto)" : "") + (s.bottleneck ? " *" : ""));
      width = std::max(width, static_cast<int>(names.back().size()));
    }
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-*s %12s %10s %12s %6s %7s %7s\n", width, "stage",
                  "elements", "MB", "self us/elem", "par", "buffer", "wait%");
    out += line;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const StageStats& s = stages[i];
      out += names[i];
      out.append(static_cast<std::size_t>(width) - names[i].size(), ' ');
      std::snprintf(line, sizeof line, " %12lld %10.2f %12.3f %6s %7s %7s\n",
                    static_cast<long long>(s.elements), s.megabytes, s.self_us_per_element,
                    s.parallelism ? std::to_string(s.parallelism).c_str() : "-",
                    s.buffer ? std::to_string(s.buffer).c_str() : "-",
                    s.buffer || s.parallelism
                        ? detail::format_percent(s.consumer_wait_percent).c_str()
                        : "-");
      out += line;
    }
    for (const StageStats& s : stages) {  // remote reads, where a stage made any
      if (s.net_requests == 0) continue;
      std::snprintf(line, sizeof line,
                    "network: %s fetched %.2f MB in %lld requests (%lld retries), its readers "
                    "waited %s%% of the time",
                    s.name.c_str(), s.net_megabytes, static_cast<long long>(s.net_requests),
                    static_cast<long long>(s.net_retries),
                    detail::format_percent(s.net_wait_percent).c_str());
      out += line;
      if (s.readahead_in_flight > 0) {
        out += ", readahead " + std::to_string(s.readahead_in_flight) + " x " +
               detail::format_bytes(s.readahead_block_bytes) +
               (s.readahead_autotuned ? " (autotuned)" : "");
      }
      out += "\n";
    }
    std::snprintf(line, sizeof line, "(%.2f s; the consumer waited for input %s%% of the time)\n",
                  seconds, detail::format_percent(input_wait_percent).c_str());
    out += line;
    if (!bottleneck_reason.empty()) out += bottleneck_reason + "\n";
    if (checkpoints > 0) {
      std::snprintf(line, sizeof line,
                    "checkpoint: the last state has %s, saved in %.3f ms (%lld saves, %lld "
                    "compacted)\n",
                    detail::format_bytes(last_state_bytes).c_str(), last_save_ms,
                    static_cast<long long>(checkpoints),
                    static_cast<long long>(compacted_checkpoints));
      out += line;
    }
    if (restored) {
      std::snprintf(line, sizeof line,
                    "restore: %.3f ms, replaying %lld inputs to the saved position\n", restore_ms,
                    static_cast<long long>(restore_replayed_inputs));
      out += line;
    }
    return out;
  }
  /// Writes to_string() to `os`.
  friend std::ostream& operator<<(std::ostream& os, const PipelineStats& s) {
    return os << s.to_string();
  }
};

namespace detail {

/// A node's measurements at one moment, with derived costs.
struct NodeView {
  StageNode* node = nullptr;
  std::vector<std::size_t> inputs;  // indexes into the snapshot
  std::int64_t elements = 0;
  double inclusive_ns = 0;  // time per element seen by the consumer (sampled)
  double self_ns = 0;       // own time per produced element
  double wait_ns = 0;       // async: consumer's time per element spent waiting
  double bytes = 0;         // per element
  std::int64_t wait_total_ns = 0;
  std::int64_t work_ns = 0;
  /// Measured over a window: the stage produced nothing in it and has no
  /// iterator open (a later pass reads a cache instead of it). The
  /// optimizer gives it no time and no cores.
  bool idle = false;
};

/// Input elements per element of `v`: measured, or the node's nominal ratio
/// while either count is still zero (a shuffle filling, a first batch).
inline double input_ratio(const NodeView& v, const NodeView& in) noexcept {
  if (v.elements > 0 && in.elements > 0)
    return static_cast<double>(in.elements) / static_cast<double>(v.elements);
  return v.node->nominal_ratio;
}

/// A node's raw counters at one moment.
struct Counters {
  std::int64_t elements = 0, estimated_ns = 0, samples = 0, work_ns = 0, wait_ns = 0;
  static Counters read(const StageNode& n) noexcept {
    return {n.element_count(), n.estimated_ns.load(std::memory_order_relaxed),
            n.samples.load(std::memory_order_relaxed), n.work_ns.load(std::memory_order_relaxed),
            n.wait_ns.load(std::memory_order_relaxed)};
  }
};

/// Counters per node, to measure a window between two snapshots.
using Baseline = std::vector<std::pair<const StageNode*, Counters>>;

/// Takes a snapshot of the model and derives every node's costs. With a
/// baseline, costs come from the measurements made since it (unless a node
/// that is not idle has too few new samples: then all keep their overall
/// averages, and `out_windowed` is set false), and a node that produced
/// nothing since it and has no iterator open is idle; `out_baseline`
/// receives the counters read now.
inline std::vector<NodeView> snapshot(const Model& model, const Baseline* since = nullptr,
                                      Baseline* out_baseline = nullptr,
                                      bool* out_windowed = nullptr) {
  std::vector<NodeView> views;
  std::vector<StageNode*> order;
  model.for_each([&](StageNode& n) { order.push_back(&n); });
  views.resize(order.size());
  if (out_baseline) out_baseline->clear();
  // Window counts: elements may come from the window while per-element costs
  // do too; ratios between nodes use the same choice for all nodes.
  bool windowed = since != nullptr;
  std::vector<Counters> now(order.size()), base(order.size());
  std::vector<char> idle(order.size(), 0);
  for (std::size_t i = 0; i < order.size(); ++i) {
    now[i] = Counters::read(*order[i]);
    if (out_baseline) out_baseline->emplace_back(order[i], now[i]);
    if (since) {
      const auto it = std::find_if(since->begin(), since->end(),
                                   [&](const auto& p) { return p.first == order[i]; });
      if (it != since->end()) {
        base[i] = it->second;
        idle[i] = now[i].elements == base[i].elements && order[i]->closed();
      }
      if (!idle[i] && now[i].samples - base[i].samples < 8 && now[i].elements > 0) {
        windowed = false;
      }
    }
  }
  if (!windowed) base.assign(order.size(), Counters{});
  if (out_windowed) *out_windowed = windowed;
  for (std::size_t i = 0; i < order.size(); ++i) {
    StageNode& n = *order[i];
    NodeView& v = views[i];
    const Counters c{now[i].elements - base[i].elements, now[i].estimated_ns - base[i].estimated_ns,
                     now[i].samples - base[i].samples, now[i].work_ns - base[i].work_ns,
                     now[i].wait_ns - base[i].wait_ns};
    v.node = &n;
    v.idle = idle[i] != 0;
    v.elements = c.elements;
    v.inclusive_ns =
        c.elements ? static_cast<double>(c.estimated_ns) / static_cast<double>(c.elements) : 0;
    v.bytes = n.bytes_per_element();
    v.wait_total_ns = c.wait_ns;
    v.work_ns = c.work_ns;
    for (StageNode* in : model.inputs(&n)) {
      const auto it = std::find(order.begin(), order.end(), in);
      if (it != order.end()) v.inputs.push_back(static_cast<std::size_t>(it - order.begin()));
    }
  }
  for (NodeView& v : views) {
    // The inputs pulled on this stage's calling thread, per produced element.
    double inputs_ns = 0;
    if (v.node->pulls_inputs_inline()) {
      for (std::size_t i : v.inputs) {
        const NodeView& in = views[i];
        const double ratio =
            v.elements ? static_cast<double>(in.elements) / static_cast<double>(v.elements) : 0;
        inputs_ns += in.inclusive_ns * ratio;
      }
    }
    if (v.node->async()) {
      v.self_ns = v.elements ? static_cast<double>(v.work_ns) / static_cast<double>(v.elements) : 0;
      v.wait_ns = std::max(0.0, v.inclusive_ns - inputs_ns);
    } else {
      v.self_ns = std::max(0.0, v.inclusive_ns - inputs_ns);
    }
  }
  return views;
}

/// The consumer waiting less than this share of the time means the input is
/// not what limits it: no stage is marked as the bottleneck.
inline constexpr double bottleneck_min_wait = 0.05;

/// A stage's row depth: the visible stages between it and the root.
inline int visible_depth(const StageNode& n) noexcept {
  int depth = 0;
  for (const StageNode* p = n.parent(); p != nullptr; p = p->parent()) depth += p->hidden() ? 0 : 1;
  return depth;
}

/// The nearest stage above `n` that runs its inputs on parallel threads (a
/// parallel interleave), or null.
inline const StageNode* parallel_runner(const StageNode& n) noexcept {
  for (const StageNode* p = n.parent(); p != nullptr; p = p->parent()) {
    if (p->runs_inputs_in_parallel()) return p;
  }
  return nullptr;
}

/// Builds PipelineStats from a model (see PipelineIterator::stats()).
inline PipelineStats make_stats(const Model& model) {
  PipelineStats stats;
  const double elapsed_ns = static_cast<double>(now_ns() - model.start_ns());
  stats.seconds = elapsed_ns / 1e9;
  stats.checkpoints = model.saves.load(std::memory_order_relaxed);
  stats.last_state_bytes = model.last_state_bytes.load(std::memory_order_relaxed);
  stats.compacted_checkpoints = model.compacted_saves.load(std::memory_order_relaxed);
  stats.last_save_ms =
      static_cast<double>(model.last_save_ns.load(std::memory_order_relaxed)) / 1e6;
  stats.restored = model.restored.load(std::memory_order_relaxed);
  stats.restore_ms =
      static_cast<double>(model.last_restore_ns.load(std::memory_order_relaxed)) / 1e6;
  stats.restore_replayed_inputs = model.last_restore_replayed.load(std::memory_order_relaxed);
  const std::vector<NodeView> views = snapshot(model);
  if (views.empty()) return stats;
  const double root_elements = static_cast<double>(std::max<std::int64_t>(views[0].elements, 1));
  // The consumer's time inside next(): all of the time but its own between
  // calls (measured on every 16th call, steady for a training step), which
  // is steadier than the root's sampled call times (a parallel stage's calls
  // are either instant or long).
  const double own_ns = model.consumer_ns_per_element() * static_cast<double>(views[0].elements);
  const double waited = elapsed_ns > 0 ? std::clamp(1.0 - own_ns / elapsed_ns, 0.0, 1.0) : 0;
  stats.input_wait_percent = 100.0 * waited;
  double worst = -1, total = 0;
  std::size_t worst_row = 0;
  const StageNode* worst_node = nullptr;
  for (const NodeView& v : views) {
    const StageNode& n = *v.node;
    if (n.hidden()) continue;
    StageStats s;
    s.name = n.name();
    s.depth = visible_depth(n);
    s.elements = v.elements;
    s.megabytes = v.bytes * static_cast<double>(v.elements) / 1e6;
    s.self_us_per_element = v.self_ns / 1e3;
    if (n.shows_parallelism()) s.parallelism = n.parallelism.get();
    if (n.shows_buffer()) s.buffer = n.buffer.get();
    s.buffered = n.buffered.load(std::memory_order_relaxed);
    s.consumer_wait_percent =
        elapsed_ns > 0 ? 100.0 * static_cast<double>(v.wait_total_ns) / elapsed_ns : 0;
    s.autotuned = n.parallelism.tunable() || n.buffer.tunable();
    s.net_megabytes = static_cast<double>(n.net_bytes.load(std::memory_order_relaxed)) / 1e6;
    s.net_requests = n.net_requests.load(std::memory_order_relaxed);
    s.net_retries = n.net_retries.load(std::memory_order_relaxed);
    if (n.readahead.used()) {
      s.readahead_in_flight = n.readahead.in_flight.get();
      s.readahead_block_bytes = n.readahead.block_bytes.get();
      s.readahead_autotuned = n.readahead.tunable();
    }
    s.net_wait_percent =
        elapsed_ns > 0
            ? 100.0 * static_cast<double>(n.net_wait_ns.load(std::memory_order_relaxed)) /
                  elapsed_ns
            : 0;
    // Demand on the pipeline per final element: own time x elements per final
    // element, shared among the stage's parallel calls.
    const double demand = v.self_ns * static_cast<double>(v.elements) / root_elements /
                          static_cast<double>(std::max<std::int64_t>(s.parallelism, 1));
    total += demand;
    if (demand > worst) {
      worst = demand;
      worst_row = stats.stages.size();
      worst_node = &n;
    }
    stats.stages.push_back(std::move(s));
  }
  if (stats.stages.empty()) return stats;
  // Depths relative to the first visible stage.
  const int base = stats.stages.front().depth;
  for (auto& s : stats.stages) s.depth = std::max(0, s.depth - base);
  if (views[0].elements == 0 || worst <= 0) {
    stats.bottleneck_reason = "no bottleneck yet: nothing measured";
    return stats;
  }
  if (waited < bottleneck_min_wait) {
    stats.bottleneck_reason = "no bottleneck: the input kept up (the consumer waited " +
                              format_percent(100.0 * waited) + "% of the time)";
    return stats;
  }
  // The stage where the time goes: its own work (inputs excluded), per final
  // element and divided among its parallel calls, is the largest.
  StageStats& b = stats.stages[worst_row];
  b.bottleneck = true;
  std::string reason = "* bottleneck: " + b.name + ", " +
                       format_percent(total > 0 ? 100.0 * worst / total : 100.0) +
                       "% of the pipeline's work per element";
  if (b.parallelism > 0) {
    reason += " at parallelism " + std::to_string(b.parallelism) +
              (b.autotuned ? " (autotuned)" : "; raise .parallelism or use ingest::autotune");
  } else if (b.buffer > 0) {
    reason += " with a buffer of " + std::to_string(b.buffer);
  } else if (const StageNode* runner = parallel_runner(*worst_node)) {
    // Already inside a parallel interleave: that stage's knob is the one to turn.
    const std::int64_t p = runner->parallelism.get();
    reason += "; it runs in " + runner->name() + "'s parallel inputs (parallelism " +
              std::to_string(p) +
              (runner->parallelism.tunable()
                   ? ", autotuned)"
                   : "): raise " + runner->name() + "'s .parallelism or use ingest::autotune");
  } else {
    reason += "; it runs sequentially: move its work into a parallel map or interleave";
  }
  stats.bottleneck_reason = std::move(reason);
  return stats;
}

}  // namespace detail
}  // namespace ingest
