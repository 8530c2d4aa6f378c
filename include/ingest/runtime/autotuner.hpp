// The autotuner: a background thread per pipeline iterator that models the
// pipeline's output latency from the stages' measurements and hill-climbs
// the knobs set to ingest::autotune (parallelism of parallel map,
// map-and-batch and interleave; prefetch buffer sizes) toward the lowest
// latency, within a CPU budget (the parallelism of the stages running on the
// compute pool <= its threads + 1, the consumer thread that helps; each
// node says how many cores its knob keeps busy, so an interleave's fetchers
// count for the share of their time they compute rather than wait for I/O)
// and a RAM budget (buffered bytes <= ram_budget_bytes). tf.data counterpart:
// model::Model::Optimize with the hill-climbing algorithm.
//
// The model, as tf.data's, is each node's own formula (runtime/model.hpp:
// StageNode::modelled_time and its overrides): a synchronous stage adds its
// own time to its inputs'; an asynchronous stage decouples its producer
// (time y per element, divided by its parallelism) from its consumer (time
// x between calls) through a buffer of n elements, and the consumer waits
// p_empty * y, with p_empty from an M/M/1/n queue. The optimizer knows no
// stage kinds: it asks the nodes. Every tuning starts the knobs from their
// minimum and repeatedly applies the +1 (for buffers, x2) that lowers the
// modelled latency most, so knobs also come down when costs fall. It uses
// the measurements of the last period (or all of them while they are
// few), so it follows stages whose costs change. It runs after 20 ms, then
// with a period doubling up to 1 s, and starts over 10 ms into each later
// pass of a repeat; a stage that has stopped (no iterator open, nothing
// produced in the window: the stages before a cache a pass reads) takes no
// time and no budget in the model and keeps its knobs. A growth is kept
// only while its modelled gain shows up in the next window's measurements
// (else the knobs it grew go back and are held there, for longer after
// each failure). Every change is
// visible in stats() and, when tracing, as a counter in the trace.
//
// The readahead of remote readers (runtime/model.hpp: RemoteReadahead, the
// blocks in flight per reader and the block size) is not in the latency
// model: it is measured. Each tuning step hands a stage's network counters
// of the window since the last step to next_readahead, which grows a knob
// while the readers wait on the network and the fetch rate keeps rising,
// undoes a growth that did not pay, and shrinks both to fit the RAM budget.
// The bytes the readahead holds count against the same budget as the
// buffers: the buffers are tuned within what the readahead holds now, the
// readahead within what the buffers leave.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ingest/core/clock.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/runtime/model.hpp"
#include "ingest/runtime/stats.hpp"

namespace ingest::detail {

/// Available memory in bytes (MemAvailable from /proc/meminfo, else free pages).
inline std::int64_t available_memory_bytes() {
  // <cstdio>, not <fstream>: every pipeline header includes this one.
  if (std::FILE* meminfo = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    long long kb = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, meminfo))
      found = std::sscanf(line, "MemAvailable: %lld", &kb) == 1;
    std::fclose(meminfo);
    if (found) return static_cast<std::int64_t>(kb) * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : std::int64_t{1} << 30;
}

/// The default RAM budget: half of the memory available when tuning starts.
inline std::int64_t default_ram_budget() { return available_memory_bytes() / 2; }

/// The knobs of a model and the cost model over them; pure functions of a
/// snapshot, so the decisions can be tested on synthetic costs.
class Optimizer {
 public:
  struct Budget {
    std::int64_t cpu = 1;  // total parallelism of the tuned stages
    double ram_bytes = 0;  // buffered bytes
  };

  Optimizer(std::vector<NodeView> views, double consumer_ns)
      : views_(std::move(views)), consumer_ns_(consumer_ns) {
    for (std::size_t i = 0; i < views_.size(); ++i) {
      StageNode& n = *views_[i].node;
      par_.push_back(std::max<std::int64_t>(n.parallelism.get(), 1));
      buf_.push_back(std::max<std::int64_t>(n.buffer.get(), 1));
      par_max_.push_back(n.parallelism.max());
      buf_max_.push_back(n.buffer.max());
    }
  }

