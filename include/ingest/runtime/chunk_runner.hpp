// Runs chunks of user-function work on the pool, shared by parallel map and
// map-and-batch. A chunk slot goes idle -> pending (the consumer loaded its
// inputs) -> running (a worker or the consumer claimed it) -> done -> idle.
// At most `parallelism` pool tasks are active; each keeps claiming the
// oldest pending chunk until none is left, so the pool stays busy between
// the consumer's calls. A consumer waiting for a chunk runs pending chunks
// itself when fewer than `parallelism` threads are computing, so at most
// `parallelism` calls run at once and a consumer with nothing better to do
// takes the place of a pool thread that has not started yet. Pool tasks
// never wait for anything, so no pool size can deadlock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "ingest/runtime/chunking.hpp"
#include "ingest/runtime/runtime.hpp"
#include "ingest/runtime/sync.hpp"

namespace ingest::detail {

/// ChunkRunner's scheduling, whatever its Work and Run: the slots' states,
/// the computing places and the queued workers. Compiled once, not once for
/// every map function; ChunkRunner adds the work and runs it.
class ChunkScheduler : public std::enable_shared_from_this<ChunkScheduler> {
 public:
  enum : int { idle = 0, pending = 1, running = 2, done = 3 };
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

  ChunkScheduler(const ChunkScheduler&) = delete;
  ChunkScheduler& operator=(const ChunkScheduler&) = delete;

  std::size_t capacity() const noexcept { return states_.size(); }
  int state(std::size_t slot) const noexcept {
    return states_[slot]->state.load(std::memory_order_acquire);
  }

  // ---- consumer side ----

  /// An idle slot, or `none`.
  std::size_t find_idle() const noexcept {
    for (std::size_t i = 0; i < states_.size(); ++i) {
      if (state(i) == idle) return i;
    }
    return none;
  }

  /// True if the calling consumer could run a pending chunk now.
  bool can_help() const noexcept {
    return computing_.load(std::memory_order_acquire) < limit() && has_pending();
  }

  /// Marks a consumed slot reusable.
  void release(std::size_t slot) noexcept {
    states_[slot]->state.store(idle, std::memory_order_release);
  }

  /// Waits until `ready()` (which reads slot states) is true; woken by every completion.
  template <class Ready>
  void wait_until(Ready&& ready) noexcept {
    done_.wait_until(ready);
  }

  /// True if some slot waits for a thread to run it.
  bool has_pending() const noexcept {
    for (const SlotState* s : states_) {
      if (s->state.load(std::memory_order_acquire) == pending) return true;
    }
    return false;
  }

  /// Stops new chunks from starting and waits for the running ones.
  void cancel_and_join() noexcept {
    cancelled_.store(true, std::memory_order_release);
    for (SlotState* s : states_) {
      int expected = pending;
      s->state.compare_exchange_strong(expected, idle, std::memory_order_acq_rel);
    }
    done_.wait_until([this] {
      for (const SlotState* s : states_) {
        if (s->state.load(std::memory_order_acquire) == running) return false;
      }
      return true;
    });
  }

  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }

 protected:
  struct SlotState {
    std::atomic<int> state{idle};
    std::atomic<std::uint64_t> seq{0};
  };

  explicit ChunkScheduler(Runtime* runtime) noexcept : runtime_(runtime) {}
  ~ChunkScheduler() = default;

  // Publishes a loaded slot for up to `parallelism` threads.
  void publish(std::size_t slot, std::size_t parallelism) noexcept {
    SlotState& s = *states_[slot];
    s.seq.store(next_seq_++, std::memory_order_relaxed);
    s.state.store(pending, std::memory_order_release);
    // (Compared with int counters: a parallelism of 2^40 must not wrap to 0.)
    parallelism_.store(std::min<std::size_t>(parallelism, std::numeric_limits<int>::max()),
                       std::memory_order_relaxed);
  }

  int limit() const noexcept {
    return static_cast<int>(parallelism_.load(std::memory_order_relaxed));
  }

  // Takes one of the `parallelism` computing places, if one is free.
  bool enter() noexcept {
    int computing = computing_.load(std::memory_order_relaxed);
    while (computing < limit()) {
      if (computing_.compare_exchange_weak(computing, computing + 1, std::memory_order_acq_rel))
        return true;
    }
    return false;
  }
  // Gives the place back; true if what is still pending should go to the pool.
  bool leave() noexcept {
    computing_.fetch_sub(1, std::memory_order_acq_rel);
    return !cancelled() && has_pending();
  }

  // True if a pool worker is to be posted (counted as queued): unless
  // computing and queued workers fill the places.
  bool reserve_worker() noexcept {
    int queued = queued_.load(std::memory_order_relaxed);
    for (;;) {
      if (queued + computing_.load(std::memory_order_acquire) >= limit()) return false;
      if (queued_.compare_exchange_weak(queued, queued + 1, std::memory_order_acq_rel)) return true;
    }
  }

