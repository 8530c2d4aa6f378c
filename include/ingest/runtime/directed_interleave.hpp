// The engine of sample_from_datasets and choose_from_datasets (tf.data:
// DirectedInterleaveDataset): a selector names, element by element, which of
// several inputs gives the next element. The inputs are a std::vector<D> of
// one dataset type or a std::tuple<Ds...> of different types with one
// element type; each is opened once per pass, in this stage's context, and
// appears in stats as "<its name> [i]". When the selected input is exhausted
// the pass ends (stop_on_empty_dataset) or that input is closed, the
// selector told, and the selection goes on; the pass ends when the selector
// ends or no input is left open. Runs on the consumer's thread; a run of
// selections of closed inputs checks the consumer's cancellation between
// them. Errors from the selector and the inputs surface from next() at
// their position, and the pass goes on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/iterator.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/probe.hpp"

namespace ingest::detail {

/// What the engine needs of a list of input datasets (a std::vector<D> or a
/// std::tuple<Ds...>): their count, element type and cardinalities, and
/// their iterators (DirectedInputs).
template <class Inputs>
struct dataset_list;

template <class D>
struct dataset_list<std::vector<D>> {
  static_assert(dataset<D>,
                "sample_from_datasets, choose_from_datasets: the inputs must be datasets");
  using element_type = typename D::element_type;
  static std::size_t size(const std::vector<D>& ds) { return ds.size(); }
  static std::vector<std::int64_t> cardinalities(const std::vector<D>& ds) {
    std::vector<std::int64_t> out;
    out.reserve(ds.size());
    for (const D& d : ds) out.push_back(cardinality_of(d));
    return out;
  }
  static void fingerprint(const std::vector<D>& ds, Fingerprint& fp) {
    fp.add(static_cast<std::uint64_t>(ds.size()));
    for (const D& d : ds) fingerprint_of(d, fp);
  }
};

template <class D0, class... Ds>
struct dataset_list<std::tuple<D0, Ds...>> {
  static_assert((dataset<D0> && ... && dataset<Ds>),
                "sample_from_datasets, choose_from_datasets: the inputs must be datasets");
  static_assert((std::is_same_v<typename D0::element_type, typename Ds::element_type> && ...),
                "sample_from_datasets, choose_from_datasets: the datasets must all have the same "
                "element type");
  using element_type = typename D0::element_type;
  static std::size_t size(const std::tuple<D0, Ds...>&) { return 1 + sizeof...(Ds); }
  static std::vector<std::int64_t> cardinalities(const std::tuple<D0, Ds...>& ds) {
    return std::apply([](const auto&... d) { return std::vector{cardinality_of(d)...}; }, ds);
  }
  static void fingerprint(const std::tuple<D0, Ds...>& ds, Fingerprint& fp) {
    fp.add(static_cast<std::uint64_t>(1 + sizeof...(Ds)));
    std::apply([&](const auto&... d) { (fingerprint_of(d, fp), ...); }, ds);
  }
};

/// The suffix that keeps input i's node apart from the others' in stats.
inline std::string input_suffix(std::size_t i) { return " [" + std::to_string(i) + "]"; }

/// One input of a directed interleave in a checkpoint: open or not, then its
/// state. An input saved open must be open here (the same inputs are opened
/// for the same weights, which the fingerprint covers).
template <class It>
void save_input(StateWriter& w, const std::optional<It>& it) {
  w.write(it.has_value());
  if (it) it->save(w);
}
template <class It>
void restore_input(StateReader& r, std::optional<It>& it) {
  const std::uint64_t at = r.offset();
  bool open = false;
  r.read(open);
  if (open && !it) {
    throw DataLossError("checkpoint: an input saved open was never opened in this pipeline",
                        {.offset = at});
  }
  if (open) {
    it->restore(r);
  } else {
    it.reset();
  }
}

/// The open iterators of a list of inputs; a closed one is released at once.
template <class Inputs>
class DirectedInputs;

template <class D>
class DirectedInputs<std::vector<D>> {
 public:
  using value_type = typename D::element_type;

  /// Opens input i where open(i) (the others are never read).
  template <class Open>
  DirectedInputs(const std::vector<D>& ds, const IteratorContext& ctx, Open open) {
    its_.reserve(ds.size());
    for (std::size_t i = 0; i < ds.size(); ++i) {
      its_.emplace_back();
      if (open(i)) its_.back().emplace(child_iterator(ds[i], ctx, input_suffix(i)));
    }
  }

  std::size_t size() const noexcept { return its_.size(); }
  bool is_open(std::size_t i) const noexcept { return its_[i].has_value(); }
  std::optional<value_type> next(std::size_t i) { return its_[i]->next(); }
  void close(std::size_t i) noexcept { its_[i].reset(); }
  void close_all() noexcept {
    for (auto& it : its_) it.reset();
  }

  /// Checkpoint: for each input, whether it is open, then its state.
  void save(StateWriter& w) const {
    for (const auto& it : its_) save_input(w, it);
  }
  void restore(StateReader& r) {
    for (auto& it : its_) restore_input(r, it);
  }

 private:
  std::vector<std::optional<child_iterator_t<D>>> its_;
};

template <class... Ds>
class DirectedInputs<std::tuple<Ds...>> {
  using Seq = std::index_sequence_for<Ds...>;

 public:
  using value_type = typename dataset_list<std::tuple<Ds...>>::element_type;

  template <class Open>
  DirectedInputs(const std::tuple<Ds...>& ds, const IteratorContext& ctx, Open open) {
    open_all(ds, ctx, open, Seq{});
  }

