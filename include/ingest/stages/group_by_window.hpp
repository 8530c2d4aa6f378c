// group_by_window(key_func, reduce_func, window_size | window_size_func):
// files each element under key_func(element) (an int64); when a key's window
// holds its window size (window_size, or window_size_func(key), asked once
// per key and iterator), reduce_func(key, std::vector<T>&& window) returns a
// dataset whose elements are produced in order, as flat_map does. At the end
// of the input the partial windows are reduced in ascending key order. tf.data
// counterpart: Dataset.group_by_window (GroupByWindowDataset), with a window
// as std::vector<T> (as window() has it), not a dataset.
// Runs on the iterating thread; the datasets reduce_func returns run in this
// stage's context and appear in stats as its inputs. Memory: elements wait in
// their key's window until it fills or the input ends (a key that rarely
// fills holds its elements for the whole pass), and each key seen keeps a
// small entry until the iterator is destroyed. Errors: an input element's
// error surfaces in its place; an exception from key_func or window_size_func
// (or a window size <= 0) fails that element (stage "group_by_window", its
// index in the input) and drops it; one from reduce_func fails the window
// (its first element's index); an error inside a returned dataset surfaces
// where it occurs. Iteration may continue after any of them.
// Checkpoints store the elements waiting in the windows and the window whose
// dataset is open; for that the stage keeps a copy of each window's elements
// while reduce_func's dataset is read (only for elements with a serializer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/flatten.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"
#include "ingest/runtime/window_groups.hpp"

namespace ingest {

namespace detail {
template <class ReduceFn, class T>
using group_reduce_t =
    std::decay_t<std::invoke_result_t<ReduceFn&, std::int64_t, std::vector<T>&&>>;
}  // namespace detail

/// Iterator of GroupByWindowDataset: the elements of the datasets reduce_func returns for each
/// full window of a key.
template <class InputIt, class KeyFn, class ReduceFn, class SizeFn>
class GroupByWindowIterator {
  using In = typename InputIt::value_type;
  using Inner = detail::group_reduce_t<ReduceFn, In>;
  static constexpr bool keeps_window = serializable<In> && std::is_copy_constructible_v<In>;

 public:
  /// What a checkpoint stores of its own (values, through ingest::serializer).
  static constexpr std::string_view checkpoint_stores =
      "the elements waiting in its windows and the window whose dataset is open";
  /// The element type of the datasets reduce_func returns.
  using value_type = typename Inner::element_type;

  /// `ctx` is the context the datasets reduce_func returns are iterated in.
  GroupByWindowIterator(InputIt input, KeyFn key_fn, ReduceFn reduce_fn, SizeFn size_fn,
                        IteratorContext ctx)
      : groups_(std::move(input), std::move(key_fn), std::move(size_fn), "group_by_window",
                ctx.cancellation),
        reduce_fn_(std::move(reduce_fn)),
        datasets_(std::move(ctx), " (each window)") {}

  /// The next element of the open dataset, reducing the next full window (the partial ones at
  /// the end of the input, in ascending key order) when it ends; std::nullopt at the end.
  /// Throws an element's or a window's error and goes on after it on the next call.
  std::optional<value_type> next() {
    return datasets_.next([&]() -> std::optional<Inner> {
      std::optional<detail::GroupWindow<In>> w = groups_.next();
      if (!w) return std::nullopt;
      if constexpr (keeps_window) {  // a copy per element, for checkpoints
        open_.key = w->key;
        open_.first = w->first;
        open_.elements = w->elements;
      }
      return detail::invoke_user("group_by_window", w->first, reduce_fn_, w->key,
                                 std::move(w->elements));
    });
  }

