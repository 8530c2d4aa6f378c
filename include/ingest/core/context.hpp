// What an iterator learns from the pipeline that creates it: the runtime
// (thread pool) its async stages use (see runtime_of in runtime/runtime_core.hpp), whether order
// must be deterministic, and where batch buffers come from. tf.data counterpart: IteratorContext.
// with_options() overrides these for the stages before it. Stages copy what
// they need: an iterator must not keep a reference to the context.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "ingest/core/allocator.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/core/world.hpp"

namespace ingest {

// Defined by the runtime layer (runtime/runtime_core.hpp, runtime/model.hpp); the
// context only carries pointers to them.
class Runtime;
namespace detail {
class Model;
class StageNode;
}  // namespace detail

/// Whether the consumer of an iterator is gone. An iterator that owns
/// threads (prefetch, the loaders) stops its token when it is destroyed;
/// the stages below it check the token between elements (a batch fill, an
/// interleave's inputs, a shuffle fill) and unwind with detail::Cancelled,
/// so destruction waits for at most one element per thread. A
/// default-constructed token is never stopped. Checking costs one relaxed
/// atomic load per level of nesting.
class CancellationToken {
 public:
  CancellationToken() = default;

  /// Whether this token's source, or a parent's, was asked to stop.
  bool stop_requested() const noexcept {
    for (const State* s = state_.get(); s != nullptr; s = s->parent.get()) {
      if (s->stopped.load(std::memory_order_relaxed)) return true;
    }
    return false;
  }

 private:
  friend class CancellationSource;
  struct State {
    std::atomic<bool> stopped{false};
    std::shared_ptr<const State> parent;  // stopping the parent stops this too
  };
  explicit CancellationToken(std::shared_ptr<const State> state) : state_(std::move(state)) {}

  std::shared_ptr<const State> state_;
};

/// Owns a stop flag; its tokens also report a stop of `parent`.
class CancellationSource {
 public:
  /// A source with no parent.
  CancellationSource() : CancellationSource(CancellationToken{}) {}
  /// A source whose tokens also report a stop of `parent`.
  explicit CancellationSource(const CancellationToken& parent)
      : state_(std::make_shared<CancellationToken::State>()) {
    state_->parent = parent.state_;
  }

  /// A token that reports this source's stop (and its parent's).
  CancellationToken token() const { return CancellationToken(state_); }
  /// A moved-from source stops nothing.
  void request_stop() noexcept {
    if (state_) state_->stopped.store(true, std::memory_order_relaxed);
  }
  /// Whether this source, or its parent, was asked to stop.
  bool stop_requested() const noexcept { return CancellationToken(state_).stop_requested(); }

 private:
  std::shared_ptr<CancellationToken::State> state_;
};

namespace detail {
/// Between two elements of a loop that may run long: unwind if the consumer is gone.
inline void throw_if_cancelled(const CancellationToken& token) {
  if (token.stop_requested()) throw Cancelled{};
}
}  // namespace detail

namespace detail {
/// The counters datasets share between their copies and iterators (a
/// reshuffling shuffle's passes, list_files' epochs, ignore_errors' count),
/// made private for a replica: a pipeline that PipelineIterator::save()
/// restores from the state it just wrote, in the same process, and saves
/// again, so that the state it returns replays little (see there). The
/// replica's iterators count on copies, so the live pipeline's datasets see
/// none of its passes. A copy starts at the shared counter's value when the
/// replica first reaches it (a restore sets what its state holds).
class CounterSandbox {
 public:
  template <class T>
  std::shared_ptr<std::atomic<T>> resolve(const std::shared_ptr<std::atomic<T>>& shared) {
    if (!shared) return shared;
    std::lock_guard lock(mu_);
    Copy& copy = copies_[shared.get()];
    if (!copy.copy) {
      copy.shared = shared;  // held: no other counter takes its address meanwhile
      copy.copy = std::make_shared<std::atomic<T>>(shared->load(std::memory_order_relaxed));
    }
    return std::static_pointer_cast<std::atomic<T>>(copy.copy);
  }

  /// Throws ReplicaRefused, and marks the replica refused for good: a
  /// stage that pulls its input may take the exception for an element's
  /// error (a restore's replay skips those), and the save must still give
  /// up (PipelineIterator::save checks refused()).
  [[noreturn]] void refuse();
  bool refused() const noexcept { return refused_.load(std::memory_order_relaxed); }

