// rejection_resample(class_func, target_dist, {.initial_dist, .seed}):
// resamples a dataset so that its classes (class_func(element), an integer in
// [0, num_classes), num_classes = target_dist.size()) follow target_dist.
// Each output is std::pair{class, element}. tf.data counterpart:
// Dataset.rejection_resample, whose algorithm this reproduces:
//
// - p: the input's class distribution, initial_dist when given, else
//   estimated from counts as the pass goes (tf's _estimate_data_distribution:
//   every class starts at 10, the counts grow by blocks of 32 elements and
//   each block's elements use the estimate that includes the block); t:
//   target_dist. Both are weights, normalised here to sum 1 (tf assumes they
//   do and misbehaves when they don't).
// - With r_i = t_i / p_i, m = min r, M = max r, an element of class i is
//   accepted with a_i = (r_i - m) / (M - m) (1 for all when M = m) and the
//   output is drawn from the input itself with probability m, from the
//   accepted elements otherwise (tf's _calculate_acceptance_probs_with_mixing
//   and sample_from_datasets(..., stop_on_empty_dataset=True)): m p_i +
//   (1 - m) p_i a_i / sum_j(p_j a_j) = t_i, with fewer elements dropped than
//   by plain rejection.
// - As in tf.data, the two are separate passes over the input: "original"
//   (every element, with its class) and "filtered" (the accepted ones). So
//   an element can come out twice, once from each, and the input is read
//   twice; put the resampling where the input is cheap to re-read (after a
//   cache or on file names and labels). With a given initial_dist, m = 1 (t
//   equals p) reads only "original" and m = 0 (some t_i = 0) only
//   "filtered", as tf does; estimating, "original" is skipped when some t_i
//   is 0 (then m = 0 throughout). The pass ends when the stream drawn from
//   ends.
//
// Differences from tf.data: the estimate comes from the elements "filtered"
// reads (tf reads the classes in a third pass), so a draw between the
// streams uses the estimate of the filtered stream's current block (tf: of
// block k / 32 for the k-th draw); "filtered" reads up to 32 elements ahead
// while estimating and holds them. Arithmetic is in double (tf: float32).
// Stricter than tf: a class with initial_dist 0 and target_dist > 0 is an
// InvalidArgument (tf would reject almost every element forever), and a class
// outside [0, num_classes) fails its element in both streams (tf lets it
// through "original").
//
// Randomness: two ingest::Rng streams (accept or reject; original or
// filtered) seeded from (seed, IteratorContext::epoch), so every iterator of
// the dataset and its copies gives the same output, and the epochs of an
// enclosing repeat differ; without a seed one is drawn when the dataset is
// built. Runs on the iterating thread; f is called on it as f(const T&). An
// error from the input or from class_func (stage "rejection_resample", the
// element's index in the input) surfaces as that element's error, in the
// stream that read it, and the pass continues. Between rejected elements it
// unwinds once its consumer is gone. Like tf.data, it logs once per dataset
// when the sampler rejects half of what it reads or more. Cardinality: unknown.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

