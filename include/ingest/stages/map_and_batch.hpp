// map(f, {.parallelism}).batch(n): one fused stage. tf.data counterpart:
// MapAndBatchDataset. The consumer pulls a batch's inputs and hands each
// chunk of them to the pool as soon as it is pulled, and each call of f
// writes its result straight into its slot of the batch buffer
// (batch_traits' builder): no per-element hand-off, no intermediate element
// buffer. Functions too cheap to hand over
// run inline on the consumer's thread. Same output as the unfused pipeline:
// a batch with a failed element (in f, in the input, or not stackable) fails
// as a whole with its first error. Destroying the iterator stops new chunks
// and waits for running ones. When the consumer is gone (the context's
// cancellation token), loading, inline and pooled work stop between
// elements (between pieces of 64 for arithmetic results and fused sources).
// Checkpoints store the consumer's position (runtime/anchors.hpp): the
// input's state at an anchor and the batches not yet delivered; the batches
// in flight are loaded and computed again after a restore, into any
// parallelism.
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
#include "ingest/core/batch_traits.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/anchors.hpp"
#include "ingest/runtime/chunking.hpp"
#include "ingest/runtime/parallel_apply.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of MapAndBatchDataset: batches of `f`'s results, computed by the pool straight into
/// the batch buffer.
template <class InputIt, class F>
class MapAndBatchIterator {
  using In = typename InputIt::value_type;
  using Out = std::decay_t<std::invoke_result_t<const F&, In&&>>;
  using traits = batch_traits<Out>;
  using builder = typename traits::builder;
  // Inputs wait in plain slots when the type allows, so bulk pulling works.
  static constexpr bool plain_inputs =
      std::is_default_constructible_v<In> && std::is_move_assignable_v<In>;
  using InputSlot = std::conditional_t<plain_inputs, In, std::optional<In>>;
  static constexpr bool bulk_input = plain_inputs && bulk_iterator<InputIt>;
  static constexpr bool fused_source =
      detail::bulk_builder<builder, Out> && map_fusing_iterator<InputIt, const F, Out>;

 public:
  /// The batch type: `batch_t` of what `f` returns.
  using value_type = typename traits::batch_type;

