// Measurement at every stage boundary, in one place: each stage gets its
// input's iterator through child_iterator(), which registers the input's
// node in the pipeline's model and wraps the iterator in a Probe. The probe
// counts elements in a plain member and stores the count into a slot of its
// own (a plain store on x86; no lock and no atomic read-modify-write per
// element), so stats() read at any moment are exact and consistent between
// stages; it times one call in `period` (two clock reads per 64 calls),
// publishing times to the node's atomics at that rate. Tracing raises the
// rate to every call for stages at or above a batch. Without a model (a
// pipeline iterated with measurement off) a probe is a pass-through.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/clock.hpp"
#include "ingest/core/context.hpp"
#include "ingest/core/element_size.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/iterator.hpp"
#include "ingest/core/state.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/runtime/model.hpp"

namespace ingest::detail {

/// The stage name of dataset D (its `stage_name`, or "dataset").
template <class D>
constexpr std::string_view stage_name_of() {
  if constexpr (requires { D::stage_name; }) {
    return D::stage_name;
  } else {
    return "dataset";
  }
}

/// The name of `d`'s node in stats and the trace: its node_name() where it
/// has one that is not empty (a name the user gave), else its stage_name.
template <class D>
std::string node_name_of(const D& d) {
  if constexpr (requires { d.node_name(); }) {
    std::string name(d.node_name());
    if (!name.empty()) return name;
  }
  return std::string(stage_name_of<D>());
}

/// The model node type of dataset D (its `model_node`, or StageNode: the
/// synchronous model) and its traits (`batches`, `hidden`); see model.hpp.
template <class D>
struct model_node_of {
  using type = StageNode;
};
template <class D>
requires requires { typename D::model_node; }
struct model_node_of<D> {
  using type = typename D::model_node;
};

template <class D>
constexpr NodeTraits node_traits_of() {
  NodeTraits t;
  if constexpr (requires { D::batches; }) t.batches = D::batches;
  if constexpr (requires { D::hidden; }) t.hidden = D::hidden;
  return t;
}

template <iterator It>
class Probe {
 public:
  using value_type = typename It::value_type;

  Probe(It it, StageNode* node, Model* model, std::string_view stage = "dataset")
      : it_(std::move(it)), node_(node), model_(model), stage_(stage) {
    if (node_ && model_->tracing() && node_->batched.load(std::memory_order_relaxed)) {
      period_ = 1;
      every_call_ = true;
    }
    if (node_) live_ = node_->open_count();
    countdown_ = 1;  // measure the first call: it sets the sampling period
  }
  Probe(Probe&& o) noexcept
      : it_(std::move(o.it_)),
        node_(std::exchange(o.node_, nullptr)),
        model_(o.model_),
        stage_(o.stage_),
        period_(o.period_),
        every_call_(o.every_call_),
        countdown_(o.countdown_),
        weight_(o.weight_),
        elements_(std::exchange(o.elements_, 0)),
        live_(std::exchange(o.live_, nullptr)) {}
  Probe& operator=(Probe&&) = delete;
  ~Probe() {
    if (node_) node_->close_count(live_);
  }

  // Always inlined: a probe sits at every stage boundary, and GCC returns a
  // std::optional from a call that is not inlined through the stack, storing
  // the engaged flag as a byte and reloading it as a word (a store-forwarding
  // stall of ~10 ns per call).
  [[gnu::always_inline]] std::optional<value_type> next() {
    if (node_ == nullptr) return it_.next();
    if (--countdown_ != 0) [[likely]] {
      std::optional<value_type> x = it_.next();
      if (x) [[likely]]
        count(1);
      return x;
    }
    return sampled_next();
  }

  std::size_t fill(std::span<value_type> out) requires bulk_iterator<It> {
    if (node_ == nullptr) return it_.fill(out);
    if (--countdown_ != 0) [[likely]] {
      const std::size_t n = it_.fill(out);
      count(static_cast<std::int64_t>(n));
      return n;
    }
    const std::int64_t start = ticks();
    const std::size_t n = it_.fill(out);
    record(start, n, n ? element_bytes(out[0]) : 0);
    return n;
  }

  template <class U, class F>
  std::size_t fill_map(std::span<U> out, F& f,
                       std::exception_ptr& error) requires map_fusing_iterator<It, F, U> {
    if (node_ == nullptr) return it_.fill_map(out, f, error);
    const std::size_t n = it_.fill_map(out, f, error);
    count(static_cast<std::int64_t>(n + (error ? 1 : 0)));
    return n;
  }

