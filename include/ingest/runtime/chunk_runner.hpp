// Runs chunks of user-function work on the pool, shared by parallel map and
// map-and-batch. A chunk slot goes idle -> pending (the consumer loaded its
// inputs) -> running (a worker or the consumer claimed it) -> done -> idle.
// At most `parallelism` pool tasks are active; each keeps claiming the
// oldest pending chunk until none is left, so the pool stays busy between
// the consumer's calls. A consumer that needs a chunk never sleeps while a
// chunk is still pending: it claims and runs that chunk itself. Pool tasks
// never wait for anything, so no pool size can deadlock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "ingest/runtime/runtime.hpp"
#include "ingest/runtime/sync.hpp"

namespace ingest::detail {

/// `Run` is a function object: `void operator()(Work&, const std::atomic<bool>& cancelled) const`.
/// It must not throw (it records its errors in the Work).
template <class Work, class Run>
class ChunkRunner : public std::enable_shared_from_this<ChunkRunner<Work, Run>> {
 public:
  enum : int { idle = 0, pending = 1, running = 2, done = 3 };
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

  ChunkRunner(std::size_t capacity, Run run, Runtime* runtime)
      : run_(std::move(run)), runtime_(runtime) {
    slots_.reserve(capacity);
    for (std::size_t i = 0; i < capacity; ++i) slots_.push_back(std::make_unique<Slot>());
  }

  std::size_t capacity() const noexcept { return slots_.size(); }
  Work& work(std::size_t slot) noexcept { return slots_[slot]->work; }
  const Run& run() const noexcept { return run_; }
  Run& run() noexcept { return run_; }
  int state(std::size_t slot) const noexcept {
    return slots_[slot]->state.load(std::memory_order_acquire);
  }

  // ---- consumer side ----

  /// An idle slot, or `none`.
  std::size_t find_idle() const noexcept {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (state(i) == idle) return i;
    }
    return none;
  }

  /// Publishes a loaded slot and makes sure up to `parallelism` pool tasks run.
  void submit(std::size_t slot, std::size_t parallelism) {
    Slot& s = *slots_[slot];
    s.seq.store(next_seq_++, std::memory_order_relaxed);
    s.state.store(pending, std::memory_order_release);
    parallelism_.store(parallelism, std::memory_order_relaxed);
    int active = active_.load(std::memory_order_relaxed);
    while (static_cast<std::size_t>(active) < parallelism) {
      if (active_.compare_exchange_weak(active, active + 1, std::memory_order_acq_rel)) {
        runtime_->post([self = this->shared_from_this()] { self->worker(); });
        break;
      }
    }
  }

  /// Runs `slot` on the calling thread if nobody has started it.
  bool help(std::size_t slot) {
    int expected = pending;
    if (!slots_[slot]->state.compare_exchange_strong(expected, running,
                                                     std::memory_order_acq_rel)) {
      return false;
    }
    execute(slot);
    return true;
  }

  /// Runs the oldest pending slot on the calling thread; false if none.
  bool help_oldest() {
    std::size_t slot;
    if (!claim_oldest(slot)) return false;
    execute(slot);
    return true;
  }

  /// Marks a consumed slot reusable.
  void release(std::size_t slot) noexcept {
    slots_[slot]->state.store(idle, std::memory_order_release);
  }

  /// Waits until `ready()` (which reads slot states) is true; woken by every completion.
  template <class Ready>
  void wait_until(Ready&& ready) noexcept {
    done_.wait_until(ready);
  }

  /// True if some slot waits for a thread to run it.
  bool has_pending() const noexcept {
    for (auto& s : slots_) {
      if (s->state.load(std::memory_order_acquire) == pending) return true;
    }
    return false;
  }

  /// Stops new chunks from starting and waits for the running ones.
  void cancel_and_join() noexcept {
    cancelled_.store(true, std::memory_order_release);
    for (auto& s : slots_) {
      int expected = pending;
      s->state.compare_exchange_strong(expected, idle, std::memory_order_acq_rel);
    }
    done_.wait_until([this] {
      for (auto& s : slots_) {
        if (s->state.load(std::memory_order_acquire) == running) return false;
      }
      return true;
    });
  }

  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }

 private:
  struct Slot {
    std::atomic<int> state{idle};
    std::atomic<std::uint64_t> seq{0};
    Work work{};
  };

  bool claim_oldest(std::size_t& out) {
    for (;;) {
      std::size_t best = none;
      std::uint64_t best_seq = std::numeric_limits<std::uint64_t>::max();
      for (std::size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i]->state.load(std::memory_order_acquire) != pending) continue;
        const std::uint64_t seq = slots_[i]->seq.load(std::memory_order_relaxed);
        if (seq < best_seq) {
          best_seq = seq;
          best = i;
        }
      }
      if (best == none) return false;
      int expected = pending;
      if (slots_[best]->state.compare_exchange_strong(expected, running,
                                                      std::memory_order_acq_rel)) {
        out = best;
        return true;
      }
    }
  }

  void execute(std::size_t slot) {
    run_(slots_[slot]->work, cancelled_);
    slots_[slot]->state.store(done, std::memory_order_release);
    done_.notify();
  }

  void worker() {
    for (;;) {
      std::size_t slot;
      while (!cancelled() && claim_oldest(slot)) execute(slot);
      active_.fetch_sub(1, std::memory_order_acq_rel);
      // Work submitted after our last look, while we still counted as
      // active, would wait for the consumer: rejoin if there is room.
      if (cancelled() || !has_pending()) return;
      int active = active_.load(std::memory_order_relaxed);
      if (static_cast<std::size_t>(active) >= parallelism_.load(std::memory_order_relaxed) ||
          !active_.compare_exchange_strong(active, active + 1, std::memory_order_acq_rel)) {
        return;
      }
    }
  }

  Run run_;
  Runtime* runtime_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::uint64_t next_seq_ = 0;  // consumer only
  std::atomic<int> active_{0};
  std::atomic<std::size_t> parallelism_{1};
  std::atomic<bool> cancelled_{false};
  Notifier done_;
};

}  // namespace ingest::detail
