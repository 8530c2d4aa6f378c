// Clocks for measurements: now_ns() (the steady clock) and ticks(), the
// CPU's time-stamp counter where there is one (a few ns instead of ~25 ns
// for clock_gettime in a VM), converted with ticks_to_ns(). Used by the
// probes, the model, the autotuner and the engines' pacing.
#pragma once

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace ingest::detail {

/// The calling thread's time on a CPU, in ns (one clock_gettime: a
/// system call, well under a microsecond; not for per-element paths).
/// Unlike now_ns(), it does not count the time the thread was preempted.
inline std::int64_t thread_cpu_ns() noexcept {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// The calling thread's time on a CPU, and its time runnable but waiting for
/// one (other threads had the cores), in ns since it started.
struct ThreadTimes {
  std::int64_t on_cpu = 0;
  std::int64_t waiting_for_cpu = 0;
};

/// ThreadTimes now (system calls, a few microseconds: not for hot paths):
/// the thread's CPU clock, and the run-queue wait from Linux's
/// /proc/thread-self/schedstat (a file kept open per thread; 0 where there
/// is none). The schedstat's own CPU time is only brought up to date at
/// scheduler ticks, too coarse for bursts of a few hundred microseconds;
/// its wait is exact, since it only grows while the thread is not running.
inline ThreadTimes thread_times() noexcept {
  struct File {
    int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    ~File() {
      if (fd >= 0) ::close(fd);
    }
  };
  thread_local File file;
  ThreadTimes t;
  t.on_cpu = thread_cpu_ns();
  if (file.fd >= 0) {
    char buf[96];
    const ::ssize_t n = ::pread(file.fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      char* end = nullptr;
      std::strtoll(buf, &end, 10);  // time on a CPU, as of the last tick
      t.waiting_for_cpu = std::strtoll(end, nullptr, 10);
    }
  }
  return t;
}

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A cheap timestamp for measuring short calls on the hot path: the CPU's
/// time-stamp counter on x86 (a few ns; clock_gettime costs ~25 ns in a VM),
/// nanoseconds elsewhere. Convert differences with ticks_to_ns().
inline std::int64_t ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return static_cast<std::int64_t>(__builtin_ia32_rdtsc());
#else
  return now_ns();
#endif
}

#if defined(__x86_64__) || defined(__i386__)
/// The slow path of ns_per_tick(): measures the ratio against the steady
/// clock since the first call, and settles it once 50 ms have passed.
[[gnu::noinline]] inline double calibrate_ns_per_tick(std::atomic<double>& settled) noexcept {
  struct Origin {
    std::int64_t ns = now_ns();
    std::int64_t tick = ticks();
  };
  static const Origin origin;
  const std::int64_t ns = now_ns() - origin.ns;
  if (ns < 1'000'000) {
    // Too early to tell: measure over a millisecond once.
    static const double early = [] {
      const std::int64_t n0 = now_ns(), t0 = ticks();
      while (now_ns() - n0 < 1'000'000) {
      }
      return static_cast<double>(now_ns() - n0) / static_cast<double>(ticks() - t0);
    }();
    return early;
  }
  const std::int64_t t = ticks() - origin.tick;
  const double ratio = t > 0 ? static_cast<double>(ns) / static_cast<double>(t) : 1.0;
  if (ns >= 50'000'000) settled.store(ratio, std::memory_order_relaxed);
  return ratio;
}
#endif

/// Nanoseconds per tick, calibrated against the steady clock: over the
/// process's first 50 ms, then fixed, so the hot path reads no clock (a
/// clock_gettime costs ~25 ns in a VM).
inline double ns_per_tick() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  static std::atomic<double> settled{0.0};
  const double ratio = settled.load(std::memory_order_relaxed);
  if (ratio > 0) [[likely]]
    return ratio;
  return calibrate_ns_per_tick(settled);
#else
  return 1.0;
#endif
}

/// Nanoseconds in a difference of ticks(). Take the difference first: the
/// first calls of ns_per_tick() may calibrate (and read the clock).
inline std::int64_t ticks_to_ns(std::int64_t delta) noexcept {
  return static_cast<std::int64_t>(static_cast<double>(delta) * ns_per_tick());
}

}  // namespace ingest::detail
