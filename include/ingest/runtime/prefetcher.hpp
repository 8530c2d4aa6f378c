// A producer running ahead of its consumer: a driver thread pulls an input
// iterator into a bounded single-producer / single-consumer ring, and the
// consumer takes elements out in order. Shared by prefetch and the parallel
// interleave (one per open input). Hand-offs are two atomic counters and a
// Notifier each way, so a hand-off costs no lock and no system call while
// both sides are busy. Errors travel through the ring at their position.
// cancel_and_join() stops the producer after its current element and
// destroys the input iterator on the calling thread.
//
// Checkpoints (enable_anchors): the producer anchors its
// input every few pulls (runtime/anchors.hpp), and save_position() stores
// the consumer's position: the elements in the ring are recomputed after a
// restore.
//
// A cooperative prefetcher (the interleave's, with a Gate) holds a driver
// thread only while it pulls: a producer that gets no permit parks in the
// gate and returns its thread, and one whose ring is full returns too. A
// releasing holder runs the first parked producer on its own thread, and
// the consumer re-spawns a stopped one when its ring drains to half. So
// many open inputs cost threads in proportion to the gate's permits.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/iterator.hpp"
#include "ingest/core/state.hpp"
#include "ingest/runtime/anchors.hpp"
#include "ingest/runtime/chunking.hpp"
#include "ingest/runtime/model.hpp"
#include "ingest/runtime/runtime_core.hpp"
#include "ingest/runtime/sync.hpp"

namespace ingest::detail {

/// Limits how many producers pull at once (a parallel interleave's
/// parallelism). The limit may change while producers wait (an autotuned
/// knob): blocking waiters (acquire) re-check it every few milliseconds.
/// Cooperative producers park instead (a queue, first in first out), and
/// release_and_take() hands the releaser's permit to the first of them, to
/// run on the releaser's thread. A producer parks only while in_use >=
/// limit >= 1, so some holder will release and hand it a permit. Use one
/// kind of producer per gate.
class Gate {
 public:
  struct Parked;
  /// Runs a parked producer, which holds a permit, until it stops; returns
  /// the producer handed to this thread meanwhile, if any.
  using Step = Parked (*)(std::shared_ptr<void>);
  struct Parked {
    std::shared_ptr<void> producer;  // null: none
    Step step = nullptr;
  };

  /// `node` (optional) receives the producers' sampled pulling time and the
  /// CPU time within it (StageNode::driver_wall_ns, driver_cpu_ns).
  explicit Gate(std::size_t permits, const std::atomic<std::int64_t>* dynamic_limit = nullptr,
                StageNode* node = nullptr)
      : permits_(permits), dynamic_(dynamic_limit), node_(node) {}
  StageNode* node() const noexcept { return node_; }
  void acquire() {
    std::unique_lock lock(mu_);
    while (in_use_ >= limit()) cv_.wait_for(lock, std::chrono::milliseconds(5));
    ++in_use_;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      --in_use_;
    }
    cv_.notify_one();
  }

  /// Takes a permit (true), or parks `producer` (false) until a holder's
  /// release_and_take() hands it one.
  bool acquire_or_park(std::shared_ptr<void> producer, Step step) {
    std::lock_guard lock(mu_);
    if (in_use_ < limit()) {
      ++in_use_;
      return true;
    }
    parked_.push_back({std::move(producer), step});
    return false;
  }
  /// Releases a permit; if a producer is parked, gives it the permit and
  /// returns it: the caller runs it (parked.step) once it has stopped itself.
  [[nodiscard]] Parked release_and_take() {
    std::lock_guard lock(mu_);
    if (!parked_.empty() && in_use_ <= limit()) {
      Parked p = std::move(parked_.front());
      parked_.pop_front();
      return p;  // the permit passes on: in_use_ unchanged
    }
    --in_use_;
    return {};
  }
  /// Removes a parked producer; false if it is not parked (running, or
  /// handed a permit).
  bool remove(const void* producer) noexcept {
    std::shared_ptr<void> removed;  // destroyed after unlocking
    std::lock_guard lock(mu_);
    for (auto p = parked_.begin(); p != parked_.end(); ++p) {
      if (p->producer.get() == producer) {
        removed = std::move(p->producer);
        parked_.erase(p);
        return true;
      }
    }
    return false;
  }

