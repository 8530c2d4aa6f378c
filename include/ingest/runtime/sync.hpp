// Waiting between threads without paying a system call or a shared write per
// hand-off. A waiter spins on its own condition briefly (most hand-offs
// complete within a few microseconds when both sides are busy), then yields
// its core a few times (on a loaded machine the other side may be waiting
// for it), then registers and sleeps on a futex through C++20 atomic wait. A notifier pays one
// fence and one read of the waiter count, and touches the futex word only when someone sleeps, so a
// hand-off between two busy threads shares no extra cache line.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>

namespace ingest::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();  // _mm_pause() without <immintrin.h> (GCC and Clang)
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class Notifier {
 public:
  /// Spins before yielding in wait_until (a few microseconds on current x86).
  static constexpr int default_spins = 200;
  /// sched_yield calls before sleeping.
  static constexpr int yields = 8;

  /// Call after making a waiter's condition true (with a release store).
  void notify() noexcept {
    // Pairs with the waiter's registration: either it sees our update when it
    // re-checks its condition, or we see it registered and wake it.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_relaxed) != 0) {
      epoch_.fetch_add(1, std::memory_order_release);
      epoch_.notify_all();
    }
  }

  /// Returns once `ready()` is true (it must read with acquire ordering).
  template <class Ready>
  void wait_until(Ready&& ready, int spins = default_spins) noexcept(noexcept(ready())) {
    for (int i = 0; i < spins; ++i) {
      if (ready()) return;
      cpu_relax();
    }
    // Past the spins the waiter yields or sleeps, and an indirect call to
    // `ready` costs nothing beside that; so the rest is compiled once, not
    // once for every condition.
    using R = std::remove_reference_t<Ready>;
    wait_slow([](void* r) -> bool { return (*static_cast<R*>(r))(); },
              const_cast<void*>(static_cast<const void*>(std::addressof(ready))),
              spins ? yields : 0);
  }

 private:
  // wait_until's yields, then its sleeps on the futex, until ready(r). Out
  // of line, also where the optimiser would inline it into each caller.
  [[gnu::noinline]] void wait_slow(bool (*ready)(void*), void* r, int yield_rounds) {
    for (int i = 0; i < yield_rounds; ++i) {
      if (ready(r)) return;
      std::this_thread::yield();
    }
    for (;;) {
      const std::uint32_t seen = epoch_.load(std::memory_order_acquire);
      waiters_.fetch_add(1, std::memory_order_seq_cst);
      if (ready(r)) {
        waiters_.fetch_sub(1, std::memory_order_relaxed);
        return;
      }
      epoch_.wait(seen, std::memory_order_acquire);
      waiters_.fetch_sub(1, std::memory_order_relaxed);
      if (ready(r)) return;
    }
  }

  alignas(64) std::atomic<std::uint32_t> epoch_{0};
  std::atomic<std::uint32_t> waiters_{0};
};

}  // namespace ingest::detail
