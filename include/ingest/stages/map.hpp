// map(f): f applied to every element, in order, on the iterating thread.
// tf.data counterpart: MapDataset (sequential). An exception from f surfaces
// from next() as the element's error, with stage "map" and the element's
// index in the map's input; iteration may continue after it. When the input
// supports bulk fill, map transforms whole chunks in a loop the compiler can
// vectorise.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/allocator.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of MapDataset: `f` applied to each input element, in order, on the calling thread.
template <class InputIt, class F>
class MapIterator {
  using input_type = typename InputIt::value_type;

 public:
  /// What `f` returns for an input element, decayed.
  using value_type = std::decay_t<std::invoke_result_t<F&, input_type&&>>;

  /// Owns the input iterator and `f`.
  MapIterator(InputIt input, F f) : input_(std::move(input)), f_(std::move(f)) {}

  // Always inlined: see Probe::next (a std::optional returned from a call
  // that is not inlined costs a store-forwarding stall).
  /// `f` of the next input element, or std::nullopt at the end; throws the element's error
  /// (f's exception, or the input's) and continues after it on the next call.
  [[gnu::always_inline]] std::optional<value_type> next() {
    deferred_.rethrow_if_any();
    if (pending_ < buffered_) [[unlikely]] {
      return apply(std::move(buffer_[pending_++]));
    }
    std::optional<input_type> x = detail::next_counted(input_, index_);
    if (!x) return std::nullopt;
    return apply(std::move(*x));
  }

  /// Bulk protocol: writes `f` of up to out.size() input elements, read in chunks from the
  /// input's fill; returns how many. An element's error is kept for the next call of next().
  std::size_t fill(std::span<value_type> out) requires
      bulk_iterator<InputIt> && std::is_default_constructible_v<input_type> &&
      std::is_move_assignable_v<input_type> && std::is_move_assignable_v<value_type> {
    if (deferred_ || pending_ < buffered_) return 0;  // drain those through next()
    if constexpr (map_fusing_iterator<InputIt, F, value_type>) {
      // The source applies f in its own loop: one pass, no read-ahead.
      std::exception_ptr error;
      const std::size_t got = input_.fill_map(out, f_, error);
      index_ += static_cast<std::int64_t>(got);
      if (error) {
        // The failed element was consumed; its error waits for next().
        deferred_.defer(detail::capture_with_context(
            error, {.stage = detail::map_stage_label<F>, .element = index_}));
        ++index_;
      }
      return got;
    }
    std::size_t n = 0;
    while (n < out.size()) {
      const std::size_t want = std::min(chunk, out.size() - n);
      input_type* in;
      std::size_t got;
      if constexpr (std::is_same_v<input_type, value_type>) {
        in = out.data() + n;  // transform in place
        got = input_.fill(out.subspan(n, want));
      } else {
        if (buffer_.size() < chunk) buffer_.resize(chunk);
        in = buffer_.data();
        got = input_.fill(std::span(buffer_).first(want));
      }
      std::size_t j = 0;
      try {
        for (; j < got; ++j) {
          out[n + j] = f_(std::move(in[j]));
          if constexpr (!std::is_same_v<input_type, value_type>) detail::recycle(in[j]);
        }
      } catch (...) {
        // Element j failed: its error waits for the next call to next();
        // the inputs after it stay pending, so nothing is lost.
        deferred_.defer(
            detail::capture_with_context({.stage = detail::map_stage_label<F>,
                                          .element = index_ + static_cast<std::int64_t>(j)}));
        if (buffer_.size() < chunk) buffer_.resize(chunk);
        std::move(in + j + 1, in + got, buffer_.begin());
        pending_ = 0;
        buffered_ = got - j - 1;
        index_ += static_cast<std::int64_t>(j) + 1;
        return n + j;
      }
      index_ += static_cast<std::int64_t>(got);
      n += got;
      if (got < want) break;
    }
    return n;
  }

  /// Checkpoint: the input index, then the input. Inputs read ahead by fill()
  /// after an element's error are not stored: such a state throws.
  void save(StateWriter& w) const {
    if (deferred_ || pending_ < buffered_) {
      throw Unimplemented(
          "checkpoint: stage 'map' cannot be saved while an element's error is pending",
          {.stage = "map"});
    }
    w.write_i64(index_);
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    index_ = r.read_i64();
    input_.restore(r);
  }

 private:
  // Inputs are read ahead at most this many at a time.
  static constexpr std::size_t chunk = std::clamp<std::size_t>(4096 / sizeof(input_type), 8, 512);

  std::optional<value_type> apply(input_type&& x) {
    std::optional<value_type> v(
        std::in_place, detail::invoke_user(detail::map_stage_label<F>, index_++, f_, std::move(x)));
    detail::recycle(x);
    return v;
  }

  InputIt input_;
  F f_;
  std::int64_t index_ = 0;          // index of the next input element
  detail::DeferredError deferred_;  // error of an element fill() stopped before
  std::vector<input_type> buffer_;  // inputs read ahead by fill()
  std::size_t pending_ = 0, buffered_ = 0;
};

/// The dataset of `ds.map(f)` (no options): `f` applied to every element, in order, on the
/// iterating thread.
template <class Input, class F>
class MapDataset : public detail::UnaryStage<
                       MapDataset<Input, F>, Input,
                       std::decay_t<std::invoke_result_t<F&, typename Input::element_type&&>>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "map";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;

  /// Maps `input` through `f` (copied into each iterator).
  MapDataset(Input input, F f) : MapDataset::UnaryStage(std::move(input)), f_(std::move(f)) {}

  /// Wraps the input's iterator in a MapIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return MapIterator<It, F>(std::move(input), f_);
  }

  /// The mapped function.
  const F& function() const noexcept { return f_; }

  /// The input's cardinality.
  std::int64_t cardinality() const { return this->input_cardinality(); }

 private:
  F f_;
};

}  // namespace ingest