namespace detail {

/// tf's _calculate_acceptance_probs_with_mixing: writes each class's
/// acceptance probability a_i = (r_i - m) / (M - m), r_i = t_i / (p_i + tiny)
/// (tiny: the smallest normal double, so p_i = 0 with t_i = 0 gives r_i = 0),
/// m = min r, M = max r (a_i = 1 for all when M = m), into `acceptance`, and
/// returns m, the probability of drawing from the input itself. `initial`
/// and `target` should each sum to 1 (they are not normalised here).
inline double acceptance_probs_with_mixing(std::span<const double> initial,
                                           std::span<const double> target,
                                           std::span<double> acceptance) noexcept {
  const double tiny = std::numeric_limits<double>::min();
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (std::size_t i = 0; i < target.size(); ++i) {
    acceptance[i] = target[i] / (initial[i] + tiny);
    lo = std::min(lo, acceptance[i]);
    hi = std::max(hi, acceptance[i]);
  }
  for (std::size_t i = 0; i < target.size(); ++i) {
    acceptance[i] = hi > lo ? (acceptance[i] - lo) / (hi - lo) : 1.0;
  }
  return lo;
}

/// The share of the input the filter rejects: sum_i (1 - a_i) p_i.
inline double proportion_rejected(std::span<const double> initial,
                                  std::span<const double> acceptance) noexcept {
  double rejected = 0;
  for (std::size_t i = 0; i < initial.size(); ++i) rejected += (1 - acceptance[i]) * initial[i];
  return rejected;
}

inline std::string format_double(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

inline std::string format_doubles(std::span<const double> xs) {
  std::string s = "[";
  for (std::size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + format_double(xs[i]);
  return s + "]";
}

/// `dist` checked (non-empty, finite, >= 0, positive sum) and normalised to sum 1.
inline std::vector<double> checked_distribution(const char* name, std::vector<double> dist) {
  const auto fail = [name](const std::string& why) {
    throw InvalidArgument(std::string("rejection_resample: ") + name + " " + why,
                          {.stage = "rejection_resample"});
  };
  if (dist.empty()) fail("is empty; it needs one weight per class");
  double sum = 0;
  for (std::size_t i = 0; i < dist.size(); ++i) {
    if (!std::isfinite(dist[i]) || dist[i] < 0) {
      fail("must hold finite weights >= 0; got " + format_double(dist[i]) + " for class " +
           std::to_string(i));
    }
    sum += dist[i];
  }
  if (!(sum > 0)) fail("must have a positive sum; every weight is 0");
  if (!std::isfinite(sum)) fail("must have a finite sum; it overflows");
  for (double& d : dist) d /= sum;
  return dist;
}

/// What every iterator of a rejection_resample dataset (and its copies) shares.
struct ResampleParams {
  std::vector<double> target{};      ///< normalised
  std::vector<double> initial{};     ///< normalised; empty: estimated during the pass
  std::vector<double> acceptance{};  ///< from `initial`; empty when estimated
  double prob_original = 0;          ///< m, from `initial`
  bool use_original = true;          ///< whether the "original" stream is ever drawn from
  bool use_filtered = true;          ///< likewise "filtered"
  std::uint64_t seed = 0;
  mutable std::atomic<bool> warned{false};  ///< the high-rejection line was logged
};

}  // namespace detail

/// Iterator of RejectionResampleDataset: `(class, element)` pairs whose classes follow the
/// target distribution.
template <class InputIt, class F>
class RejectionResampleIterator {
  using In = typename InputIt::value_type;
  static constexpr std::size_t estimation_block = 32;  // tf's dist_estimation_batch_size
  static constexpr std::int64_t smoothing = 10;        // tf's smoothing_constant

  struct Slot {
    std::optional<In> value{};
    std::int64_t cls = 0;
    std::exception_ptr error{};  ///< this element's failure, surfacing at its position
  };

 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "the block of elements it estimates from";
  /// `(class, element)`, the class from class_func.
  using value_type = std::pair<std::int64_t, In>;

  /// Owns the iterators of the two passes over the input ("original" and "filtered"; either
  /// may be absent when never drawn from), class_func `f` and the generators' `seed`.
  RejectionResampleIterator(std::optional<InputIt> original, std::optional<InputIt> filtered, F f,
                            std::shared_ptr<const detail::ResampleParams> params,
                            std::uint64_t seed, CancellationToken cancel)
      : original_(std::move(original)),
        filtered_(std::move(filtered)),
        f_(std::move(f)),
        params_(std::move(params)),
        cancel_(std::move(cancel)),
        accept_rng_(derive_seed(seed, 0)),
        choose_rng_(derive_seed(seed, 1)),
        estimating_(params_->initial.empty()) {
    const std::size_t n = params_->target.size();
    if (estimating_) {
      acceptance_.assign(n, 0.0);
      counts_.assign(n, smoothing);
      estimate_.assign(n, 0.0);
      block_.resize(estimation_block);
      update_estimate();  // uniform until a block is counted
    } else {
      acceptance_ = params_->acceptance;
      prob_original_ = params_->prob_original;
      if (filtered_) warn_if_rejecting_most(params_->initial);
    }
  }

  /// The next `(class, element)`, drawn from the original or the accepted elements; std::nullopt
  /// once the stream drawn from ends. Throws an element's error where it occurs.
  std::optional<value_type> next() {
    if (done_) return std::nullopt;
    std::optional<value_type> out = draw_original() ? next_original() : next_filtered();
    // The stream drawn from ended: so does the pass (tf: stop_on_empty_dataset).
    if (!out) done_ = true;
    return out;
  }

  /// Checkpoint: both generators' states, the acceptance probabilities and
  /// the class estimate, the counters, the rest of the block read ahead
  /// while estimating (through ingest::serializer: at most 32 elements),
  /// then the inputs. An element's error held in the block cannot be stored:
  /// saving then raises Unimplemented.
  void save(StateWriter& w) const requires serializable<In> {
    for (std::size_t k = pos_; k < size_; ++k) {
      if (block_[k].error) {
        throw Unimplemented(
            "checkpoint: stage 'rejection_resample' cannot be saved while its block holds an "
            "input element's error",
            {.stage = "rejection_resample"});
      }
    }
    for (const Rng* rng : {&accept_rng_, &choose_rng_}) {
      const auto& s = rng->state();
      w.write(s[0], s[1], s[2], s[3]);
    }
    w.write(prob_original_, original_index_, filtered_index_, done_, primed_, filtered_done_);
    for (const double a : acceptance_) w.write(a);
    for (const std::int64_t c : counts_) w.write(c);
    for (const double e : estimate_) w.write(e);
    w.write(size_ - pos_);
    for (std::size_t k = pos_; k < size_; ++k) {
      w.write(block_[k].cls);
      w.write_element(*block_[k].value);
    }
    if (original_) original_->save(w);
    if (filtered_) filtered_->save(w);
  }
  /// Restores what save() wrote (generators, estimate and block), on a fresh iterator of the
  /// same dataset.
  void restore(StateReader& r) requires serializable<In> {
    for (Rng* rng : {&accept_rng_, &choose_rng_}) {
      std::uint64_t s[4];
      r.read(s[0], s[1], s[2], s[3]);
      rng->set_state(s);
    }
    r.read(prob_original_, original_index_, filtered_index_, done_, primed_, filtered_done_);
    for (double& a : acceptance_) r.read(a);
    for (std::int64_t& c : counts_) r.read(c);
    for (double& e : estimate_) r.read(e);
    const std::uint64_t at = r.offset();
    std::size_t held = 0;
    r.read(held);
    if (held > block_.size()) {
      throw DataLossError("checkpoint: rejection_resample holds " + std::to_string(held) +
                              " elements, more than its block of " + std::to_string(block_.size()),
                          {.stage = "rejection_resample", .offset = at});
    }
    pos_ = 0;
    size_ = held;
    for (std::size_t k = 0; k < held; ++k) {
      Slot& s = block_[k];
      r.read(s.cls);
      if (s.cls < 0 || static_cast<std::size_t>(s.cls) >= params_->target.size()) {
        throw DataLossError(
            "checkpoint: rejection_resample class " + std::to_string(s.cls) + " is out of range",
            {.stage = "rejection_resample", .offset = at});
      }
      s.value = r.read_element<In>("rejection_resample");
      s.error = nullptr;
    }
    if (original_) original_->restore(r);
    if (filtered_) filtered_->restore(r);
  }

 private:
  bool draw_original() {
    if (!filtered_) return true;
    if (!original_) return false;
    if (estimating_ && !primed_) refill();  // the first draw uses the first block's estimate
    return choose_rng_.uniform01() < prob_original_;
  }

  std::int64_t classify(const In& x, std::int64_t index) {
    const auto c = static_cast<std::int64_t>(
        detail::invoke_user("rejection_resample", index, f_, std::as_const(x)));
    const auto n = static_cast<std::int64_t>(params_->target.size());
    if (c < 0 || c >= n) {
      throw InvalidArgument("rejection_resample: class_func returned class " + std::to_string(c) +
                                ", outside [0, " + std::to_string(n) + ") (num_classes " +
                                std::to_string(n) + ", the size of target_dist)",
                            {.stage = "rejection_resample", .element = index});
    }
    return c;
  }

  std::optional<value_type> next_original() {
    std::optional<In> x = detail::next_counted(*original_, original_index_);
    if (!x) return std::nullopt;
    const std::int64_t c = classify(*x, original_index_++);
    return value_type(c, std::move(*x));
  }

  std::optional<value_type> next_filtered() {
    if (!estimating_) {
      for (;;) {
        std::optional<In> x = detail::next_counted(*filtered_, filtered_index_);
        if (!x) return std::nullopt;
        const std::int64_t c = classify(*x, filtered_index_++);
        if (accept_rng_.uniform01() < acceptance_[static_cast<std::size_t>(c)]) {
          return value_type(c, std::move(*x));
        }
        detail::throw_if_cancelled(cancel_);  // a long run of rejected elements
      }
    }
    for (;;) {
      if (pos_ == size_) {
        if (filtered_done_) return std::nullopt;
        refill();
        if (size_ == 0) return std::nullopt;
      }
      Slot& s = block_[pos_++];
      if (s.error) std::rethrow_exception(std::exchange(s.error, nullptr));
      const bool accept = accept_rng_.uniform01() < acceptance_[static_cast<std::size_t>(s.cls)];
      if (accept) {
        std::optional<value_type> out(std::in_place, s.cls, std::move(*s.value));
        s.value.reset();
        return out;
      }
      s.value.reset();
      detail::throw_if_cancelled(cancel_);
    }
  }

  // Reads the next block of up to 32 elements into block_, counts their
  // classes and recomputes the estimate and the probabilities from it. An
  // element that fails keeps its slot, holding its error, and is not counted.
  void refill() {
    primed_ = true;
    pos_ = 0;
    size_ = 0;
    bool counted = false;
    while (size_ < block_.size() && !filtered_done_) {
      if (size_ > 0) detail::throw_if_cancelled(cancel_);
      Slot& s = block_[size_];
      s.value.reset();
      s.error = nullptr;
      try {
        s.value = detail::next_counted(*filtered_, filtered_index_);
        if (!s.value) {
          filtered_done_ = true;
          break;
        }
        s.cls = classify(*s.value, filtered_index_++);
        ++counts_[static_cast<std::size_t>(s.cls)];
        counted = true;
      } catch (const detail::Cancelled&) {
        throw;
      } catch (...) {
        s.value.reset();
        s.error = std::current_exception();
      }
      ++size_;
    }
    if (!counted) return;
    update_estimate();
    warn_if_rejecting_most(estimate_);
  }

  // tf's _estimate_data_distribution: counts / their sum, then the probabilities from it.
  void update_estimate() {
    std::int64_t total = 0;
    for (const std::int64_t c : counts_) total += c;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      estimate_[i] = static_cast<double>(counts_[i]) / static_cast<double>(total);
    }
    prob_original_ = detail::acceptance_probs_with_mixing(estimate_, params_->target, acceptance_);
  }

  void warn_if_rejecting_most(std::span<const double> initial) {
    const double rejected = detail::proportion_rejected(initial, acceptance_);
    if (rejected < 0.5 || params_->warned.load(std::memory_order_relaxed) ||
        params_->warned.exchange(true, std::memory_order_relaxed)) {
      return;
    }
    log_line("rejection_resample: the sampler rejects " + detail::format_double(100 * rejected) +
             "% of the elements it reads (class distribution " + detail::format_doubles(initial) +
             ", acceptance probabilities " + detail::format_doubles(acceptance_) +
             "); logged once");
  }

  std::optional<InputIt> original_;  // every element, with its class
  std::optional<InputIt> filtered_;  // the elements the sampler accepts
  F f_;
  std::shared_ptr<const detail::ResampleParams> params_;
  CancellationToken cancel_;
  Rng accept_rng_;
  Rng choose_rng_;
  bool estimating_;
  std::vector<double> acceptance_;
  double prob_original_ = 0;
  std::int64_t original_index_ = 0;
  std::int64_t filtered_index_ = 0;
  bool done_ = false;
  // While estimating: the class counts, the estimate, and the block read ahead.
  std::vector<std::int64_t> counts_;
  std::vector<double> estimate_;
  std::vector<Slot> block_;
  std::size_t pos_ = 0;
  std::size_t size_ = 0;
  bool primed_ = false;
  bool filtered_done_ = false;
};

/// The dataset of `ds.rejection_resample(class_func, target_dist, options)`: the input
/// resampled so that its classes follow `target_dist`.
template <class Input, class F>
class RejectionResampleDataset
    : public detail::UnaryStageBase<RejectionResampleDataset<Input, F>, Input,
                                    std::pair<std::int64_t, typename Input::element_type>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "rejection_resample";