  /// Keeps view i's parallelism (or buffer) at most `value` in optimize().
  void cap(std::size_t i, bool buffer, std::int64_t value) {
    std::int64_t& max = buffer ? buf_max_[i] : par_max_[i];
    max = std::max<std::int64_t>(1, std::min(max, value));
  }

  /// Modelled time per final element (ns) for the current knob values.
  double output_time() const { return views_.empty() ? 0 : time(0, consumer_ns_); }

  /// Bytes the buffers hold at most with the current knob values.
  double buffered_bytes() const {
    double total = 0;
    for (std::size_t i = 0; i < views_.size(); ++i) {
      if (!views_[i].idle) total += views_[i].node->buffered_bytes(knobs(i), views_[i].bytes);
    }
    return total;
  }

  /// Hill-climbs the tunable knobs from their minimum, keeping a change only
  /// if it shortens the time per element, the consumer's own time included,
  /// by more than 0.5% (a pipeline already faster than its consumer gets no
  /// more threads or memory). An idle stage (NodeView::idle) keeps its
  /// knobs and takes no budget.
  void optimize(const Budget& budget) {
    for (std::size_t i = 0; i < views_.size(); ++i) {
      const StageNode& n = *views_[i].node;
      if (views_[i].idle) continue;
      if (n.parallelism.tunable()) par_[i] = n.parallelism.min();
      if (n.buffer.tunable()) buf_[i] = n.buffer.min();
    }
    for (int step = 0; step < 10'000; ++step) {
      const double now = output_time();
      double best = now;
      std::size_t best_i = 0;
      bool best_is_buffer = false;
      for (std::size_t i = 0; i < views_.size(); ++i) {
        const StageNode& n = *views_[i].node;
        if (views_[i].idle) continue;
        if (n.parallelism.tunable() && par_[i] < par_max_[i]) {
          ++par_[i];
          const double t = output_time();
          if (t < best && buffered_bytes() <= budget.ram_bytes &&
              cpu_demand() <= static_cast<double>(budget.cpu) + 1e-9) {
            best = t;
            best_i = i;
            best_is_buffer = false;
          }
          --par_[i];
        }
        if (n.buffer.tunable() && buf_[i] < buf_max_[i]) {
          const std::int64_t old = buf_[i];
          buf_[i] = std::min(buf_max_[i], old * 2);
          const double t = output_time();
          if (t < best && buffered_bytes() <= budget.ram_bytes) {
            best = t;
            best_i = i;
            best_is_buffer = true;
          }
          buf_[i] = old;
        }
      }
      if (!(best + consumer_ns_ < (now + consumer_ns_) * 0.995)) break;
      if (best_is_buffer) {
        buf_[best_i] = std::min(buf_max_[best_i], buf_[best_i] * 2);
      } else {
        ++par_[best_i];
      }
    }
  }

  std::int64_t parallelism(std::size_t i) const { return par_[i]; }
  std::int64_t buffer(std::size_t i) const { return buf_[i]; }
  const std::vector<NodeView>& views() const noexcept { return views_; }

 private:
  KnobValues knobs(std::size_t i) const { return {par_[i], buf_[i]}; }
  // Cores the stages keep busy with the current knob values, fixed ones included.
  double cpu_demand() const {
    double total = 0;
    for (std::size_t i = 0; i < views_.size(); ++i) {
      if (!views_[i].idle) total += views_[i].node->cpu_demand(knobs(i));
    }
    return total;
  }

  // Time per element of inputs, summed and scaled by elements per output.
  double inputs_time(std::size_t i, double consumer_ns) const {
    const NodeView& v = views_[i];
    double total = 0;
    for (std::size_t c : v.inputs) {
      if (views_[c].idle) continue;  // not running: its inputs are not either
      const double ratio = input_ratio(v, views_[c]);
      if (ratio <= 0) continue;
      total += ratio * time(c, consumer_ns / ratio);
    }
    return total;
  }

  // Modelled time per element of view i, as seen by its consumer, whose own
  // time between calls is consumer_ns.
  double time(std::size_t i, double consumer_ns) const {
    const NodeView& v = views_[i];
    const auto inputs = [this, i](double c) { return inputs_time(i, c); };
    return v.node->modelled_time(v.self_ns, knobs(i), consumer_ns, InputsTime(inputs));
  }

