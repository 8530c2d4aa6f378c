// Allocators for CUDA memory behind ingest's Allocator hook: pinned host
// memory (cudaHostAlloc), so batches are built straight in DMA-able memory,
// and device memory (cudaMalloc). Each has a process-wide reusing pool
// (PoolAllocator), so steady-state loading calls neither. The pools are
// never destroyed (freeing CUDA memory during static destruction is unsafe);
// release_cached_memory() hands their free blocks back (torch.cuda.empty_cache).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ingest/core/allocator.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/cuda/error.hpp"

namespace ingest::cuda {

/// Page-locked host memory, usable for asynchronous copies by every device.
/// Throws Unavailable without a CUDA device, CudaError when out of memory.
class PinnedAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable), "cudaHostAlloc");
    return p;
  }
  void deallocate(void* p, std::size_t) noexcept override { (void)cudaFreeHost(p); }
  MemoryKind memory_kind() const noexcept override { return MemoryKind::pinned; }
};

/// Memory of one CUDA device. Throws Unavailable without the device,
/// CudaError when out of memory.
class DeviceAllocator final : public Allocator {
 public:
  /// Allocates on CUDA device `device` (its ordinal, not checked before the
  /// first allocate()).
  explicit DeviceAllocator(int device = 0) : device_(device) {}
  void* allocate(std::size_t bytes) override {
    const DeviceGuard guard(device_);
    void* p = nullptr;
    check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
    return p;
  }
  void deallocate(void* p, std::size_t) noexcept override {
    int previous = 0;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    (void)cudaFree(p);
    if (switched) (void)cudaSetDevice(previous);
  }
  MemoryKind memory_kind() const noexcept override { return MemoryKind::device; }
  /// The CUDA device ordinal the memory is on.
  int device() const noexcept { return device_; }

 private:
  int device_;
};

/// Pinned bytes the process-wide pinned pool keeps for reuse at most.
inline constexpr std::size_t pinned_pool_cached_bytes = std::size_t{512} << 20;

/// The process-wide pool of pinned host memory (the device loader builds
/// its input's batches here).
inline PoolAllocator& pinned_pool() {
  static auto* upstream = new PinnedAllocator();  // immortal on purpose
  static auto* pool = new PoolAllocator(*upstream, {.max_cached_bytes = pinned_pool_cached_bytes});
  return *pool;
}

namespace detail {

/// The process-wide device pools, by device.
struct DevicePools {
  std::mutex mu;
  std::map<int, std::pair<std::unique_ptr<DeviceAllocator>, std::unique_ptr<PoolAllocator>>>
      by_device;
};

inline DevicePools& device_pools() {
  static auto* pools = new DevicePools();  // immortal on purpose
  return *pools;
}

}  // namespace detail

/// The process-wide pool of memory of CUDA device `device`. Blocks are
/// reused at once when freed, with no stream ordering: synchronise before
/// freeing memory that queued work still uses (the device loader does).
/// InvalidArgument for a negative `device`.
inline PoolAllocator& device_pool(int device = 0) {
  if (device < 0) throw InvalidArgument("device_pool: device " + std::to_string(device) + " < 0");
  detail::DevicePools& pools = detail::device_pools();
  std::lock_guard lock(pools.mu);
  auto& entry = pools.by_device[device];
  if (!entry.second) {
    entry.first = std::make_unique<DeviceAllocator>(device);
    entry.second = std::make_unique<PoolAllocator>(*entry.first);
  }
  return *entry.second;
}

/// Hands the free blocks the pinned pool and every device pool keep for
/// reuse back to CUDA (cudaFreeHost, cudaFree), as torch.cuda.empty_cache()
/// does: for a process that is done loading, or before a leak check
/// (compute-sanitizer --leak-check full), where the pools' cached blocks
/// would otherwise show as never freed. Blocks in use stay theirs; later
/// allocations refill the pools. Call it while CUDA is usable (not from a
/// static destructor).
inline void release_cached_memory() noexcept {
  pinned_pool().trim();
  detail::DevicePools& pools = detail::device_pools();
  std::lock_guard lock(pools.mu);
  for (auto& [device, entry] : pools.by_device) {
    if (entry.second) entry.second->trim();
  }
}

}  // namespace ingest::cuda
