// Checkpoints through the stages that run their input ahead of the consumer
// (prefetch and the loaders, parallel map, map-and-batch): the one mechanism
// they share. A state stores the consumer's position, never a buffered
// element; the work in flight at the save is recomputed after a restore.
//
// Positions count the input elements the stage pulled (an input error is an
// element). Every `every` pulls (and before the first; after a restore, the
// state's anchor is the first: Anchors::restored) the thread that pulls
// saves the input's state into an anchor {position, bytes} between two
// pulls (a prefetch's producer: right after a pull, before it hands the
// element over, so that a save just after the consumer takes it finds an
// anchor at its position): a lock of the anchor queue and a small
// allocation per `every` elements, nothing per element. Anchors no longer
// needed (older than the newest one at or before the lowest position not
// yet delivered) are dropped as new ones come.
//
// A stage's section then holds (all integers i64):
//
//   anchor position A, the anchor's bytes (its input's section),
//   low L (the lowest position not delivered), high H,
//   n, then n ranges [begin, end) within [L, H)
//
// Positions below L were delivered; of those in [L, H), exactly the ones in
// the ranges were not (a non-deterministic stage hands results out of
// order); none from H on was. A restore restores a fresh input from the
// anchor, pulls and discards the L - A inputs before L, and then drops the
// results of [L, H) outside the ranges as they come: with `every` pulls
// between anchors, the replay is at most `every` + the stage's window. An
// input whose save() costs more than about 1% of the time its pulls take (a
// large shuffle buffer before a prefetch) is anchored less often, keeping
// that cost, and its replay is longer; once the pipeline has been saved or
// restored, about 5% (Anchors::paced_interval).
//
// If the input cannot be saved (its save() throws), the error is kept and
// the next anchor is tried after twice as many pulls (a pending error of a
// map passes, a stage that cannot be saved costs a few attempts in all);
// save() rethrows it while no anchor is at or before the consumer's position.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/clock.hpp"
#include "ingest/core/context.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"

namespace ingest::detail {

/// Input positions [begin, end).
struct PositionRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

/// What a restore replays: the input was restored at `anchor`; the inputs
/// before `low` are discarded (skip_inputs) and, of the results at positions
/// in [low, high), only those in `pending` are delivered.
struct Replay {
  std::int64_t anchor = 0;
  std::int64_t low = 0;
  std::int64_t high = 0;
  std::vector<PositionRange> pending;
  /// The anchor's bytes as read, shared with the restored state's storage
  /// (null when the reader has no owner): the restored iterator's first
  /// anchor (Anchors::restored), so that the restore writes nothing.
  std::shared_ptr<StateWriter> anchor_state;

  /// True if the result at `position` (< high) was delivered before the save.
  bool delivered(std::int64_t position) const noexcept {
    if (position < low) return true;
    for (const PositionRange& r : pending) {
      if (position < r.begin) return true;
      if (position < r.end) return false;
    }
    return true;
  }

  /// What an iterator restored with this replay states when it is saved
  /// again: its `due` ranges (of `pulled` inputs) less the results this
  /// replay drops, plus the ones it has yet to pull and deliver; `pulled`
  /// becomes at least `high` (what lies between was delivered).
  void adjust(std::vector<PositionRange>& due, std::int64_t& pulled) const {
    if (high <= low) return;  // nothing was delivered out of order
    std::vector<PositionRange> out;
    const auto add = [&](std::int64_t b, std::int64_t e) {
      if (b < e) out.push_back({b, e});
    };
    for (const PositionRange& r : due) {
      for (const PositionRange& u : pending)
        add(std::max(r.begin, u.begin), std::min(r.end, u.end));
      add(std::max(r.begin, high), r.end);
    }
    if (pulled < high) {
      for (const PositionRange& u : pending) add(std::max(u.begin, pulled), u.end);
      pulled = high;
    }
    due = std::move(out);
  }

