// OverlapTimer: how much of a training loop's compute ran while the device
// loader's copies did, from CUDA events: the copies' start and end events
// (a DeviceLoader with .timing = true) and events around each step on the
// consumer's stream. Never blocks the host except in report(). The interval
// arithmetic is plain C++ (detail::union_length, overlap_length).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/cuda/device_loader.hpp"
#include "ingest/cuda/error.hpp"

namespace ingest::cuda {

/// What OverlapTimer measured, in milliseconds of GPU time.
struct OverlapReport {
  std::int64_t steps = 0;  ///< steps measured
  double copy_ms = 0;      ///< time during which a copy of the loader ran
  double compute_ms = 0;   ///< time during which a step ran
  double overlap_ms = 0;   ///< time during which both did
  double span_ms = 0;      ///< from the timer's start to the last step's end

  /// Fraction of the steps' time during which a copy ran too.
  double compute_overlap() const noexcept { return compute_ms > 0 ? overlap_ms / compute_ms : 0; }
  /// Fraction of the copies' time hidden behind steps.
  double copy_hidden() const noexcept { return copy_ms > 0 ? overlap_ms / copy_ms : 0; }
};

namespace detail {

/// A time interval [begin, end).
struct Interval {
  double begin = 0, end = 0;
};

/// The intervals merged into disjoint ones, sorted.
inline std::vector<Interval> merge_intervals(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.end <= i.begin) continue;
    if (!out.empty() && i.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

/// Length of the union of the intervals.
inline double union_length(const std::vector<Interval>& v) {
  double total = 0;
  for (const Interval& i : merge_intervals(v)) total += i.end - i.begin;
  return total;
}

/// Length of the time covered by both sets of intervals.
inline double overlap_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  const std::vector<Interval> x = merge_intervals(a), y = merge_intervals(b);
  double total = 0;
  for (std::size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    total += std::max(0.0, std::min(x[i].end, y[j].end) - std::max(x[i].begin, y[j].begin));
    if (x[i].end < y[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

}  // namespace detail

/// Measures copy / compute overlap on one consumer stream:
///
///     OverlapTimer timer(stream);
///     while (auto batch = it.next()) {
///       batch->wait(stream);
///       timer.begin_step(*batch);   // after wait(), before the step's work
///       step<<<..., stream>>>(...);
///       timer.end_step();
///     }
///     OverlapReport r = timer.report();
///
/// Finished steps are folded into the totals as they complete, so the
/// timer holds events only for the steps still running.
class OverlapTimer {
 public:
  /// Throws Unavailable without the device.
  explicit OverlapTimer(cudaStream_t stream, int device = 0)
      : stream_(stream), events_(std::make_shared<detail::EventPool>(device, true)) {
    origin_ = events_->record(stream_);
  }

  /// Starts a step that uses `batch`. Throws InvalidArgument unless the
  /// batch comes from a DeviceLoader with .timing = true.
  void begin_step(const DeviceBatch& batch) {
    if (!batch.copy_started_event() || !batch.copy_done_event()) {
      throw InvalidArgument(
          "OverlapTimer: the batch has no copy timing; create the DeviceLoader with "
          ".timing = true");
    }
    harvest(false);
    pending_.push_back(
        {batch.copy_started_event(), batch.copy_done_event(), events_->record(stream_), nullptr});
  }

  /// Ends the step begun last (after its work was enqueued on the stream).
  void end_step() {
    if (pending_.empty() || pending_.back().step_end) {
      throw InvalidArgument("OverlapTimer: end_step() without begin_step()");
    }
    pending_.back().step_end = events_->record(stream_);
  }

  /// Waits for the steps begun so far and returns the totals.
  OverlapReport report() {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    harvest(true);
    OverlapReport r;
    r.steps = steps_;
    r.copy_ms = copy_ms_ + detail::union_length(copies_);
    r.compute_ms = compute_ms_ + detail::union_length(computes_);
    r.overlap_ms = overlap_ms_ + detail::overlap_length(copies_, computes_);
    r.span_ms = span_ms_;
    return r;
  }

 private:
  struct Step {
    Event copy_start, copy_end, step_start, step_end;
  };

  double since_origin(const Event& e) const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, origin_.get(), e.get()), "cudaEventElapsedTime");
    return ms;
  }

  // Folds finished steps (all of them when `all`) into intervals.
  void harvest(bool all) {
    while (!pending_.empty() && pending_.front().step_end &&
           (all || detail::CudaBackend::passed(pending_.front().step_end))) {
      const Step& s = pending_.front();
      copies_.push_back({since_origin(s.copy_start), since_origin(s.copy_end)});
      computes_.push_back({since_origin(s.step_start), since_origin(s.step_end)});
      span_ms_ = std::max(span_ms_, computes_.back().end);
      ++steps_;
      pending_.pop_front();
    }
    // Copies follow each other on the loader's stream and steps on the
    // consumer's, so later intervals start after the last ones end: the
    // time before the earlier of those two ends is final. Fold it into the
    // totals to keep the lists short.
    if (copies_.size() + computes_.size() > 2048) {
      const double t = std::min(copies_.back().end, computes_.back().end);
      const std::vector<detail::Interval> c = split_before(copies_, t),
                                          s = split_before(computes_, t);
      copy_ms_ += detail::union_length(c);
      compute_ms_ += detail::union_length(s);
      overlap_ms_ += detail::overlap_length(c, s);
    }
  }

  // Moves the parts of `v` before `t` out of it, and returns them.
  static std::vector<detail::Interval> split_before(std::vector<detail::Interval>& v, double t) {
    std::vector<detail::Interval> before, after;
    for (const detail::Interval& i : v) {
      if (i.end <= t) {
        before.push_back(i);
      } else if (i.begin >= t) {
        after.push_back(i);
      } else {
        before.push_back({i.begin, t});
        after.push_back({t, i.end});
      }
    }
    v = std::move(after);
    return before;
  }

  cudaStream_t stream_;
  std::shared_ptr<detail::EventPool> events_;
  Event origin_;
  std::deque<Step> pending_;
  std::vector<detail::Interval> copies_, computes_;
  double copy_ms_ = 0, compute_ms_ = 0, overlap_ms_ = 0;  // folded totals
  double span_ms_ = 0;
  std::int64_t steps_ = 0;
};

}  // namespace ingest::cuda