 private:
  struct Copy {
    std::shared_ptr<const void> shared;
    std::shared_ptr<void> copy;
  };
  std::mutex mu_;
  std::unordered_map<const void*, Copy> copies_;
  std::atomic<bool> refused_{false};
};

/// Thrown where a replica (CounterSandbox) would touch what it cannot keep
/// apart from the live pipeline (a cache being filled, a generator's own
/// state, the datasets an interleave's function captures): the save keeps
/// the state it wrote. Not an error; never reaches a user.
struct ReplicaRefused {};

inline void CounterSandbox::refuse() {
  refused_.store(true, std::memory_order_relaxed);
  throw ReplicaRefused{};
}
}  // namespace detail

namespace detail {
/// with_options({.auto_shard}): the rank, and what the first file source
/// below decided (one per iterator of the with_options stage).
struct AutoShard {
  distributed::World world;
  enum Decision { undecided, by_file, by_element } decision = undecided;
};
}  // namespace detail

/// What a dataset's make_iterator receives: the runtime, the allocator, the
/// pipeline's model and the pass's cancellation and epoch. Stages pass it
/// down to their input, adjusted (cancellable_by, for_repeat_pass).
struct IteratorContext {
  /// The runtime of async stages; null means default_runtime().
  std::shared_ptr<Runtime> runtime{};
  /// Whether async stages must keep the input's order (tf: options.deterministic).
  bool deterministic = true;
  /// Where batch buffers (batch, padded_batch, map-and-batch) are allocated.
  Allocator* allocator = &default_allocator();
  /// The pipeline's model (measurements, knobs), or null when not measured.
  std::shared_ptr<detail::Model> model{};
  /// The model node of the stage whose make_iterator receives this context.
  detail::StageNode* node = nullptr;
  /// Stopped when the iterator that consumes this one's output is destroyed.
  CancellationToken cancellation{};
  /// Which pass over its input the enclosing repeats are on: 0 outside any
  /// repeat; see for_repeat_pass. Stages that need "the same pass of the same
  /// dataset gives the same result" (random_map's generators) read it; every
  /// other stage passes it on unchanged with the context.
  std::uint64_t epoch = 0;
  /// Set only in a replica (detail::CounterSandbox): its private counters.
  std::shared_ptr<detail::CounterSandbox> replica{};
  /// with_options({.auto_shard}) above: the first file source decides.
  std::shared_ptr<detail::AutoShard> auto_shard{};

  /// This context for the inputs of a stage that stops them when it is
  /// destroyed: its cancellation is `source`'s token (a source made from
  /// this context's token, so an outer stop reaches them too).
  IteratorContext cancellable_by(const CancellationSource& source) const {
    IteratorContext inner = *this;
    inner.cancellation = source.token();
    return inner;
  }

  /// This context for pass `pass` (0-based) of a repeat(count) (-1: forever)
  /// iterated in this context. Passes of nested finite repeats are numbered
  /// consecutively: in ds.repeat(2).repeat(3), ds sees epochs 0 to 5. An
  /// infinite repeat is restarted by an outer repeat only after an empty
  /// pass; its passes in outer epoch k are numbered from k * 2^32.
  IteratorContext for_repeat_pass(std::int64_t count, std::int64_t pass) const {
    IteratorContext inner = *this;
    const std::uint64_t stride = count >= 0 ? static_cast<std::uint64_t>(count) : 1ULL << 32;
    inner.epoch = epoch * stride + static_cast<std::uint64_t>(pass);  // wraps, never UB
    return inner;
  }
};

/// The iterator type of dataset D.
template <class D>
using iterator_t =
    decltype(std::declval<const D&>().make_iterator(std::declval<const IteratorContext&>()));

namespace detail {
/// The counter `shared` of a dataset, as the iterators made in `ctx` count
/// on it: itself, or a replica's private copy.
template <class T>
std::shared_ptr<std::atomic<T>> shared_counter(const IteratorContext& ctx,
                                               const std::shared_ptr<std::atomic<T>>& shared) {
  return ctx.replica ? ctx.replica->resolve(shared) : shared;
}
/// The checkpoint flag (runtime/model.hpp's checkpoint_flag) of a
/// replica's stages: always set, and known by its address, so that
/// Anchors::restored anchors a replica's input afresh at the restored
/// position instead of keeping the state's old anchor.
inline const std::shared_ptr<const std::atomic<bool>>& replica_checkpoint_flag() {
  static const std::shared_ptr<const std::atomic<bool>> flag =
      std::make_shared<const std::atomic<bool>>(true);
  return flag;
}
/// with_options({.auto_shard}): called by a file source's make_iterator
/// with its file count; the first source below the stage decides. Returns
/// this rank's first file when it shards by file (at least one file per
/// rank; the stride is the world's size); otherwise each rank keeps
/// every world_size-th record of the file sources below it. Logs which
/// (once per iterator of the with_options stage).
inline std::optional<std::size_t> auto_shard_by_file(const IteratorContext& ctx, std::size_t files,
                                                     std::string_view stage) {
  if (!ctx.auto_shard || ctx.auto_shard->decision != AutoShard::undecided) return std::nullopt;
  AutoShard& a = *ctx.auto_shard;
  const auto size = static_cast<std::size_t>(a.world.world_size);
  const bool by_file = files >= size;
  a.decision = by_file ? AutoShard::by_file : AutoShard::by_element;
  {
    log_line("auto_shard: " + std::string(stage) + " has " + std::to_string(files) + " files for " +
             std::to_string(size) + " ranks: " +
             (by_file
                  ? "by file: rank " + std::to_string(a.world.rank) + " reads 1 file in " +
                        std::to_string(size) + ", from file " + std::to_string(a.world.rank)
                  : "by element (fewer files than ranks): rank " + std::to_string(a.world.rank) +
                        " reads every file and keeps 1 record in " + std::to_string(size)));
  }
  if (!by_file) return std::nullopt;
  return static_cast<std::size_t>(a.world.rank);
}
/// Throws ReplicaRefused in a replica: the caller keeps state the replica
/// cannot make private.
inline void refuse_in_replica(const IteratorContext& ctx) {
  if (ctx.replica) ctx.replica->refuse();
}
}  // namespace detail

}  // namespace ingest