 private:
  std::size_t limit() const noexcept {
    const std::int64_t d = dynamic_ ? dynamic_->load(std::memory_order_relaxed) : 0;
    return d > 0 ? static_cast<std::size_t>(d) : permits_;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t permits_;
  std::size_t in_use_ = 0;
  std::deque<Parked> parked_;
  const std::atomic<std::int64_t>* dynamic_;
  StageNode* node_;
};

/// `Cooperative` (with a gate): the producer holds a driver thread only
/// while it pulls (see the top of this file). Otherwise it keeps its thread
/// for its whole life and waits for room or a permit there: the prefetch
/// stage's single producer, whose consumer then pays nothing per element
/// beyond a fence and a load.
template <iterator It, bool Cooperative = false>
class Prefetcher {
 public:
  using value_type = typename It::value_type;

  /// What try_take found.
  enum class Status { value, end, empty };

  /// `capacity`: elements buffered at most. `gate` (optional; required when
  /// Cooperative) is held around each pull; `also_notify` (optional) is told of every pushed
  /// element. `limit` (optional) caps the buffered elements below `capacity` and may change while
  /// running (an autotuned buffer); `node` (optional) receives the occupancy and the consumer's
  /// waiting time.
  Prefetcher(It input, std::size_t capacity, Runtime& runtime, Gate* gate = nullptr,
             Notifier* also_notify = nullptr, const std::atomic<std::int64_t>* limit = nullptr,
             StageNode* node = nullptr)
      : shared_(std::make_shared<Shared>(std::move(input), capacity, gate, also_notify, limit, node,
                                         runtime)),
        runtime_(&runtime) {}
  Prefetcher(Prefetcher&&) noexcept = default;
  Prefetcher& operator=(Prefetcher&&) = delete;
  ~Prefetcher() { cancel_and_join(); }

  /// Starts the producer (idempotent); next() and try_take() start it too.
  void start() {
    if (started_ || stopped_ || !shared_) return;
    // The first anchor, on this thread: a save() from now on finds one.
    if constexpr (checkpointable_iterator<It>) {
      if (shared_->anchors) shared_->anchors->take(*shared_->input, shared_->base, shared_->base);
    }
    if constexpr (Cooperative) {
      Shared::wake(shared_);
    } else {
      runtime_->spawn([s = shared_] { s->produce(); });
    }
    started_ = true;
  }

  /// The next element in order, blocking until it is produced; rethrows an
  /// element's error at its position.
  std::optional<value_type> next() {
    if (ended_) return std::nullopt;
    start();
    Shared& s = *shared_;
    const std::size_t head = s.head.load(std::memory_order_relaxed);
    if (s.tail.load(std::memory_order_acquire) == head) {
      const std::int64_t start = now_ns();
      s.not_empty.wait_until([&] { return s.tail.load(std::memory_order_acquire) != head; });
      if (s.node) s.node->wait_ns.fetch_add(now_ns() - start, std::memory_order_relaxed);
    }
    return take_at(head);
  }

  /// Like next() but never blocks: Status::empty if nothing is ready.
  Status try_take(std::optional<value_type>& out) {
    if (ended_) return Status::end;
    start();
    Shared& s = *shared_;
    const std::size_t head = s.head.load(std::memory_order_relaxed);
    if (s.tail.load(std::memory_order_acquire) == head) return Status::empty;
    out = take_at(head);
    return out ? Status::value : Status::end;
  }

  /// True if next() would not block.
  bool ready() const noexcept {
    return ended_ || !shared_ ||
           shared_->tail.load(std::memory_order_acquire) !=
               shared_->head.load(std::memory_order_relaxed);
  }

