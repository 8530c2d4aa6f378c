// shuffle(buffer_size, {.seed, .reshuffle_each_iteration}): tf.data's
// fill-then-sample shuffle. The buffer fills to buffer_size before the first
// output; each output then draws a uniform random slot, emits it and refills
// that slot from the input; at the end of the input the buffer drains in
// random order. tf.data counterpart: ShuffleDataset. A seed gives the same
// order in every run (given the same input order); without one, each run
// differs. With reshuffle_each_iteration every pass (epoch) gets a new order
// derived from the seed and the pass number. Elements are moved, never
// copied. Runs on the consumer's thread; a buffer still filling after 10 s
// logs its progress. An input error surfaces from next() (at once while
// filling, on the following call afterwards) and the element is dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
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
#include "ingest/runtime/model.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/serialized_buffer.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of ShuffleDataset: tf.data's fill-then-sample shuffle over a buffer of elements.
template <class InputIt>
class ShuffleIterator {
 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "its buffered elements";
  /// The element type (the input's).
  using value_type = typename InputIt::value_type;

  /// `passes`, where the dataset reshuffles each pass: its pass counter,
  /// this iterator's pass being `pass` (a restore moves the counter on).
  /// `checkpointed` (the pipeline's Model::checkpointed): once set, saves
  /// keep the buffer serialized (runtime/serialized_buffer.hpp).
  ShuffleIterator(InputIt input, std::size_t buffer_size, std::uint64_t seed,
                  CancellationToken cancel = {},
                  std::shared_ptr<std::atomic<std::uint64_t>> passes = nullptr,
                  std::uint64_t pass = 0,
                  std::shared_ptr<const std::atomic<bool>> checkpointed = nullptr)
      : input_(std::move(input)),
        capacity_(buffer_size),
        rng_(seed),
        cancel_(std::move(cancel)),
        passes_(std::move(passes)),
        pass_(pass),
        checkpointed_(std::move(checkpointed)) {}

  /// A random element of the buffer (filled on the first call, refilled from the input), or
  /// std::nullopt once the input ended and the buffer drained. Throws an input error (the
  /// element is dropped): at once while filling, on the following call afterwards.
  std::optional<value_type> next() {
    deferred_.rethrow_if_any();
    if (!filled_) fill();
    if (buffer_.empty()) return std::nullopt;
    const auto slot = static_cast<std::size_t>(rng_.uniform(buffer_.size()));
    if (!buffer_[slot]) [[unlikely]]
      read_kept(slot);
    value_type out = std::move(*buffer_[slot]);
    std::optional<value_type> refill;
    if (!input_done_) {
      try {
        refill = input_.next();
        if (!refill) input_done_ = true;
      } catch (...) {
        deferred_.defer(std::current_exception());  // surfaces on the next call; `out` is not lost
      }
    }
    if (refill) {
      buffer_[slot] = std::move(*refill);
      if (kept_.active()) [[unlikely]]
        kept_.replaced(slot);
    } else {
      if (kept_.active()) [[unlikely]]
        kept_.removed(slot, buffer_.size());
      if (slot != buffer_.size() - 1) buffer_[slot] = std::move(buffer_.back());
      buffer_.pop_back();
    }
    return out;
  }

  /// Checkpoint: the pass, the generator's state, the buffered elements
  /// (through ingest::serializer<T>, as tf.data stores them: the state grows
  /// with the buffer) and whether the input ended, then the input. Restore
  /// moves the dataset's pass counter past the saved pass, so the passes
  /// that follow reshuffle as they would have. From the pipeline's first
  /// save or restore on, the buffer is kept serialized between saves: a
  /// save serializes the elements that entered since the last one (each
  /// element once) and shares the rest, so anchors of a large buffer are
  /// cheap (runtime/serialized_buffer.hpp).
  void save(StateWriter& w) const requires serializable<value_type> {
    if (deferred_) {
      throw Unimplemented(
          "checkpoint: stage 'shuffle' cannot be saved while an input error is pending",
          {.stage = "shuffle"});
    }
    if (!kept_.active() && checkpointed_ && checkpointed_->load(std::memory_order_relaxed))
      kept_.activate();
    // An anchor taken in case the pipeline is saved (a pipeline that never
    // is would serialize its whole buffer now and then for nothing): the
    // buffer is saved once the pipeline is, kept serialized from then on.
    if (!kept_.active() && w.speculative() && !buffer_.empty()) throw detail::SaveDeclined{};
    const auto& rng = rng_.state();
    w.write(pass_, rng[0], rng[1], rng[2], rng[3], filled_, input_done_, buffer_.size());
    if (kept_.active()) {
      kept_.write(w, std::span<const std::optional<value_type>>(buffer_));
    } else {
      w.write_element_table(std::span<const std::optional<value_type>>(buffer_));
    }
    input_.save(w);
  }
  /// Restores what save() wrote (the buffer and the generator), on a fresh iterator of the same
  /// dataset.
  void restore(StateReader& r) requires serializable<value_type> {
    const std::uint64_t at = r.offset();
    std::uint64_t rng[4];
    std::size_t count = 0;
    r.read(pass_, rng[0], rng[1], rng[2], rng[3], filled_, input_done_, count);
    if ((rng[0] | rng[1] | rng[2] | rng[3]) == 0) {
      throw DataLossError("checkpoint: shuffle's generator state is all zero",
                          {.stage = "shuffle", .offset = at});
    }
    // Bounded before anything is allocated: at most the buffer's size, and
    // each element takes at least its 8-byte length.
    if (count > capacity_ || count > r.remaining() / 8) {
      throw DataLossError("checkpoint: shuffle holds " + std::to_string(count) +
                              " elements, more than its buffer of " + std::to_string(capacity_) +
                              " or the state's bytes",
                          {.stage = "shuffle", .offset = at});
    }
    rng_.set_state(rng);
    kept_.clear();
    buffer_.clear();
    std::vector<std::span<const std::byte>> elements = r.read_element_table(count);
    if (r.owner()) {
      // The state's bytes stay alive: its elements are deserialized when
      // drawn (the first batch after a restore needs a few of them, not the
      // whole buffer), and kept for the next save as they are.
      buffer_.resize(count);
      kept_.adopt(r.owner(), std::move(elements));
    } else {
      buffer_.reserve(count);
      for (const std::span<const std::byte> e : elements)
        buffer_.emplace_back(read_stored<value_type>(e, "shuffle", r.offset_of(e)));
    }
    if (passes_) detail::restored_pass(passes_, pass_);
    input_.restore(r);
  }

