// The runtime: one compute pool (Boost.Asio thread_pool) for user functions,
// plus "driver" threads for the jobs that block (a prefetch producer, a
// parallel interleave's fetchers). tf.data counterpart: the iterator
// context's runner and the UnboundedThreadPool. Pool tasks never block on
// other pool tasks; the blocking work lives on driver threads, which are
// created on demand and reused. So nested async stages cannot deadlock,
// whatever the pool size, one thread included.
//
// This header declares Runtime without Boost.Asio: what sizes, spawns or
// passes runtimes around includes it. Runtime::post, the one member that
// needs the pool's type, is defined in runtime/runtime.hpp, which only the
// headers that post work (and users calling post) include.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/errors.hpp"

namespace ingest {

namespace detail {

// Runs blocking jobs, each on its own thread; threads are kept and reused.
class DriverThreads {
 public:
  DriverThreads() = default;
  DriverThreads(const DriverThreads&) = delete;
  DriverThreads& operator=(const DriverThreads&) = delete;

  ~DriverThreads() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      for (auto& w : workers_) w->cv.notify_all();
    }
    const auto self = std::this_thread::get_id();
    for (auto& w : workers_) {
      if (w->thread.get_id() == self) {
        w->thread.detach();  // destroyed from one of our own jobs: cannot join ourselves
      } else if (w->thread.joinable()) {
        w->thread.join();
      }
    }
  }

  /// Runs `job` on an idle driver thread, or a new one.
  void run(std::function<void()> job) {
    std::unique_lock lock(mu_);
    for (auto& w : workers_) {
      if (!w->job && w->idle) {
        w->job = std::move(job);
        w->idle = false;
        Worker* chosen = w.get();  // workers_ may grow once unlocked; workers stay
        lock.unlock();
        chosen->cv.notify_one();  // only this worker: the others stay asleep
        return;
      }
    }
    auto w = std::make_unique<Worker>();
    w->job = std::move(job);
    Worker* raw = w.get();
    workers_.push_back(std::move(w));
    raw->thread = std::thread([this, raw] { loop(*raw); });
  }

  std::size_t size() const {
    std::lock_guard lock(mu_);
    return workers_.size();
  }

 private:
  struct Worker {
    std::thread thread;
    std::function<void()> job;
    bool idle = false;
    std::condition_variable cv;  // told of this worker's job, or of stopping
  };

  void loop(Worker& w) {
    std::unique_lock lock(mu_);
    for (;;) {
      w.cv.wait(lock, [&] { return w.job || stopping_; });
      if (!w.job) return;
      std::function<void()> job = std::move(w.job);
      w.job = nullptr;
      lock.unlock();
      job();          // jobs catch their own exceptions
      job = nullptr;  // release captures before announcing idleness
      lock.lock();
      w.idle = true;
    }
  }

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool stopping_ = false;
};

/// The compute pool behind Runtime::post: Boost.Asio's thread_pool, in
/// runtime/runtime.hpp (AsioComputePool). Destroying it waits for the work
/// posted to it.
class ComputePool {
 public:
  ComputePool() = default;
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;
  virtual ~ComputePool() = default;
};

}  // namespace detail

/// A compute pool and driver threads shared by the async stages of the
/// pipelines that use it. Thread-safe. Destroy it only after the iterators
/// using it (they hold it through shared_ptr, so this is the default).
class Runtime {
 public:
  /// A runtime with `threads` compute threads (0: the hardware's thread
  /// count). The compute threads start with the first post().
  explicit Runtime(std::size_t threads = 0)
      : threads_(threads ? threads : std::max(1u, std::thread::hardware_concurrency())) {}
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime() { pool_owner_.reset(); }  // waits for the posted work, then the drivers

  /// Number of compute threads.
  std::size_t threads() const noexcept { return threads_; }

  /// Runs `f` on a compute thread. `f` must not block waiting for other
  /// pool work; it should catch its own exceptions. Defined in
  /// <ingest/runtime/runtime.hpp> (Boost.Asio): include that to call it.
  template <class F>
  void post(F&& f);

  /// Runs a job that may block (e.g. pulling from an input iterator) on a
  /// driver thread.
  void spawn(std::function<void()> job) { drivers_.run(std::move(job)); }

  /// Driver threads created so far (they are reused).
  std::size_t driver_threads() const { return drivers_.size(); }

 private:
  // The pool, created by the first post() (runtime/runtime.hpp names its type).
  template <class Pool>
  Pool& pool() {
    detail::ComputePool* p = pool_.load(std::memory_order_acquire);
    if (!p) [[unlikely]] {
      std::lock_guard lock(pool_mu_);
      if (!pool_owner_) {
        pool_owner_ = std::make_unique<Pool>(threads_);
        pool_.store(pool_owner_.get(), std::memory_order_release);
      }
      p = pool_owner_.get();
    }
    return static_cast<Pool&>(*p);
  }

  std::size_t threads_;
  std::mutex pool_mu_;
  std::unique_ptr<detail::ComputePool> pool_owner_;
  std::atomic<detail::ComputePool*> pool_{nullptr};
  detail::DriverThreads drivers_;
};

/// The process-wide runtime (threads = hardware threads), created on first
/// use. It lives until the process exits (never destroyed), so iterators
/// that outlive main's locals stay safe.
inline const std::shared_ptr<Runtime>& default_runtime() {
  static auto* rt =
      new std::shared_ptr<Runtime>(std::make_shared<Runtime>());  // immortal on purpose
  return *rt;
}

/// The runtime an iterator created with `ctx` uses: the context's, or the
/// process-wide default.
inline const std::shared_ptr<Runtime>& runtime_of(const IteratorContext& ctx) {
  return ctx.runtime ? ctx.runtime : default_runtime();
}

namespace detail {
/// The most parallelism the autotuner gives a map, and a pipeline's default
/// CPU budget: the pool's threads plus one for the map's consumer thread,
/// which computes elements itself when it would otherwise wait for them (so
/// the pool's share stays within its threads). On W6 (2 cores) parallelism 3
/// ran 10-20% faster than 2.
inline std::size_t max_tuned_parallelism(const Runtime& runtime) noexcept {
  return runtime.threads() + 1;
}

/// The parallelism a map sizes its result slots for. No more calls run at
/// once than the pool's threads + 1, so a parallelism far above that only
/// deepens the read-ahead: slots (allocated up front) follow the requested
/// value up to 4 x (threads + 1), at least 64, and never a knob's raw value
/// (map parallelism 1,000,000 allocated 260 MiB over a 10-element input).
inline std::size_t slot_parallelism(std::size_t parallelism, const Runtime& runtime) noexcept {
  return std::min(parallelism, std::max<std::size_t>(64, 4 * max_tuned_parallelism(runtime)));
}
}  // namespace detail

}  // namespace ingest