  /// True once the producer has pushed its last item and it was consumed.
  bool ended() const noexcept { return ended_; }

  /// Asks the producer to stop after its current element, without waiting;
  /// lets the caller stop many prefetchers before joining them one by one.
  void request_stop() noexcept {
    if (!shared_) return;
    shared_->cancelled.store(true, std::memory_order_release);
    shared_->not_full.notify();
  }

  /// Stops the producer after its current element, waits for it, and destroys
  /// the input iterator on this thread. Idempotent.
  void cancel_and_join() noexcept {
    if (!shared_) return;
    stop_and_join();
    shared_->input.reset();
    shared_->free_ring();
    shared_.reset();
  }

  /// Stops the producer after its current element and waits for it; what it
  /// had produced stays to be taken (try_take() answers `empty` once it is
  /// all taken). Then release_input() hands the input over, positioned at
  /// the element after them: the consumer goes on pulling it itself.
  void stop_and_join() noexcept {
    if (!shared_ || stopped_) return;
    stopped_ = true;
    Shared& s = *shared_;
    s.cancelled.store(true, std::memory_order_release);
    s.not_full.notify();
    bool running = started_;
    if constexpr (Cooperative) {
      // Parked: no job runs or will. Idle (stopped on a full ring): taking
      // the run token keeps any job from starting. Otherwise a job runs, or
      // a holder's thread was handed it; either sees `cancelled` and exits.
      if (running) {
        running = !s.gate->remove(&s) && s.wakeups.fetch_add(1, std::memory_order_acq_rel) != 0;
      }
    }
    if (running) s.exit_signal.wait_until([&] { return s.exited.load(std::memory_order_acquire); });
  }

  /// Checkpoints: the producer anchors its input every `every` pulls (call
  /// before start()), and at once when `checkpointed` is set (the
  /// pipeline's first save or restore; Anchors::watch).
  void enable_anchors(std::int64_t every,
                      std::shared_ptr<const std::atomic<bool>> checkpointed = nullptr) {
    shared_->anchors.emplace(every, shared_->base);
    shared_->anchors->watch(checkpointed);
    shared_->checkpointed = std::move(checkpointed);
  }

  /// The consumer's position (see runtime/anchors.hpp); between calls of
  /// next(), with anchors enabled. Locks the anchor queue only.
  void save_position(StateWriter& w) const {
    const Shared& s = *shared_;
    const std::int64_t consumed =
        s.base + static_cast<std::int64_t>(s.head.load(std::memory_order_relaxed)) -
        (ended_ ? 1 : 0);  // the end's item is no element
    s.anchors->write(
        w, consumed, {}, [&](StateWriter& now) { s.input->save(now); },
        /*input_idle=*/!started_);
  }

  /// Restores what save_position() wrote, before start(): restores the
  /// input from the anchor and replays it to the consumer's position.
  void restore_position(StateReader& r, std::string_view stage) {
    Shared& s = *shared_;
    Replay replay = read_position(r, *s.input, stage);
    replay.expect_in_order(stage);
    skip_inputs(*s.input, replay.low - replay.anchor, stage);
    s.base = replay.low;
    s.anchors.emplace(s.anchors->every(), s.base);
    s.anchors->watch(s.checkpointed);  // before restored(): a replica's is seen there
    s.anchors->restored(replay, *s.input);
  }

  /// After stop_and_join(), with every produced element taken (not ended):
  /// the input iterator. The prefetcher is empty afterwards.
  It release_input() {
    It input = std::move(*shared_->input);
    shared_->input.reset();
    shared_->free_ring();
    shared_.reset();
    return input;
  }

 private:
  struct Item {
    std::optional<value_type> value;
    std::exception_ptr error;
  };

  // A ring of items holding positions from `start` on, modulo its size.
  struct Segment {
    Segment(std::size_t size, std::size_t first) : items(size), start(first) {}
    Item& at(std::size_t position) noexcept { return items[position % items.size()]; }
    std::vector<Item> items;
    std::size_t start;
    std::atomic<Segment*> next{nullptr};  // the grown ring, set by the producer
  };