  /// For a stage that delivers in order (prefetch): a state with results
  /// delivered out of order is DataLossError.
  void expect_in_order(std::string_view stage) const {
    if (high != low) {
      throw DataLossError("checkpoint: stage '" + std::string(stage) +
                              "' delivers in order, but the state has results delivered out of "
                              "order",
                          {.stage = std::string(stage)});
    }
  }
};

/// Writes a stage's position (the layout at the top of this file); `pending`:
/// the ranges of pulled positions below `pulled` not yet delivered, in any
/// order (a deterministic stage has one: [consumer's position, pulled)).
inline void write_position(StateWriter& w, std::int64_t anchor, const StateWriter& anchor_state,
                           std::int64_t pulled, std::vector<PositionRange> pending) {
  std::erase_if(pending, [](const PositionRange& r) { return r.begin >= r.end; });
  std::sort(pending.begin(), pending.end(),
            [](const PositionRange& a, const PositionRange& b) { return a.begin < b.begin; });
  std::vector<PositionRange> merged;
  for (const PositionRange& r : pending) {
    if (!merged.empty() && r.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  std::int64_t high = pulled;
  // What ends at the pulled position is pending anyway (everything from H on is).
  if (!merged.empty() && merged.back().end >= high) {
    high = merged.back().begin;
    merged.pop_back();
  }
  const std::int64_t low = merged.empty() ? high : merged.front().begin;
  w.note_replay(low - anchor);
  w.write_i64(anchor);
  w.write_nested(anchor_state);
  w.write_i64(low);
  w.write_i64(high);
  w.write_u64(merged.size());
  for (const PositionRange& r : merged) {
    w.write_i64(r.begin);
    w.write_i64(r.end);
  }
}

/// The lowest position not delivered, for a stage that has pulled `pulled`
/// inputs and whose undelivered ones are `pending`.
inline std::int64_t lowest_pending(std::int64_t pulled,
                                   std::span<const PositionRange> pending) noexcept {
  std::int64_t low = pulled;
  for (const PositionRange& r : pending)
    if (r.begin < r.end) low = std::min(low, r.begin);
  return low;
}

/// read_position's work for any input (below): `restore(input, reader)`
/// restores the input from the anchor's bytes. Compiled once, not once for
/// every stage type that restores.
inline Replay read_position_of(StateReader& r, void* input, void (*restore)(void*, StateReader&),
                               std::string_view stage) {
  Replay replay;
  const std::uint64_t at = r.offset();
  replay.anchor = r.read_i64();
  const std::uint64_t bytes_at = r.offset() + 8;
  const std::span<const std::byte> bytes = r.read_span();
  replay.low = r.read_i64();
  replay.high = r.read_i64();
  const std::uint64_t n = r.read_u64();
  const auto bad = [&](const std::string& what) {
    throw DataLossError("checkpoint: stage '" + std::string(stage) + "': " + what + " at byte " +
                            std::to_string(at),
                        {.stage = std::string(stage), .offset = at});
  };
  if (replay.anchor < 0 || replay.low < replay.anchor || replay.high < replay.low) {
    bad("positions out of order (anchor " + std::to_string(replay.anchor) + ", low " +
        std::to_string(replay.low) + ", high " + std::to_string(replay.high) + ")");
  }
  if (n > r.remaining() / 16) bad(std::to_string(n) + " ranges do not fit in the state");
  std::int64_t last = replay.low;
  for (std::uint64_t i = 0; i < n; ++i) {
    PositionRange p{r.read_i64(), 0};
    p.end = r.read_i64();
    if (p.begin < last || p.end <= p.begin || p.end > replay.high) bad("ranges out of order");
    last = p.end;
    replay.pending.push_back(p);
  }
  StateReader anchor(bytes, bytes_at, r.owner());
  restore(input, anchor);
  anchor.finish();
  r.note_replayed(anchor.replayed() + (replay.low - replay.anchor));  // the caller's skip_inputs
  if (r.owner()) {
    replay.anchor_state = std::make_shared<StateWriter>();
    replay.anchor_state->write_deferred(std::make_shared<const SharedBytes>(bytes, r.owner()));
  }
  return replay;
}

/// Reads what write_position wrote: restores `input` (a fresh iterator)
/// from the anchor and returns the replay. Throws DataLossError for
/// positions that do not fit together.
template <class It>
Replay read_position(StateReader& r, It& input, std::string_view stage) {
  return read_position_of(
      r, std::addressof(input),
      [](void* in, StateReader& anchor) { static_cast<It*>(in)->restore(anchor); }, stage);
}

/// skip_inputs' work for any input (below): `next(input)` pulls one and
/// returns false at its end. One indirect call per input replayed, on the
/// restore's path only.
inline void skip_inputs_of(void* input, bool (*next)(void*), std::int64_t n,
                           std::string_view stage) {
  for (std::int64_t i = 0; i < n; ++i) {
    bool ended = false;
    try {
      ended = !next(input);
    } catch (const Cancelled&) {
      throw;
    } catch (...) {
      // An element's error: it was delivered before the save.
    }
    if (ended) {
      throw DataLossError("checkpoint: stage '" + std::string(stage) + "': its input ended " +
                              std::to_string(n - i) + " elements before the saved position",
                          {.stage = std::string(stage)});
    }
  }
}

/// Pulls and discards `n` inputs (errors count; Cancelled passes): the
/// replay from an anchor to the consumer's position. An input that ends
/// first is DataLossError (it changed since the save).
template <class It>
void skip_inputs(It& input, std::int64_t n, std::string_view stage) {
  if (n <= 0) return;
  skip_inputs_of(
      std::addressof(input),
      [](void* in) -> bool { return static_cast<bool>(static_cast<It*>(in)->next()); }, n, stage);
}

/// The anchors of one stage's input (see the top of this file). The puller
/// calls due() before each pull (or bulk pull) and take() when it is true;
/// the consumer calls write(). The queue is locked for each, never per
/// element; take() may run on another thread than write().
class Anchors {
 public:
  explicit Anchors(std::int64_t every = 64, std::int64_t first = 0)
      : every_(std::max<std::int64_t>(every, 1)), interval_(every_), next_(first) {}
  Anchors(Anchors&& o) noexcept
      : every_(o.every_),
        interval_(o.interval_),
        next_(o.next_),
        last_end_ns_(o.last_end_ns_),
        last_pulled_(o.last_pulled_),
        last_bytes_(o.last_bytes_),
        watch_(std::move(o.watch_)),
        seen_(o.seen_),
        anchors_(std::move(o.anchors_)),
        failure_(std::move(o.failure_)),
        failure_shown_(o.failure_shown_) {}
  Anchors& operator=(Anchors&&) = delete;

  /// Pulls between anchors.
  std::int64_t every() const noexcept { return every_; }
  /// Puller: pulls between anchors from the next take() on (a stage whose
  /// window changes: about the inputs it has in flight).
  void set_every(std::int64_t every) noexcept { every_ = std::max<std::int64_t>(every, 1); }

  /// Before the first pull: once `checkpointed` (the pipeline's
  /// Model::checkpointed, detail::checkpoint_flag) is set, by its first
  /// save or restore, poll() makes an anchor due at once, whatever the
  /// pacing: the stages that start keeping state for cheap saves then
  /// (shuffle's serialized buffer) are anchored from there on, not after the
  /// long interval their earlier, costly saves set. (A stage restored from
  /// a state starts from the state's anchor instead: restored().)
  void watch(std::shared_ptr<const std::atomic<bool>> checkpointed) noexcept {
    watch_ = std::move(checkpointed);
  }
  /// Puller, now and then (per pull, or per stretch of inline pulls; not
  /// on a per-element path): see watch().
  void poll(std::int64_t pulled) noexcept {
    if (watch_ && !seen_ && watch_->load(std::memory_order_relaxed)) {
      seen_ = true;
      next_ = std::min(next_, pulled);
    }
  }

  /// After a restore (read_position, then skip_inputs to replay.low), before
  /// the first pull: the anchor the state named is the first one (its bytes
  /// shared with the state, so nothing is saved on the restore's path; a
  /// save before the next anchor replays what the restore did), and the
  /// next is due after as many pulls as the restore replayed (at least
  /// every()): saving the input now would serialize again what a shuffle
  /// buffer pulled during the replay, on the way to the first element.
  /// Without the anchor's bytes (a reader with no owner), saves the input.
  /// In a replica (detail::replica_checkpoint_flag; watch() first), saves
  /// the input instead: the replica is made to be saved at once, its state
  /// anchored where it stands.
  template <class It>
  void restored(Replay& replay, const It& input) noexcept {
    seen_ = true;
    if (replay.anchor_state && !in_replica()) {
      try {
        std::lock_guard lock(mu_);
        anchors_.push_back({replay.anchor, std::move(replay.anchor_state)});
        next_ = replay.low + std::max(every_, replay.low - replay.anchor);
        return;
      } catch (...) {
        // No memory for the queue: save the input instead.
      }
    }
    take(input, replay.low, replay.low);
  }

  /// Whether these are a replica's anchors (watch()ing
  /// detail::replica_checkpoint_flag; see PipelineIterator::save): its
  /// stages run inline and are saved where they stand.
  bool in_replica() const noexcept { return watch_ == replica_checkpoint_flag(); }

  /// Puller: an anchor is due before pulling the input at `pulled`.
  bool due(std::int64_t pulled) const noexcept { return pulled >= next_; }

  /// Puller, between pulls: saves `input` as the anchor at `pulled`, and
  /// drops the anchors older than the newest one at or before `low` (the
  /// lowest position not delivered; a stale value only keeps more).
  template <class It>
  void take(const It& input, std::int64_t pulled, std::int64_t low) noexcept {
    take_of(
        std::addressof(input),
        [](const void* in, StateWriter& w) { static_cast<const It*>(in)->save(w); }, pulled, low);
  }

  /// take()'s work for any input: `save(input, writer)` saves it. Compiled
  /// once, not once for every stage type (anchors are every() pulls apart
  /// or more: the indirect call is not on a per-element path).
  void take_of(const void* input, void (*save)(const void*, StateWriter&), std::int64_t pulled,
               std::int64_t low) noexcept {
    try {
      const std::int64_t start = now_ns(), cpu_start = thread_cpu_ns();
      StateWriter w;
      // Before the pipeline's first save or restore, in case one comes: a
      // stage may decline (a shuffle buffer would be serialized whole).
      w.set_speculative(watch_ && !watch_->load(std::memory_order_relaxed));
      // A large state (a shuffle buffer's) is written into the storage of
      // one dropped earlier, whose pages are mapped, or into room for the
      // last one's size: no doubling, no page faults per anchor.
      std::vector<std::byte> spare;
      {
        std::lock_guard lock(mu_);
        spare = std::move(spare_);
      }
      if (spare.capacity() > 0) {
        w.reuse(std::move(spare));
      } else {
        w.reserve(last_bytes_ + last_bytes_ / 8);
      }
      save(input, w);
      last_bytes_ = w.bytes().size();
      // The cost: the thread's CPU time (a preemption during the save, on
      // a busy machine, would space the anchors out for long), less the
      // work done once for all later saves (elements serialized to be kept).
      const std::int64_t end = now_ns();
      const std::int64_t cost =
          std::max<std::int64_t>(thread_cpu_ns() - cpu_start - w.prepaid_ns(), 0);
      interval_ = paced_interval(pulled, cost, start, end);
      next_ = pulled + interval_;
      auto state = std::make_shared<StateWriter>(std::move(w));
      std::lock_guard lock(mu_);
      anchors_.push_back({pulled, std::move(state)});
      std::size_t keep = 0;
      for (std::size_t i = 0; i < anchors_.size(); ++i)
        if (anchors_[i].position <= low) keep = i;
      for (std::size_t i = 0; i < keep; ++i) {
        // Nobody else holds it (write() takes and drops its copy of the
        // pointer under this lock): its storage is the next spare.
        std::shared_ptr<StateWriter>& old = anchors_[i].state;
        const std::size_t capacity = old->bytes().capacity();
        if (old.use_count() == 1 && capacity >= spare_.capacity() &&
            capacity >= (std::size_t{1} << 16)) {
          spare_ = std::move(*old).take();
        }
      }
      anchors_.erase(anchors_.begin(), anchors_.begin() + static_cast<std::ptrdiff_t>(keep));
    } catch (const SaveDeclined&) {
      // Tried again later, or at once when the pipeline is saved (poll());
      // the anchors taken before stay.
      retry_later(pulled);
    } catch (...) {
      retry_later(pulled);
      try {
        std::lock_guard lock(mu_);
        if (!failure_shown_) failure_ = std::current_exception();
      } catch (...) {
      }
    }
  }

  /// Consumer: writes the stage's position (see write_position) with the
  /// newest anchor at or before the lowest pending position. With no anchor
  /// taken yet, `save_now(StateWriter&)` saves the input, which is idle and
  /// at `pulled` (nothing pulled yet). Rethrows the input's error if it
  /// could not be saved.
  ///
  /// `input_idle`: the stage's input is at `pulled` and nobody pulls it
  /// meanwhile (nothing in flight, no producer started). In a replica
  /// (see restored()) with nothing pending, save_now then saves the input
  /// where it stands: a replay by an outer stage's restore moved it past
  /// the anchor restored() took, and the state would replay that again.
  template <class SaveNow>
  void write(StateWriter& w, std::int64_t pulled, std::vector<PositionRange> pending,
             SaveNow&& save_now, bool input_idle = false) const {
    using S = std::remove_reference_t<SaveNow>;
    write_of(
        w, pulled, std::move(pending),
        const_cast<void*>(static_cast<const void*>(std::addressof(save_now))),
        [](void* f, StateWriter& now) { (*static_cast<S*>(f))(now); }, input_idle);
  }

  /// write()'s work for any input: `save_now(f, writer)` saves it. Compiled
  /// once, not once for every stage type.
  void write_of(StateWriter& w, std::int64_t pulled, std::vector<PositionRange> pending, void* f,
                void (*save_now)(void*, StateWriter&), bool input_idle) const {
    const std::int64_t low = lowest_pending(pulled, pending);
    // In a replica, an idle input is saved where it stands (see above).
    const bool save_here = input_idle && low == pulled && in_replica();
    std::int64_t position = 0;
    // Shared, not copied: the lock is held for a pointer's copy, never for
    // the bytes of a large state (a shuffle buffer's), so the puller's next
    // take() does not wait on this save.
    std::shared_ptr<const StateWriter> state;
    bool found = false;
    std::exception_ptr failure;
    if (!save_here) {
      std::lock_guard lock(mu_);
      for (auto a = anchors_.rbegin(); a != anchors_.rend(); ++a) {
        if (a->position <= low) {
          position = a->position;
          state = a->state;
          found = true;
          break;
        }
      }
      if (!found && failure_) {
        failure = failure_;
        failure_shown_ = true;
      }
    }
    if (!found) {
      if (failure) std::rethrow_exception(failure);
      auto now = std::make_shared<StateWriter>();
      now->set_speculative(w.speculative());
      save_now(f, *now);
      position = pulled;
      state = std::move(now);
    }
    // The reference goes under the lock, so that take() sees it gone (and
    // may recycle the storage) only after these reads of the bytes.
    const auto release = [&]() noexcept {
      std::lock_guard lock(mu_);
      state.reset();
    };
    try {
      write_position(w, position, *state, pulled, std::move(pending));
    } catch (...) {
      release();
      throw;
    }
    release();
  }

 private:
  struct Anchor {
    std::int64_t position = 0;
    // The input's state; never changed once taken (shared with a write()
    // in progress, and its storage recycled as spare_ only when no one else
    // holds it). Its deferred parts are shared with the stages that wrote
    // them (shuffle's serialized buffer), never changed either.
    std::shared_ptr<StateWriter> state;
  };

  // After a save that failed or was declined at `pulled`: the next try
  // after twice as many pulls as the last interval.
  void retry_later(std::int64_t pulled) noexcept {
    interval_ = std::min(interval_, std::numeric_limits<std::int64_t>::max() / 4) * 2;
    next_ = pulled + interval_;
  }

  // Pulls to the next anchor: every_, or more where saving the input (an
  // anchor that took `cost` ns of CPU time, from `start` to `end`) costs
  // more than about 1% of the time the pulls take (an input whose state is
  // large, such as a shuffle buffer before a prefetch, is anchored less
  // often; its replay after a restore is then longer). Once the pipeline
  // has been saved or restored (seen_), about 5%: its anchors are no longer
  // taken just in case, and each one less is pulls a restore replays (on
  // W3 with shuffle(10,000), anchors every batch instead of every second
  // or third: a replay of 256 to 512 pulls, 0.5 to 2.9 ms, gone). The
  // pulls' time is measured between the end of one anchor and the start of
  // the next.
  std::int64_t paced_interval(std::int64_t pulled, std::int64_t cost, std::int64_t start,
                              std::int64_t end) noexcept {
    std::int64_t interval = every_;
    if (last_end_ns_ > 0 && pulled > last_pulled_ && start > last_end_ns_) {
      const double per_pull =
          static_cast<double>(start - last_end_ns_) / static_cast<double>(pulled - last_pulled_);
      const double budget = seen_ ? 0.05 : 0.01;  // of the pulls' time
      const double paced = static_cast<double>(cost) / budget / per_pull;
      if (paced > static_cast<double>(interval))
        interval = static_cast<std::int64_t>(std::min(paced, 1e12));
    }
    last_end_ns_ = end;
    last_pulled_ = pulled;
    return interval;
  }

  std::int64_t every_;
  std::int64_t interval_;  // pulls to the next try: every_, doubled after each failure
  std::int64_t next_;      // the position at which the next anchor is due
  std::int64_t last_end_ns_ = 0, last_pulled_ = 0;  // the last anchor's end, and where
  std::size_t last_bytes_ = 0;                      // the last anchor's size
  std::shared_ptr<const std::atomic<bool>> watch_;  // the pipeline's checkpointed flag
  bool seen_ = false;                               // ... set at an anchor already
  mutable std::mutex mu_;
  std::deque<Anchor> anchors_;    // oldest first
  std::vector<std::byte> spare_;  // a dropped anchor's storage (64 KiB or more), for the next
  std::exception_ptr failure_;    // the input's error from its last failed save
  // A save() rethrew failure_: it stays from then on (the same error for
  // each save), so that the consumer's thread, which may still hold the
  // exception, is the one to release it last, not the puller's.
  mutable bool failure_shown_ = false;
};

/// The position of a stage that pulls its input on the consumer's thread
/// and may deliver out of order (parallel map, map-and-batch): `pulled`
/// inputs, of which `pending` are not delivered; an iterator restored with
/// `replay` and saved again states what the replay still drops as delivered.
template <class It>
void save_pulled(StateWriter& w, const Anchors& anchors, const Replay& replay, const It& input,
                 std::int64_t pulled, std::vector<PositionRange> pending, bool input_idle = false) {
  // Below the restore's `high` the input is not where `pulled` is raised to.
  input_idle = input_idle && pulled >= replay.high;
  replay.adjust(pending, pulled);
  anchors.write(
      w, pulled, std::move(pending), [&](StateWriter& now) { input.save(now); }, input_idle);
}

/// Restores what save_pulled wrote into a fresh iterator: `input` from the
/// anchor, replayed to the first input not delivered; the anchor is the
/// first one (Anchors::restored). Returns that position (the stage's next
/// input).
template <class It>
std::int64_t restore_pulled(StateReader& r, Anchors& anchors, Replay& replay, It& input,
                            std::string_view stage) {
  replay = read_position(r, input, stage);
  skip_inputs(input, replay.low - replay.anchor, stage);
  anchors.restored(replay, input);
  return replay.low;
}

}  // namespace ingest::detail
