// The backend-agnostic core of the loaders (ingest::HostLoader in
// ingest/loader.hpp, ingest::cuda::DeviceLoader in ingest/cuda/; their
// dataset is stages/loader_dataset.hpp), in the
// style of Thrust's systems: the ring, the order, the buffer pool and the
// lifetime rules live here once; a backend supplies only a copy engine (a
// CUDA stream, or a host thread that models one), events, and memory.
//
// A producer on a driver thread (a Prefetcher) pulls host batches, takes a
// buffer from the pool, has the engine copy each field into it
// asynchronously, and hands out a batch with the copy's event, in order,
// at most `depth` ahead of the consumer and with at most `depth` copies
// unfinished. A buffer goes back to the pool when the batch and every view
// of it are dropped, with a fence per consumer (an event recorded on each
// consumer stream at that moment); the engine waits for those fences
// before it writes the buffer again, so memory in use is never overwritten
// and nobody blocks the host to get there. The host batches being copied
// are kept until their copy's event has passed.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
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

#include "ingest/core/allocator.hpp"
#include "ingest/core/batch_traits.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/runtime/prefetcher.hpp"

// The loaders need no DLPack: LoadedBatch::to_dlpack calls ingest::to_dlpack,
// declared here and defined in ingest/core/dlpack.hpp (which needs
// <dlpack/dlpack.h>). A program calling to_dlpack includes that header.
struct DLManagedTensor;  // <dlpack/dlpack.h>

namespace ingest {

inline DLManagedTensor* to_dlpack(const Tensor& t, int device_id);  // ingest/core/dlpack.hpp

/// The most batches in flight the autotuner gives a loader's depth knob.
inline constexpr std::int64_t max_tuned_loader_depth = 16;

namespace detail {

/// Where each field starts in a loader's buffer (DLPack's alignment).
inline constexpr std::size_t loader_field_alignment = 256;

/// A buffer of a loader's pool, with the fences to pass before writing it.
template <class Backend>
struct Slab {
  std::byte* data = nullptr;   // aligned to loader_field_alignment
  std::size_t capacity = 0;    // usable bytes at data
  std::byte* block = nullptr;  // what the allocator returned
  std::size_t block_bytes = 0;
  std::vector<typename Backend::Event> fences;
};

/// A loader's buffers. Released buffers are reused as soon as they are
/// released (their fences travel with them, for the engine to wait on);
/// acquire prefers a buffer whose fences have passed and that fits best.
/// Buffers go back to the backend's allocator (a process-wide pool) only
/// when their fences have passed: at destruction, or when more than
/// `max_free` idle buffers pile up. Thread-safe.
template <class Backend>
class SlabPool {
 public:
  SlabPool(Allocator& allocator, std::size_t max_free)
      : allocator_(allocator), max_free_(max_free) {}
  SlabPool(const SlabPool&) = delete;
  SlabPool& operator=(const SlabPool&) = delete;
  ~SlabPool() {
    for (Slab<Backend>& s : free_) discard(s);
  }