  struct Shared {
    Shared(It in, std::size_t slots, Gate* g, Notifier* extra, const std::atomic<std::int64_t>* lim,
           StageNode* n, Runtime& rt)
        : input(std::in_place, std::move(in)),
          capacity(std::max<std::size_t>(slots, 1)),
          read_segment(new Segment(std::min<std::size_t>(this->capacity, 16), 0)),
          write_segment(read_segment),
          gate(g),
          also_notify(extra),
          limit(lim),
          node(n),
          runtime(&rt) {}

    // Elements the ring may hold now.
    std::size_t room() const noexcept {
      const std::int64_t l = limit ? limit->load(std::memory_order_relaxed) : 0;
      return l > 0 ? std::min(capacity, static_cast<std::size_t>(l)) : capacity;
    }

    // Pulls in bursts: a producer with a gate holds its permit while its
    // ring has room (up to a burst), so the gate costs a lock per burst, not
    // per element, and only the pulling itself is limited.
    void produce() noexcept {
      bool done = false;
      while (!done && !cancelled.load(std::memory_order_acquire)) {
        if (!wait_for_room()) break;
        try {
          if (gate) gate->acquire();
        } catch (...) {
          done = !push(Item{std::nullopt, std::current_exception()});
          continue;
        }
        done = pull_burst();
        if (gate) gate->release();
      }
      exited.store(true, std::memory_order_release);
      exit_signal.notify();
    }

    // Cooperative production. One token, `wakeups` != 0, says a job runs,
    // is spawned, is parked in the gate or was handed a permit; whoever
    // raises it from 0 takes the token and schedules the job. A job that
    // stops because its ring is full gives the token back unless a wake
    // came meanwhile (then it looks again), so the producer never runs
    // twice at once and a wake is never lost. A parked or finished producer
    // keeps the token.
    enum class Outcome { full, parked, finished };

    // Called by the consumer (start, room freed).
    static void wake(const std::shared_ptr<Shared>& self) {
      if (self->wakeups.fetch_add(1, std::memory_order_acq_rel) == 0) schedule(self);
    }

    // With the token: a job once a permit is ours, else parked (no thread).
    // If no thread can be made, the error reaches the consumer, the permit
    // goes back and a later wake tries again (parked producers then wait
    // for another holder: the process is out of threads anyway).
    static void schedule(const std::shared_ptr<Shared>& self) {
      bool permit = false;
      try {
        permit = self->gate->acquire_or_park(self, &step);
        if (permit) self->runtime->spawn([s = self] { run(s); });
      } catch (...) {
        if (permit) self->gate->release();
        self->wakeups.store(0, std::memory_order_release);
        throw;
      }
    }

    // A driver thread's job: this producer, then those whose permits it
    // handed on (each on this thread, so the threads follow the permits).
    static void run(std::shared_ptr<Shared> self) noexcept {
      Gate::Parked next = step(std::move(self));
      while (next.producer) next = next.step(std::move(next.producer));
    }

    // Runs a producer that holds a permit until it stops.
    static Gate::Parked step(std::shared_ptr<void> producer) noexcept {
      auto self = std::static_pointer_cast<Shared>(std::move(producer));
      Shared& s = *self;
      Gate::Parked handed;
      bool permit = true;
      for (;;) {
        const std::uint32_t seen = s.wakeups.load(std::memory_order_acquire);
        const Outcome outcome = s.work(self, permit, handed);
        permit = false;
        if (outcome == Outcome::parked) return handed;  // handed a permit later
        if (outcome == Outcome::finished) {
          s.exited.store(true, std::memory_order_release);
          s.exit_signal.notify();
          return handed;
        }
        if (s.wakeups.fetch_sub(seen, std::memory_order_acq_rel) == seen) return handed;
      }
    }

