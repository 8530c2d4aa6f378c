// How async stages split work for the pool, from the measured cost of the
// user function: a chunk should take about target_chunk_ns, so that posting
// it (~1-5 µs with a wake-up) is noise; a function so cheap that even the
// largest chunk takes less than inline_chunk_ns runs on the consumer's
// thread instead, because handing it over would cost more than doing it.
// Workers add their measurements with two relaxed atomics per chunk; only
// the consumer reads them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ingest/core/clock.hpp"

namespace ingest::detail {

/// How many elements a bulk fill (a source's loop, with a map fused into
/// it) writes between two cancellation checks: about check_interval_ns of
/// work, from the measured cost of the previous piece. A cheap function
/// fills a whole batch in one loop (a check per element would stop it
/// vectorising); a slow one is checked after every element. It starts at
/// one element and grows at most eightfold per measurement. Pieces of
/// cheap elements (256 or more) are measured one in eight: the two clock
/// reads would cost a batch of trivial elements ~10%; so when a function's
/// cost jumps (cheap, then slow), up to eight pieces run at the old size
/// before the next measurement shrinks them.
class CheckPacer {
 public:
  static constexpr double check_interval_ns = 100'000;

  std::size_t piece() const noexcept { return piece_; }

  /// At the start of a piece: its ticks(), or 0 when it goes unmeasured.
  std::int64_t start() noexcept {
    if (--countdown_ > 0) [[likely]]
      return 0;
    return ticks();
  }

  /// After a piece of `elements` that start() began: sets the next piece.
  void done(std::int64_t start, std::size_t elements) noexcept {
    if (start == 0 || elements == 0) {
      if (countdown_ <= 0) countdown_ = 1;  // measure the next one instead
      return;
    }
    const double ns = std::max(static_cast<double>(ticks_to_ns(ticks() - start)), 1.0);
    const double fit = check_interval_ns * static_cast<double>(elements) / ns;
    piece_ = static_cast<std::size_t>(
        std::clamp(fit, 1.0, std::min(8.0 * static_cast<double>(piece_), max_piece)));
    countdown_ = piece_ >= 256 ? 8 : 1;
  }

 private:
  static constexpr double max_piece = 1 << 20;
  std::size_t piece_ = 1;
  int countdown_ = 1;
};

/// Elements the inline path of a map-and-batch (a function the planner
/// measured as cheap) computes between two cancellation checks.
inline constexpr std::size_t inline_elements_between_checks = 256;

class ChunkPlanner {
 public:
  static constexpr double target_chunk_ns = 50'000;
  static constexpr double inline_chunk_ns = 20'000;

  explicit ChunkPlanner(std::size_t max_chunk) : max_chunk_(max_chunk) {}

  /// Called by whoever ran `elements` calls taking `nanos` in all (any thread).
  void record(std::size_t elements, std::int64_t nanos) noexcept {
    busy_ns_.fetch_add(nanos, std::memory_order_relaxed);
    busy_elements_.fetch_add(static_cast<std::int64_t>(elements), std::memory_order_relaxed);
  }

  /// Folds new measurements into the estimate (consumer thread only).
  void update() noexcept {
    const std::int64_t ns = busy_ns_.load(std::memory_order_relaxed);
    const std::int64_t n = busy_elements_.load(std::memory_order_relaxed);
    const std::int64_t dn = n - seen_elements_;
    if (dn <= 0) return;
    const double sample = static_cast<double>(ns - seen_ns_) / static_cast<double>(dn);
    // Over the first elements, the average of all of them: the first chunk
    // has one element, whose time is mostly the clock's own (~25-50 ns in a
    // VM), and a moving average would remember it for several chunks.
    const bool early = seen_elements_ < early_elements;
    seen_ns_ = ns;
    seen_elements_ = n;
    if (early) {
      cost_ns_ = static_cast<double>(ns) / static_cast<double>(n);
    } else {
      cost_ns_ = 0.7 * cost_ns_ + 0.3 * sample;
    }
  }

  /// Measured nanoseconds per element, or -1 before any measurement.
  double ns_per_element() const noexcept { return cost_ns_; }
  bool known() const noexcept { return cost_ns_ >= 0; }

  /// Elements per chunk: 1 until the cost is known, then ~target_chunk_ns worth.
  std::size_t chunk_size() const noexcept {
    if (!known()) return 1;
    const double c = target_chunk_ns / std::max(cost_ns_, 1.0);
    return std::clamp<std::size_t>(static_cast<std::size_t>(c), 1, max_chunk_);
  }

  /// Whether the function is too cheap to hand to another thread. `inline_now`
  /// adds hysteresis: leaving inline mode needs a clearly higher cost.
  bool prefer_inline(bool inline_now) const noexcept {
    if (!known()) return false;
    const double largest = cost_ns_ * static_cast<double>(max_chunk_);
    return largest < (inline_now ? 2 * inline_chunk_ns : inline_chunk_ns);
  }

  std::size_t max_chunk() const noexcept { return max_chunk_; }

 private:
  static constexpr std::int64_t early_elements = 4096;

  std::size_t max_chunk_;
  std::atomic<std::int64_t> busy_ns_{0};
  std::atomic<std::int64_t> busy_elements_{0};
  std::int64_t seen_ns_ = 0, seen_elements_ = 0;
  double cost_ns_ = -1;
};

/// Measures a run of `run` consecutive calls in every `period` made on the
/// consumer's thread, so inline mode keeps learning the cost for two clock
/// reads per `period` elements.
class InlineSampler {
 public:
  static constexpr std::int64_t period = 1024, run = 32;

  /// Call before each inline call; true while the call is being measured
  /// (then call after() once it returns).
  bool before() noexcept {
    if (--countdown_ == 0) {
      countdown_ = period;
      start_ = now_ns();
      left_ = run;
    }
    return left_ > 0;
  }
  /// True when it just recorded a measurement.
  bool after(ChunkPlanner& planner) noexcept {
    if (--left_ == 0) {
      last_ns_ = now_ns() - start_;
      planner.record(run, last_ns_);
      return true;
    }
    return false;
  }
  /// The time of the last measured run of calls.
  std::int64_t last_ns() const noexcept { return last_ns_; }

 private:
  std::int64_t countdown_ = 1, start_ = 0, left_ = 0, last_ns_ = 0;
};

}  // namespace ingest::detail