  /// Throws InvalidArgument for a target_dist or initial_dist that is empty,
  /// holds a negative or non-finite weight or sums to 0, for sizes that
  /// differ, and for a class with initial weight 0 and target weight > 0.
  RejectionResampleDataset(Input input, F class_func, std::vector<double> target_dist,
                           RejectionResampleOptions options)
      : RejectionResampleDataset::UnaryStageBase(std::move(input)),
        f_(std::move(class_func)),
        params_(make_params(std::move(target_dist), std::move(options))) {}

  /// Two passes over the input ("original" and "filtered"). The stage derives
  /// from UnaryStageBase, not UnaryStage: UnaryStage's make_iterator would
  /// call a make_stage_iterator this stage lacks, and clang instantiates it
  /// when it checks whether the base converts to an AnyDataset input (on
  /// every copy of a stage over an AnyDataset).
  auto make_iterator(const IteratorContext& ctx) const {
    using It = detail::child_iterator_t<Input>;
    std::optional<It> original;
    std::optional<It> filtered;
    if (params_->use_original)
      original.emplace(detail::child_iterator(this->input(), ctx, " (original)"));
    if (params_->use_filtered)
      filtered.emplace(detail::child_iterator(this->input(), ctx, " (filtered)"));
    return RejectionResampleIterator<It, F>(std::move(original), std::move(filtered), f_, params_,
                                            derive_seed(params_->seed, ctx.epoch),
                                            ctx.cancellation);
  }