    // Pulls in bursts while the ring has room, as produce() does, and
    // returns instead of waiting for room or a permit. A producer its
    // release handed the permit to comes back in `handed` (it then parks
    // or stops itself, since the permit is gone).
    Outcome work(const std::shared_ptr<Shared>& self, bool permit, Gate::Parked& handed) noexcept {
      for (;;) {
        if (!permit) {
          if (cancelled.load(std::memory_order_acquire)) return Outcome::finished;
          if (!room_or_register()) return Outcome::full;
          try {
            if (!gate->acquire_or_park(self, &step)) return Outcome::parked;
          } catch (...) {
            store(Item{std::nullopt, std::current_exception()});
            continue;
          }
        }
        permit = false;
        const bool last = pull_burst();
        // One hand-off per step: a further release leaves the parked to the
        // holder just handed a permit. (A mutex failing here terminates.)
        if (handed.producer) {
          gate->release();
        } else {
          handed = gate->release_and_take();
        }
        if (last) return Outcome::finished;
      }
    }

    // True if the ring has room; otherwise asks the consumer to wake the
    // producer once it drains to half, and re-checks (the consumer may have
    // drained it before seeing the request).
    bool room_or_register() noexcept {
      const std::size_t t = tail.load(std::memory_order_relaxed);
      if (t - head.load(std::memory_order_acquire) < room()) return true;
      wants_room.store(true, std::memory_order_seq_cst);
      if (t - head.load(std::memory_order_seq_cst) > room() / 2) return false;
      wants_room.store(false, std::memory_order_relaxed);
      return true;
    }

    // Pulls up to a burst of elements into the ring while it has room and
    // the producer is not cancelled; true once the input's end is stored.
    // One burst in 8 is timed for the gate's node: the autotuner counts
    // fetchers by the share of their time they compute. Time spent waiting
    // for a core (more threads than cores) is left out of both, so that
    // crowding does not make computing fetchers look like waiting ones.
    bool pull_burst() {
      StageNode* measured = gate ? gate->node() : nullptr;
      if (measured && ++bursts % 8 == 0) {
        const std::int64_t wall = now_ns();
        const ThreadTimes before = thread_times();
        const bool last = pull_burst_unmeasured();
        const ThreadTimes after = thread_times();
        const std::int64_t crowded = after.waiting_for_cpu - before.waiting_for_cpu;
        measured->driver_cpu_ns.fetch_add(after.on_cpu - before.on_cpu, std::memory_order_relaxed);
        measured->driver_wall_ns.fetch_add(std::max<std::int64_t>(now_ns() - wall - crowded, 0),
                                           std::memory_order_relaxed);
        return last;
      }
      return pull_burst_unmeasured();
    }
    bool pull_burst_unmeasured() {
      static constexpr int burst = 64;
      for (int k = 0; k < burst && !cancelled.load(std::memory_order_acquire); ++k) {
        Item item;
        try {
          item.value = input->next();
        } catch (...) {
          item.error = std::current_exception();
        }
        const bool last = !item.value && !item.error;
        if constexpr (checkpointable_iterator<It>) {
          // Before the element is handed over: a save() right after the
          // consumer takes it finds the anchor at its position (no replay).
          if (anchors && !last) anchor_if_due();
        }
        store(std::move(item));
        if (last) return true;
        if (!has_room()) break;
      }
      return false;
    }

    // After the pull at ring position tail, before its element is stored:
    // the anchor at the next pull's position, every so often.
    void anchor_if_due() noexcept {
      const std::int64_t pulled =
          base + static_cast<std::int64_t>(tail.load(std::memory_order_relaxed)) + 1;
      anchors->poll(pulled);
      if (anchors->due(pulled)) [[unlikely]] {
        anchors->take(*input, pulled,
                      base + static_cast<std::int64_t>(head.load(std::memory_order_relaxed)));
      }
    }

    bool has_room() const noexcept {
      return tail.load(std::memory_order_relaxed) - head.load(std::memory_order_acquire) < room();
    }

