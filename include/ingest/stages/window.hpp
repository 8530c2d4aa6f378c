// window(size, {.shift = size, .stride = 1, .drop_remainder = false}): window
// i holds input elements i*shift, i*shift + stride, ... (at most `size` of
// them) as a std::vector<T>; the last windows are shorter unless
// drop_remainder. tf.data counterpart: WindowDataset, with its exact
// windows, but a window is a vector here, not a dataset per window. Where a
// window should be one tensor, tf's `window(n).flat_map(lambda w:
// w.batch(n))` is `window(n).flat_map([](auto w) { return
// from_vector(std::move(w)).batch(n); })`, or stack it in a map with
// batch_traits<T>::builder, as batch() does.
// Runs on the iterating thread and holds at most (size - 1) * stride + 1
// input elements. An element in a window is moved into it when no later
// window holds it, else copied (overlapping windows need a copyable T). A
// window containing a failed element fails as a whole with the first such
// error, as in tf.data; the window after it starts where it would have.
// Input elements skipped by a shift larger than the window are read (errors
// ignored, as tf.data does) when the next window is asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

namespace detail {
/// Input elements a window of `size` at `stride` spans: (size - 1) * stride
/// + 1, saturated at the largest int64 (tf: TargetBufferSize).
inline std::int64_t window_span(std::int64_t size, std::int64_t stride) {
  if (size - 1 > (std::numeric_limits<std::int64_t>::max() - 1) / stride)
    return std::numeric_limits<std::int64_t>::max();
  return (size - 1) * stride + 1;
}
}  // namespace detail

/// Iterator of WindowDataset: windows of input elements as `std::vector<T>`.
template <class InputIt>
class WindowIterator {
  using element_type = typename InputIt::value_type;

 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores = "the input elements its next windows hold";
  /// A window: `std::vector` of the input's element type.
  using value_type = std::vector<element_type>;

  /// Owns the input iterator; window i starts at input element i * shift and takes every
  /// `stride`-th element over `span` = (size - 1) * stride + 1 elements.
  WindowIterator(InputIt input, std::int64_t shift, std::int64_t stride, std::int64_t span,
                 bool drop_remainder, CancellationToken cancel = {})
      : input_(std::move(input)),
        shift_(static_cast<std::size_t>(shift)),
        stride_(static_cast<std::size_t>(stride)),
        span_(static_cast<std::size_t>(span)),
        drop_remainder_(drop_remainder),
        cancel_(std::move(cancel)) {}

  /// The next window, or std::nullopt at the end (or before a short window with
  /// drop_remainder); a window holding a failed element throws the first such error.
  std::optional<value_type> next() {
    skip_pending();
    while (!input_done_ && buffer_.size() < span_) pull_one();
    if (buffer_.empty() || (drop_remainder_ && buffer_.size() < span_)) {
      buffer_.clear();
      return std::nullopt;
    }
    const std::size_t count = 1 + (buffer_.size() - 1) / stride_;
    std::exception_ptr error;
    for (std::size_t i = 0; i < count && !error; ++i) error = buffer_[i * stride_].error;
    value_type window;
    if (!error) {
      window.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        std::optional<element_type>& v = buffer_[i * stride_].value;
        if (i * stride_ < shift_) {
          window.push_back(std::move(*v));  // no later window holds it
        } else if constexpr (std::is_copy_constructible_v<element_type>) {
          window.push_back(*v);  // the dataset rejects overlap for move-only types
        }
      }
    }
    // Shift: drop what no later window holds; elements past the buffer are
    // skipped when the next window is asked for.
    if (shift_ >= buffer_.size()) {
      skip_ = shift_ - buffer_.size();
      buffer_.clear();
    } else {
      buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(shift_));
    }
    if (error) std::rethrow_exception(error);
    return window;
  }

  /// Checkpoint: the input elements the next windows hold (through
  /// ingest::serializer: at most a window's span, which the input cannot
  /// give again without its state from before them), the elements to skip,
  /// whether the input ended, then the input. A held element's error cannot
  /// be stored: saving then raises Unimplemented.
  void save(StateWriter& w) const requires serializable<element_type> {
    for (const Slot& s : buffer_) {
      if (s.error) {
        throw Unimplemented(
            "checkpoint: stage 'window' cannot be saved while it holds an input element's "
            "error",
            {.stage = "window"});
      }
    }
    w.write(skip_, input_done_, buffer_.size());
    for (const Slot& s : buffer_) w.write_element(*s.value);
    input_.save(w);
  }
  /// Restores what save() wrote (the elements its next windows hold), on a fresh iterator of the
  /// same dataset.
  void restore(StateReader& r) requires serializable<element_type> {
    const std::uint64_t at = r.offset();
    std::size_t held = 0;
    r.read(skip_, input_done_, held);
    if (held > span_) {
      throw DataLossError("checkpoint: window holds " + std::to_string(held) +
                              " elements, more than its span of " + std::to_string(span_),
                          {.stage = "window", .offset = at});
    }
    buffer_.clear();
    for (std::size_t i = 0; i < held; ++i)
      buffer_.push_back(Slot{r.read_element<element_type>("window"), nullptr});
    input_.restore(r);
  }

 private:
  struct Slot {
    std::optional<element_type> value;
    std::exception_ptr error;  // the input's error in this element's place
  };

  // Reads one input element into the buffer; a failed one takes its place.
  // Unwinds (detail::Cancelled) between elements once the consumer is gone.
  void pull_one() {
    detail::throw_if_cancelled(cancel_);
    Slot slot;
    try {
      slot.value = input_.next();
      if (!slot.value) {
        input_done_ = true;
        return;
      }
    } catch (const detail::Cancelled&) {
      throw;
    } catch (...) {
      slot.error = std::current_exception();
    }
    buffer_.push_back(std::move(slot));
  }

  // Reads and drops the input elements a shift past the last window skips.
  void skip_pending() {
    for (; skip_ > 0 && !input_done_; --skip_) {
      detail::throw_if_cancelled(cancel_);
      try {
        if (!input_.next()) input_done_ = true;
      } catch (const detail::Cancelled&) {
        throw;
      } catch (...) {  // a skipped element's error is dropped with it (tf.data)
      }
    }
    skip_ = 0;
  }

  InputIt input_;
  std::size_t shift_, stride_, span_;
  bool drop_remainder_;
  CancellationToken cancel_;
  std::deque<Slot> buffer_;  // the input elements from the next window's first on
  std::size_t skip_ = 0;     // input elements to skip before filling the buffer
  bool input_done_ = false;
};

