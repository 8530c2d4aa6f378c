// interleave(f, {.cycle_length, .block_length, .parallelism, .deterministic}):
// f maps each input element to a dataset; up to cycle_length of those are
// open at once and block_length elements are taken from each in turn; an
// exhausted one is replaced by the next input element's. tf.data
// counterpart: InterleaveDataset / ParallelInterleaveDatasetV4, with exactly
// its order when deterministic. With parallelism > 1 every open dataset (and
// min(cycle_length, 2 x parallelism, 64) more opened ahead, to hide open
// latency) is pulled into a small buffer (16-256 elements, see
// fetcher_capacity) by a cooperative producer, at most
// `parallelism` pulling at once: the I/O-bound case of many files on slow
// storage. A producer holds a driver thread only while it pulls (it parks
// in the gate, or stops on a full buffer, and returns its thread), so the
// threads follow the parallelism, not cycle_length; the cycle grows as
// inputs open (a cycle_length of 2^40 over 3 inputs holds 3 slots).
// Non-deterministic mode takes from whichever open dataset has an element
// ready. f and the input run on the consumer's thread. Errors from f, from
// the input, or from an open dataset surface from next() at the position
// parallelism 1 gives them (an input error raised while opening ahead waits
// for its turn), and iteration may continue. Destroying the iterator stops
// its cancellation source first, whose token the input and every opened
// dataset carry (a batch being filled stops after the element in hand),
// then stops and joins the producers.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/anchors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/prefetcher.hpp"
#include "ingest/runtime/probe.hpp"
#include "ingest/runtime/runtime_core.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

namespace detail {
template <class F, class T>
using interleaved_dataset_t = std::decay_t<std::invoke_result_t<F&, T&&>>;
}  // namespace detail

/// Iterator of InterleaveDataset: takes `block_length` elements in turn from up to
/// `cycle_length` open datasets, each returned by `f` for an input element.
template <class InputIt, class F>
class InterleaveIterator {
  using In = typename InputIt::value_type;
  using Inner = detail::interleaved_dataset_t<F, In>;
  using InnerIt = detail::child_iterator_t<Inner>;
  // Checkpoints need the input elements the open datasets came from.
  static constexpr bool keeps_sources = serializable<In> && std::is_copy_constructible_v<In>;

 public:
  /// The element type of the datasets `f` returns.
  using value_type = typename Inner::element_type;

  /// The stage's parameters, resolved (no ingest::autotune left in them).
  struct Config {
    /// @name Sizes
    /// @{

    /// The most datasets open at once; elements taken from each in turn; producers pulling at once.
    std::size_t cycle_length, block_length, parallelism;
    /// @}
    /// Whether elements come in the order parallelism 1 gives, or as they are ready.
    bool deterministic;
    const std::atomic<std::int64_t>* tuned_parallelism = nullptr;  ///< an autotuned knob
  };

  /// `ctx` is the context of the opened datasets; `cancel` the source whose
  /// token it (and the input's) carries, stopped when this is destroyed.
  InterleaveIterator(InputIt input, F f, Config config, IteratorContext ctx,
                     CancellationSource cancel = {},
                     std::shared_ptr<detail::ReturnedCounters::Record> returned =
                         std::make_shared<detail::ReturnedCounters::Record>())
      : cancel_(std::move(cancel)),
        input_(std::move(input)),
        f_(std::move(f)),
        returned_(std::move(returned), ctx),
        config_(config),
        ctx_(std::move(ctx)),
        parallel_(config.parallelism > 1 || config.tuned_parallelism != nullptr),
        ahead_(std::min(config.cycle_length,
                        2 * std::clamp<std::size_t>(config.parallelism, 1, max_ahead / 2))) {
    if (parallel_) {
      runtime_ = runtime_of(ctx_);
      shared_ = std::make_unique<Shared>(config.parallelism, config.tuned_parallelism, ctx_.node);
    }
  }
  /// Movable, not assignable; destruction cancels the opened datasets' work and joins the
  /// producers.
  InterleaveIterator(InterleaveIterator&&) noexcept = default;
  InterleaveIterator& operator=(InterleaveIterator&&) = delete;
  ~InterleaveIterator() {
    // Stop the opened datasets' work between elements first, then ask every
    // producer to stop, then join them one by one.
    cancel_.request_stop();
    for (auto& e : cycle_) {
      if (e && e->fetcher) e->fetcher->request_stop();
    }
    for (auto& e : future_) {
      if (e.fetcher) e.fetcher->request_stop();
    }
    cycle_.clear();
    future_.clear();
  }