    // Waits for room; false if cancelled meanwhile. A producer that found
    // the ring full waits until it is half empty, so a fast producer and a
    // slow consumer exchange one wake-up per half ring, not per element.
    bool wait_for_room() {
      const std::size_t t = tail.load(std::memory_order_relaxed);
      if (t - head.load(std::memory_order_acquire) >= room()) {
        const std::size_t low_water = room() / 2;
        not_full.wait_until([&] {
          return t - head.load(std::memory_order_acquire) <= low_water ||
                 cancelled.load(std::memory_order_acquire);
        });
      }
      return !cancelled.load(std::memory_order_acquire);
    }

    bool push(Item&& item) {
      if (!wait_for_room()) return false;
      store(std::move(item));
      return true;
    }

    // Stores an item; the caller made sure there is room.
    void store(Item&& item) {
      const std::size_t t = tail.load(std::memory_order_relaxed);
      Segment* w = write_segment;
      if (t - std::max(head.load(std::memory_order_acquire), w->start) >= w->items.size()) {
        // Full here, though the buffer has room: a ring twice the size
        // takes the elements from position t on.
        auto* grown = new Segment(std::min(capacity, 2 * w->items.size()), t);
        w->next.store(grown, std::memory_order_release);
        write_segment = w = grown;
      }
      w->at(t) = std::move(item);
      tail.store(t + 1, std::memory_order_release);
      if (node)
        node->set_buffered(static_cast<std::int64_t>(t + 1 - head.load(std::memory_order_relaxed)));
      not_empty.notify();
      if (also_notify) also_notify->notify();
    }

    ~Shared() { free_ring(); }

    // Destroys the buffered items (on the calling thread) and the ring.
    void free_ring() noexcept {
      while (read_segment) delete std::exchange(read_segment, read_segment->next.load());
      write_segment = nullptr;
    }

    std::optional<It> input;
    // The ring grows with what arrives (a buffer of ten million over ten
    // elements allocates a few slots): it starts at 16 slots at most and a
    // full one is followed by one twice the size, up to `capacity`, which
    // the consumer moves to (freeing the old) when it reaches its start.
    std::size_t capacity;
    Segment* read_segment;   // consumer's
    Segment* write_segment;  // producer's: the newest
    Gate* gate;
    Notifier* also_notify;
    const std::atomic<std::int64_t>* limit;
    StageNode* node;
    Runtime* runtime;
    std::uint32_t bursts = 0;                               // producer's: pull_burst calls
    std::optional<Anchors> anchors;                         // checkpoints (enable_anchors)
    std::shared_ptr<const std::atomic<bool>> checkpointed;  // ... the pipeline's flag
    std::int64_t base = 0;                                  // the input position of ring position 0
    alignas(64) std::atomic<std::size_t> head{0};           // consumer position
    alignas(64) std::atomic<std::size_t> tail{0};           // producer position
    Notifier not_empty, not_full, exit_signal;
    std::atomic<bool> cancelled{false};
    std::atomic<bool> exited{false};
    std::atomic<std::uint32_t> wakeups{0};  // cooperative: the run token
    std::atomic<bool> wants_room{false};    // cooperative: stopped, its ring full
  };

  std::optional<value_type> take_at(std::size_t head) {
    Shared& s = *shared_;
    // Positions from a grown ring's start on are in that ring (published
    // before the tail that made this position visible).
    while (Segment* grown = s.read_segment->next.load(std::memory_order_acquire)) {
      if (head < grown->start) break;
      delete std::exchange(s.read_segment, grown);
    }
    Item& item = s.read_segment->at(head);
    std::optional<value_type> value = std::move(item.value);
    std::exception_ptr error = std::move(item.error);
    item.value.reset();
    item.error = nullptr;
    s.head.store(head + 1, std::memory_order_release);
    if constexpr (Cooperative) {
      // Pairs with room_or_register: the producer sees this head, or we see
      // its request. A fence and a load unless it stopped on a full ring.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (s.wants_room.load(std::memory_order_relaxed) &&
          s.tail.load(std::memory_order_relaxed) - (head + 1) <= s.room() / 2 &&
          s.wants_room.exchange(false, std::memory_order_acq_rel))
        Shared::wake(shared_);
    } else {
      s.not_full.notify();  // a fence and a load unless the producer sleeps
    }
    if (error) std::rethrow_exception(error);
    if (!value) ended_ = true;
    return value;
  }