  It& inner() noexcept { return it_; }

  /// Saves the stage's iterator in a section named after the stage; throws
  /// Unimplemented naming the stage if its iterator cannot be saved.
  void save(StateWriter& w) const {
    if constexpr (checkpointable_iterator<It>) {
      w.section(stage_, [&] { it_.save(w); });
    } else {
      throw_not_checkpointable();
    }
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    if constexpr (checkpointable_iterator<It>) {
      r.section(stage_, [&] { it_.restore(r); });
    } else {
      throw_not_checkpointable();
    }
  }

 private:
  [[gnu::noinline]] std::optional<value_type> sampled_next() {
    const std::int64_t start = ticks();
    std::optional<value_type> x;
    try {
      x = it_.next();
    } catch (...) {
      record(start, 0, 0);
      throw;
    }
    record(start, x ? 1 : 0, x ? element_bytes(*x) : 0);
    return x;
  }

  // `start` is in ticks().
  void record(std::int64_t start, std::size_t produced, std::size_t bytes) {
    const std::int64_t took = ticks_to_ns(ticks() - start);
    // Slow calls are measured more often (the clock is noise next to them),
    // so slow stages (batches, async waits) publish promptly.
    // This call stands for the `weight_` calls since the previous sample, so
    // the weighted sum estimates the total without bias, however uneven the
    // calls (a shuffle's first call fills its whole buffer).
    node_->estimated_ns.fetch_add(took * weight_, std::memory_order_relaxed);
    node_->samples.fetch_add(1, std::memory_order_relaxed);
    // Traced, every call longer than 2 us is measured (and so traced): the
    // trace shows each visible span, at a cost under 10% of such a call.
    if (!every_call_) {
      period_ = took > 2'000 && model_->tracing() ? 1 : took > 20'000 ? 2 : took > 2'000 ? 8 : 64;
    }
    countdown_ = weight_ = period_;
    count(static_cast<std::int64_t>(produced));
    if (produced) {
      node_->sampled_bytes.fetch_add(static_cast<std::int64_t>(bytes / produced),
                                     std::memory_order_relaxed);
      node_->bytes_samples.fetch_add(1, std::memory_order_relaxed);
    }
    if (model_->tracing() && produced && !node_->hidden()) {
      const std::int64_t end = now_ns();
      model_->trace({node_->name(), 'X', end - took, took, thread_number(), {}});
    }
  }

  // The count is this probe's own: a release store (a plain store on x86)
  // makes it exact for readers at any moment, after the inputs' counts.
  void count(std::int64_t n) noexcept {
    elements_ += n;
    live_->store(elements_, std::memory_order_release);
  }

  // A stage that stores values in its state (It::checkpoint_stores says
  // which) can be saved when they have a serializer; others not yet.
  [[noreturn]] void throw_not_checkpointable() const {
    if constexpr (requires { It::checkpoint_stores; }) {
      throw_no_serializer(stage_, It::checkpoint_stores);
    } else {
      throw Unimplemented("checkpoint: stage '" + std::string(stage_) + "' cannot be saved yet",
                          {.stage = std::string(stage_)});
    }
  }