  /// The next element in cycle order (deterministic) or from any open dataset with one ready,
  /// or std::nullopt once the input and every open dataset ended. Throws errors of `f`, of the
  /// input or of an open dataset at the position parallelism 1 gives them, and goes on after.
  std::optional<value_type> next() {
    if (parallel_ && !config_.deterministic) return next_any();
    while (more_inputs() || open_ > 0) {
      if (index_ == cycle_.size()) cycle_.emplace_back();  // the cycle grows as inputs open
      std::optional<Element>& slot = cycle_[index_];
      if (slot) {
        std::optional<value_type> x =
            pull(slot);  // an element's error leaves the block as is (tf.data)
        if (x) {
          if (++block_ == config_.block_length) advance();
          return x;
        }
        close(slot);
        advance();
      } else if (more_inputs()) {
        open(slot);
      } else {
        advance();
      }
    }
    return std::nullopt;
  }

  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores =
      "the input elements its open datasets came from";

  /// Checkpoint: the cycle (its length, the slot and block counters), for
  /// each open dataset the input element it came from (through
  /// ingest::serializer, to call f on it again) and its position (its state
  /// at the consumer's position: a fetcher's anchor and the elements to
  /// skip, whatever the fetcher had buffered is read again after a
  /// restore), the input elements opened ahead (their datasets start
  /// afresh), then the input. With or without fetchers, at any parallelism:
  /// a state restores into another parallelism. An open error still to be
  /// raised cannot be stored: saving then raises Unimplemented.
  void save(StateWriter& w) const requires keeps_sources {
    const auto pending_error = [](const Element& e) { return e.open_error != nullptr; };
    for (const auto& slot : cycle_) {
      if (slot && pending_error(*slot)) throw_error_pending();
    }
    for (const Element& e : future_) {
      if (pending_error(e)) throw_error_pending();
    }
    returned_.save(w, "interleave");
    w.write(config_.cycle_length, index_, block_, input_done_, input_index_, cycle_.size(),
            future_.size());
    for (const auto& slot : cycle_) {
      w.write(slot.has_value());
      if (slot) save_element(w, *slot, true);
    }
    for (const Element& e : future_) save_element(w, e, false);
    input_.save(w);
  }
  /// Restores what save() wrote (the cycle and the input elements of the open datasets), on a
  /// fresh iterator of the same dataset.
  void restore(StateReader& r) requires keeps_sources {
    returned_.restore(r);
    const std::uint64_t at = r.offset();
    std::size_t cycle_length = 0, slots = 0, ahead = 0;
    r.read(cycle_length, index_, block_, input_done_, input_index_, slots, ahead);
    if (cycle_length == 0 || slots > cycle_length || index_ > slots ||
        block_ >= config_.block_length || ahead > r.remaining() / 16) {
      throw DataLossError("checkpoint: interleave's cycle of " + std::to_string(slots) + " of " +
                              std::to_string(cycle_length) + " slots at slot " +
                              std::to_string(index_) + " does not fit together",
                          {.stage = "interleave", .offset = at});
    }
    config_.cycle_length = cycle_length;  // as saved (autotune: the saving machine's cores)
    cycle_.clear();
    future_.clear();
    open_ = 0;
    for (std::size_t i = 0; i < slots; ++i) {
      cycle_.emplace_back();
      bool open = false;
      r.read(open);
      if (open) {
        cycle_.back().emplace(restore_element(r, true));
        ++open_;
      }
    }
    for (std::size_t i = 0; i < ahead; ++i) future_.push_back(restore_element(r, false));
    input_.restore(r);
  }

 private:
  // One open input element: its dataset's iterator, pulled directly or
  // through a prefetcher, or the error that opening it raised. A stopped
  // fetcher (`draining`) still holds elements it produced; once they are
  // taken its input is pulled directly. `source`: the input element it came
  // from (kept for checkpoints, where it can be stored).
  struct Element {
    std::optional<InnerIt> direct;
    std::optional<detail::Prefetcher<InnerIt, true>> fetcher;
    std::exception_ptr open_error;
    bool draining = false;
    std::optional<In> source{};
    std::int64_t input_index = 0;
  };

  [[noreturn]] static void throw_error_pending() {
    throw Unimplemented(
        "checkpoint: stage 'interleave' cannot be saved while an input's error is still to be "
        "raised",
        {.stage = "interleave"});
  }