  std::shared_ptr<Shared> shared_;
  Runtime* runtime_;
  bool started_ = false;
  bool stopped_ = false;  // stop_and_join() ran
  bool ended_ = false;
};

}  // namespace ingest::detail

namespace ingest {

/// The iterator over a Prefetcher's ring: what prefetch() and the loaders
/// return. Checkpoints (when its input has them): the consumer's position,
/// through the input's anchors (runtime/anchors.hpp); the elements buffered
/// at the save are recomputed after a restore. States do not depend on the
/// buffer size: one saved with prefetch(4) restores into prefetch(0).
template <class InputIt>
class PrefetchIterator {
 public:
  /// The element type.
  using value_type = typename InputIt::value_type;

  /// `node` (may be null) holds the buffer knob: the ring has `capacity`
  /// slots and holds at most the knob's value.
  /// A capacity of 0: no producer, next() pulls the input directly.
  /// `cancel`: the source whose token the input's context got; stopped
  /// when this iterator is destroyed. `stage`: the stage's name (static
  /// storage), for checkpoint errors.
  PrefetchIterator(InputIt input, std::size_t capacity, std::shared_ptr<Runtime> runtime,
                   detail::StageNode* node = nullptr, CancellationSource cancel = {},
                   std::string_view stage = "prefetch",
                   std::shared_ptr<const std::atomic<bool>> checkpointed = nullptr)
      : runtime_(std::move(runtime)), cancel_(std::move(cancel)), stage_(stage) {
    if (capacity == 0) {
      direct_.emplace(std::move(input));
    } else {
      prefetcher_.emplace(std::move(input), capacity, *runtime_, nullptr, nullptr,
                          node && node->buffer.tunable() ? &node->buffer.value : nullptr, node);
      if constexpr (checkpointable_iterator<InputIt>) {
        // An anchor before every pull, paced to about 1% of the pulls' time
        // (anchors.hpp): batches of costly elements are anchored each, so a
        // restore recomputes almost nothing; cheap elements every few
        // hundred or thousand.
        prefetcher_->enable_anchors(1, std::move(checkpointed));
      }
    }
  }

  /// Takes over the ring and its producer; the moved-from iterator is left only
  /// to be destroyed.
  PrefetchIterator(PrefetchIterator&&) noexcept = default;
  PrefetchIterator& operator=(PrefetchIterator&&) = delete;
  /// Stops the input's work between elements, then (the prefetcher's
  /// destructor) waits for the element in hand.
  ~PrefetchIterator() { cancel_.request_stop(); }

  /// The next element, or std::nullopt at the end; an element's error is
  /// rethrown here.
  std::optional<value_type> next() { return direct_ ? direct_->next() : prefetcher_->next(); }

  /// Checkpoint: the input's state at the consumer's position.
  void save(StateWriter& w) const requires checkpointable_iterator<InputIt> {
    if (direct_) {
      StateWriter now;
      direct_->save(now);
      detail::write_position(w, 0, now, 0, {});
    } else {
      prefetcher_->save_position(w);
    }
  }
  /// Restores what save() wrote, into a fresh iterator (any buffer size).
  void restore(StateReader& r) requires checkpointable_iterator<InputIt> {
    if (direct_) {
      const detail::Replay replay = detail::read_position(r, *direct_, stage_);
      replay.expect_in_order(stage_);
      detail::skip_inputs(*direct_, replay.low - replay.anchor, stage_);
    } else {
      prefetcher_->restore_position(r, stage_);
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;  // outlives the prefetcher (declared first)
  CancellationSource cancel_;
  std::string_view stage_;
  std::optional<InputIt> direct_;
  std::optional<detail::Prefetcher<InputIt>> prefetcher_;
};

}  // namespace ingest
