// cuda::DeviceLoader: the Load stage. Wraps a dataset of host batches and
// yields DeviceBatches: each batch copied into a pooled device buffer with
// cudaMemcpyAsync on the loader's own non-blocking stream, with an event the
// consumer's stream waits on, so the training stream never blocks the host.
// The ring, order and buffer lifetime logic is runtime/loader_core.hpp's, shared
// with HostLoader; this file is the CUDA backend (stream, events, pools).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/dlpack.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/cuda/allocator.hpp"
#include "ingest/cuda/error.hpp"
#include "ingest/runtime/runtime_core.hpp"
#include "ingest/stages/loader_dataset.hpp"

namespace ingest::cuda {

/// Options of DeviceLoader.
struct DeviceLoaderOptions {
  /// Batches copied ahead of the consumer, and copies unfinished, at most;
  /// ingest::autotune lets the autotuner choose (starting at 2).
  std::int64_t depth = 2;
  /// Have the input build its batches in pinned memory (it allocates them
  /// from the context's allocator), and stage any field that is not pinned
  /// through pinned memory, so that copies are truly asynchronous.
  bool pinned = true;
  /// The CUDA device to load to.
  int device = 0;
  /// Record the start of each copy with a timing event (for OverlapTimer).
  bool timing = false;
};

/// A CUDA event handle from a loader's pool, returned to it when the last
/// handle goes. Empty means "already passed".
using Event = std::shared_ptr<CUevent_st>;

class DeviceBatch;

namespace detail {

/// Recycles the CUDA events of one loader (or timer). Thread-safe.
class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  EventPool(int device, bool timing)
      : device_(device),
        flags_(cudaEventBlockingSync | (timing ? cudaEventDefault : cudaEventDisableTiming)) {}
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
  }

  /// An unrecorded event (a new one if none is free).
  Event acquire() {
    cudaEvent_t e = nullptr;
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        e = free_.back();
        free_.pop_back();
      }
    }
    if (e == nullptr) {
      const DeviceGuard guard(device_);
      check(cudaEventCreateWithFlags(&e, flags_), "cudaEventCreateWithFlags");
    }
    try {
      return Event(e, [pool = shared_from_this()](cudaEvent_t ev) { pool->recycle(ev); });
    } catch (...) {
      (void)cudaEventDestroy(e);
      throw;
    }
  }

  /// An event recorded on `stream` now.
  Event record(cudaStream_t stream) {
    Event e = acquire();
    check(cudaEventRecord(e.get(), stream), "cudaEventRecord");
    return e;
  }

 private:
  void recycle(cudaEvent_t e) noexcept {
    try {
      std::lock_guard lock(mu_);
      free_.push_back(e);
      return;
    } catch (...) {
    }
    (void)cudaEventDestroy(e);
  }

  int device_;
  unsigned flags_;
  std::mutex mu_;
  std::vector<cudaEvent_t> free_;
};

/// The CUDA backend of the loaders (see runtime/loader_core.hpp for the contract).
struct CudaBackend {
  using batch_type = DeviceBatch;
  using options_type = DeviceLoaderOptions;
  using Event = cuda::Event;
  using Consumer = cudaStream_t;  // a stream the batch was used on
  static constexpr std::string_view stage_name = "device_loader";
  static constexpr MemoryKind memory_kind = MemoryKind::device;

  class Resources {
   public:
    /// Throws Unavailable without the device.
    explicit Resources(const options_type& options)
        : device_(options.device),
          events_((require_device(options.device),
                   std::make_shared<EventPool>(options.device, options.timing))) {}
    Allocator& buffer_allocator() const { return device_pool(device_); }
    int device() const noexcept { return device_; }
    EventPool& events() const noexcept { return *events_; }

   private:
    int device_;
    std::shared_ptr<EventPool> events_;
  };

  static bool passed(const Event& e) {
    if (!e) return true;
    const cudaError_t code = cudaEventQuery(e.get());
    if (code == cudaErrorNotReady) return false;
    check(code, "cudaEventQuery");
    return true;
  }
  static void wait_for(const Event& e) noexcept {
    if (e) (void)cudaEventSynchronize(e.get());
  }
  // The consumer's stream at release: the buffer is reused only after it passes this point.
  static Event fence(Resources& r, cudaStream_t stream) noexcept {
    try {
      return r.events().record(stream);
    } catch (...) {  // no event: wait for the stream here instead
      (void)cudaStreamSynchronize(stream);
      return {};
    }
  }
  // Without a registered stream, the legacy default stream stands for the consumer.
  static std::optional<Event> default_fence(Resources& r) noexcept {
    return fence(r, cudaStreamLegacy);
  }
  static void adapt_input_context(IteratorContext& ctx, const options_type& options) {
    if (options.pinned) ctx.allocator = &pinned_pool();
  }

