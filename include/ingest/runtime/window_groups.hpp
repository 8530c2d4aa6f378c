// The grouping engine of group_by_window and bucket_by_sequence_length (tf:
// GroupByWindowDataset's iterator, which bucket_by_sequence_length is built
// on): reads the input, files each element under its int64 key and hands a
// key's window out as soon as it holds that key's window size; at the end of
// the input, the non-empty partial windows in ascending key order (tf keeps
// its groups in a std::map and flushes groups_.begin() until none is left).
// A key's window size is asked for once per iterator, when the key is first
// seen (tf caches it in window_sizes_ for the iterator's lifetime).
// Memory: every element waits in its key's window until the window fills or
// the input ends, and every key seen keeps a small entry (its window size and
// an empty vector) until the iterator is destroyed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/iterator.hpp"
#include "ingest/core/state.hpp"

namespace ingest::detail {

/// A key's window, as WindowGroups hands it out.
template <class T>
struct GroupWindow {
  std::int64_t key = 0;
  std::vector<T> elements{};  ///< in input order; fewer than `size` only at the end of the input
  std::int64_t size = 0;      ///< the key's window size
  std::int64_t first = 0;     ///< the index in the input of the window's first element
};

/// A window size that is the same for every key (group_by_window(key, reduce, n)).
struct FixedWindowSize {
  std::int64_t size = 0;
  std::int64_t operator()(std::int64_t) const noexcept { return size; }
};

/// key_fn(const T&) and size_fn(key) return integers; `stage` names both in
/// their errors. Runs on the iterating thread.
template <class InputIt, class KeyFn, class SizeFn>
class WindowGroups {
  using T = typename InputIt::value_type;

 public:
  WindowGroups(InputIt input, KeyFn key_fn, SizeFn size_fn, const char* stage,
               CancellationToken cancel)
      : input_(std::move(input)),
        key_fn_(std::move(key_fn)),
        size_fn_(std::move(size_fn)),
        stage_(stage),
        cancel_(std::move(cancel)) {}

  /// The next window that filled up, or, once the input has ended, the next
  /// partial window in ascending key order; std::nullopt when none is left.
  /// An input element's error, or key_fn's or size_fn's on an element (a
  /// window size <= 0 is InvalidArgument), is thrown in the element's place
  /// and the element is dropped; the next call continues after it. Unwinds
  /// (detail::Cancelled) between input elements once the consumer is gone.
  std::optional<GroupWindow<T>> next() {
    while (!input_done_) {
      throw_if_cancelled(cancel_);  // a long run of elements that fill no window
      std::optional<T> x = next_counted(input_, index_);
      if (!x) {
        input_done_ = true;
        flush_ = groups_.empty() ? std::nullopt : std::optional(groups_.begin()->first);
        break;
      }
      const std::int64_t index = index_++;
      const auto key =
          static_cast<std::int64_t>(invoke_user(stage_, index, key_fn_, std::as_const(*x)));
      auto group = groups_.find(key);
      if (group == groups_.end())
        group = groups_.emplace(key, Group{window_size(key, index)}).first;
      Group& g = group->second;
      if (g.elements.empty()) {
        g.first = index;
        // Grows with what arrives beyond this: not sized by the window size alone.
        g.elements.reserve(static_cast<std::size_t>(std::min<std::int64_t>(g.size, 64)));
      }
      g.elements.push_back(std::move(*x));
      if (g.elements.size() == static_cast<std::size_t>(g.size)) return take(group);
    }
    // By key, not by a map iterator: the iterator (and the map's end) must
    // stay valid when this object moves.
    for (auto group = flush_ ? groups_.lower_bound(*flush_) : groups_.end(); group != groups_.end();
         ++group) {
      const auto after = std::next(group);
      flush_ = after == groups_.end() ? std::nullopt : std::optional(after->first);
      if (!group->second.elements.empty()) return take(group);
    }
    flush_.reset();
    return std::nullopt;
  }

  /// Hands a window's storage back to its key, emptied, so that the key's next
  /// window reuses its capacity instead of allocating (for callers that consume
  /// a window's elements rather than keep the vector).
  void recycle(std::int64_t key, std::vector<T>&& storage) {
    if (input_done_) return;
    auto group = groups_.find(key);
    if (group == groups_.end() || !group->second.elements.empty()) return;
    storage.clear();
    group->second.elements = std::move(storage);
  }

  /// Checkpoint: the input index, whether the input ended (and the key
  /// flushed next), every key seen with its window size and the elements
  /// waiting in its window (through ingest::serializer: they cannot be read
  /// again without the input's state from before them), then the input.
  void save(StateWriter& w) const requires serializable<T> {
    const bool flushing = input_done_ && flush_;
    w.write(index_, input_done_, flushing, flushing ? *flush_ : std::int64_t{0}, groups_.size());
    for (const auto& [key, g] : groups_) {
      w.write(key, g.size, g.first, g.elements.size());
      for (const T& x : g.elements) w.write_element(x);
    }
    input_.save(w);
  }
  void restore(StateReader& r) requires serializable<T> {
    const std::uint64_t at = r.offset();
    bool flushing = false;
    std::int64_t flush_key = 0;
    std::size_t keys = 0;
    r.read(index_, input_done_, flushing, flush_key, keys);
    if (keys > r.remaining() / 32) bad_state(at, "more keys than the state's bytes");
    groups_.clear();
    for (std::size_t i = 0; i < keys; ++i) {
      std::int64_t key = 0;
      Group g;
      std::size_t count = 0;
      r.read(key, g.size, g.first, count);
      if (g.size <= 0 || count >= static_cast<std::uint64_t>(g.size) || count > r.remaining() / 8) {
        bad_state(at, "key " + std::to_string(key) + " holds " + std::to_string(count) +
                          " elements for a window of " + std::to_string(g.size));
      }
      g.elements.reserve(count);
      for (std::size_t k = 0; k < count; ++k) g.elements.push_back(r.read_element<T>(stage_));
      groups_.emplace(key, std::move(g));
    }
    flush_ = flushing ? std::optional(flush_key) : std::nullopt;
    input_.restore(r);
  }

 private:
  struct Group {
    std::int64_t size = 0;
    std::vector<T> elements{};
    std::int64_t first = 0;
  };

  [[noreturn]] void bad_state(std::uint64_t at, const std::string& what) const {
    throw DataLossError("checkpoint: " + std::string(stage_) + ": " + what,
                        {.stage = stage_, .offset = at});
  }
  using Groups = std::map<std::int64_t, Group>;

  std::int64_t window_size(std::int64_t key, std::int64_t index) {
    const auto size = static_cast<std::int64_t>(invoke_user(stage_, index, size_fn_, key));
    if (size <= 0) {
      throw InvalidArgument(std::string(stage_) + ": the window size of key " +
                                std::to_string(key) + " must be > 0; window_size_func returned " +
                                std::to_string(size),
                            {.stage = stage_, .element = index});
    }
    return size;
  }

  GroupWindow<T> take(typename Groups::iterator group) {
    Group& g = group->second;
    return {group->first, std::exchange(g.elements, {}), g.size, g.first};
  }

  InputIt input_;
  KeyFn key_fn_;
  SizeFn size_fn_;
  const char* stage_;
  CancellationToken cancel_;
  Groups groups_;                      // every key seen: its window size and its waiting elements
  std::optional<std::int64_t> flush_;  // after the input's end: the key flushed next, if any
  std::int64_t index_ = 0;             // input elements read, failed ones included
  bool input_done_ = false;
};

}  // namespace ingest::detail
