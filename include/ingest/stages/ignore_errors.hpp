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

template <class InputIt>
class IgnoreErrorsIterator {
 public:
  using value_type = typename InputIt::value_type;

  IgnoreErrorsIterator(InputIt input, std::shared_ptr<std::atomic<std::int64_t>> total,
                       IgnoreErrorsOptions options)
      : input_(std::move(input)), total_(std::move(total)), options_(std::move(options)) {}

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

template <class Input>
class IgnoreErrorsDataset
    : public detail::UnaryStage<IgnoreErrorsDataset<Input>, Input, typename Input::element_type> {
 public:
  static constexpr std::string_view stage_name = "ignore_errors";
  /// At a save, every input element it pulled is delivered (distributed::restore).
  static constexpr bool elastic_passthrough = true;

  IgnoreErrorsDataset(Input input, IgnoreErrorsOptions options)
      : IgnoreErrorsDataset::UnaryStage(std::move(input)),
        options_(std::move(options)),
        total_(std::make_shared<std::atomic<std::int64_t>>(0)) {}
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
