// The iterator protocol every stage implements, and the adaptor that makes a
// dataset usable in a range-for. tf.data counterpart: IteratorBase::GetNext.
//
//   std::optional<T> next();   the next element, std::nullopt at the end.
//
// An exception from next() consumes the failing element: the following call
// continues after it (this is what ignore_errors and batch rely on). Once
// next() has returned std::nullopt it keeps doing so. Iterators are movable
// and own everything they read; destroying one cancels and joins its work.
//
// Optional bulk protocol, used on the static path to move many elements per
// call (range -> map -> batch runs as loops over contiguous buffers):
//
//   std::size_t fill(std::span<T> out);
//
// writes up to out.size() elements to out and returns how many. It may return
// fewer at any time; the caller then calls next(), which yields the next
// element, the end, or throws the error of the element fill stopped before.
// fill itself does not throw for a failing element.
//
// Sources whose elements are cheap to produce may also fuse a map into their
// fill loop, so range -> map -> batch is one pass the compiler can optimise
// as a whole (the map's function inlined into the source's loop):
//
//   std::size_t fill_map(std::span<U> out, F& f, std::exception_ptr& error);
//
// writes f(element) for up to out.size() elements; fewer only at the end of
// the input or when f throws. If f throws for an element, that element is
// consumed, its exception is stored in `error`, and the count of elements
// written before it is returned.
//
// Optional checkpoint protocol (core/state.hpp, Dataset::iterator(state)):
//
//   void save(StateWriter& w) const;   concept checkpointable_iterator
//   void restore(StateReader& r);
//
// Save happens between calls of next(). A stage writes only its own
// position and counters, then calls its input's save (the input is a Probe,
// which wraps it in a section named after the input's stage); restore reads
// the same fields in the same order on a freshly made iterator of the same
// dataset. States are small by construction: never store an element that can
// be recomputed from a position. A stage whose iterator has no save/restore
// makes save() throw Unimplemented naming the stage, at run time (AnyDataset
// erases types, so this cannot be a compile error). A dataset may implement
//
//   void fingerprint(Fingerprint& fp) const;
//
// adding its parameters (never user functions); its stage name and its
// input's fingerprint are added by detail::fingerprint_of (runtime/probe.hpp).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <optional>
#include <span>
#include <utility>

#include "ingest/core/state.hpp"

namespace ingest {

/// A stage iterator: movable, with `value_type` and `std::optional<value_type> next()`.
template <class It>
concept iterator = std::move_constructible<It> && requires(It& it) {
  typename It::value_type;
  { it.next() } -> std::same_as<std::optional<typename It::value_type>>;
};

/// An iterator that also implements the bulk `fill` protocol.
template <class It>
concept bulk_iterator = iterator<It> && requires(It& it, std::span<typename It::value_type> out) {
  { it.fill(out) } -> std::same_as<std::size_t>;
};

/// An iterator that can apply `F` inside its own bulk loop (see above).
template <class It, class F, class U>
concept map_fusing_iterator = requires(It& it, std::span<U> out, F& f, std::exception_ptr& e) {
  { it.fill_map(out, f, e) } -> std::same_as<std::size_t>;
};

/// An iterator that can save its position and restore it (see above).
template <class It>
concept checkpointable_iterator = iterator<It> &&
    requires(const It& c, It& it, StateWriter& w, StateReader& r) {
  c.save(w);
  it.restore(r);
};

namespace detail {

/// The bulk protocol's one rule about errors, for iterators whose fill()
/// stops at a failed element: the element's error is kept for the next call
/// of next() (fill() returns the elements before it and then nothing while
/// the error waits), so no element and no error is lost.
class DeferredError {
 public:
  explicit operator bool() const noexcept { return error_ != nullptr; }
  void defer(std::exception_ptr error) noexcept { error_ = std::move(error); }
  /// At the start of next(): rethrows the deferred error, once.
  void rethrow_if_any() {
    if (error_) [[unlikely]]
      std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  std::exception_ptr error_;
};

/// The next element of `input` for a stage that numbers its input elements
/// (for error positions): an input element that fails still takes its
/// position. One definition of an element's position everywhere: its index
/// in the stage's input, failed elements counted.
template <iterator It>
[[gnu::always_inline]] inline std::optional<typename It::value_type> next_counted(
    It& input, std::int64_t& position) {
  try {
    return input.next();
  } catch (...) {
    ++position;
    throw;
  }
}

/// A std::input_iterator over an owned stage iterator, for range-for and
/// standard algorithms. Ends when the stage iterator does.
template <iterator It>
class InputIterator {
 public:
  using value_type = typename It::value_type;
  using difference_type = std::ptrdiff_t;

  explicit InputIterator(It it) : it_(std::move(it)) { advance(); }
  InputIterator(InputIterator&&) noexcept = default;
  InputIterator& operator=(InputIterator&&) noexcept = default;

  value_type& operator*() const { return *current_; }
  InputIterator& operator++() {
    advance();
    return *this;
  }
  void operator++(int) { advance(); }
  friend bool operator==(const InputIterator& i, std::default_sentinel_t) {
    return !i.current_.has_value();
  }

 private:
  void advance() { current_ = it_.next(); }
  It it_;
  mutable std::optional<value_type> current_;
};

/// An iterator with no elements (an empty AnyDataset's).
template <class T>
struct EmptyIterator {
  using value_type = T;
  std::optional<T> next() { return std::nullopt; }
  void save(StateWriter&) const {}
  void restore(StateReader&) {}
};

}  // namespace detail
}  // namespace ingest