  /// A buffer of at least `bytes` bytes, with the fences to wait for before writing it.
  Slab<Backend> acquire(std::size_t bytes) {
    std::vector<Slab<Backend>> surplus;
    Slab<Backend> out;
    {
      std::lock_guard lock(mu_);
      std::size_t best = free_.size();
      bool best_done = false;
      for (std::size_t i = 0; i < free_.size(); ++i) {
        const Slab<Backend>& s = free_[i];
        if (s.capacity < bytes) continue;
        const bool done = passed(s);
        if (best == free_.size() || (done && !best_done) ||
            (done == best_done && s.capacity < free_[best].capacity)) {
          best = i;
          best_done = done;
        }
      }
      if (best != free_.size()) {
        out = std::move(free_[best]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      }
      // Idle buffers beyond the limit (too small ones first) go back, once passed.
      for (std::size_t i = 0; free_.size() > max_free_ && i < free_.size();) {
        if (passed(free_[i])) {
          surplus.push_back(std::move(free_[i]));
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
    }
    for (Slab<Backend>& s : surplus) discard(s);
    if (out.data != nullptr) return out;
    // Allocators align to tensor_alignment at least (device memory to 256):
    // room to align the start to loader_field_alignment.
    const std::size_t want = bytes + loader_field_alignment - tensor_alignment;
    const std::size_t cls = PoolAllocator::size_class(want);
    out.block_bytes = cls < PoolAllocator::num_classes ? PoolAllocator::class_bytes(cls) : want;
    out.block = static_cast<std::byte*>(allocator_.allocate(out.block_bytes));
    const auto address = reinterpret_cast<std::uintptr_t>(out.block);
    const std::size_t pad =
        (loader_field_alignment - address % loader_field_alignment) % loader_field_alignment;
    out.data = out.block + pad;
    out.capacity = out.block_bytes - pad;
    created_.fetch_add(1, std::memory_order_relaxed);
    return out;
  }

  /// Returns a buffer; its fences must pass before it is written again.
  void release(Slab<Backend>&& s) noexcept {
    try {
      std::lock_guard lock(mu_);
      free_.push_back(std::move(s));
      return;
    } catch (...) {  // no memory for the list: wait for the fences and free it instead
    }
    discard(s);
  }

  /// Buffers allocated so far (held, free or given back).
  std::size_t created() const noexcept { return created_.load(std::memory_order_relaxed); }

 private:
  static bool passed(const Slab<Backend>& s) {
    return std::all_of(s.fences.begin(), s.fences.end(),
                       [](const auto& f) { return Backend::passed(f); });
  }
  void discard(Slab<Backend>& s) noexcept {
    for (const auto& f : s.fences) Backend::wait_for(f);
    allocator_.deallocate(s.block, s.block_bytes);
    s.data = s.block = nullptr;
  }

  Allocator& allocator_;
  std::size_t max_free_;
  std::mutex mu_;
  std::vector<Slab<Backend>> free_;
  std::atomic<std::size_t> created_{0};
};

/// What one running loader shares with the batches it produced (which may
/// outlive it): the backend's resources and the buffer pool.
template <class Backend>
struct LoaderShared {
  LoaderShared(const typename Backend::options_type& options, std::size_t max_free)
      : resources(options), slabs(resources.buffer_allocator(), max_free) {}
  typename Backend::Resources resources;
  SlabPool<Backend> slabs;  // destroyed first: it waits for fences from the resources
};

/// One batch's hold on its buffer, shared by the batch and its field views.
/// When the last holder goes, the buffer returns to the pool fenced by an
/// event on every consumer the batch registered (or the backend's default).
template <class Backend>
class Lease {
 public:
  using Consumer = typename Backend::Consumer;

  Lease(std::shared_ptr<LoaderShared<Backend>> shared, Slab<Backend> slab)
      : shared_(std::move(shared)), slab_(std::move(slab)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    auto& resources = shared_->resources;
    try {
      if (consumers_.empty()) {
        if (auto fence = Backend::default_fence(resources))
          slab_.fences.push_back(std::move(*fence));
      } else {
        for (const Consumer& c : consumers_) slab_.fences.push_back(Backend::fence(resources, c));
      }
    } catch (...) {  // no memory to keep the fences: wait for them here instead
      for (const auto& f : slab_.fences) Backend::wait_for(f);
      for (const Consumer& c : consumers_) Backend::wait_for(Backend::fence(resources, c));
      if (consumers_.empty()) {
        if (auto fence = Backend::default_fence(resources)) Backend::wait_for(*fence);
      }
      slab_.fences.clear();
    }
    shared_->slabs.release(std::move(slab_));
  }

  std::byte* data() const noexcept { return slab_.data; }
  LoaderShared<Backend>& shared() const noexcept { return *shared_; }

  /// Registers a consumer whose work must pass before the buffer is reused.
  void add_consumer(Consumer c) {
    if constexpr (std::equality_comparable<Consumer>) {
      if (std::find(consumers_.begin(), consumers_.end(), c) != consumers_.end()) return;
    }
    consumers_.push_back(std::move(c));
  }

 private:
  std::shared_ptr<LoaderShared<Backend>> shared_;
  Slab<Backend> slab_;
  std::vector<Consumer> consumers_;
};

/// What the producer hands a batch type's constructor.
template <class Backend>
struct LoadedParts {
  std::vector<Tensor> fields{};             // views of the buffer
  std::shared_ptr<Lease<Backend>> lease{};  // the buffer
  typename Backend::Event copy_started{};   // empty unless the backend times copies
  typename Backend::Event copy_done{};      // the copy's completion
  std::int64_t index = 0;                   // position in the loader's input
};

/// The part of HostBatch and cuda::DeviceBatch common to both: the fields
/// as Tensors viewing the loader's buffer (in device memory for CUDA),
/// their metadata, the copy's event, DLPack export. Movable, not copyable.
/// Field Tensors copied out of a batch keep its buffer alive, but only the
/// batch registers consumers: do that before dropping it.
template <class Backend>
class LoadedBatch {
 public:
  using Event = typename Backend::Event;

  LoadedBatch() = default;
  explicit LoadedBatch(LoadedParts<Backend>&& parts) : parts_(std::move(parts)) {}
  LoadedBatch(LoadedBatch&&) noexcept = default;
  LoadedBatch& operator=(LoadedBatch&&) noexcept = default;
  LoadedBatch(const LoadedBatch&) = delete;
  LoadedBatch& operator=(const LoadedBatch&) = delete;

  /// Number of fields: 1 for a Tensor batch, N for a tuple of N Tensors.
  std::size_t size() const noexcept { return parts_.fields.size(); }
  /// Field `i` as a Tensor viewing the loader's buffer. Throws InvalidArgument if out of range.
  const Tensor& field(std::size_t i = 0) const {
    if (i >= parts_.fields.size()) {
      throw InvalidArgument("loaded batch: field " + std::to_string(i) + " of a batch with " +
                            std::to_string(parts_.fields.size()) + " fields");
    }
    return parts_.fields[i];
  }
  std::span<const Tensor> fields() const noexcept { return parts_.fields; }
  /// Address of field `i` (a device pointer for DeviceBatch).
  void* data(std::size_t i = 0) const { return const_cast<void*>(field(i).raw_data()); }
  /// Typed address of field `i`. Throws InvalidArgument if T is not its dtype.
  template <TensorElement T>
  T* data(std::size_t i = 0) const {
    return const_cast<T*>(field(i).template data<T>());
  }
  const Shape& shape(std::size_t i = 0) const { return field(i).shape(); }
  DType dtype(std::size_t i = 0) const { return field(i).dtype(); }
  std::size_t nbytes(std::size_t i = 0) const { return field(i).nbytes(); }
  /// Position of this batch in the loader's input (failed batches count too).
  std::int64_t index() const noexcept { return parts_.index; }
  /// The device of the loader's buffers (0 for host memory).
  int device() const noexcept {
    return parts_.lease ? parts_.lease->shared().resources.device() : 0;
  }

  /// True once the copy has completed (never blocks).
  bool ready() const { return Backend::passed(parts_.copy_done); }
  /// Blocks the calling thread until the copy has completed.
  void synchronize() const { Backend::wait_for(parts_.copy_done); }

  /// Field `i` as DLPack, after synchronize(): the consumer owns the result
  /// and must call its deleter, which releases its hold on the buffer.
  /// Needs <ingest/core/dlpack.hpp> (and so <dlpack/dlpack.h>).
  DLManagedTensor* to_dlpack(std::size_t i = 0) const {
    synchronize();
    return ingest::to_dlpack(field(i), device());
  }

 protected:
  void add_consumer(typename Backend::Consumer c) {
    if (parts_.lease) parts_.lease->add_consumer(std::move(c));
  }
  const Event& copy_started() const noexcept { return parts_.copy_started; }
  const Event& copy_done() const noexcept { return parts_.copy_done; }

 private:
  LoadedParts<Backend> parts_;
};

/// The producer's step, driven by a Prefetcher on a driver thread: pulls
/// a host batch, copies it into a pooled buffer through the engine, and
/// returns the loaded batch. Errors of the input surface at their position
/// and iteration goes on; an error of the backend (a failed copy) surfaces
/// at its batch and ends the iteration.
template <class Backend, iterator InputIt>
class LoadStep {
  using Element = typename InputIt::value_type;
  using Event = typename Backend::Event;
  static_assert(loader_fields<Element>::value,
                "loader: the input's elements must be ingest::Tensor, a std::tuple / std::pair "
                "of Tensors (what batch() makes of scalars and Tensors), or a type for which "
                "ingest::loader_fields is specialised (see core/batch_traits.hpp)");

 public:
  using value_type = typename Backend::batch_type;

  /// `depth_knob` (optional) overrides `depth` while running (an autotuned depth).
  LoadStep(InputIt input, std::shared_ptr<LoaderShared<Backend>> shared,
           typename Backend::Engine engine, std::int64_t depth,
           const std::atomic<std::int64_t>* depth_knob)
      : input_(std::move(input)),
        shared_(std::move(shared)),
        engine_(std::move(engine)),
        depth_(depth),
        depth_knob_(depth_knob) {}
  LoadStep(LoadStep&&) noexcept = default;
  LoadStep& operator=(LoadStep&&) = delete;
  ~LoadStep() {
    // The engine finishes its queued work before the sources it reads go.
    engine_.synchronize();
  }

  /// Checkpoint: the input's position (the batches in flight are loaded
  /// again after a restore).
  void save(StateWriter& w) const requires checkpointable_iterator<InputIt> {
    w.write_i64(position_);
    input_.save(w);
  }
  void restore(StateReader& r) requires checkpointable_iterator<InputIt> {
    position_ = r.read_i64();
    input_.restore(r);
  }

  std::optional<value_type> next() {
    if (failed_) return std::nullopt;
    const std::int64_t index = position_++;
    std::optional<Element> element = input_.next();  // an input error surfaces at its position
    if (!element) return std::nullopt;
    std::vector<Tensor> sources;
    loader_fields<Element>::split(std::move(*element), sources);
    for (std::size_t i = 0; i < sources.size(); ++i) {
      if (sources[i].memory_kind() == MemoryKind::device) {
        throw InvalidArgument("field " + std::to_string(i) + " is already in device memory",
                              {.stage = std::string(Backend::stage_name), .element = index});
      }
    }
    try {
      return load(std::move(sources), index);
    } catch (...) {
      failed_ = true;
      rethrow_with_context({.stage = std::string(Backend::stage_name), .element = index},
                           Raiser::internal);
    }
  }

 private:
  struct InFlight {
    Event done;
    std::vector<Tensor> sources;
  };

  std::int64_t depth() const noexcept {
    const std::int64_t d = depth_knob_ ? depth_knob_->load(std::memory_order_relaxed) : depth_;
    return std::max<std::int64_t>(d, 1);
  }

  value_type load(std::vector<Tensor>&& sources, std::int64_t index) {
    if (!bound_) {
      engine_.bind_thread();
      bound_ = true;
    }
    std::vector<std::size_t> offsets(sources.size());
    std::size_t total = 0;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      sources[i] = engine_.stage(std::move(sources[i]));
      total =
          (total + loader_field_alignment - 1) / loader_field_alignment * loader_field_alignment;
      offsets[i] = total;
      total += sources[i].nbytes();
    }
    // At most depth() copies unfinished: drop the sources of finished ones,
    // and wait for the oldest while there are too many.
    while (!in_flight_.empty() && (Backend::passed(in_flight_.front().done) ||
                                   static_cast<std::int64_t>(in_flight_.size()) >= depth())) {
      Backend::wait_for(in_flight_.front().done);
      in_flight_.pop_front();
    }
    Slab<Backend> slab = shared_->slabs.acquire(total);
    std::vector<Event> fences = std::move(slab.fences);
    slab.fences.clear();
    auto lease = std::make_shared<Lease<Backend>>(shared_, std::move(slab));
    for (const Event& f : fences) engine_.wait(f);
    LoadedParts<Backend> parts;
    parts.copy_started = engine_.mark();
    for (std::size_t i = 0; i < sources.size(); ++i) {
      if (sources[i].nbytes() != 0) engine_.copy(lease->data() + offsets[i], sources[i]);
    }
    parts.copy_done = engine_.record();
    parts.fields.reserve(sources.size());
    for (std::size_t i = 0; i < sources.size(); ++i) {
      parts.fields.push_back(Tensor::from_external(
          lease->data() + offsets[i], sources[i].dtype(), sources[i].shape(), [lease] {},
          Backend::memory_kind));
    }
    in_flight_.push_back({parts.copy_done, std::move(sources)});
    parts.lease = std::move(lease);
    parts.index = index;
    return value_type(std::move(parts));
  }

  InputIt input_;
  std::shared_ptr<LoaderShared<Backend>> shared_;
  std::deque<InFlight> in_flight_;  // destroyed after the engine has drained (see ~LoadStep)
  typename Backend::Engine engine_;
  std::int64_t depth_;
  const std::atomic<std::int64_t>* depth_knob_;
  std::int64_t position_ = 0;
  bool bound_ = false;
  bool failed_ = false;
};

}  // namespace detail
}  // namespace ingest