  // An element in a checkpoint: its input element and index, and (for an
  // element of the cycle) its dataset's position in runtime/anchors.hpp's
  // layout, whether it is pulled directly or through a fetcher.
  void save_element(StateWriter& w, const Element& e, bool with_position) const {
    w.write_element(*e.source);
    w.write(e.input_index);
    if (!with_position) return;
    if (e.fetcher) {
      e.fetcher->save_position(w);
    } else {
      StateWriter now;
      e.direct->save(now);
      detail::write_position(w, 0, now, 0, {});
    }
  }

  // f's dataset for input element `x` (number `index`), its counters noted
  // (and a restore's values set on them), and its iterator.
  InnerIt open_dataset(std::int64_t index, In x) {
    Inner d = detail::invoke_user("interleave", index, f_, std::move(x));
    returned_.note(d);
    return detail::child_iterator(d, ctx_, " (each input)");
  }

  // Opens an element again from a checkpoint: f on its input element, its
  // dataset moved to the saved position, then a fetcher if inputs are
  // pulled through them now.
  Element restore_element(StateReader& r, bool with_position) {
    In x = r.read_element<In>("interleave");
    Element e;
    r.read(e.input_index);
    e.source = x;
    InnerIt it = open_dataset(e.input_index, std::move(x));
    if (with_position) {
      const detail::Replay replay = detail::read_position(r, it, "interleave");
      replay.expect_in_order("interleave");
      detail::skip_inputs(it, replay.low - replay.anchor, "interleave");
    }
    if (fetch_new_inputs()) {
      start_fetcher(e, std::move(it));
    } else {
      e.direct.emplace(std::move(it));
    }
    return e;
  }

  // Pulls `it` through a new fetcher (anchored for checkpoints as a
  // prefetch: paced to about 1% of its pulls' time).
  void start_fetcher(Element& e, InnerIt it) {
    e.fetcher.emplace(std::move(it), fetcher_capacity(), *runtime_, &shared_->gate,
                      &shared_->any_ready);
    if constexpr (checkpointable_iterator<InnerIt>) {
      e.fetcher->enable_anchors(1, detail::checkpoint_flag(ctx_));
    }
    e.fetcher->start();
  }
  struct Shared {
    Shared(std::size_t permits, const std::atomic<std::int64_t>* tuned, detail::StageNode* node)
        : gate(permits, tuned, node) {}
    detail::Gate gate;
    detail::Notifier any_ready;  // told of every element a producer pushes
  };

  // Input elements not yet in the cycle: unread, or opened ahead.
  bool more_inputs() const noexcept { return !input_done_ || !future_.empty(); }

  // Whether inputs are pulled through producers now. A tuned parallelism
  // of 1 pulls them on the consumer's thread, as a fixed 1 does: a hand-off
  // through a producer costs more than reading a cheap record (page-cache
  // TFRecords: about 1.4 M records/s through producers on two cores, 2.5 M
  // inline), so the autotuner can choose not to pay it. A replica
  // (PipelineIterator::save) pulls them on its thread too: it is saved as
  // soon as it is restored, and an input pulled directly is saved where it
  // stands, where a producer would have run ahead of its anchors.
  bool fetch_new_inputs() const noexcept {
    if (!parallel_ || ctx_.replica) return false;
    return config_.tuned_parallelism == nullptr ||
           config_.tuned_parallelism->load(std::memory_order_relaxed) > 1;
  }

  // Puts an open input in the mode the tuned knob asks for when its turn
  // comes, so a change applies to the open inputs too, not only to those
  // opened later (a W3 shard lasts about a tenth of a W3 run): an inline
  // input gets a producer; a producer is stopped, and its input pulled
  // directly once what it produced is taken.
  void follow_knob(Element& e) {
    if (!parallel_ || config_.tuned_parallelism == nullptr || e.open_error) return;
    const bool fetch = fetch_new_inputs();
    if (fetch && e.direct) {
      InnerIt it = std::move(*e.direct);
      e.direct.reset();
      start_fetcher(e, std::move(it));
    } else if (!fetch && e.fetcher && !e.draining) {
      e.fetcher->stop_and_join();
      e.draining = true;
    }
  }

  // Takes from a draining fetcher without blocking; once it is empty, its
  // input continues inline and is pulled here.
  std::optional<value_type> take_draining(Element& e) {
    std::optional<value_type> x;
    switch (e.fetcher->try_take(x)) {  // may rethrow an element's error
      case detail::Prefetcher<InnerIt, true>::Status::value: return x;
      case detail::Prefetcher<InnerIt, true>::Status::end: return std::nullopt;
      case detail::Prefetcher<InnerIt, true>::Status::empty: break;
    }
    e.direct.emplace(e.fetcher->release_input());
    e.fetcher.reset();
    e.draining = false;
    return e.direct->next();
  }