  class Engine {
   public:
    Engine(Resources& resources, const options_type& options, Runtime&)
        : resources_(&resources),
          device_(options.device),
          pinned_(options.pinned),
          timing_(options.timing) {
      const DeviceGuard guard(device_);
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags");
    }
    Engine(Engine&& o) noexcept
        : resources_(o.resources_),
          stream_(std::exchange(o.stream_, nullptr)),
          device_(o.device_),
          pinned_(o.pinned_),
          timing_(o.timing_) {}
    Engine& operator=(Engine&&) = delete;
    ~Engine() {
      if (stream_ == nullptr) return;
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }

    void bind_thread() { check(cudaSetDevice(device_), "cudaSetDevice"); }
    Tensor stage(Tensor t) const {
      if (!pinned_ || t.memory_kind() == MemoryKind::pinned || t.nbytes() == 0) return t;
      return t.clone(pinned_pool());
    }
    void wait(const Event& e) {
      if (e) check(cudaStreamWaitEvent(stream_, e.get(), 0), "cudaStreamWaitEvent");
    }
    Event mark() { return timing_ ? record() : Event(); }
    void copy(void* dst, const Tensor& src) {
      check(cudaMemcpyAsync(dst, src.raw_data(), src.nbytes(), cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync");
    }
    Event record() { return resources_->events().record(stream_); }
    void synchronize() noexcept {
      if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    }

   private:
    Resources* resources_;
    cudaStream_t stream_ = nullptr;
    int device_;
    bool pinned_, timing_;
  };
};

}  // namespace detail

/// A batch in device memory: each field a Tensor of MemoryKind::device
/// viewing a pooled device buffer. Before using it on a stream, call
/// wait(stream): the stream then waits for the copy (no host blocking) and
/// the batch remembers the stream. When the batch and every Tensor copied
/// out of it are dropped, the buffer returns to the pool fenced by an event
/// on each remembered stream (on the legacy default stream if none), so it
/// is not overwritten before that work has run. Streams passed to wait()
/// must outlive the batch.
class DeviceBatch : public ingest::detail::LoadedBatch<detail::CudaBackend> {
 public:
  using LoadedBatch::LoadedBatch;

  /// Makes `stream` wait for the copy (cudaStreamWaitEvent) and remembers
  /// it as a user of the buffer. Throws CudaError if the wait cannot be enqueued.
  void wait(cudaStream_t stream) {
    if (const Event& done = copy_done()) {
      check(cudaStreamWaitEvent(stream, done.get(), 0), "cudaStreamWaitEvent");
    }
    add_consumer(stream);
  }

  /// Field `i` as DLPack for a consumer working on `stream`: wait(stream),
  /// then the export (no host blocking). to_dlpack(i) without a stream
  /// blocks the host until the copy is complete.
  DLManagedTensor* to_dlpack(std::size_t i, cudaStream_t stream) {
    wait(stream);
    return ingest::to_dlpack(field(i), device());
  }
  using LoadedBatch::to_dlpack;

  /// The event recorded after the copy (null for an empty batch).
  cudaEvent_t copy_event() const noexcept { return copy_done().get(); }
  /// Handles of the copy's start (null unless the loader times copies) and
  /// end events, for timing (see OverlapTimer); holding them keeps the
  /// events from being reused.
  const Event& copy_started_event() const noexcept { return copy_started(); }
  /// The handle of the copy's end event (empty for an empty batch).
  const Event& copy_done_event() const noexcept { return copy_done(); }
};

/// Wraps a dataset of host batches (a Tensor, or a tuple / pair of Tensors
/// per element) and yields DeviceBatches in order, copied on the loader's
/// stream up to `depth` batches ahead of the consumer. With options.pinned
/// the input builds its batches in pinned memory. iterator() throws
/// ingest::Unavailable where there is no CUDA device. An error of the input
/// surfaces from next() at its batch and iteration continues; a CUDA error
/// (a CudaError naming the call) surfaces at its batch and ends the
/// iteration. Destroying the iterator stops the producer and waits for the
/// loader's stream; batches already handed out stay valid.
/// DeviceLoader(input, options) throws InvalidArgument for a depth below 1
/// (other than ingest::autotune).
template <class Input>
class DeviceLoader
    : public ingest::detail::LoaderDataset<DeviceLoader<Input>, detail::CudaBackend, Input> {
 public:
  using ingest::detail::LoaderDataset<DeviceLoader<Input>, detail::CudaBackend,
                                      Input>::LoaderDataset;
};
/// Deduces the input type: `cuda::DeviceLoader(dataset, options)`.
template <dataset Input>
DeviceLoader(Input, DeviceLoaderOptions = {}) -> DeviceLoader<Input>;

}  // namespace ingest::cuda
