// from_generator(make): make() returns a generator g, and g() returns
// std::optional<T> (std::nullopt ends the pass). make is called anew for every
// pass, so the dataset re-iterates each epoch. tf.data counterpart:
// Dataset.from_generator, without the Python GIL: g runs on whichever thread
// pulls from this source. An exception from make or g surfaces from next() as
// a FunctionError with the element index; the following call asks g again.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"

namespace ingest {

namespace detail {
template <class O>
struct optional_value;
template <class T>
struct optional_value<std::optional<T>> {
  using type = T;
};
template <class Make>
using generator_t = std::decay_t<std::invoke_result_t<Make&>>;
template <class Make>
using generated_t =
    typename optional_value<std::decay_t<std::invoke_result_t<generator_t<Make>&>>>::type;
}  // namespace detail

template <class Gen, class T>
class FromGeneratorIterator {
 public:
  using value_type = T;

  explicit FromGeneratorIterator(Gen gen) : gen_(std::move(gen)) {}

  std::optional<T> next() {
    if (done_) return std::nullopt;
    std::optional<T> x = detail::invoke_user("from_generator", index_++, gen_);
    if (!x) done_ = true;
    return x;
  }

 private:
  Gen gen_;
  std::int64_t index_ = 0;
  bool done_ = false;
};

template <class Make>
class FromGeneratorDataset
    : public DatasetBase<FromGeneratorDataset<Make>, detail::generated_t<Make>> {
 public:
  static constexpr std::string_view stage_name = "from_generator";

  using element_type = detail::generated_t<Make>;

  explicit FromGeneratorDataset(Make make) : make_(std::move(make)) {}

  auto make_iterator(const IteratorContext&) const {
    Make make = make_;  // make() may be non-const; each pass calls a copy
    return FromGeneratorIterator<detail::generator_t<Make>, element_type>(
        detail::invoke_user("from_generator", std::nullopt, make));
  }

 private:
  Make make_;
};

/// A dataset produced by generators: make() -> g, g() -> std::optional<T>.
template <class Make>
auto from_generator(Make make) {
  static_assert(std::is_invocable_v<Make&>,
                "from_generator: make must be callable with no arguments");
  using Gen = std::decay_t<std::invoke_result_t<Make&>>;
  static_assert(std::is_invocable_v<Gen&>,
                "from_generator: make() must return a generator callable with no arguments");
  static_assert(
      requires { typename detail::generated_t<Make>; },
      "from_generator: the generator must return std::optional<T>");
  return FromGeneratorDataset<Make>(std::move(make));
}

}  // namespace ingest