 private:
  // Deserializes the restored element at `slot`; one that cannot be read
  // leaves the buffer (its error is the element's).
  // (Only a restore leaves a slot empty, and only values with a serializer restore.)
  void read_kept(std::size_t slot) {
    try {
      if constexpr (serializable<value_type>) {
        buffer_[slot].emplace(kept_.read<value_type>(slot, "shuffle"));
      }
    } catch (...) {
      kept_.removed(slot, buffer_.size());
      if (slot != buffer_.size() - 1) buffer_[slot] = std::move(buffer_.back());
      buffer_.pop_back();
      throw;
    }
  }

  void fill() {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    auto report = start + std::chrono::seconds(10);
    while (!input_done_ && buffer_.size() < capacity_) {
      detail::throw_if_cancelled(cancel_);
      std::optional<value_type> x = input_.next();  // an error surfaces here and is dropped
      if (!x) {
        input_done_ = true;
        break;
      }
      buffer_.push_back(std::move(*x));
      if (buffer_.size() % 1024 == 0 && clock::now() >= report) {
        report += std::chrono::seconds(10);
        log_line("shuffle: filled " + std::to_string(buffer_.size()) + " of " +
                 std::to_string(capacity_) + " buffer elements");
      }
    }
    filled_ = true;
  }

  InputIt input_;
  std::size_t capacity_;
  Rng rng_;
  CancellationToken cancel_;
  std::shared_ptr<std::atomic<std::uint64_t>> passes_;  // reshuffling: the dataset's counter
  std::uint64_t pass_;
  // Empty slots: elements of a restored state not deserialized yet (kept_).
  std::vector<std::optional<value_type>> buffer_;
  // The buffer's serialized form, kept between saves; saves run on the
  // thread that owns this iterator, between calls of next().
  mutable detail::SerializedBuffer kept_;
  std::shared_ptr<const std::atomic<bool>> checkpointed_;
  bool filled_ = false;
  bool input_done_ = false;
  detail::DeferredError deferred_;
};

/// The dataset of `ds.shuffle(buffer_size, options)`: its input in random order, through a
/// buffer of `buffer_size` elements.
template <class Input>
class ShuffleDataset
    : public detail::UnaryStage<ShuffleDataset<Input>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "shuffle";

  /// Shuffles `input` through a buffer of `buffer_size` elements; without options.seed one is drawn
  /// now. Throws InvalidArgument if `buffer_size` < 1.
  ShuffleDataset(Input input, std::int64_t buffer_size, ShuffleOptions options)
      : ShuffleDataset::UnaryStage(std::move(input)),
        buffer_size_(buffer_size),
        options_(options),
        base_seed_(options.seed ? *options.seed : random_seed()),
        passes_(std::make_shared<std::atomic<std::uint64_t>>(0)) {
    if (buffer_size < 1) {
      throw InvalidArgument("shuffle: buffer_size must be >= 1; got " + std::to_string(buffer_size),
                            {.stage = "shuffle"});
    }
  }

  /// Wraps the input's iterator in a ShuffleIterator with the seed of the next pass (called by
  /// make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    // Every pass over the dataset (and its copies) gets its own stream.
    const auto passes = detail::shared_counter(ctx, passes_);
    const std::uint64_t pass = passes->fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t seed =
        options_.reshuffle_each_iteration ? derive_seed(base_seed_, pass) : base_seed_;
    return ShuffleIterator<It>(
        std::move(input), static_cast<std::size_t>(buffer_size_), seed, ctx.cancellation,
        options_.reshuffle_each_iteration ? passes : nullptr, pass, detail::checkpoint_flag(ctx));
  }

  /// The input's cardinality.
  std::int64_t cardinality() const { return this->input_cardinality(); }

  /// The buffer size and the seed (a seed drawn from the OS differs between
  /// processes: such a state restores only into this dataset).
  void fingerprint(Fingerprint& fp) const {
    fp.add(buffer_size_).add(options_.reshuffle_each_iteration).add(base_seed_);
    fp.counter(passes_);
  }

 private:
  std::int64_t buffer_size_;
  ShuffleOptions options_;
  std::uint64_t base_seed_;
  std::shared_ptr<std::atomic<std::uint64_t>> passes_;
};

}  // namespace ingest