  /// Unknown, as tf.data's: how many elements are accepted depends on the draws.
  std::int64_t cardinality() const { return unknown_cardinality; }

  /// The target and initial distributions and the seed (one drawn when the
  /// dataset was built differs between processes).
  void fingerprint(Fingerprint& fp) const {
    for (const auto* v : {&params_->target, &params_->initial}) {
      fp.add(static_cast<std::uint64_t>(v->size()));
      for (const double x : *v) fp.add(x);
    }
    fp.add(params_->seed);
  }

 private:
  static std::shared_ptr<const detail::ResampleParams> make_params(
      std::vector<double> target_dist, RejectionResampleOptions options) {
    auto p = std::make_shared<detail::ResampleParams>();
    p->target = detail::checked_distribution("target_dist", std::move(target_dist));
    p->seed = options.seed ? *options.seed : random_seed();
    const std::size_t n = p->target.size();
    if (!options.initial_dist) {
      // m = 0 in every block when a class has target 0 (its ratio is 0).
      p->use_original =
          std::none_of(p->target.begin(), p->target.end(), [](double t) { return t == 0; });
      return p;
    }
    if (options.initial_dist->size() != n) {
      throw InvalidArgument("rejection_resample: initial_dist has " +
                                std::to_string(options.initial_dist->size()) +
                                " classes but target_dist has " + std::to_string(n),
                            {.stage = "rejection_resample"});
    }
    p->initial = detail::checked_distribution("initial_dist", std::move(*options.initial_dist));
    for (std::size_t i = 0; i < n; ++i) {
      if (p->initial[i] == 0 && p->target[i] > 0) {
        throw InvalidArgument(
            "rejection_resample: class " + std::to_string(i) +
                " has initial_dist 0 but target_dist " + detail::format_double(p->target[i]) +
                " (normalised): no element of it can be drawn to reach the target",
            {.stage = "rejection_resample"});
      }
    }
    p->acceptance.resize(n);
    p->prob_original = detail::acceptance_probs_with_mixing(p->initial, p->target, p->acceptance);
    // tf: only the input when m is 1, only the filter when m is 0.
    p->use_original = p->prob_original > 0;
    p->use_filtered = p->prob_original < 1;
    return p;
  }

  F f_;
  std::shared_ptr<const detail::ResampleParams> params_;
};

}  // namespace ingest
