// map(f, {.parallelism}).batch(n): one fused stage. tf.data counterpart:
// MapAndBatchDataset. The consumer pulls a batch's inputs, splits the batch
// into chunks for the pool, and each call of f writes its result straight
// into its slot of the batch buffer (batch_traits' builder): no per-element
// hand-off, no intermediate element buffer. Functions too cheap to hand over
// run inline on the consumer's thread. Same output as the unfused pipeline:
// a batch with a failed element (in f, in the input, or not stackable) fails
// as a whole with its first error. Destroying the iterator stops new chunks
// and waits for running ones. When the consumer is gone (the context's
// cancellation token), loading, inline and pooled work stop between
// elements (between pieces of 64 for arithmetic results and fused sources).
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

#include "ingest/core/batch_traits.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/chunk_runner.hpp"
#include "ingest/runtime/chunking.hpp"
#include "ingest/stages/parallel_map.hpp"

namespace ingest {

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
  using value_type = typename traits::batch_type;

  /// `capacity`: the batch size, or less when the input is known to be
  /// shorter (the batch buffer of the fused path has this size).
  MapAndBatchIterator(InputIt input, F f, std::size_t batch_size, std::size_t capacity,
                      bool drop_remainder, std::size_t parallelism, bool deterministic,
                      IteratorContext ctx, bool infinite_input = false)
      : node_(ctx.node),
        input_(std::move(input)),
        runtime_(ctx.runtime_or_default()),
        allocator_(ctx.allocator),
        batch_size_(batch_size),
        capacity_(std::min(capacity, batch_size)),
        drop_remainder_(drop_remainder),
        parallelism_(parallelism),
        deterministic_(deterministic),
        cancel_(ctx.cancellation) {
    // An infinite input fills every batch: the inputs of one must fit too
    // (a finite or unknown one allocates by what arrives).
    if (infinite_input) {
      try {
        detail::check_batch_bytes(batch_size, sizeof(InputSlot));
      } catch (...) {
        refused_ = detail::capture_with_context({.stage = "batch"}, detail::Raiser::internal);
      }
    }
    const std::size_t p_max = std::max(detail::slot_parallelism(parallelism, *runtime_),
                                       detail::max_tuned_parallelism(*runtime_));
    const std::size_t chunks_per_batch = std::min(batch_size, 4 * p_max);
    const std::size_t max_batches =
        std::clamp<std::size_t>((4 * p_max + batch_size - 1) / batch_size, 2, 64);
    Run run{std::move(f), std::make_unique<detail::ChunkPlanner>(batch_size), node_, cancel_};
    runner_ =
        std::make_shared<Runner>(max_batches * chunks_per_batch, std::move(run), runtime_.get());
    batches_.reserve(max_batches);
    for (std::size_t i = 0; i < max_batches; ++i) batches_.push_back(std::make_unique<Batch>());
  }
  MapAndBatchIterator(MapAndBatchIterator&&) noexcept = default;
  MapAndBatchIterator& operator=(MapAndBatchIterator&&) = delete;
  ~MapAndBatchIterator() {
    if (runner_) runner_->cancel_and_join();
  }

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
          fused_ = true;
          if (auto batch = next_fused()) return batch;
          continue;
        }
        Batch& b = *batches_[0];
        load(b);
        if (b.count == 0) return std::nullopt;
        Chunk whole{&b, 0, b.count, nullptr, 0};
        static const std::atomic<bool> never_cancelled{false};
        // One inline batch in 16 is timed: it keeps the cost estimate fresh.
        const bool timed = ++inline_batches_ % 16 == 0;
        const std::int64_t start = timed ? detail::now_ns() : 0;
        runner_->run().compute_all(whole, never_cancelled, detail::inline_elements_between_checks);
        detail::throw_if_cancelled(cancel_);  // the batch may be incomplete
        if (timed) runner_->run().record_work(b.count, detail::now_ns() - start, 16);
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
    struct ChunkError {
      std::exception_ptr error;
      std::size_t index;
    };
    std::vector<ChunkError> chunk_errors;
  };
  struct Chunk {
    Batch* batch = nullptr;
    std::size_t begin = 0, end = 0;
    std::exception_ptr error;  // the first failure in [begin, end)
    std::size_t error_index = 0;
  };
  struct Run {
    F f;
    std::unique_ptr<detail::ChunkPlanner> planner;
    detail::StageNode* node;
    CancellationToken cancel;  // the consumer is gone: stop between elements

    bool stopped(const std::atomic<bool>& cancelled) const noexcept {
      return cancelled.load(std::memory_order_relaxed) || cancel.stop_requested();
    }

    // Measured work: `ns` for `elements` calls, standing for `scale` times as many.
    void record_work(std::size_t elements, std::int64_t ns, std::int64_t scale) const {
      planner->record(elements, ns);
      if (node) node->work_ns.fetch_add(ns * scale, std::memory_order_relaxed);
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
        if (b.any_failed && b.failed[i]) continue;
        try {
          auto&& v = f(take(b.in[i]));
          try {
            b.out->set(i, std::move(v));
          } catch (...) {
            fail(c, i, "batch", detail::Raiser::internal);
          }
        } catch (...) {
          fail(c, i, "map");
        }
      }
    }
    // A pool chunk: computed and timed (chunks last tens of microseconds, so
    // the two clock reads are noise).
    // Pool chunks check for cancellation after every element (their
    // functions are the expensive ones: cheap ones run inline).
    void operator()(Chunk& c, const std::atomic<bool>& cancelled) const {
      const std::int64_t start = detail::now_ns();
      compute_all(c, cancelled, 1);
      const std::int64_t end = detail::now_ns();
      record_work(c.end - c.begin, end - start, 1);
      detail::trace_work(node, start, end);
    }
    // `piece`: elements of the arithmetic loop between two cancellation checks.
    void compute_all(Chunk& c, const std::atomic<bool>& cancelled, std::size_t piece) const {
      Batch& b = *c.batch;
      if constexpr (detail::bulk_builder<builder, Out> && plain_inputs) {
        if (!b.any_failed) {
          // Arithmetic results: a plain loop over the batch buffer.
          // A plain loop over the batch buffer, in pieces between which
          // cancellation is checked.
          const std::span<Out> slots = b.out->slots();
          std::size_t i = c.begin;
          while (i < c.end && !stopped(cancelled)) {
            const std::size_t piece_end = std::min(c.end, i + piece);
            try {
              for (; i < piece_end; ++i) slots[i] = f(std::move(b.in[i]));
            } catch (...) {
              fail(c, i, "map");
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
  using Runner = detail::ChunkRunner<Chunk, Run>;

  void replan() {
    detail::ChunkPlanner& planner = *runner_->run().planner;
    planner.update();
    inline_ = planner.prefer_inline(inline_);
  }

  // Inline, when the source can apply f in its own fill loop: the sequential
  // map -> batch path, one pass writing straight into the batch buffer. While
  // it lasts (fused_), next() comes straight here and the plan is revisited
  // only with each timed batch (one in 16).
  std::optional<value_type> next_fused() {
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
      const std::size_t got = input_.fill_map(slots.subspan(count, want), runner_->run().f, error);
      pacer_.done(piece_start, got);
      count += got;
      if (error) {
        if (!first_error) {
          first_error = detail::capture_with_context(
              error, {.stage = "map", .element = next_index_ + static_cast<std::int64_t>(count)});
        }
        ++count;  // the failed element takes its place in the batch
      } else if (got < want) {
        input_done_ = true;
      }
    }
    if (start) {
      runner_->run().record_work(count, detail::now_ns() - start, 16);
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
  // and the batch buffer is sized to what arrived.
  void load(Batch& b) {
    b.out.reset();
    if (b.any_failed) std::fill(b.failed.begin(), b.failed.end(), 0);
    b.any_failed = false;
    b.input_error = nullptr;
    b.chunks.clear();
    b.chunk_errors.clear();
    b.first_index = next_index_;
    std::size_t k = 0;
    while (k < batch_size_ && !input_done_) {
      detail::throw_if_cancelled(cancel_);
      if (k == b.in.size()) {
        const std::size_t size = std::min(batch_size_, std::max<std::size_t>(64, 2 * k));
        b.in.resize(size);
        b.failed.resize(size);
      }
      if constexpr (bulk_input) {
        const std::size_t room = std::min(b.in.size() - k, load_pacer_.piece());
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
    b.out.emplace(BatchSpec{std::max<std::size_t>(k, 1), allocator_});
    next_index_ += static_cast<std::int64_t>(k);
  }

  // Loads batches and submits their chunks while the budget allows.
  void launch() {
    if (node_ && node_->parallelism.tunable()) {
      parallelism_ = static_cast<std::size_t>(node_->parallelism.get());
    }
    while (!input_done_ && active_.size() < batches_.size()) {
      Batch* b = nullptr;
      for (auto& candidate : batches_) {
        if (std::find(active_.begin(), active_.end(), candidate.get()) == active_.end()) {
          b = candidate.get();
          break;
        }
      }
      load(*b);
      if (b->count == 0) return;
      const std::size_t per_chunk =
          std::max(runner_->run().planner->chunk_size(),
                   (b->count + 4 * parallelism_ - 1) / (4 * parallelism_));
      for (std::size_t begin = 0; begin < b->count; begin += per_chunk) {
        const std::size_t slot = runner_->find_idle();
        Chunk& c = runner_->work(slot);
        c = Chunk{b, begin, std::min(b->count, begin + per_chunk), nullptr, 0};
        b->chunks.push_back(slot);
        runner_->submit(slot, parallelism_);
      }
      active_.push_back(b);
    }
  }

  bool ready(const Batch& b) const {
    return std::all_of(b.chunks.begin(), b.chunks.end(),
                       [this](std::size_t s) { return runner_->state(s) == Runner::done; });
  }

  // The next batch to hand out: the oldest (deterministic) or any finished
  // one. Runs pending chunks itself rather than sleeping.
  Batch& take_ready() {
    for (;;) {
      for (std::size_t k = 0; k < active_.size(); ++k) {
        if (ready(*active_[k])) {
          Batch& b = *active_[k];
          active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(k));
          for (std::size_t s : b.chunks) {
            Chunk& c = runner_->work(s);
            b.chunk_errors.push_back({c.error, c.error_index});
            c.error = nullptr;
            runner_->release(s);
          }
          return b;
        }
        if (deterministic_) break;
      }
      bool helped = false;
      if (deterministic_) {
        for (std::size_t s : active_.front()->chunks) {
          if (runner_->help(s)) {
            helped = true;
            break;
          }
        }
      }
      if (helped || runner_->help_oldest()) continue;
      runner_->wait_until([this] {
        if (runner_->can_help()) return true;
        for (const Batch* b : active_) {
          if (ready(*b)) return true;
          if (deterministic_) return false;
        }
        return false;
      });
    }
  }

  // The batch, or its first error; nullopt for a dropped remainder.
  std::optional<value_type> finish(Batch& b) {
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
  std::shared_ptr<Runtime> runtime_;
  Allocator* allocator_;
  std::size_t batch_size_;
  std::size_t capacity_;
  bool drop_remainder_;
  std::size_t parallelism_;
  bool deterministic_;
  CancellationToken cancel_;
  detail::CheckPacer pacer_;       // the fused path's pieces
  detail::CheckPacer load_pacer_;  // bulk input fills
  std::shared_ptr<Runner> runner_;
  std::vector<std::unique_ptr<Batch>> batches_;
  std::vector<Batch*> active_;  // batches with chunks submitted, in launch order
  bool inline_ = false;
  bool fused_ = false;  // inline with a fused source: next() goes straight to next_fused()
  bool input_done_ = false;
  std::int64_t next_index_ = 0;
  std::uint64_t inline_batches_ = 0;
  std::exception_ptr refused_;  // an impossible batch_size, thrown by every next()
};

template <class Input, class F>
class MapAndBatchDataset
    : public DatasetBase<
          MapAndBatchDataset<Input, F>,
          batch_t<std::decay_t<std::invoke_result_t<const F&, typename Input::element_type&&>>>> {
 public:
  static constexpr std::string_view stage_name = "map_and_batch";

  MapAndBatchDataset(Input input, F f, MapOptions map_options, std::int64_t batch_size,
                     BatchOptions batch_options)
      : input_(std::move(input)),
        f_(std::move(f)),
        map_options_(map_options),
        batch_size_(batch_size),
        batch_options_(batch_options) {
    detail::check_parallelism("map", map_options.parallelism);
    if (batch_size <= 0) {
      throw InvalidArgument("batch: batch_size must be > 0; got " + std::to_string(batch_size),
                            {.stage = "batch"});
    }
  }

  auto make_iterator(const IteratorContext& ctx) const {
    const auto& runtime = ctx.runtime_or_default();
    std::size_t parallelism = detail::resolve_parallelism(map_options_.parallelism, *runtime);
    if (ctx.node) {
      ctx.node->kind = detail::StageKind::map_and_batch;
      ctx.node->nominal_ratio = static_cast<double>(batch_size_);
      detail::configure_knob(ctx.node->parallelism, map_options_.parallelism, 1,
                             static_cast<std::int64_t>(detail::max_tuned_parallelism(*runtime)),
                             static_cast<std::int64_t>(parallelism));
      parallelism = static_cast<std::size_t>(ctx.node->parallelism.get());
    }
    return MapAndBatchIterator<detail::child_iterator_t<Input>, F>(
        detail::child_iterator(input_, ctx), f_, static_cast<std::size_t>(batch_size_),
        static_cast<std::size_t>(
            detail::batch_capacity(batch_size_, detail::cardinality_of(input_))),
        batch_options_.drop_remainder, parallelism,
        map_options_.deterministic.value_or(ctx.deterministic), ctx,
        detail::cardinality_of(input_) == infinite_cardinality);
  }

  std::int64_t cardinality() const {
    return detail::batched_cardinality(detail::cardinality_of(input_), batch_size_,
                                       batch_options_.drop_remainder);
  }

 private:
  Input input_;
  F f_;
  MapOptions map_options_;
  std::int64_t batch_size_;
  BatchOptions batch_options_;
};

}  // namespace ingest