  It it_;
  StageNode* node_;
  Model* model_;
  std::string_view stage_;  // the stage's name (static storage: a stage_name)
  std::int64_t period_ = 64;
  bool every_call_ = false;  // traced and batched: every call is measured
  std::int64_t countdown_ = 64;
  std::int64_t weight_ = 1;                    // calls the next sample stands for
  std::int64_t elements_ = 0;                  // produced by this probe
  std::atomic<std::int64_t>* live_ = nullptr;  // its node's live count of it
};

/// The iterator of `input` for the stage whose context is `ctx`: registers
/// the input's node under the stage's node and wraps it in a Probe. A
/// `suffix` keeps inputs of different roles apart (the datasets an
/// interleave opens, apart from its input).
template <class D>
Probe<iterator_t<D>> child_iterator(const D& input, const IteratorContext& ctx,
                                    std::string_view suffix = {}) {
  if (!ctx.model) {
    return Probe<iterator_t<D>>(input.make_iterator(ctx), nullptr, nullptr, stage_name_of<D>());
  }
  StageNode* node = ctx.model->template node<typename model_node_of<D>::type>(
      ctx.node, node_name_of(input) + std::string(suffix), node_traits_of<D>());
  IteratorContext inner = ctx;
  inner.node = node;
  auto it = input.make_iterator(inner);
  // A stage is "batched" if it or a stage before it batches (tracing records
  // every call from there on: batches are few).
  bool batched = node->batches();
  for (StageNode* in : ctx.model->inputs(node))
    batched |= in->batched.load(std::memory_order_relaxed);
  node->batched.store(batched, std::memory_order_relaxed);
  return Probe<iterator_t<D>>(std::move(it), node, ctx.model.get(), stage_name_of<D>());
}

/// Adds dataset `d`'s description to `fp`: its stage name, its parameters
/// (its fingerprint(Fingerprint&), where it has one) and its input's
/// description (through input(), where it has one).
template <class D>
void fingerprint_of(const D& d, Fingerprint& fp) {
  fp.add(stage_name_of<D>());
  if constexpr (requires { d.fingerprint(fp); }) d.fingerprint(fp);
  if constexpr (requires { d.input(); }) {
    if constexpr (requires { D::anchors_input; }) {
      const Fingerprint::Below below(fp, Fingerprint::Below::anchor);
      fingerprint_of(d.input(), fp);
    } else if constexpr (requires { D::makes_input_iterators; }) {
      const Fingerprint::Below below(fp, Fingerprint::Below::maker);
      fingerprint_of(d.input(), fp);
    } else {
      fingerprint_of(d.input(), fp);
    }
  }
}

/// The counters (Fingerprint::counter) of the datasets in a tree, in the
/// tree's order: what a stage that makes iterators of its input after a
/// save (repeat's next pass, concatenate's second input) stores, so that the
/// iterators it makes after a restore, in any process, get the passes they
/// got in the saved run. save() stores the values at the save; apply(),
/// called once the stage's input iterators are restored (making and
/// restoring them moves the counters), sets them back to those values,
/// except those that may have been ahead (Fingerprint::Below): the anchored
/// stage's restore replays its input from the anchor, and their counting
/// with it.
class PassCounters {
 public:
  /// The counters below `d`, as the iterators made in `ctx` count on them
  /// (a replica's are its own: shared_counter).
  template <class D>
  explicit PassCounters(const D& d, const IteratorContext& ctx = {}) {
    Fingerprint fp(&counters_);
    fingerprint_of(d, fp);
    if (ctx.replica)
      for (Fingerprint::CounterRef& c : counters_) c.counter = ctx.replica->resolve(c.counter);
  }

  void save(StateWriter& w) const {
    w.write_u64(counters_.size());
    for (const Fingerprint::CounterRef& c : counters_) {
      w.write_u64(c.counter->load(std::memory_order_relaxed));
      w.write_bool(c.ahead);
    }
  }
  /// Reads what save() wrote; apply() sets the values.
  void read(StateReader& r) {
    const std::uint64_t at = r.offset();
    const std::uint64_t n = r.read_u64();
    if (n != counters_.size()) throw_state_error(mismatch(n), at);
    saved_.resize(counters_.size());
    for (Saved& s : saved_) {
      s.value = r.read_u64();
      s.ahead = r.read_bool();
    }
  }
  void apply() const noexcept {
    for (std::size_t i = 0; i < saved_.size(); ++i)
      if (!saved_[i].ahead) counters_[i].counter->store(saved_[i].value, std::memory_order_relaxed);
  }

  /// The values now, and setting them all (the cache's refill).
  std::vector<std::uint64_t> values() const {
    std::vector<std::uint64_t> out;
    out.reserve(counters_.size());
    for (const Fingerprint::CounterRef& c : counters_)
      out.push_back(c.counter->load(std::memory_order_relaxed));
    return out;
  }
  void set(std::span<const std::uint64_t> values) const {
    if (values.size() != counters_.size())
      throw DataLossError("checkpoint: " + mismatch(values.size()), {});
    for (std::size_t i = 0; i < counters_.size(); ++i)
      counters_[i].counter->store(values[i], std::memory_order_relaxed);
  }

 private:
  std::string mismatch(std::uint64_t n) const {
    return "the state holds " + std::to_string(n) + " pass counters where the pipeline has " +
           std::to_string(counters_.size());
  }