/// The dataset of `ds.window(size, options)`: windows of up to `size` elements as
/// `std::vector<T>`, one every `shift` elements.
template <class Input>
class WindowDataset : public detail::UnaryStage<WindowDataset<Input>, Input,
                                                std::vector<typename Input::element_type>> {
  using In = typename Input::element_type;

 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "window";

  /// Throws InvalidArgument unless size, shift and stride are > 0, or when
  /// windows overlap (shift < (size - 1) * stride + 1) and T cannot be copied.
  WindowDataset(Input input, std::int64_t size, WindowOptions options)
      : WindowDataset::UnaryStage(std::move(input)),
        size_(size),
        shift_(options.shift.value_or(size)),
        stride_(options.stride),
        drop_remainder_(options.drop_remainder) {
    check_positive("size", size_);
    check_positive("shift", shift_);
    check_positive("stride", stride_);
    span_ = detail::window_span(size_, stride_);
    if (!std::is_copy_constructible_v<In> && shift_ < span_) {
      throw InvalidArgument("window: windows overlap (shift " + std::to_string(shift_) +
                                " < (size - 1) * stride + 1 = " + std::to_string(span_) +
                                ") and the element type cannot be copied into each of them",
                            {.stage = "window"});
    }
  }
  /// Wraps the input's iterator in a WindowIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    if (ctx.node) ctx.node->nominal_ratio = static_cast<double>(shift_);
    return WindowIterator<It>(std::move(input), shift_, stride_, span_, drop_remainder_,
                              ctx.cancellation);
  }

  /// As tf.data: with drop_remainder the windows that span their whole
  /// (size - 1) * stride + 1 elements, else one window per shift started.
  std::int64_t cardinality() const {
    return detail::map_cardinality(this->input_cardinality(), [&](std::int64_t n) {
      if (!drop_remainder_) return n / shift_ + (n % shift_ != 0);
      return n < span_ ? std::int64_t{0} : (n - span_) / shift_ + 1;
    });
  }

  /// The window's size, shift, stride and drop_remainder.
  void fingerprint(Fingerprint& fp) const {
    fp.add(size_).add(shift_).add(stride_).add(drop_remainder_);
  }

 private:
  static void check_positive(const char* what, std::int64_t value) {
    if (value <= 0) {
      throw InvalidArgument(
          std::string("window: ") + what + " must be > 0; got " + std::to_string(value),
          {.stage = "window"});
    }
  }

  std::int64_t size_, shift_, stride_, span_ = 0;
  bool drop_remainder_;
};

}  // namespace ingest