  /// `capacity`: the batch size, or less when the input is known to be
  /// shorter (the batch buffer of the fused path has this size).
  MapAndBatchIterator(InputIt input, F f, std::size_t batch_size, std::size_t capacity,
                      bool drop_remainder, std::size_t parallelism, bool deterministic,
                      IteratorContext ctx, bool infinite_input = false)
      : node_(ctx.node),
        input_(std::move(input)),
        allocator_(ctx.allocator),
        batch_size_(batch_size),
        capacity_(std::min(capacity, batch_size)),
        drop_remainder_(drop_remainder),
        cancel_(ctx.cancellation),
        engine_(max_batches(batch_size, parallelism, *runtime_of(ctx)) *
                    chunks_per_batch(batch_size, parallelism, *runtime_of(ctx)),
                batch_size, Compute{std::move(f), cancel_}, parallelism, deterministic,
                runtime_of(ctx), ctx.node) {
    anchors_.watch(detail::checkpoint_flag(ctx));
    // An infinite input fills every batch: the inputs of one must fit too
    // (a finite or unknown one allocates by what arrives).
    if (infinite_input) {
      try {
        detail::check_batch_bytes(batch_size, sizeof(InputSlot));
      } catch (...) {
        refused_ = detail::capture_with_context({.stage = "batch"}, detail::Raiser::internal);
      }
    }
    const std::size_t n = max_batches(batch_size, parallelism, engine_.runtime());
    batches_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) batches_.push_back(std::make_unique<Batch>());
  }
  /// Movable, not assignable; destruction stops new chunks and waits for the running ones.
  MapAndBatchIterator(MapAndBatchIterator&&) noexcept = default;
  MapAndBatchIterator& operator=(MapAndBatchIterator&&) = delete;

  /// The next batch, or std::nullopt at the end (or before a short last batch with
  /// drop_remainder); a batch with a failed element (in f, in the input, or not stackable)
  /// throws its first error.
  std::optional<value_type> next() {
    if (refused_) std::rethrow_exception(refused_);
    if constexpr (fused_source) {
      if (fused_ && !input_done_) [[likely]]
        return next_fused();
    }
    for (;;) {
      replan();
      if (inline_ && active_.empty()) {
        if (input_done_) return std::nullopt;
        if constexpr (fused_source) {
          // (Replaying after a restore goes through finish(), which drops
          // the batches delivered before the save.)
          if (next_index_ >= replay_.high) {
            fused_ = true;
            if (auto batch = next_fused()) return batch;
            continue;
          }
        }
        Batch& b = *batches_[0];
        load(b);
        if (b.count == 0) return std::nullopt;
        Chunk whole{&b, 0, b.count, nullptr, 0, b.any_failed};
        static const std::atomic<bool> never_cancelled{false};
        // One inline batch in 16 is timed: it keeps the cost estimate fresh.
        const bool timed = ++inline_batches_ % 16 == 0;
        const std::int64_t start = timed ? detail::now_ns() : 0;
        engine_.compute().compute_all(whole, never_cancelled,
                                      detail::inline_elements_between_checks);
        detail::throw_if_cancelled(cancel_);  // the batch may be incomplete
        if (timed) engine_.run().record_work(b.count, detail::now_ns() - start, 16);
        b.chunk_errors.push_back({whole.error, whole.error_index});
        if (auto batch = finish(b)) return batch;
        continue;
      }
      if (!inline_) launch();
      if (active_.empty()) return std::nullopt;
      Batch& b = take_ready();
      detail::throw_if_cancelled(cancel_);  // its chunks may have stopped early
      if (auto batch = finish(b)) return batch;
    }
  }

  /// Checkpoint: the newest anchor at or before the first input not yet
  /// delivered, and which batches were not (runtime/anchors.hpp).
  void save(StateWriter& w) const requires checkpointable_iterator<InputIt> {
    detail::save_pulled(w, anchors_, replay_, input_, next_index_, pending(),
                        /*input_idle=*/active_.empty());
  }
  /// Restores what save() wrote into a fresh iterator: the input from the
  /// anchor, replayed to the first input not delivered (a batch's start).
  void restore(StateReader& r) requires checkpointable_iterator<InputIt> {
    next_index_ = detail::restore_pulled(r, anchors_, replay_, input_, "map_and_batch");
  }

 private:
  struct Batch {
    std::optional<builder> out;
    std::vector<InputSlot> in;
    std::vector<std::uint8_t> failed;  // 1 where the input itself failed
    bool any_failed = false;
    std::exception_ptr input_error;
    std::size_t input_error_index = 0;
    std::size_t count = 0;
    std::int64_t first_index = 0;
    std::vector<std::size_t> chunks;  // runner slots of this batch's chunks
    /// A chunk's first failure and the index of its element in the batch.
    struct ChunkError {
      /// The failure.
      std::exception_ptr error;
      /// Its element's index in the batch.
      std::size_t index;
    };
    std::vector<ChunkError> chunk_errors;
  };
  struct Chunk {
    Batch* batch = nullptr;
    std::size_t begin = 0, end = 0;
    std::exception_ptr error;  // the first failure in [begin, end)
    std::size_t error_index = 0;
    // Whether an input in [begin, end) failed (the batch's flag may change
    // while the chunk runs: the rest of its batch is still loading).
    bool any_failed = false;
  };
  // Runs f over a chunk of a batch, each result into its slot of the batch
  // buffer; the calls it made.
  struct Compute {
    F f;
    CancellationToken cancel;  // the consumer is gone: stop between elements

    bool stopped(const std::atomic<bool>& cancelled) const noexcept {
      return cancelled.load(std::memory_order_relaxed) || cancel.stop_requested();
    }

    static In&& take(InputSlot& s) {
      if constexpr (plain_inputs) {
        return std::move(s);
      } else {
        return std::move(*s);
      }
    }
    // `raiser`: f (map) or the builder (batch), whose failures keep their type.
    void fail(Chunk& c, std::size_t i, const char* stage,
              detail::Raiser raiser = detail::Raiser::user_function) const {
      if (!c.error) {
        c.error = detail::capture_with_context(
            {.stage = stage, .element = c.batch->first_index + static_cast<std::int64_t>(i)},
            raiser);
        c.error_index = i;
      }
    }
    // Computes slots [i, c.end) into the batch buffer.
    void compute(Chunk& c, std::size_t i, const std::atomic<bool>& cancelled) const {
      Batch& b = *c.batch;
      for (; i < c.end && !stopped(cancelled); ++i) {
        if (c.any_failed && b.failed[i]) continue;
        In&& x = take(b.in[i]);
        try {
          auto&& v = f(std::move(x));
          try {
            b.out->set(i, std::move(v));
          } catch (...) {
            fail(c, i, "batch", detail::Raiser::internal);
          }
        } catch (...) {
          fail(c, i, detail::map_stage_label<F>);
        }
        detail::recycle(x);
      }
    }
    // A pool chunk. Pool chunks check for cancellation after every element
    // (their functions are the expensive ones: cheap ones run inline).
    std::size_t operator()(Chunk& c, const std::atomic<bool>& cancelled) const {
      compute_all(c, cancelled, 1);
      return c.end - c.begin;
    }
    // `piece`: elements of the arithmetic loop between two cancellation checks.
    void compute_all(Chunk& c, const std::atomic<bool>& cancelled, std::size_t piece) const {
      Batch& b = *c.batch;
      if constexpr (detail::bulk_builder<builder, Out> && plain_inputs) {
        if (!c.any_failed) {
          // Arithmetic results: a plain loop over the batch buffer, in
          // pieces between which cancellation is checked.
          const std::span<Out> slots = b.out->slots();
          std::size_t i = c.begin;
          while (i < c.end && !stopped(cancelled)) {
            const std::size_t piece_end = std::min(c.end, i + piece);
            try {
              for (; i < piece_end; ++i) {
                slots[i] = f(std::move(b.in[i]));
                detail::recycle(b.in[i]);
              }
            } catch (...) {
              fail(c, i, detail::map_stage_label<F>);
              ++i;
            }
          }
        } else {
          compute(c, c.begin, cancelled);
        }
      } else {
        compute(c, c.begin, cancelled);
      }
    }
  };
  using Engine = detail::ParallelApply<Chunk, Compute>;

  // Batches that can be in flight, and chunks per batch: enough chunks for
  // the most parallelism the knob can reach (4 per call in flight).
  static std::size_t parallelism_bound(std::size_t parallelism, const Runtime& runtime) {
    return std::max(detail::slot_parallelism(parallelism, runtime),
                    detail::max_tuned_parallelism(runtime));
  }
  static std::size_t chunks_per_batch(std::size_t batch_size, std::size_t parallelism,
                                      const Runtime& runtime) {
    return std::min(batch_size, 4 * parallelism_bound(parallelism, runtime));
  }
  static std::size_t max_batches(std::size_t batch_size, std::size_t parallelism,
                                 const Runtime& runtime) {
    return std::clamp<std::size_t>(
        (4 * parallelism_bound(parallelism, runtime) + batch_size - 1) / batch_size, 2, 64);
  }

  void replan() {
    anchors_.poll(next_index_);  // the pipeline's first save or restore: anchor now
    // A replica (PipelineIterator::save) runs inline: an outer stage's
    // restore pulls through it, and it is saved at once, anchored where its
    // input stands (Anchors::write), nothing in flight.
    inline_ = engine_.replan() || anchors_.in_replica();
  }

  // Inline, when the source can apply f in its own fill loop: the sequential
  // map -> batch path, one pass writing straight into the batch buffer. While
  // it lasts (fused_), next() comes straight here and the plan is revisited
  // only with each timed batch (one in 16).
  std::optional<value_type> next_fused() {
    if (anchors_.due(next_index_)) [[unlikely]]
      take_anchor();
    builder out = make_builder(capacity_);
    const std::span<Out> slots = out.slots();
    std::size_t count = 0;
    std::exception_ptr first_error;
    const std::int64_t start = (++inline_batches_ % 16 == 0) ? detail::now_ns() : 0;
    while (count < capacity_ && !input_done_) {
      detail::throw_if_cancelled(cancel_);
      const std::size_t want = std::min(pacer_.piece(), capacity_ - count);
      std::exception_ptr error;
      const std::int64_t piece_start = pacer_.start();
      const std::size_t got =
          input_.fill_map(slots.subspan(count, want), engine_.compute().f, error);
      pacer_.done(piece_start, got);
      count += got;
      if (error) {
        if (!first_error) {
          first_error = detail::capture_with_context(
              error, {.stage = detail::map_stage_label<F>,
                      .element = next_index_ + static_cast<std::int64_t>(count)});
        }
        ++count;  // the failed element takes its place in the batch
      } else if (got < want) {
        input_done_ = true;
      }
    }
    if (start) {
      engine_.run().record_work(count, detail::now_ns() - start, 16);
      replan();
      fused_ = inline_;
    }
    next_index_ += static_cast<std::int64_t>(count);
    // As finish(): a batch holding a failed element is dropped for its error.
    if (first_error) std::rethrow_exception(first_error);
    if (count == 0 || (count < batch_size_ && drop_remainder_)) return std::nullopt;
    return std::move(out).finish(count);
  }

  // A batch buffer of n slots: an impossible size is InvalidArgument from
  // the stage, not std::bad_alloc.
  builder make_builder(std::size_t n) const {
    try {
      return builder(BatchSpec{n, allocator_});
    } catch (...) {
      detail::rethrow_with_context({.stage = "batch"}, detail::Raiser::internal);
    }
  }

  // Pulls up to batch_size inputs into b. The input buffers grow with what
  // arrives (a batch size far above the input's length allocates nothing),
  // and the batch buffer is sized to what arrived. With `per_chunk` (the
  // pool's path, early_chunks()), the buffers are sized to the batch first
  // and each chunk of `per_chunk` inputs goes to the pool as soon as it is
  // pulled, the last one when the batch is complete: the first calls of f
  // do not wait for the whole batch's inputs (after a restore or at the
  // start, while the input warms up, a batch's pulls take milliseconds).
  void load(Batch& b, std::size_t per_chunk = 0) {
    if (anchors_.due(next_index_)) [[unlikely]]
      take_anchor();
    b.out.reset();
    if (b.any_failed) std::fill(b.failed.begin(), b.failed.end(), 0);
    b.any_failed = false;
    b.input_error = nullptr;
    b.chunks.clear();
    b.chunk_errors.clear();
    b.first_index = next_index_;
    std::size_t k = 0, submitted = 0;
    if (per_chunk) {
      if (b.in.size() < batch_size_) {
        b.in.resize(batch_size_);
        b.failed.resize(batch_size_);
      }
      b.out.emplace(BatchSpec{batch_size_, allocator_});
    }
    const auto submit_full = [&] {
      for (; per_chunk && k - submitted >= per_chunk; submitted += per_chunk)
        submit_chunk(b, submitted, submitted + per_chunk);
    };
    while (k < batch_size_ && !input_done_) {
      submit_full();
      detail::throw_if_cancelled(cancel_);
      if (k == b.in.size()) {
        const std::size_t size = std::min(batch_size_, std::max<std::size_t>(64, 2 * k));
        b.in.resize(size);
        b.failed.resize(size);
      }
      if constexpr (bulk_input) {
        std::size_t room = std::min(b.in.size() - k, load_pacer_.piece());
        // Early chunks: a fill stops where the chunk being loaded is full.
        if (per_chunk) room = std::min(room, submitted + per_chunk - k);
        const std::int64_t piece_start = load_pacer_.start();
        const std::size_t got = input_.fill(std::span<In>(b.in).subspan(k, room));
        load_pacer_.done(piece_start, got);
        k += got;
        if (got == room) continue;  // no end or error yet: grow, or the batch is full
      }
      try {
        std::optional<In> x = input_.next();
        if (!x) {
          input_done_ = true;
          break;
        }
        b.in[k] = std::move(*x);
      } catch (const detail::Cancelled&) {
        throw;
      } catch (...) {
        b.failed[k] = 1;
        b.any_failed = true;
        if (!b.input_error) {
          b.input_error = std::current_exception();
          b.input_error_index = k;
        }
      }
      ++k;
    }
    b.count = k;
    if (per_chunk) {
      submit_chunks(b, submitted, k, per_chunk);
    } else {
      b.out.emplace(BatchSpec{std::max<std::size_t>(k, 1), allocator_});
    }
    next_index_ += static_cast<std::int64_t>(k);
  }

  // Batches of at most this many inputs are handed to the pool chunk by
  // chunk while they load (their buffers sized to the batch up front).
  static constexpr std::size_t max_early_batch = 4096;
  // Whether load() submits chunks as they fill: a batch size the input
  // fills (not known to be shorter) and small enough to size up front.
  bool early_chunks() const noexcept {
    return capacity_ == batch_size_ && batch_size_ <= max_early_batch;
  }

  // Hands inputs [begin, end) of b to the pool in chunks of `per_chunk`.
  void submit_chunks(Batch& b, std::size_t begin, std::size_t end, std::size_t per_chunk) {
    for (; begin < end; begin += per_chunk)
      submit_chunk(b, begin, std::min(end, begin + per_chunk));
  }

  // Hands inputs [begin, end) of b to the pool as one chunk.
  void submit_chunk(Batch& b, std::size_t begin, std::size_t end) {
    const std::size_t slot = engine_.find_idle();
    Chunk& c = engine_.work(slot);
    const bool failed =
        b.any_failed && std::any_of(b.failed.begin() + static_cast<std::ptrdiff_t>(begin),
                                    b.failed.begin() + static_cast<std::ptrdiff_t>(end),
                                    [](std::uint8_t f) { return f != 0; });
    c = Chunk{&b, begin, end, nullptr, 0, failed};
    b.chunks.push_back(slot);
    engine_.submit(slot);
  }

  // The pulled inputs not yet delivered: the batches in flight.
  std::vector<detail::PositionRange> pending() const {
    std::vector<detail::PositionRange> p;
    p.reserve(active_.size());
    for (const Batch* b : active_)
      p.push_back({b->first_index, b->first_index + static_cast<std::int64_t>(b->count)});
    return p;
  }

  // Before loading the batch at next_index_. Anchors come about once per
  // batch (at least 16 inputs apart), so that a restore replays less than a
  // batch's inputs; inline (a cheap function) every 4096 inputs, so that a
  // save per anchor (~0.2 us) stays below 0.1 ns per element. An input whose
  // save costs more is anchored less often (Anchors' pacing).
  [[gnu::noinline]] void take_anchor() noexcept {
    const auto batch = static_cast<std::int64_t>(std::min<std::size_t>(batch_size_, 4096));
    anchors_.set_every(inline_ ? 4096 : std::max<std::int64_t>(batch, 16));
    try {
      anchors_.take(input_, next_index_, detail::lowest_pending(next_index_, pending()));
    } catch (...) {
      // No memory for the list: the next batch tries again.
    }
  }

  // Loads batches and submits their chunks while the budget allows, or
  // until the batch to hand out next is ready (see ParallelApply::ready).
  void launch() {
    const std::size_t parallelism = engine_.parallelism();
    for (bool loaded = false; !input_done_ && active_.size() < batches_.size(); loaded = true) {
      if (loaded && engine_.loaded_enough(active_.front()->chunks)) return;
      Batch* b = nullptr;
      for (auto& candidate : batches_) {
        if (std::find(active_.begin(), active_.end(), candidate.get()) == active_.end()) {
          b = candidate.get();
          break;
        }
      }
      const auto chunk_for = [&](std::size_t count) {
        return std::max(engine_.planner().chunk_size(),
                        (count + 4 * parallelism - 1) / (4 * parallelism));
      };
      if (early_chunks()) {
        try {
          load(*b, chunk_for(batch_size_));
        } catch (...) {
          // Cancelled (the consumer is gone): the chunks already submitted
          // keep the batch in flight, holding the inputs they compute.
          if (!b->chunks.empty()) {
            b->count = engine_.work(b->chunks.back()).end;
            active_.push_back(b);
          }
          throw;
        }
        if (b->count == 0) return;
      } else {
        load(*b);
        if (b->count == 0) return;
        submit_chunks(*b, 0, b->count, chunk_for(b->count));
      }
      active_.push_back(b);
    }
  }

  // The next batch to hand out (see ParallelApply::take_ready); its chunks'
  // errors collected and their slots released.
  Batch& take_ready() {
    const std::size_t k = engine_.take_ready(active_.size(), [this](std::size_t i) {
      return std::span<const std::size_t>(active_[i]->chunks);
    });
    Batch& b = *active_[k];
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(k));
    for (std::size_t s : b.chunks) {
      Chunk& c = engine_.work(s);
      b.chunk_errors.push_back({c.error, c.error_index});
      c.error = nullptr;
      engine_.release(s);
    }
    return b;
  }

  // The batch, or its first error; nullopt for a dropped remainder (and,
  // after a restore, for a batch delivered before the save).
  std::optional<value_type> finish(Batch& b) {
    if (b.first_index < replay_.high && replay_.delivered(b.first_index)) [[unlikely]] {
      b.chunk_errors.clear();
      b.count = 0;
      b.out.reset();
      return std::nullopt;
    }
    std::exception_ptr error = b.input_error;
    std::size_t error_index = b.input_error_index;
    for (auto& e : b.chunk_errors) {
      if (e.error && (!error || e.index < error_index)) {
        error = e.error;
        error_index = e.index;
      }
    }
    b.chunk_errors.clear();
    const std::size_t count = b.count;
    b.count = 0;
    if (error) {
      b.out.reset();
      std::rethrow_exception(error);
    }
    if (count < batch_size_ && drop_remainder_) {
      b.out.reset();
      return std::nullopt;
    }
    value_type batch = std::move(*b.out).finish(count);
    b.out.reset();
    return batch;
  }

  detail::StageNode* node_;  // knobs and measurements (may be null)
  InputIt input_;
  Allocator* allocator_;
  std::size_t batch_size_;
  std::size_t capacity_;
  bool drop_remainder_;
  CancellationToken cancel_;
  // Before engine_: the engine's destructor waits for the chunks writing
  // into these batches, so they must outlive it.
  std::vector<std::unique_ptr<Batch>> batches_;
  std::vector<Batch*> active_;     // batches with chunks submitted, in launch order
  Engine engine_;                  // after cancel_: its Compute copies the token
  detail::CheckPacer pacer_;       // the fused path's pieces
  detail::CheckPacer load_pacer_;  // bulk input fills
  bool inline_ = false;
  bool fused_ = false;  // inline with a fused source: next() goes straight to next_fused()
  bool input_done_ = false;
  std::int64_t next_index_ = 0;
  std::uint64_t inline_batches_ = 0;
  std::exception_ptr refused_;  // an impossible batch_size, thrown by every next()
  // Checkpoints: anchors of the input (see take_anchor).
  detail::Anchors anchors_{16};
  detail::Replay replay_;  // after a restore: the batches to drop
};