  struct Saved {
    std::uint64_t value = 0;
    bool ahead = false;
  };
  std::vector<Fingerprint::CounterRef> counters_;
  std::vector<Saved> saved_;
};

/// The counters of the datasets an `interleave`'s or `flat_map`'s function
/// returns, as far as a state needs them: those the calls share (a dataset
/// the function captures, whose every new iterator takes the next pass).
/// Those datasets are made per input element, so no walk of the pipeline
/// reaches them; a restored open input sets its dataset's count past its own
/// pass (detail::restored_pass), but a state holding none of them (saved
/// before the stage opened its first input) would leave the next ones to the
/// restoring process's count. So a counter that an earlier call's dataset
/// also had is one the calls share (the counters of the last calls are held,
/// so a new one cannot reuse a freed one's address). A shared counter is
/// known in another process by its place in the walk of the returned dataset
/// and by that dataset's fingerprint, where the fingerprint was the same at
/// each call that returned the counter (a function choosing between captured
/// datasets); where it was not (stages above the captured dataset whose
/// parameters depend on the element), by its place alone. States store the
/// shared counters' values, and a restored iterator sets each on the first
/// dataset the function returns to it that matches it, before that dataset's
/// iterator is made. An iterator holds one; the Record is shared by the
/// stage's dataset copies and iterators.
class ReturnedCounters {
 public:
  /// What the calls of all the stage's iterators found.
  class Record {
    friend class ReturnedCounters;
    struct Seen {
      Fingerprint::Counter counter;
      std::uint64_t place = 0;    // in the walk of the returned dataset
      std::uint64_t dataset = 0;  // the returned dataset's fingerprint
      bool by_dataset = true;     // every call returning the counter had that fingerprint
      std::uint64_t call = 0;     // the call that returned it first
    };
    // The counters of the last calls, held (a new counter cannot reuse a
    // freed one's address): a function choosing among this many captured
    // datasets' counters is recognised.
    static constexpr std::size_t recent_capacity = 64;
    mutable std::mutex mu_;
    std::vector<Seen> shared_;  // returned by more than one call
    std::vector<Seen> recent_;  // returned once so far: grows to recent_capacity, then a ring
    std::size_t next_ = 0;      // the ring's oldest (next to replace) once full
    std::uint64_t calls_ = 0;   // calls whose datasets had counters
  };

  /// In a replica (IteratorContext::replica) the iterator keeps a record of
  /// its own and counts on private copies (CounterSandbox).
  ReturnedCounters(std::shared_ptr<Record> record, const IteratorContext& ctx)
      : record_(ctx.replica ? std::make_shared<Record>() : std::move(record)),
        replica_(ctx.replica) {}

  /// `d` is what the function just returned: its counters are noted, after
  /// the values a restore left pending for it are set on them.
  template <class D>
  void note(const D& d) {
    // Where the last call's dataset had counters, one walk collects and
    // hashes; otherwise a walk that only collects comes first, so a
    // function whose datasets have none pays no hashing.
    found_.clear();  // kept between calls: no allocation per call
    if (!last_had_counters_) {
      Fingerprint walk = Fingerprint::counters_only(&found_);
      fingerprint_of(d, walk);
      if (found_.empty()) return;  // nothing to note, no lock
      found_.clear();
    }
    Fingerprint fp(&found_);
    fingerprint_of(d, fp);
    const std::uint64_t dataset = fp.value();
    last_had_counters_ = !found_.empty();
    if (found_.empty()) return;
    if (replica_)
      for (Fingerprint::CounterRef& c : found_) c.counter = replica_->resolve(c.counter);
    if (!pending_.empty()) {
      std::erase_if(pending_, [&](const Pending& p) {
        if (p.place >= found_.size() || (p.by_dataset && p.dataset != dataset)) return false;
        found_[p.place].counter->store(p.value, std::memory_order_relaxed);
        return true;
      });
    }
    Record& r = *record_;
    std::lock_guard lock(r.mu_);
    const std::uint64_t call = ++r.calls_;
    for (std::size_t i = 0; i < found_.size(); ++i) {
      const Fingerprint::Counter& c = found_[i].counter;
      const auto same = [&](const Record::Seen& s) { return s.counter == c; };
      if (const auto known = std::find_if(r.shared_.begin(), r.shared_.end(), same);
          known != r.shared_.end()) {
        known->by_dataset = known->by_dataset && known->dataset == dataset;
        known->place = i;
        continue;
      }
      if (const auto once = std::find_if(r.recent_.begin(), r.recent_.end(), same);
          once != r.recent_.end()) {
        // Named twice by this call's dataset (`s.concatenate(s)`): not shared.
        if (once->call == call) continue;
        r.shared_.push_back(
            {std::move(once->counter), i, once->dataset, once->dataset == dataset, call});
        continue;
      }
      if (r.recent_.size() < Record::recent_capacity) {
        r.recent_.push_back({c, i, dataset, true, call});
      } else {
        r.recent_[r.next_] = {c, i, dataset, true, call};
        r.next_ = (r.next_ + 1) % Record::recent_capacity;
      }
    }
  }