  // To the next slot of the cycle. Past the slots opened so far, more are
  // added while inputs remain; after the input's end they would stay empty.
  void advance() {
    block_ = 0;
    if (++index_ == config_.cycle_length || (index_ >= cycle_.size() && !more_inputs())) index_ = 0;
  }

  // Pulls from an open element; at its end returns nullopt.
  std::optional<value_type> pull(std::optional<Element>& slot) {
    Element& e = *slot;
    if (e.open_error) {
      std::exception_ptr error = std::exchange(e.open_error, nullptr);
      close(slot);
      std::rethrow_exception(error);
    }
    follow_knob(e);
    if (e.draining) return take_draining(e);
    return e.fetcher ? e.fetcher->next() : e.direct->next();
  }

  void close(std::optional<Element>& slot) {
    slot.reset();
    --open_;
  }

  // Makes the next input element (f's dataset) an Element; nullopt at the
  // input's end. Errors from the input, from f or from creating the
  // iterator are kept in the Element, to surface at its turn (an input
  // error read ahead then surfaces where parallelism 1 raises it).
  std::optional<Element> make_element() {
    std::optional<In> x;
    try {
      x = input_.next();
    } catch (...) {
      Element failed;
      failed.open_error = std::current_exception();
      return failed;
    }
    if (!x) {
      input_done_ = true;
      return std::nullopt;
    }
    const std::int64_t index = input_index_++;
    Element e;
    e.input_index = index;
    if constexpr (keeps_sources) e.source = *x;  // a copy per input element, for checkpoints
    try {
      InnerIt it = open_dataset(index, std::move(*x));
      if (fetch_new_inputs()) {
        start_fetcher(e, std::move(it));
      } else {
        e.direct.emplace(std::move(it));
      }
    } catch (...) {
      e.open_error = std::current_exception();
    }
    return e;
  }

  // Elements each open input may buffer: room for two blocks and more, so a
  // producer stopped on a full buffer is started again once per half buffer,
  // not per element: about buffered_elements in all, 16 to 256 per input
  // (each restart is a futex wake and a context switch: on W3's gzip shards
  // 16 slots cost a third of the throughput, and on plain shards a parallel
  // interleave went from 0.95 to 1.6 M records/s when 4 open inputs got 128
  // slots instead of 64).
  std::size_t fetcher_capacity() const noexcept {
    const std::size_t open_at_most =
        std::max<std::size_t>(std::min(config_.cycle_length, std::size_t{1} << 20) + ahead_, 1);
    return std::max(2 * std::min(config_.block_length, std::size_t{1} << 30) + 1,
                    std::clamp<std::size_t>(buffered_elements / open_at_most, 16, 256));
  }
  static constexpr std::size_t buffered_elements = 1024;

  // Fills an empty cycle slot: from the elements opened ahead, or the input.
  void open(std::optional<Element>& slot) {
    if (!future_.empty()) {
      slot.emplace(std::move(future_.front()));
      future_.pop_front();
      ++open_;
    } else if (std::optional<Element> e = make_element()) {
      slot.emplace(std::move(*e));
      ++open_;
    }
    if (fetch_new_inputs()) open_ahead();
    if (slot && slot->open_error) {
      std::exception_ptr error = std::exchange(slot->open_error, nullptr);
      close(slot);
      std::rethrow_exception(error);
    }
  }

  // Keeps ahead_ elements opened ahead, so their producers start early.
  void open_ahead() {
    while (!input_done_ && future_.size() < ahead_) {
      std::optional<Element> e = make_element();
      if (!e) break;
      future_.push_back(std::move(*e));
    }
  }

  // Non-deterministic: the first open element, from the current one on, with
  // an element ready; waits for any producer when none is. The cycle grows
  // by one slot whenever nothing is ready and it is below cycle_length.
  std::optional<value_type> next_any() {
    for (;;) {
      for (auto& slot : cycle_) {
        if (!slot && more_inputs()) open(slot);
      }
      for (std::size_t k = 0; k < cycle_.size(); ++k) {
        std::optional<Element>& slot = cycle_[(index_ + k) % cycle_.size()];
        if (!slot) continue;
        follow_knob(*slot);
        if (slot->open_error || slot->direct || slot->draining) {
          // Rethrows an open error; an input pulled inline is always ready.
          if (std::optional<value_type> x = pull(slot)) {
            index_ = (index_ + k + 1) % cycle_.size();
            return x;
          }
          close(slot);
          if (more_inputs()) open(slot);
          continue;
        }
        std::optional<value_type> x;
        auto status = slot->fetcher->try_take(x);  // may rethrow an element's error
        if (status == detail::Prefetcher<InnerIt, true>::Status::value) {
          index_ = (index_ + k + 1) % cycle_.size();
          return x;
        }
        if (status == detail::Prefetcher<InnerIt, true>::Status::end) {
          close(slot);
          if (more_inputs()) open(slot);
        }
      }
      if (cycle_.size() < config_.cycle_length && more_inputs()) {
        cycle_.emplace_back();
        open(cycle_.back());
        continue;
      }
      if (open_ == 0) {
        if (!more_inputs()) return std::nullopt;
        continue;
      }
      shared_->any_ready.wait_until([this] {
        for (auto& slot : cycle_) {
          if (slot &&
              (slot->open_error || slot->direct || slot->draining || slot->fetcher->ready())) {
            return true;
          }
        }
        return false;
      });
    }
  }