  std::vector<NodeView> views_;
  double consumer_ns_;
  std::vector<std::int64_t> par_, buf_;
  std::vector<std::int64_t> par_max_, buf_max_;  // the knobs' maxima, or lower caps
};

/// Whether a tuning's modelled gain showed up in the measurements of the
/// window after it: the consumer-visible time per element fell by at least
/// half of what the model predicted, or came within 25% of the prediction.
inline bool gain_showed(double modelled_before, double modelled_after, double measured_before,
                        double measured_after) noexcept {
  const double predicted = modelled_before - modelled_after;
  if (predicted <= 0) return true;
  return measured_before - measured_after >= 0.5 * predicted ||
         measured_after <= 1.25 * modelled_after;
}

/// What the remote readers of one stage did between two tuning steps.
struct ReadaheadWindow {
  double seconds = 0;             ///< the window's length
  std::int64_t bytes = 0;         ///< fetched
  std::int64_t requests = 0;      ///< sent
  std::int64_t wait_ns = 0;       ///< the readers waited for the network, summed over them
  std::int64_t open_readers = 0;  ///< readers open at its end
};

/// A stage's readahead as a tuning step leaves it, and what the next step
/// needs to judge the last growth.
struct ReadaheadState {
  enum class Grew { none, in_flight, block };
  std::int64_t in_flight = RemoteReadahead::initial_in_flight;
  std::int64_t block_bytes = RemoteReadahead::initial_block_bytes;
  bool measured = false;            ///< a window with requests was seen (the first only measures)
  Grew grew = Grew::none;           ///< the knob the last step grew, on trial
  std::int64_t grew_from = 0;       ///< its value before
  double rate_before = 0;           ///< bytes/s in the window before the growth
  std::int64_t hold_in_flight = 0;  ///< steps in_flight may not grow (a growth did not pay)
  std::int64_t hold_block = 0;      ///< steps block_bytes may not grow
  std::int64_t backoff_in_flight = 2, backoff_block = 2;  ///< the next holds (doubling, <= 64)
};

/// The bounds of one stage's readahead in a tuning step.
struct ReadaheadLimits {
  bool in_flight_tunable = true, block_tunable = true;
  std::int64_t min_in_flight = RemoteReadahead::min_in_flight;
  std::int64_t max_in_flight = RemoteReadahead::max_in_flight;
  std::int64_t min_block = RemoteReadahead::min_block_bytes;
  std::int64_t max_block = RemoteReadahead::max_block_bytes;
  double ram_bytes = 0;  ///< what this stage's readers may hold (the RAM budget less the rest)
};

/// The readers waiting on the network less than this share of the time
/// (summed over them) means the network is not what they wait for.
inline constexpr double readahead_min_wait_share = 0.1;
/// A growth pays when the fetch rate rises by at least this factor.
inline constexpr double readahead_min_gain = 1.1;
/// A ranged request moving less than this many bytes per second of its
/// duration is latency-bound: larger blocks spread its fixed cost (the
/// time to first byte) over more bytes.
inline constexpr double readahead_latency_bound_rate = 64.0 * (1 << 20);