  /// Checkpoint: whether a window's dataset is open; if one is, its key, the
  /// index of its first element and its elements (through ingest::serializer,
  /// to call reduce_func on them again at a restore) and that dataset's state;
  /// then the windows still filling and the input (WindowGroups).
  void save(StateWriter& w) const requires keeps_window {
    w.write(datasets_.open());
    if (datasets_.open()) {
      w.write(open_.key, open_.first, open_.elements.size());
      for (const In& x : open_.elements) w.write_element(x);
      datasets_.save(w);
    }
    groups_.save(w);
  }
  /// Restores what save() wrote (the waiting elements and the open window), on a fresh iterator
  /// of the same dataset.
  void restore(StateReader& r) requires keeps_window {
    const std::uint64_t at = r.offset();
    bool open = false;
    r.read(open);
    open_.elements.clear();
    if (open) {
      std::size_t count = 0;
      r.read(open_.key, open_.first, count);
      // Bounded before anything is allocated: each element takes at least
      // its 8-byte length.
      if (count > r.remaining() / 8) {
        throw DataLossError("checkpoint: group_by_window: an open window of " +
                                std::to_string(count) + " elements in " +
                                std::to_string(r.remaining()) + " bytes",
                            {.stage = "group_by_window", .offset = at});
      }
      open_.elements.reserve(count);
      for (std::size_t k = 0; k < count; ++k)
        open_.elements.push_back(r.read_element<In>("group_by_window"));
      std::vector<In> window = open_.elements;
      datasets_.restore(detail::invoke_user("group_by_window", open_.first, reduce_fn_, open_.key,
                                            std::move(window)),
                        r);
    }
    groups_.restore(r);
  }

 private:
  struct OpenWindow {
    std::int64_t key = 0;
    std::int64_t first = 0;
    std::vector<In> elements{};
  };

  detail::WindowGroups<InputIt, KeyFn, SizeFn> groups_;
  ReduceFn reduce_fn_;
  detail::Flattener<Inner> datasets_;
  OpenWindow open_;  // the window whose dataset is open (a copy)
};

/// The dataset of `ds.group_by_window(key_func, reduce_func, window_size)`: elements grouped
/// by key into windows, each reduced to a dataset whose elements it produces.
template <class Input, class KeyFn, class ReduceFn, class SizeFn>
class GroupByWindowDataset
    : public detail::UnaryStage<
          GroupByWindowDataset<Input, KeyFn, ReduceFn, SizeFn>, Input,
          typename detail::group_reduce_t<ReduceFn, typename Input::element_type>::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "group_by_window";

  /// With window_size_func: each key's window size is window_size_func(key).
  GroupByWindowDataset(Input input, KeyFn key_fn, ReduceFn reduce_fn, SizeFn size_fn)
      : GroupByWindowDataset::UnaryStage(std::move(input)),
        key_fn_(std::move(key_fn)),
        reduce_fn_(std::move(reduce_fn)),
        size_fn_(std::move(size_fn)) {}
  /// With one window size for every key; throws InvalidArgument unless it is > 0.
  GroupByWindowDataset(
      Input input, KeyFn key_fn, ReduceFn reduce_fn,
      std::int64_t window_size) requires std::is_same_v<SizeFn, detail::FixedWindowSize>
      : GroupByWindowDataset(std::move(input), std::move(key_fn), std::move(reduce_fn),
                             detail::FixedWindowSize{window_size}) {
    if (window_size <= 0) {
      throw InvalidArgument(
          "group_by_window: window_size must be > 0; got " + std::to_string(window_size),
          {.stage = "group_by_window"});
    }
  }

  /// Wraps the input's iterator in a GroupByWindowIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    return GroupByWindowIterator<It, KeyFn, ReduceFn, SizeFn>(std::move(input), key_fn_, reduce_fn_,
                                                              size_fn_, ctx);
  }

  /// A fixed window size (a window_size_func is a user function: not part of it).
  void fingerprint(Fingerprint& fp) const {
    if constexpr (std::is_same_v<SizeFn, detail::FixedWindowSize>) fp.add(size_fn_.size);
  }

  /// As tf.data: infinite after an infinite input, else unknown.
  std::int64_t cardinality() const {
    const std::int64_t n = this->input_cardinality();
    return n == infinite_cardinality ? n : unknown_cardinality;
  }

 private:
  KeyFn key_fn_;
  ReduceFn reduce_fn_;
  SizeFn size_fn_;
};

}  // namespace ingest
