// ignore_errors(): drops elements whose production threw an ingest::Error
// (user function failures arrive as FunctionError, corrupt records as
// DataLossError, ...) and counts them. tf.data counterpart:
// IgnoreErrorsDataset. Exceptions that are not ingest::Errors (e.g.
// std::bad_alloc) still propagate. The count is shared by all copies of the
// dataset and all their iterators; on_error, if set, sees each dropped error.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of IgnoreErrorsDataset: its input's elements, without those that failed with an Error.
template <class InputIt>
class IgnoreErrorsIterator {
 public:
  /// The element type (the input's).
  using value_type = typename InputIt::value_type;

  /// Owns the input iterator; counts dropped errors in `total` (shared with the dataset).
  IgnoreErrorsIterator(InputIt input, std::shared_ptr<std::atomic<std::int64_t>> total,
                       IgnoreErrorsOptions options)
      : input_(std::move(input)), total_(std::move(total)), options_(std::move(options)) {}

  /// The next element that did not fail, or std::nullopt at the end. Drops and counts each
  /// ingest::Error (calling options.on_error with it); other exceptions propagate.
  std::optional<value_type> next() {
    for (;;) {
      try {
        return input_.next();
      } catch (const Error& e) {
        ++ignored_;
        total_->fetch_add(1, std::memory_order_relaxed);
        if (options_.on_error) options_.on_error(e);
      }
    }
  }

  /// Bulk protocol: writes up to out.size() elements of the input; a failing element stops the
  /// chunk and next() drops it. Returns how many.
  std::size_t fill(std::span<value_type> out) requires bulk_iterator<InputIt> {
    return input_.fill(out);  // a failing element stops the chunk; next() drops it
  }

  /// Errors this iterator dropped.
  std::int64_t ignored_errors() const noexcept { return ignored_; }

  /// Checkpoint: the count of dropped errors, then the input.
  void save(StateWriter& w) const {
    w.write(ignored_);
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(ignored_);
    input_.restore(r);
  }

 private:
  InputIt input_;
  std::shared_ptr<std::atomic<std::int64_t>> total_;
  IgnoreErrorsOptions options_;
  std::int64_t ignored_ = 0;
};

/// The dataset of `ds.ignore_errors(options)`: its input without the elements whose production
/// threw an ingest::Error, which it counts.
template <class Input>
class IgnoreErrorsDataset
    : public detail::UnaryStage<IgnoreErrorsDataset<Input>, Input, typename Input::element_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "ignore_errors";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;

  /// Drops `input`'s failed elements; `options.on_error`, if set, sees each dropped error.
  IgnoreErrorsDataset(Input input, IgnoreErrorsOptions options)
      : IgnoreErrorsDataset::UnaryStage(std::move(input)),
        options_(std::move(options)),
        total_(std::make_shared<std::atomic<std::int64_t>>(0)) {}
  /// Wraps the input's iterator in an IgnoreErrorsIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext& ctx) const {
    IgnoreErrorsOptions options = options_;
    // A replica replays what the live pipeline already reported.
    if (ctx.replica) options.on_error = nullptr;
    return IgnoreErrorsIterator<It>(std::move(input), detail::shared_counter(ctx, total_),
                                    std::move(options));
  }
  /// Errors dropped so far by every iterator of this dataset and its copies.
  std::int64_t ignored_errors() const noexcept { return total_->load(std::memory_order_relaxed); }

 private:
  IgnoreErrorsOptions options_;
  std::shared_ptr<std::atomic<std::int64_t>> total_;
};

}  // namespace ingest