  static constexpr std::size_t size() noexcept { return sizeof...(Ds); }
  bool is_open(std::size_t i) const noexcept { return is_open(i, Seq{}); }
  std::optional<value_type> next(std::size_t i) { return next(i, Seq{}); }
  void close(std::size_t i) noexcept { close(i, Seq{}); }
  void close_all() noexcept {
    std::apply([](auto&... it) { (it.reset(), ...); }, its_);
  }

  /// Checkpoint: for each input, whether it is open, then its state.
  void save(StateWriter& w) const {
    std::apply([&](const auto&... it) { (save_input(w, it), ...); }, its_);
  }
  void restore(StateReader& r) {
    std::apply([&](auto&... it) { (restore_input(r, it), ...); }, its_);
  }

 private:
  template <class Open, std::size_t... I>
  void open_all(const std::tuple<Ds...>& ds, const IteratorContext& ctx, Open& open,
                std::index_sequence<I...>) {
    ((open(I)
          ? (void)std::get<I>(its_).emplace(child_iterator(std::get<I>(ds), ctx, input_suffix(I)))
          : (void)0),
     ...);
  }
  template <std::size_t... I>
  bool is_open(std::size_t i, std::index_sequence<I...>) const noexcept {
    bool open = false;
    (void)((i == I ? (open = std::get<I>(its_).has_value(), true) : false) || ...);
    return open;
  }
  template <std::size_t... I>
  std::optional<value_type> next(std::size_t i, std::index_sequence<I...>) {
    std::optional<value_type> x;
    (void)((i == I ? (x = std::get<I>(its_)->next(), true) : false) || ...);
    return x;
  }
  template <std::size_t... I>
  void close(std::size_t i, std::index_sequence<I...>) noexcept {
    (void)((i == I ? (std::get<I>(its_).reset(), true) : false) || ...);
  }

  std::tuple<std::optional<child_iterator_t<Ds>>...> its_;
};

/// A directed interleave's selector: `std::optional<std::int64_t> next()`
/// (the index of the input to read, std::nullopt at its end; it may throw,
/// an error at that position), `void exhausted(std::size_t i)` (input i
/// has been closed), and save/restore of its position for checkpoints.
template <class S>
concept selector = requires(S& s, const S& c, std::size_t i, StateWriter& w, StateReader& r) {
  { s.next() } -> std::same_as<std::optional<std::int64_t>>;
  s.exhausted(i);
  c.save(w);  // checkpoints: the selector's position
  s.restore(r);
};

template <class Inputs, selector Selector>
class DirectedInterleaveIterator {
 public:
  using value_type = typename DirectedInputs<Inputs>::value_type;
  using selector_type = Selector;

  /// `stage` names the stage in errors; `open` is the number of inputs open.
  DirectedInterleaveIterator(DirectedInputs<Inputs> inputs, Selector selector, std::size_t open,
                             bool stop_on_empty_dataset, const char* stage,
                             CancellationToken cancel)
      : inputs_(std::move(inputs)),
        selector_(std::move(selector)),
        open_(open),
        stop_on_empty_(stop_on_empty_dataset),
        stage_(stage),
        cancel_(std::move(cancel)) {
    if (open_ == 0) finish();
  }

  std::optional<value_type> next() {
    for (bool first = true; selector_; first = false) {
      if (!first) throw_if_cancelled(cancel_);  // selections of closed inputs produce nothing
      std::optional<std::int64_t> pick;
      try {
        pick = selector_->next();
      } catch (const Cancelled&) {
        throw;
      } catch (...) {
        ++selections_;
        throw;
      }
      if (!pick) break;
      const std::int64_t selection = selections_++;
      if (*pick < 0 || static_cast<std::uint64_t>(*pick) >= inputs_.size())
        out_of_range(*pick, selection);
      const auto i = static_cast<std::size_t>(*pick);
      if (!inputs_.is_open(i)) continue;  // exhausted earlier: skipped (tf.data)
      if (std::optional<value_type> x = inputs_.next(i)) return x;
      if (stop_on_empty_) break;
      inputs_.close(i);
      selector_->exhausted(i);
      if (--open_ == 0) break;
    }
    finish();
    return std::nullopt;
  }

  /// Checkpoint: the selections made, the inputs still open, whether the
  /// pass ended, then the selector's state and the inputs'.
  void save(StateWriter& w) const {
    w.write(selections_, open_, selector_.has_value());
    if (!selector_) return;  // ended: every input was released
    selector_->save(w);
    inputs_.save(w);
  }
  void restore(StateReader& r) {
    bool running = false;
    r.read(selections_, open_, running);
    if (!running) {
      finish();
      return;
    }
    selector_->restore(r);
    inputs_.restore(r);
  }

 private:
  [[noreturn, gnu::cold]] void out_of_range(std::int64_t pick, std::int64_t selection) const {
    throw InvalidArgument(std::string(stage_) + ": index " + std::to_string(pick) +
                              " is out of range for " + std::to_string(inputs_.size()) +
                              " datasets (valid: 0 to " + std::to_string(inputs_.size() - 1) + ")",
                          {.stage = stage_, .element = selection});
  }

  // The end of the pass: every input and the selector released now.
  void finish() noexcept {
    inputs_.close_all();
    selector_.reset();
  }

  DirectedInputs<Inputs> inputs_;
  std::optional<Selector> selector_;  // empty once the pass has ended
  std::size_t open_;
  bool stop_on_empty_;
  const char* stage_;
  CancellationToken cancel_;
  std::int64_t selections_ = 0;  // selections made so far (the selector's position)
};

}  // namespace ingest::detail
