// map(f, {.parallelism, .deterministic}): f applied to every element by the
// runtime's pool, at most `parallelism` calls in flight. tf.data counterpart:
// ParallelMapDataset. Inputs are pulled on the consumer's thread (pulling is
// sequential) and handed to the pool in chunks sized from f's measured cost;
// a function too cheap to hand over runs inline on the consumer's thread.
// Deterministic mode returns results in input order, otherwise as they
// finish. f is called concurrently, so it must be callable as const. An
// exception from f surfaces from next() at its element's position.
// Destroying the iterator stops new calls and waits for running ones.
// Checkpoints store the consumer's position (runtime/anchors.hpp): the input's
// state at an anchor and the inputs not yet delivered; the calls in flight
// are made again after a restore, into any parallelism.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/allocator.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/anchors.hpp"
#include "ingest/runtime/chunking.hpp"
#include "ingest/runtime/parallel_apply.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of ParallelMapDataset: `f` applied to the input's elements by the runtime's pool,
/// at most `parallelism` calls in flight.
template <class InputIt, class F>
class ParallelMapIterator {
  using In = typename InputIt::value_type;

 public:
  /// What `f` returns for an input element, decayed.
  using value_type = std::decay_t<std::invoke_result_t<const F&, In&&>>;

  /// `node` (may be null) holds the parallelism knob and receives the
  /// function's measured time.
  /// (`fn`, not `f`: a function pointer named f would shadow f() for -Wshadow.)
  /// `checkpointed`: the pipeline's flag (Anchors::watch).
  ParallelMapIterator(InputIt input, F fn, std::size_t parallelism, bool deterministic,
                      std::shared_ptr<Runtime> runtime, detail::StageNode* node = nullptr,
                      std::shared_ptr<const std::atomic<bool>> checkpointed = nullptr)
      : input_(std::move(input)),
        engine_(slots(parallelism, *runtime), 1024, Compute{std::move(fn)}, parallelism,
                deterministic, runtime, node),  // a copy: `*runtime` is read in the same call
        node_(node) {
    inflight_.reserve(engine_.slots());
    anchors_.watch(std::move(checkpointed));
  }
  /// Movable, not assignable; destruction stops new calls and waits for the running ones.
  ParallelMapIterator(ParallelMapIterator&&) noexcept = default;
  ParallelMapIterator& operator=(ParallelMapIterator&&) = delete;

  // The inline fast path is kept small and always inlined into the consumer
  // (see Probe::next: an std::optional returned from a call costs a stall).
  /// The next result (in input order when deterministic, else as calls finish), or
  /// std::nullopt at the end; an exception from `f` surfaces at its element's position.
  [[gnu::always_inline]] std::optional<value_type> next() {
    if constexpr (blocks) {
      if (block_pos_ < block_end_) [[likely]]
        return std::optional<value_type>(std::move(block_[block_pos_++]));
    }
    if (fast_) [[likely]]
      return next_inline();
    return next_slow();
  }

  /// Checkpoint: the newest anchor at or before the first input not yet
  /// delivered, and which pulled inputs were not (runtime/anchors.hpp).
  void save(StateWriter& w) const requires checkpointable_iterator<InputIt> {
    detail::save_pulled(w, anchors_, replay_, input_, next_index_, pending(),
                        /*input_idle=*/current_ == Engine::none && inflight_.empty());
  }
  /// Restores what save() wrote into a fresh iterator: the input from the
  /// anchor, replayed to the first input not delivered.
  void restore(StateReader& r) requires checkpointable_iterator<InputIt> {
    next_index_ = detail::restore_pulled(r, anchors_, replay_, input_, "parallel_map");
  }

 private:
  // In inline mode over a source that applies f in its own bulk loop (range,
  // from_vector), f runs a block of elements at a time on the consumer's
  // thread (vectorised with the source where it can) and next() hands them
  // out one by one: per element an index and a move. A block runs ahead of
  // the consumer by at most block_size cheap calls, as a parallel map may.
  static constexpr bool blocks = map_fusing_iterator<InputIt, F, value_type> &&
                                 std::is_default_constructible_v<value_type> &&
                                 std::is_move_assignable_v<value_type>;
  static constexpr std::size_t block_size =
      std::clamp<std::size_t>(2048 / sizeof(value_type), 1, 64);
  static constexpr std::int64_t block_period = 16;  // one block in 16 is timed

