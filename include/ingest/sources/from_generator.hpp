// from_generator(make): make() returns a generator g, and g() returns
// std::optional<T> (std::nullopt ends the pass). make is called anew for every
// pass, so the dataset re-iterates each epoch. tf.data counterpart:
// Dataset.from_generator, without the Python GIL: g runs on whichever thread
// pulls from this source. An exception from make or g surfaces from next() as
// a FunctionError with the element index; the following call asks g again.
//
// Checkpoints: a generator is user state, so a pipeline starting with one
// can be saved only if the generator says how: give its type the hook pair
//   std::string save() const;            // the generator's position, as bytes
//   void restore(std::string_view bytes);  // on a fresh generator from make()
// Without them, save() raises Unimplemented naming from_generator and the
// hooks, never a silent wrong resume.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
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

/// Iterator of FromGeneratorDataset: calls the generator `g` until it returns std::nullopt.
template <class Gen, class T>
class FromGeneratorIterator {
 public:
  /// The element type.
  using value_type = T;

  /// Owns the generator `gen` (made by `make()` for this pass).
  explicit FromGeneratorIterator(Gen gen) : gen_(std::move(gen)) {}

  /// g's next element, or std::nullopt once it returned std::nullopt; an exception from g
  /// surfaces as a FunctionError with the element index, and the next call asks g again.
  std::optional<T> next() {
    if (done_) return std::nullopt;
    std::optional<T> x = detail::invoke_user("from_generator", index_++, gen_);
    if (!x) done_ = true;
    return x;
  }

  /// Checkpoint: the element index, whether the pass ended and the
  /// generator's own bytes from its save() hook.
  void save(StateWriter& w) const {
    if constexpr (restorable) {
      w.write(index_, done_);
      const auto hook = [&] { return std::string(gen_.save()); };
      w.write_string(detail::invoke_user("from_generator", index_, hook));
    } else {
      (void)w;
      throw_not_restorable();
    }
  }
  /// Restores what save() wrote, through the generator's restore(bytes) hook on a fresh
  /// generator; throws Unimplemented if the generator has no save/restore hooks.
  void restore(StateReader& r) {
    if constexpr (restorable) {
      r.read(index_, done_);
      const std::string bytes = r.read_string();
      const auto hook = [&] { gen_.restore(std::string_view(bytes)); };
      detail::invoke_user("from_generator", index_, hook);
    } else {
      (void)r;
      throw_not_restorable();
    }
  }

 private:
  static constexpr bool restorable = requires(const Gen& c, Gen& g, std::string_view b) {
    { c.save() } -> std::convertible_to<std::string>;
    g.restore(b);
  };
  [[noreturn]] static void throw_not_restorable() {
    throw Unimplemented(
        "checkpoint: stage 'from_generator' cannot be saved: its generator has no hooks (give "
        "its type `std::string save() const` and `void restore(std::string_view)`)",
        {.stage = "from_generator"});
  }

  Gen gen_;
  std::int64_t index_ = 0;
  bool done_ = false;
};

/// The dataset of `from_generator(make)`: `make()` returns a generator `g`, and `g()` returns
/// std::optional<T> (std::nullopt ends the pass); `make` is called anew for every pass.
template <class Make>
class FromGeneratorDataset
    : public DatasetBase<FromGeneratorDataset<Make>, detail::generated_t<Make>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "from_generator";

  /// T: what the generator returns, without the std::optional.
  using element_type = detail::generated_t<Make>;

  /// Calls a copy of `make` for every pass.
  explicit FromGeneratorDataset(Make make) : make_(std::move(make)) {}

  /// An iterator over a new generator from a copy of `make`; an exception from make surfaces as a
  /// FunctionError.
  auto make_iterator(const IteratorContext& ctx) const {
    detail::refuse_in_replica(ctx);  // the generator's state is the user's
    Make make = make_;               // make() may be non-const; each pass calls a copy
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