  /// The shared counters: their number, then (place, whether known by the
  /// dataset's fingerprint, that fingerprint, value) each. A counter known
  /// by its place alone at the place of another shared counter (a function
  /// choosing between captured datasets with stages above them whose
  /// parameters depend on the element) could not be told apart in the
  /// restoring process: Unimplemented naming `stage`, never a silent wrong
  /// resume.
  void save(StateWriter& w, std::string_view stage) const {
    const Record& r = *record_;
    std::lock_guard lock(r.mu_);
    for (const Record::Seen& s : r.shared_) {
      if (s.by_dataset) continue;
      for (const Record::Seen& other : r.shared_) {
        if (&other == &s || other.place != s.place) continue;
        throw Unimplemented(
            "checkpoint: stage '" + std::string(stage) +
                "': its function returns datasets it captures (their pass counts are shared "
                "between the calls) under stages whose parameters depend on the element, and "
                "more than one such count sits at the same place in them: a restore could not "
                "tell them apart (return each captured dataset under the same stages, or make "
                "the datasets in the function)",
            {.stage = std::string(stage)});
      }
    }
    w.write_u64(r.shared_.size());
    for (const Record::Seen& s : r.shared_) {
      w.write_u64(s.place);
      w.write_bool(s.by_dataset);
      w.write_u64(s.dataset);
      w.write_u64(s.counter->load(std::memory_order_relaxed));
    }
  }
  /// Reads what save() wrote, for note() to set on the datasets they match.
  void restore(StateReader& r) {
    const std::uint64_t at = r.offset();
    const std::uint64_t n = r.read_u64();
    if (n > r.remaining() / entry_bytes) {
      throw_state_error("the state holds " + std::to_string(n) +
                            " shared counters of the datasets a function returned, more than "
                            "its bytes can",
                        at);
    }
    // A replica's record starts empty, so it could not save these again.
    if (replica_ && n > 0) replica_->refuse();
    pending_.resize(static_cast<std::size_t>(n));
    for (Pending& p : pending_) {
      p.place = r.read_u64();
      p.by_dataset = r.read_bool();
      p.dataset = r.read_u64();
      p.value = r.read_u64();
    }
  }

 private:
  static constexpr std::uint64_t entry_bytes = 25;  // as save() writes one
  struct Pending {
    std::uint64_t place = 0;
    bool by_dataset = true;
    std::uint64_t dataset = 0;
    std::uint64_t value = 0;
  };
  std::shared_ptr<Record> record_;
  std::shared_ptr<CounterSandbox> replica_;     // a replica's private counters
  std::vector<Pending> pending_;                // a restore's, until a dataset matches each
  std::vector<Fingerprint::CounterRef> found_;  // the last call's counters
  bool last_had_counters_ = false;
};

/// One stage of a pipeline's description: its name and the fingerprint of
/// its own parameters (for a stage of several inputs, with theirs).
struct StageDescription {
  std::string name;
  std::uint64_t hash = 0;
  bool operator==(const StageDescription&) const = default;
};

/// The stages of the pipeline ending in `d`, the last stage first and each
/// stage's input after it: what a state names when it does not fit.
template <class D>
void describe(const D& d, std::vector<StageDescription>& out) {
  Fingerprint fp;
  fp.add(stage_name_of<D>());
  if constexpr (requires { d.fingerprint(fp); }) d.fingerprint(fp);
  out.push_back({std::string(stage_name_of<D>()), fp.value()});
  if constexpr (requires { d.input(); }) describe(d.input(), out);
}
template <class D>
std::vector<StageDescription> description_of(const D& d) {
  std::vector<StageDescription> out;
  describe(d, out);
  return out;
}

/// The fingerprint of the pipeline ending in `d`.
template <class D>
std::uint64_t fingerprint_value(const D& d) {
  Fingerprint fp;
  fingerprint_of(d, fp);
  return fp.value();
}

/// The type child_iterator returns for dataset D.
template <class D>
using child_iterator_t = Probe<iterator_t<D>>;

}  // namespace ingest::detail
