// HostLoader: the loader with the host backend. It copies each batch into a
// pooled host buffer on a background thread, with the same ring, order and
// lifetime rules as cuda::DeviceLoader (runtime/loader_core.hpp), so it
// serves CPU-only training and tests that logic without a GPU. Its "copy
// stream" is a thread that runs copies in order; its events are
// std::shared_future<void>. Not included by <ingest/ingest.hpp>. Needs no
// DLPack; a batch's to_dlpack() needs <ingest/core/dlpack.hpp> as well
// (and so <dlpack/dlpack.h>, libdlpack-dev).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "ingest/core/allocator.hpp"
#include "ingest/core/context.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/runtime/runtime_core.hpp"
#include "ingest/stages/loader_dataset.hpp"

namespace ingest {

/// Options of HostLoader.
struct HostLoaderOptions {
  /// Batches copied ahead of the consumer, and copies unfinished, at most;
  /// ingest::autotune lets the autotuner choose (starting at 2).
  std::int64_t depth = 2;
};

class HostBatch;

namespace detail {

/// Runs tasks in order on a driver thread, as a CUDA stream runs its work:
/// enqueue() returns at once; synchronize() waits for everything enqueued.
/// The thread starts with the first task; destruction drains and joins it.
class HostStream {
 public:
  explicit HostStream(Runtime& runtime) : runtime_(&runtime), shared_(std::make_shared<Shared>()) {}
  HostStream(HostStream&&) noexcept = default;
  HostStream& operator=(HostStream&&) = delete;
  ~HostStream() {
    if (!shared_) return;
    std::unique_lock lock(shared_->mu);
    shared_->stop = true;
    shared_->work.notify_all();
    if (started_) shared_->idle.wait(lock, [this] { return shared_->exited; });
  }

  void enqueue(std::function<void()> task) {
    if (!started_) {
      started_ = true;
      runtime_->spawn([s = shared_] { s->run(); });
    }
    {
      std::lock_guard lock(shared_->mu);
      shared_->tasks.push_back(std::move(task));
    }
    shared_->work.notify_one();
  }

  void synchronize() {
    if (!shared_ || !started_) return;
    std::unique_lock lock(shared_->mu);
    shared_->idle.wait(lock, [this] { return shared_->tasks.empty() && !shared_->busy; });
  }

 private:
  struct Shared {
    void run() {
      std::unique_lock lock(mu);
      for (;;) {
        work.wait(lock, [this] { return !tasks.empty() || stop; });
        if (tasks.empty()) break;  // stopped, and drained
        std::function<void()> task = std::move(tasks.front());
        tasks.pop_front();
        busy = true;
        lock.unlock();
        task();  // tasks do not throw
        task = nullptr;
        lock.lock();
        busy = false;
        if (tasks.empty()) idle.notify_all();
      }
      exited = true;
      idle.notify_all();
    }

    std::mutex mu;
    std::condition_variable work, idle;
    std::deque<std::function<void()>> tasks;
    bool busy = false, stop = false, exited = false;
  };

  Runtime* runtime_;
  std::shared_ptr<Shared> shared_;
  bool started_ = false;
};

/// The host backend of the loaders (see runtime/loader_core.hpp for the contract).
struct HostBackend {
  using batch_type = HostBatch;
  using options_type = HostLoaderOptions;
  using Event = std::shared_future<void>;     // an invalid future has passed
  using Consumer = std::shared_future<void>;  // ready when the consumer is done with a batch
  static constexpr std::string_view stage_name = "host_loader";
  static constexpr MemoryKind memory_kind = MemoryKind::host;

  struct Resources {
    explicit Resources(const options_type&) noexcept {}
    Allocator& buffer_allocator() const noexcept { return default_allocator(); }
    int device() const noexcept { return 0; }
  };

  static bool passed(const Event& e) {
    return !e.valid() || e.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  static void wait_for(const Event& e) noexcept {
    if (e.valid()) e.wait();
  }
  static Event fence(Resources&, const Consumer& c) noexcept { return c; }
  // A host consumer is done with a batch when it drops it.
  static std::optional<Event> default_fence(Resources&) noexcept { return std::nullopt; }
  static void adapt_input_context(IteratorContext&, const options_type&) noexcept {}

  class Engine {
   public:
    Engine(Resources&, const options_type&, Runtime& runtime) : stream_(runtime) {}
    void bind_thread() noexcept {}
    Tensor stage(Tensor t) const noexcept { return t; }
    void wait(const Event& e) {
      if (!passed(e)) stream_.enqueue([e] { e.wait(); });
    }
    Event mark() const noexcept { return {}; }
    void copy(void* dst, const Tensor& src) {
      stream_.enqueue([dst, p = src.raw_data(), n = src.nbytes()] { std::memcpy(dst, p, n); });
    }
    Event record() {
      auto done = std::make_shared<std::promise<void>>();
      Event e = done->get_future().share();
      stream_.enqueue([done] { done->set_value(); });
      return e;
    }
    void synchronize() { stream_.synchronize(); }

   private:
    HostStream stream_;
  };
};

}  // namespace detail

/// A batch loaded by HostLoader: its fields are host Tensors viewing a
/// pooled buffer. Call wait() before reading them (the copy runs on a
/// background thread). The buffer is reused only after the batch and every
/// Tensor copied out of it are dropped, and after every future passed to
/// release_after() is ready.
class HostBatch : public detail::LoadedBatch<detail::HostBackend> {
 public:
  using LoadedBatch::LoadedBatch;

  /// Blocks until the batch's copy has completed.
  void wait() const { synchronize(); }
  /// Keeps the buffer from being reused until `done` is ready (for a
  /// consumer that hands the memory to work finishing later, on other
  /// threads). The loader's copy thread waits for `done` before writing the
  /// buffer again, as a CUDA stream waits for an event: `done` must become
  /// ready without the consuming thread calling next() first, or both wait.
  void release_after(std::shared_future<void> done) { add_consumer(std::move(done)); }
};

/// Wraps a dataset of host batches (a Tensor, or a tuple / pair of Tensors
/// per element) and yields HostBatch copies of them in order, copied on a
/// background thread up to `depth` batches ahead. An error of the input
/// surfaces from next() at its batch; iteration continues after it.
/// Destroying the iterator stops the producer and waits for queued copies.
/// HostLoader(input, options) throws InvalidArgument for a depth below 1
/// (other than ingest::autotune).
template <class Input>
class HostLoader : public detail::LoaderDataset<HostLoader<Input>, detail::HostBackend, Input> {
 public:
  using detail::LoaderDataset<HostLoader<Input>, detail::HostBackend, Input>::LoaderDataset;
};
/// Deduces the input type: `HostLoader(dataset, options)`.
template <dataset Input>
HostLoader(Input, HostLoaderOptions = {}) -> HostLoader<Input>;

}  // namespace ingest