  // A posted worker starts: true if it took a place (else the consumer took
  // it meanwhile).
  bool worker_starts() noexcept {
    queued_.fetch_sub(1, std::memory_order_acq_rel);
    return enter();
  }
  // A worker gives its place back after its loop; true if it is to be
  // posted again: work submitted after its last look, or left at the end
  // of its time slice.
  bool worker_ends(bool sliced) noexcept {
    computing_.fetch_sub(1, std::memory_order_acq_rel);
    return !cancelled() && (sliced || has_pending());
  }

  // Claims `slot` if nobody has started it.
  bool claim(std::size_t slot) noexcept {
    int expected = pending;
    return states_[slot]->state.compare_exchange_strong(expected, running,
                                                        std::memory_order_acq_rel);
  }

  bool claim_oldest(std::size_t& out) noexcept {
    for (;;) {
      std::size_t best = none;
      std::uint64_t best_seq = std::numeric_limits<std::uint64_t>::max();
      for (std::size_t i = 0; i < states_.size(); ++i) {
        if (states_[i]->state.load(std::memory_order_acquire) != pending) continue;
        const std::uint64_t seq = states_[i]->seq.load(std::memory_order_relaxed);
        if (seq < best_seq) {
          best_seq = seq;
          best = i;
        }
      }
      if (best == none) return false;
      if (claim(best)) {
        out = best;
        return true;
      }
    }
  }

  // A claimed slot's chunk has run.
  void finish(std::size_t slot) noexcept {
    states_[slot]->state.store(done, std::memory_order_release);
    done_.notify();
  }

  Runtime* runtime_;
  std::vector<SlotState*> states_;  // the slots' (owned by ChunkRunner)
  std::atomic<bool> cancelled_{false};

 private:
  std::uint64_t next_seq_ = 0;     // consumer only
  std::atomic<int> computing_{0};  // threads inside execute loops (workers and a helping consumer)
  std::atomic<int> queued_{0};     // workers posted but not started
  std::atomic<std::size_t> parallelism_{1};
  Notifier done_;
};

/// `Run` is a function object: `void operator()(Work&, const std::atomic<bool>& cancelled) const`.
/// It must not throw (it records its errors in the Work).
template <class Work, class Run>
class ChunkRunner : public ChunkScheduler {
 public:
  ChunkRunner(std::size_t capacity, Run run, Runtime* runtime)
      : ChunkScheduler(runtime), run_(std::move(run)) {
    slots_.reserve(capacity);
    states_.reserve(capacity);
    for (std::size_t i = 0; i < capacity; ++i) {
      slots_.push_back(std::make_unique<Slot>());
      states_.push_back(slots_.back().get());
    }
  }

  Work& work(std::size_t slot) noexcept { return slots_[slot]->work; }
  const Run& run() const noexcept { return run_; }
  Run& run() noexcept { return run_; }

  /// Publishes a loaded slot and makes sure up to `parallelism` pool tasks run.
  void submit(std::size_t slot, std::size_t parallelism) {
    publish(slot, parallelism);
    post_worker();
  }

  /// Runs `slot` on the calling thread if nobody has started it and fewer
  /// than `parallelism` threads are computing.
  bool help(std::size_t slot) {
    if (!enter()) return false;
    const bool claimed = claim(slot);
    if (claimed) execute(slot);
    if (leave()) post_worker();
    return claimed;
  }

  /// Runs the oldest pending slot on the calling thread, within the
  /// parallelism budget; false if none was run.
  bool help_oldest() {
    if (!enter()) return false;
    std::size_t slot;
    const bool claimed = claim_oldest(slot);
    if (claimed) execute(slot);
    if (leave()) post_worker();
    return claimed;
  }

 private:
  struct Slot : SlotState {
    Work work{};
  };

  // Posts a pool worker unless computing and queued workers fill the places.
  void post_worker() {
    if (!reserve_worker()) return;
    runtime_->post(
        [self = std::static_pointer_cast<ChunkRunner>(shared_from_this())] { self->worker(); });
  }

  void execute(std::size_t slot) {
    run_(slots_[slot]->work, cancelled_);
    finish(slot);
  }

  // A pool task: computes pending chunks while it holds a place. After a
  // time slice it re-posts itself, so stages sharing the pool take turns.
  void worker() {
    if (!worker_starts()) return;
    const std::int64_t slice_end = now_ns() + 2'000'000;
    std::size_t slot;
    bool sliced = false;
    while (!cancelled() && claim_oldest(slot)) {
      execute(slot);
      if (now_ns() > slice_end) {
        sliced = true;
        break;
      }
    }
    if (worker_ends(sliced)) post_worker();
  }

  Run run_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace ingest::detail
