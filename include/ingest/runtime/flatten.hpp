// The loop that produces, in order, the elements of datasets opened one
// after another on the iterating thread: flat_map's (a dataset per input
// element) and group_by_window's (a dataset per window). The datasets run in
// the stage's context and appear in stats as its inputs, named with a
// suffix (" (each input)"). One place for the rules they share: an opened
// dataset's iterator lives until it ends, an empty dataset moves on to the
// next, and a long run of empty datasets stays cancellable.
#pragma once

#include <optional>
#include <string_view>
#include <utility>

#include "ingest/core/context.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/probe.hpp"

namespace ingest::detail {

/// The iterator of the open dataset of type `Inner`, and the context the
/// datasets are iterated in.
template <class Inner>
class Flattener {
 public:
  using value_type = typename Inner::element_type;

  Flattener(IteratorContext ctx, std::string_view suffix) : ctx_(std::move(ctx)), suffix_(suffix) {}

  const IteratorContext& context() const noexcept { return ctx_; }

  /// The next element of the open dataset; when it ends, of the dataset
  /// `open_next()` returns (std::optional<Inner>; std::nullopt: the input
  /// ended), and so on. An exception from `open_next` (the input's error, a
  /// user function's) leaves no dataset open: the next call opens the next.
  template <class OpenNext>
  std::optional<value_type> next(OpenNext&& open_next) {
    for (;;) {
      if (current_) {
        if (std::optional<value_type> x = current_->next()) return x;
        current_.reset();
        throw_if_cancelled(ctx_.cancellation);  // a long run of empty datasets
      }
      std::optional<Inner> d = open_next();
      if (!d) return std::nullopt;
      current_.emplace(child_iterator(std::move(*d), ctx_, suffix_));
    }
  }

  /// Checkpoint: whether a dataset is open; its iterator's state (if open).
  bool open() const noexcept { return current_.has_value(); }
  void save(StateWriter& w) const { current_->save(w); }
  /// Opens `d` again (the dataset that was open) and restores its iterator.
  void restore(Inner d, StateReader& r) {
    current_.emplace(child_iterator(std::move(d), ctx_, suffix_));
    current_->restore(r);
  }

 private:
  IteratorContext ctx_;
  std::string_view suffix_;
  std::optional<child_iterator_t<Inner>> current_;  // the open dataset's iterator
};

}  // namespace ingest::detail