/// One tuning step of a stage's readahead, a pure function of its
/// measurements (hill climbing with the autotuner's economy rule):
///  1. Over the RAM budget (open readers x (in_flight + 1) x block_bytes,
///     counting one reader while none is open), halve in_flight, then the
///     block size, down to their minimum; nothing grows then.
///  2. A growth on trial is judged on the window after it: kept if the fetch
///     rate (bytes per second) rose by 10%, else undone and that knob held
///     for 2, 4, ... 64 steps.
///  3. With no trial and the readers waiting on the network at least 10% of
///     the window: double in_flight (up to 16), or, when it cannot grow and
///     the requests are latency-bound (block / request time, the request
///     time from Little's law: open readers x in_flight x window / requests,
///     is under 64 MiB/s), double the block size (up to 16 MiB); only if
///     the result fits the RAM budget.
/// A window with no reader open or fewer than 2 requests decides nothing,
/// nor does the first one with requests (it starts the measurements).
inline ReadaheadState next_readahead(ReadaheadState s, const ReadaheadWindow& w,
                                     const ReadaheadLimits& lim) {
  using Grew = ReadaheadState::Grew;
  if (lim.in_flight_tunable)
    s.in_flight = std::clamp(s.in_flight, lim.min_in_flight, lim.max_in_flight);
  if (lim.block_tunable) s.block_bytes = std::clamp(s.block_bytes, lim.min_block, lim.max_block);
  s.hold_in_flight = std::max<std::int64_t>(0, s.hold_in_flight - 1);
  s.hold_block = std::max<std::int64_t>(0, s.hold_block - 1);
  const std::int64_t readers = std::max<std::int64_t>(w.open_readers, 1);
  const auto fits = [&](std::int64_t in_flight, std::int64_t block) {
    return RemoteReadahead::held_bytes(readers, in_flight, block) <= lim.ram_bytes;
  };
  if (!fits(s.in_flight, s.block_bytes)) {  // 1. the budget first
    while (!fits(s.in_flight, s.block_bytes)) {
      if (lim.in_flight_tunable && s.in_flight > lim.min_in_flight) {
        s.in_flight = std::max(lim.min_in_flight, s.in_flight / 2);
      } else if (lim.block_tunable && s.block_bytes > lim.min_block) {
        s.block_bytes = std::max(lim.min_block, s.block_bytes / 2);
      } else {
        break;  // at the minimum: a reader needs its blocks
      }
    }
    s.grew = Grew::none;
    return s;
  }
  if (w.open_readers <= 0 || w.requests < 2 || w.seconds <= 0 || w.bytes <= 0) return s;
  // The first window holds the first opens (one request each, waited for):
  // its rate would make any growth after it look like a gain.
  if (!std::exchange(s.measured, true)) return s;
  const double rate = static_cast<double>(w.bytes) / w.seconds;
  if (s.grew != Grew::none) {  // 2. judge the growth on trial
    const Grew grew = std::exchange(s.grew, Grew::none);
    if (rate >= s.rate_before * readahead_min_gain) return s;
    if (grew == Grew::in_flight) {
      s.in_flight = s.grew_from;
      s.hold_in_flight = s.backoff_in_flight;
      s.backoff_in_flight = std::min<std::int64_t>(s.backoff_in_flight * 2, 64);
    } else {
      s.block_bytes = s.grew_from;
      s.hold_block = s.backoff_block;
      s.backoff_block = std::min<std::int64_t>(s.backoff_block * 2, 64);
    }
    return s;
  }
  const double wait_share = static_cast<double>(w.wait_ns) / (w.seconds * 1e9);
  if (wait_share < readahead_min_wait_share) return s;  // 3. grow where the network is waited on
  const std::int64_t more_in_flight = std::min(lim.max_in_flight, s.in_flight * 2);
  if (lim.in_flight_tunable && s.hold_in_flight == 0 && more_in_flight > s.in_flight &&
      fits(more_in_flight, s.block_bytes)) {
    s.grew = Grew::in_flight;
    s.grew_from = std::exchange(s.in_flight, more_in_flight);
    s.rate_before = rate;
    return s;
  }
  const double request_seconds =
      static_cast<double>(readers * s.in_flight) * w.seconds / static_cast<double>(w.requests);
  const bool latency_bound =
      static_cast<double>(s.block_bytes) / request_seconds < readahead_latency_bound_rate;
  const std::int64_t bigger_block = std::min(lim.max_block, s.block_bytes * 2);
  if (lim.block_tunable && latency_bound && s.hold_block == 0 && bigger_block > s.block_bytes &&
      fits(s.in_flight, bigger_block)) {
    s.grew = Grew::block;
    s.grew_from = std::exchange(s.block_bytes, bigger_block);
    s.rate_before = rate;
  }
  return s;
}