/// The dataset of `ds.map(f, {.parallelism}).batch(n)`, fused: each result is written straight
/// into its slot of the batch.
template <class Input, class F>
class MapAndBatchDataset
    : public detail::UnaryStage<
          MapAndBatchDataset<Input, F>, Input,
          batch_t<std::decay_t<std::invoke_result_t<const F&, typename Input::element_type&&>>>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "map_and_batch";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;
  /// Its state holds its input's state at an anchor (runtime/anchors.hpp).
  static constexpr bool anchors_input = true;
  /// It stacks elements: tracing records every call from this stage on.
  static constexpr bool batches = true;
  /// Its model in the autotuner (a ParallelMapNode), with the parallelism knob.
  using model_node = detail::ParallelMapNode;

  /// Maps `input` through `f` and batches the results `batch_size` at a time; throws
  /// InvalidArgument for a parallelism that is not > 0 or ingest::autotune, or batch_size <= 0.
  MapAndBatchDataset(Input input, F f, MapOptions map_options, std::int64_t batch_size,
                     BatchOptions batch_options)
      : MapAndBatchDataset::UnaryStage(std::move(input)),
        f_(std::move(f)),
        map_options_(map_options),
        batch_size_(batch_size),
        batch_options_(batch_options) {
    detail::check_knob_option("map", "parallelism", map_options.parallelism);
    if (batch_size <= 0) {
      throw InvalidArgument("batch: batch_size must be > 0; got " + std::to_string(batch_size),
                            {.stage = "batch"});
    }
  }

  /// Wraps the input's iterator in a MapAndBatchIterator on the context's runtime (called by
  /// make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    if (ctx.node) ctx.node->nominal_ratio = static_cast<double>(batch_size_);
    const std::size_t parallelism = detail::configure_parallelism(ctx, map_options_.parallelism);
    const std::int64_t n = this->input_cardinality();
    return MapAndBatchIterator<It, F>(
        std::move(input), f_, static_cast<std::size_t>(batch_size_),
        static_cast<std::size_t>(detail::batch_capacity(batch_size_, n)),
        batch_options_.drop_remainder, parallelism,
        map_options_.deterministic.value_or(ctx.deterministic), ctx, n == infinite_cardinality);
  }

  /// The number of batches: the input's cardinality divided by the batch size, rounded up
  /// (down with drop_remainder); infinite or unknown as the input's.
  std::int64_t cardinality() const {
    return detail::batched_cardinality(this->input_cardinality(), batch_size_,
                                       batch_options_.drop_remainder);
  }

  /// Parameters that change the elements (not the parallelism: a state
  /// restores into any).
  void fingerprint(Fingerprint& fp) const {
    fp.add(batch_size_).add(batch_options_.drop_remainder);
  }

  /// The name of its row in stats and the trace: the map's name plus " + batch" (empty: the
  /// stage name).
  std::string node_name() const {
    return map_options_.name.empty() ? std::string() : map_options_.name + " + batch";
  }

 private:
  F f_;
  MapOptions map_options_;
  std::int64_t batch_size_;
  BatchOptions batch_options_;
};

}  // namespace ingest