  [[gnu::noinline]] std::optional<value_type> next_slow() {
    if constexpr (blocks) {
      if (block_error_) std::rethrow_exception(std::exchange(block_error_, nullptr));
    }
    for (;;) {
      if (current_ != Engine::none) {
        Chunk& c = engine_.work(current_);
        if (c.pos < c.count) {
          const std::size_t i = c.pos++;
          std::exception_ptr error = std::exchange(c.err[i], nullptr);
          // exchange, not move-then-reset: with the latter, GCC 12 at -O3
          // reports a false -Wmaybe-uninitialized (unique_ptr elements).
          std::optional<value_type> v = std::exchange(c.out[i], std::nullopt);
          const std::int64_t position = c.first_index + static_cast<std::int64_t>(i);
          if (c.pos == c.count) finish_current();
          // After a restore: results delivered before the save are dropped.
          if (position < replay_.high && replay_.delivered(position)) [[unlikely]]
            continue;
          if (error) std::rethrow_exception(error);
          return v;
        }
        finish_current();
      }
      replan();
      if (inline_ && inflight_.empty()) return next_inline();
      if (!inline_) launch();
      if (inflight_.empty()) return std::nullopt;
      const std::size_t k = engine_.take_ready(
          inflight_.size(), [this](std::size_t i) { return std::span(&inflight_[i], 1); });
      current_ = inflight_[k];
      inflight_.erase(inflight_.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }

  static std::size_t slots(std::size_t parallelism, const Runtime& runtime) {
    return 2 * std::max(detail::slot_parallelism(parallelism, runtime),
                        detail::max_tuned_parallelism(runtime)) +
           2;
  }

  struct Chunk {
    std::vector<std::optional<In>> in;
    std::vector<std::optional<value_type>> out;
    std::vector<std::exception_ptr> err;
    std::size_t count = 0, pos = 0;
    std::int64_t first_index = 0;
  };
  // Runs f over a chunk's inputs into its result slots; the calls it made.
  struct Compute {
    F f;
    std::size_t operator()(Chunk& c, const std::atomic<bool>& cancelled) const {
      std::size_t i = 0;
      for (; i < c.count && !cancelled.load(std::memory_order_relaxed); ++i) {
        if (!c.in[i]) continue;  // the input failed here; its error is in err[i]
        try {
          c.out[i].emplace(f(std::move(*c.in[i])));
        } catch (...) {
          c.err[i] = detail::capture_with_context(
              {.stage = detail::map_stage_label<F>,
               .element = c.first_index + static_cast<std::int64_t>(i)});
        }
        detail::recycle(*c.in[i]);
        c.in[i].reset();
      }
      return i;
    }
  };
  using Engine = detail::ParallelApply<Chunk, Compute>;

  detail::ChunkPlanner& planner() { return engine_.planner(); }
  const F& f() const noexcept { return engine_.compute().f; }

  void replan() {
    anchors_.poll(next_index_);  // the pipeline's first save or restore: anchor now
    // Replaying (after a restore) goes through chunks, whose results are
    // filtered at hand-out. A replica (PipelineIterator::save) runs inline:
    // an outer stage's restore pulls through it, and it is saved at once,
    // anchored where its input stands (Anchors::write), nothing in flight.
    inline_ = (engine_.replan() || anchors_.in_replica()) && next_index_ >= replay_.high;
    fast_ = inline_ && current_ == Engine::none && inflight_.empty();
  }

  [[gnu::always_inline]] std::optional<value_type> next_inline() {
    if constexpr (blocks) return next_block();
    if (anchors_.due(next_index_)) [[unlikely]]
      take_anchor();
    std::optional<In> x = detail::next_counted(input_, next_index_);
    if (!x) return std::nullopt;
    const std::int64_t index = next_index_++;
    if (sampler_.before()) [[unlikely]]
      return next_sampled(std::move(*x), index);
    std::optional<value_type> v(
        std::in_place, detail::invoke_user(detail::map_stage_label<F>, index, f(), std::move(*x)));
    detail::recycle(*x);
    return v;
  }

  // An inline call inside the sampler's measured run.
  [[gnu::noinline]] std::optional<value_type> next_sampled(In&& x, std::int64_t index) {
    std::optional<value_type> v(
        std::in_place, detail::invoke_user(detail::map_stage_label<F>, index, f(), std::move(x)));
    detail::recycle(x);
    if (sampler_.after(planner())) {
      // (No clock reads per call here: they would be most of what a
      // trivial function's sample measures.)
      inline_work_measured(sampler_.last_ns(),
                           detail::InlineSampler::period / detail::InlineSampler::run);
    }
    return v;
  }

  // A measured stretch of inline calls, standing for `scale` times as many:
  // inline calls are work too (for the autotuner); then the plan is revisited.
  void inline_work_measured(std::int64_t ns, std::int64_t scale) {
    if (node_) node_->work_ns.fetch_add(ns * scale, std::memory_order_relaxed);
    replan();
  }

  // Runs f over the next block (see `blocks`) and returns its first result.
  // An error from f comes after the results before it, at its position.
  [[gnu::noinline]] std::optional<value_type> next_block() {
    if (block_error_) std::rethrow_exception(std::exchange(block_error_, nullptr));
    if (block_.empty()) block_.resize(block_size);
    if (anchors_.due(next_index_)) [[unlikely]]
      take_anchor();
    const bool timed = --block_countdown_ == 0;
    const std::int64_t start = timed ? detail::ticks() : 0;
    std::exception_ptr error;
    const std::size_t n = input_.fill_map(std::span(block_), f(), error);
    if (timed) {
      const std::int64_t ns = detail::ticks_to_ns(detail::ticks() - start);
      block_countdown_ = block_period;
      planner().record(n + (error ? 1 : 0), ns);
      inline_work_measured(ns, block_period);
    }
    next_index_ += static_cast<std::int64_t>(n);
    if (error) {
      block_error_ = detail::capture_with_context(
          error, {.stage = detail::map_stage_label<F>, .element = next_index_});
      ++next_index_;
    }
    block_end_ = n;
    if (n == 0) {
      block_pos_ = 0;
      if (block_error_) std::rethrow_exception(std::exchange(block_error_, nullptr));
      return std::nullopt;
    }
    block_pos_ = 1;
    return std::optional<value_type>(std::move(block_[0]));
  }

  // Loads and submits chunks until the in-flight budget is used, or the
  // chunk to hand out next is ready (see ParallelApply::ready).
  void launch() {
    const std::size_t budget = std::min(engine_.slots() - 1, 2 * engine_.parallelism() + 1);
    for (bool loaded = false; !input_done_ && inflight_.size() < budget; loaded = true) {
      if (loaded && engine_.loaded_enough(std::span(&inflight_.front(), 1))) return;
      const std::size_t slot = engine_.find_idle();
      if (slot == Engine::none) return;
      if (anchors_.due(next_index_)) [[unlikely]]
        take_anchor();
      Chunk& c = engine_.work(slot);
      const std::size_t size = planner().chunk_size();
      if (c.in.size() < size) {
        c.in.resize(size);
        c.out.resize(size);
        c.err.resize(size);
      }
      c.first_index = next_index_;
      c.pos = 0;
      std::size_t k = 0;
      for (; k < size; ++k) {
        try {
          std::optional<In> x = input_.next();
          if (!x) {
            input_done_ = true;
            break;
          }
          c.in[k].emplace(std::move(*x));
          c.err[k] = nullptr;
        } catch (...) {
          c.in[k].reset();
          c.err[k] = std::current_exception();  // the input's error, at its position
        }
        ++next_index_;
      }
      c.count = k;
      if (k == 0) return;
      engine_.submit(slot);
      inflight_.push_back(slot);
    }
  }

  void finish_current() {
    engine_.release(current_);
    current_ = Engine::none;
  }

  // The pulled inputs not yet delivered: the rest of the chunk being handed
  // out, the chunks in flight, the rest of an inline block.
  std::vector<detail::PositionRange> pending() const {
    std::vector<detail::PositionRange> p;
    p.reserve(inflight_.size() + 2);
    if (current_ != Engine::none) {
      const Chunk& c = engine_.work(current_);
      p.push_back({c.first_index + static_cast<std::int64_t>(c.pos),
                   c.first_index + static_cast<std::int64_t>(c.count)});
    }
    for (const std::size_t slot : inflight_) {
      const Chunk& c = engine_.work(slot);
      p.push_back({c.first_index, c.first_index + static_cast<std::int64_t>(c.count)});
    }
    if constexpr (blocks) {
      const auto left = static_cast<std::int64_t>(block_end_ - block_pos_) + (block_error_ ? 1 : 0);
      if (left) p.push_back({next_index_ - left, next_index_});
    }
    return p;
  }

  // Before pulling the input at next_index_ (between chunks and blocks).
  // Anchors come about once per window of inputs in flight (at least 16
  // inputs apart): inline (a cheap function) every 4096, so that a save per
  // anchor (~0.2 us) stays below 0.1 ns per element; on the pool every
  // budget of chunks, so that a restore recomputes about two windows.
  [[gnu::noinline]] void take_anchor() noexcept {
    const auto window =
        static_cast<std::int64_t>((2 * engine_.parallelism() + 1) * engine_.planner().chunk_size());
    anchors_.set_every(inline_ ? 4096 : std::clamp<std::int64_t>(window, 16, 4096));
    try {
      anchors_.take(input_, next_index_, detail::lowest_pending(next_index_, pending()));
    } catch (...) {
      // No memory for the list: the next pull tries again.
    }
  }

  InputIt input_;
  Engine engine_;
  detail::StageNode* node_;
  bool inline_ = false;
  bool fast_ = false;  // inline mode with nothing in flight: next() calls f directly
  bool input_done_ = false;
  std::int64_t next_index_ = 0;
  std::vector<std::size_t> inflight_;   // submitted slots, in launch order
  std::size_t current_ = Engine::none;  // the done slot being consumed
  detail::InlineSampler sampler_;
  // Inline blocks (see `blocks`): results block_[block_pos_, block_end_) are
  // next, then block_error_ if f failed on the element after them.
  std::vector<value_type> block_;
  std::size_t block_pos_ = 0, block_end_ = 0;
  std::exception_ptr block_error_;
  std::int64_t block_countdown_ = 1;
  // Checkpoints: anchors of the input (see take_anchor).
  detail::Anchors anchors_{16};
  detail::Replay replay_;  // after a restore: the results to drop
};

/// The dataset of `ds.map(f, options)`: `f` applied to the elements by the runtime's pool, at
/// most `options.parallelism` calls in flight.
template <class Input, class F>
class ParallelMapDataset
    : public detail::UnaryStage<
          ParallelMapDataset<Input, F>, Input,
          std::decay_t<std::invoke_result_t<const F&, typename Input::element_type&&>>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "parallel_map";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;
  /// Its state holds its input's state at an anchor (runtime/anchors.hpp).
  static constexpr bool anchors_input = true;
  /// Its model in the autotuner (a ParallelMapNode), with the parallelism knob.
  using model_node = detail::ParallelMapNode;

  /// Maps `input` through `f` (called concurrently, as const); throws InvalidArgument for a
  /// parallelism that is not > 0 or ingest::autotune.
  ParallelMapDataset(Input input, F f, MapOptions options)
      : ParallelMapDataset::UnaryStage(std::move(input)), f_(std::move(f)), options_(options) {
    detail::check_knob_option("map", "parallelism", options.parallelism);
  }

  /// Wraps the input's iterator in a ParallelMapIterator on the context's runtime (called by
  /// make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    const std::size_t parallelism = detail::configure_parallelism(ctx, options_.parallelism);
    return ParallelMapIterator<It, F>(std::move(input), f_, parallelism,
                                      options_.deterministic.value_or(ctx.deterministic),
                                      runtime_of(ctx), ctx.node, detail::checkpoint_flag(ctx));
  }

  /// The mapped function.
  const F& function() const noexcept { return f_; }
  /// The options it was made with.
  const MapOptions& options() const noexcept { return options_; }
  /// The name of its row in stats and the trace (options.name; empty: the stage name).
  std::string_view node_name() const noexcept { return options_.name; }

  /// The input's cardinality.
  std::int64_t cardinality() const { return this->input_cardinality(); }

 private:
  F f_;
  MapOptions options_;
};

}  // namespace ingest