  CancellationSource cancel_;  // stopped first in the destructor
  InputIt input_;
  F f_;
  detail::ReturnedCounters returned_;  // of the datasets f returns
  Config config_;
  IteratorContext ctx_;
  bool parallel_;
  std::size_t ahead_;  // most elements opened ahead
  static constexpr std::size_t max_ahead = 64;
  std::shared_ptr<Runtime> runtime_;
  std::unique_ptr<Shared> shared_;  // stable address: producers point into it
  std::vector<std::optional<Element>> cycle_;
  std::deque<Element> future_;
  std::size_t index_ = 0, block_ = 0, open_ = 0;
  bool input_done_ = false;
  std::int64_t input_index_ = 0;
};

/// The dataset of `ds.interleave(f, options)`: elements taken in turn from the datasets `f`
/// returns for the input's elements, up to `cycle_length` open at once.
template <class Input, class F>
class InterleaveDataset
    : public detail::UnaryStageBase<
          InterleaveDataset<Input, F>, Input,
          typename detail::interleaved_dataset_t<F, typename Input::element_type>::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "interleave";
  /// Its model in the autotuner (an InterleaveNode), with the parallelism knob.
  using model_node = detail::InterleaveNode;

  /// Interleaves the datasets `f` returns for `input`'s elements; throws InvalidArgument for a
  /// cycle_length or parallelism that is not > 0 or ingest::autotune, or block_length < 1.
  InterleaveDataset(Input input, F f, InterleaveOptions options)
      : InterleaveDataset::UnaryStageBase(std::move(input)), f_(std::move(f)), options_(options) {
    detail::check_knob_option("interleave", "cycle_length", options.cycle_length);
    detail::check_knob_option("interleave", "parallelism", options.parallelism);
    if (options.block_length < 1) {
      throw InvalidArgument(
          "interleave: block_length must be >= 1; got " + std::to_string(options.block_length),
          {.stage = "interleave"});
    }
  }

  /// An iterator on the context's runtime (autotune resolves to the runtime's thread count);
  /// with parallelism > 1 its producers pull the open datasets ahead.
  auto make_iterator(const IteratorContext& ctx) const {
    const auto& runtime = runtime_of(ctx);
    typename InterleaveIterator<detail::child_iterator_t<Input>, F>::Config config{};
    config.cycle_length = options_.cycle_length == autotune
                              ? runtime->threads()
                              : static_cast<std::size_t>(options_.cycle_length);
    config.block_length = static_cast<std::size_t>(options_.block_length);
    config.parallelism = options_.parallelism == autotune
                             ? config.cycle_length
                             : static_cast<std::size_t>(options_.parallelism);
    config.deterministic = options_.deterministic.value_or(ctx.deterministic);
    if (ctx.node) {
      detail::configure_knob(ctx.node->parallelism, options_.parallelism, 1,
                             static_cast<std::int64_t>(config.cycle_length),
                             static_cast<std::int64_t>(config.parallelism));
      if (ctx.node->parallelism.tunable()) config.tuned_parallelism = &ctx.node->parallelism.value;
    }
    CancellationSource cancel(ctx.cancellation);
    const IteratorContext inner = ctx.cancellable_by(cancel);
    return InterleaveIterator<detail::child_iterator_t<Input>, F>(
        this->input_iterator(inner), f_, config, inner, std::move(cancel), returned_);
  }

  /// The cycle length and block length (parallelism is not: a state
  /// restores into any).
  void fingerprint(Fingerprint& fp) const {
    fp.add(options_.cycle_length).add(options_.block_length);
  }

 private:
  F f_;
  InterleaveOptions options_;
  std::shared_ptr<detail::ReturnedCounters::Record> returned_ =
      std::make_shared<detail::ReturnedCounters::Record>();  // shared by copies and iterators
};

}  // namespace ingest