/// Runs the Optimizer periodically on a model and applies its decisions.
class Autotuner {
 public:
  /// With `background` false, no thread: tunings happen in tune_once() only (tests).
  Autotuner(std::shared_ptr<Model> model, std::int64_t cpu_budget, bool background = true)
      : model_(std::move(model)), cpu_budget_(cpu_budget) {
    if (background) {
      model_->set_pass_waker([this] {
        { std::lock_guard lock(mu_); }  // the loop is waiting or will see the new count
        cv_.notify_all();
      });
      thread_ = std::thread([this] { loop(); });
    }
  }
  Autotuner(const Autotuner&) = delete;
  Autotuner& operator=(const Autotuner&) = delete;
  ~Autotuner() {
    if (thread_.joinable()) model_->set_pass_waker({});  // no wake-up runs after this
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Runs one tuning now (for tests); returns the modelled output time (ns).
  double tune_once() { return tune(); }

 private:
  // Tunes after 20 ms, then with a period doubling up to 1 s. A later pass
  // of a repeat (Model::begin_pass) starts over: its window begins with the
  // pass, the first tuning comes 10 ms in, and the period doubles from
  // there. Without that, a pass shorter than the period (W5's second epoch,
  // read from a cache: 170 ms after a 700 ms first) ran on the knobs tuned
  // for the stages it no longer runs.
  void loop() {
    trace_initial_values();
    auto period = std::chrono::milliseconds(20);
    std::int64_t passes = model_->passes();
    std::unique_lock lock(mu_);
    for (;;) {
      const bool new_pass =
          cv_.wait_for(lock, period, [&] { return stop_ || model_->passes() != passes; });
      if (stop_) return;
      lock.unlock();
      if (new_pass) {
        passes = model_->passes();
        begin_window();
        period = std::chrono::milliseconds(10);
      } else {
        tune();
        period = std::min(period * 2, std::chrono::milliseconds(1000));
      }
      lock.lock();
    }
  }

  // The next tuning measures from now; a growth on trial is not judged
  // across a pass boundary.
  void begin_window() {
    (void)snapshot(*model_, nullptr, &baseline_);
    trial_.reset();
  }

  // Records every tunable knob's starting value in the trace.
  void trace_initial_values() {
    if (!model_->tracing()) return;
    const std::int64_t now = now_ns();
    model_->for_each([&](StageNode& n) {
      if (n.parallelism.tunable()) trace_knob(n, "parallelism", n.parallelism.get(), now);
      if (n.buffer.tunable()) trace_knob(n, "buffer", n.buffer.get(), now);
      if (n.readahead.in_flight.tunable())
        trace_knob(n, "readahead in_flight", n.readahead.in_flight.get(), now);
    });
  }

  void trace_knob(StageNode& n, const char* what, std::int64_t value, std::int64_t now) {
    model_->trace({n.name() + " " + what, 'C', now, 0, thread_number(),
                   "\"" + std::string(what) + "\": " + std::to_string(value)});
  }

  // A tuning that grew knobs, on trial until the next windowed measurement.
  struct Trial {
    struct Growth {
      const StageNode* node;
      bool buffer;
      std::int64_t from;
    };
    std::vector<Growth> grown;
    double modelled_before = 0, modelled_after = 0;  // ns per element
    double measured_before = 0;                      // the consumer-visible ns per element
    int waited = 0;                                  // tunings without a windowed measurement
  };
  // A knob kept at most `value` until tuning `until`, after a growth that did not pay.
  struct Ceiling {
    const StageNode* node;
    bool buffer;
    std::int64_t value;
    std::int64_t until;
    std::int64_t hold;  // tunings; doubles each time the same growth fails
  };

  // Economy: a growth is kept only while the modelled gain shows up in the
  // measurements. When it did not, each knob it grew returns to its value
  // before and is held there for a while (4 tunings, doubling on each new
  // failure, up to 64), after which it may try again.
  void judge(Trial& trial, double measured, bool windowed) {
    if (!windowed) {
      if (++trial.waited < 3) return;  // judge on a window of its own
      trial_.reset();
      return;
    }
    if (!gain_showed(trial.modelled_before, trial.modelled_after, trial.measured_before,
                     measured)) {
      for (const Trial::Growth& g : trial.grown) {
        auto c = std::find_if(ceilings_.begin(), ceilings_.end(), [&](const Ceiling& x) {
          return x.node == g.node && x.buffer == g.buffer;
        });
        if (c == ceilings_.end())
          c = ceilings_.insert(ceilings_.end(), {g.node, g.buffer, 0, 0, 2});
        c->value = g.from;
        c->hold = std::min<std::int64_t>(c->hold * 2, 64);
        c->until = tunings_ + c->hold;
        if (log_) {
          log_line("autotune: " + g.node->name() + (g.buffer ? " buffer" : " parallelism") +
                   " back to " + std::to_string(g.from) + " for " + std::to_string(c->hold) +
                   " tunings: modelled " +
                   std::to_string(static_cast<std::int64_t>(trial.modelled_before)) + " -> " +
                   std::to_string(static_cast<std::int64_t>(trial.modelled_after)) +
                   " ns/elem, measured " +
                   std::to_string(static_cast<std::int64_t>(trial.measured_before)) + " -> " +
                   std::to_string(static_cast<std::int64_t>(measured)));
        }
      }
    }
    trial_.reset();
  }

  double tune() {
    ++tunings_;
    Baseline next_baseline;
    bool windowed = false;
    std::vector<NodeView> views =
        snapshot(*model_, baseline_.empty() ? nullptr : &baseline_, &next_baseline, &windowed);
    baseline_ = std::move(next_baseline);
    if (views.empty()) return 0;
    const double measured = views[0].inclusive_ns;  // the consumer's time in next(), per element
    if (trial_) judge(*trial_, measured, windowed);
    const double consumer_ns = model_->consumer_ns_per_element();
    Optimizer optimizer(std::move(views), consumer_ns);
    for (std::size_t i = 0; i < optimizer.views().size(); ++i) {
      for (const Ceiling& c : ceilings_) {
        if (c.node == optimizer.views()[i].node && tunings_ < c.until) {
          optimizer.cap(i, c.buffer, c.value);
        }
      }
    }
    const double modelled_before = optimizer.output_time();
    Optimizer::Budget budget;
    const std::int64_t cpu = model_->cpu_budget.load(std::memory_order_relaxed);
    budget.cpu = cpu > 0 ? cpu : cpu_budget_;
    std::int64_t ram = model_->ram_budget_bytes.load(std::memory_order_relaxed);
    if (ram <= 0) {
      if (default_ram_ <= 0) default_ram_ = default_ram_budget();
      ram = default_ram_;
    }
    // The remote readers' readahead holds memory too: the buffers get what it leaves.
    double readahead_bytes = 0;
    for (const NodeView& v : optimizer.views()) readahead_bytes += v.node->readahead.held_bytes();
    budget.ram_bytes = std::max(0.0, static_cast<double>(ram) - readahead_bytes);
    optimizer.optimize(budget);
    if (log_) log_decisions(optimizer, consumer_ns, budget);
    const std::int64_t now = now_ns();
    Trial trial{{}, modelled_before, optimizer.output_time(), measured, 0};
    for (std::size_t i = 0; i < optimizer.views().size(); ++i) {
      StageNode& n = *optimizer.views()[i].node;
      if (n.parallelism.tunable() && optimizer.parallelism(i) > n.parallelism.get())
        trial.grown.push_back({&n, false, n.parallelism.get()});
      if (n.buffer.tunable() && optimizer.buffer(i) > n.buffer.get())
        trial.grown.push_back({&n, true, n.buffer.get()});
      apply(n, n.parallelism, optimizer.parallelism(i), "parallelism", now);
      apply(n, n.buffer, optimizer.buffer(i), "buffer", now);
    }
    if (!trial.grown.empty() && trial.modelled_after < trial.modelled_before) {
      trial_ = std::move(trial);
    }
    tune_readahead(optimizer, static_cast<double>(ram) - optimizer.buffered_bytes(),
                   readahead_bytes, now);
    return optimizer.output_time();
  }

  // The per-stage readahead state between tuning steps, and the network
  // counters at the last step (the window's start).
  struct ReadaheadTuning {
    const StageNode* node = nullptr;
    ReadaheadState state{};
    std::int64_t bytes = 0, requests = 0, wait_ns = 0, at_ns = 0;
  };

  // One step of next_readahead for every stage whose readers have a tunable
  // readahead, within the RAM left by the buffers (`ram_left`) less the
  // other stages' readahead (`readahead_bytes` holds all of it).
  void tune_readahead(const Optimizer& optimizer, double ram_left, double readahead_bytes,
                      std::int64_t now) {
    for (const NodeView& v : optimizer.views()) {
      StageNode& n = *v.node;
      RemoteReadahead& ra = n.readahead;
      if (!ra.used() || !ra.tunable()) continue;
      auto t = std::find_if(readahead_.begin(), readahead_.end(),
                            [&](const ReadaheadTuning& x) { return x.node == &n; });
      if (t == readahead_.end()) {
        t = readahead_.insert(readahead_.end(), ReadaheadTuning{});
        t->node = &n;
        t->at_ns = model_->start_ns();
      }
      const std::int64_t bytes = n.net_bytes.load(std::memory_order_relaxed);
      const std::int64_t requests = n.net_requests.load(std::memory_order_relaxed);
      const std::int64_t wait = n.net_wait_ns.load(std::memory_order_relaxed);
      const ReadaheadWindow window{static_cast<double>(now - t->at_ns) / 1e9, bytes - t->bytes,
                                   requests - t->requests, wait - t->wait_ns,
                                   ra.open_readers.load(std::memory_order_relaxed)};
      t->bytes = bytes;
      t->requests = requests;
      t->wait_ns = wait;
      t->at_ns = now;
      ReadaheadLimits lim;
      lim.in_flight_tunable = ra.in_flight.tunable();
      lim.block_tunable = ra.block_bytes.tunable();
      lim.min_in_flight = ra.in_flight.min();
      lim.max_in_flight = ra.in_flight.max();
      lim.min_block = ra.block_bytes.min();
      lim.max_block = ra.block_bytes.max();
      lim.ram_bytes = ram_left - (readahead_bytes - ra.held_bytes());
      t->state.in_flight = ra.in_flight.get();
      t->state.block_bytes = ra.block_bytes.get();
      t->state = next_readahead(t->state, window, lim);
      if (log_ && (t->state.in_flight != ra.in_flight.get() ||
                   t->state.block_bytes != ra.block_bytes.get())) {
        log_line("autotune: " + n.name() + " readahead " + std::to_string(ra.in_flight.get()) +
                 " x " + std::to_string(ra.block_bytes.get()) + " -> " +
                 std::to_string(t->state.in_flight) + " x " + std::to_string(t->state.block_bytes) +
                 " bytes (fetched " + std::to_string(window.bytes) + " bytes in " +
                 std::to_string(static_cast<std::int64_t>(window.seconds * 1e3)) + " ms, waited " +
                 std::to_string(window.wait_ns / 1'000'000) + " ms, " +
                 std::to_string(window.open_readers) + " readers)");
      }
      apply(n, ra.in_flight, t->state.in_flight, "readahead in_flight", now);
      apply(n, ra.block_bytes, t->state.block_bytes, "readahead block_bytes", now);
    }
  }

  void log_decisions(const Optimizer& o, double consumer_ns, const Optimizer::Budget& budget) {
    std::string line = "autotune: consumer " +
                       std::to_string(static_cast<std::int64_t>(consumer_ns)) + " ns/elem, cpu " +
                       std::to_string(budget.cpu) + ", modelled " +
                       std::to_string(static_cast<std::int64_t>(o.output_time())) + " ns/elem;";
    for (std::size_t i = 0; i < o.views().size(); ++i) {
      const NodeView& v = o.views()[i];
      if (!v.node->parallelism.tunable() && !v.node->buffer.tunable()) continue;
      line += " " + v.node->name() + " (self " +
              std::to_string(static_cast<std::int64_t>(v.self_ns)) + " ns, " +
              std::to_string(v.elements) + " elems)";
      if (v.node->parallelism.tunable()) line += " parallelism " + std::to_string(o.parallelism(i));
      if (v.node->buffer.tunable()) line += " buffer " + std::to_string(o.buffer(i));
      line += ";";
    }
    log_line(line);
  }

  void apply(StageNode& n, Knob& knob, std::int64_t value, const char* what, std::int64_t now) {
    if (!knob.tunable() || knob.get() == value) return;
    knob.value.store(value, std::memory_order_relaxed);
    if (model_->tracing()) trace_knob(n, what, value, now);
  }

  std::shared_ptr<Model> model_;
  std::int64_t cpu_budget_;
  std::int64_t default_ram_ = 0;
  bool log_ = std::getenv("INGEST_AUTOTUNE_LOG") != nullptr;  // log every decision
  Baseline baseline_;           // counters at the previous tuning: costs come from the window since
  std::optional<Trial> trial_;  // the last tuning's growth, until judged
  std::vector<Ceiling> ceilings_;           // knobs held back after growths that did not pay
  std::vector<ReadaheadTuning> readahead_;  // stages whose remote readers' readahead is tuned
  std::int64_t tunings_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ingest::detail
