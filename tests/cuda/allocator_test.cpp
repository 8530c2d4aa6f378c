// Pinned and device memory behind the Allocator hook.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <ingest/cuda/allocator.hpp>

#include "support/cuda_testing.hpp"
#include "support/testing.hpp"

using namespace ingest;

TEST_CASE("without a device, CUDA allocators report Unavailable", "[cuda][allocator]") {
  if (cuda::device_count() > 0) {
    std::cout << "SKIPPED: a CUDA device is present; the no-device path cannot be tested"
              << std::endl;
    return;
  }
  cuda::PinnedAllocator pinned;
  CHECK(pinned.memory_kind() == MemoryKind::pinned);
  CHECK(pinned.host_accessible());
  CHECK_THROWS_WITH(pinned.allocate(1024),
                    Catch::Contains("no CUDA device: cudaHostAlloc failed: cudaError"));
  cuda::DeviceAllocator device(0);
  CHECK(device.memory_kind() == MemoryKind::device);
  CHECK_FALSE(device.host_accessible());
  CHECK_THROWS_AS(device.allocate(1024), Unavailable);
  // Through the pools and Tensors too.
  CHECK_THROWS_AS(Tensor(DType::float32, Shape{16}, cuda::pinned_pool()), Unavailable);
  CHECK_THROWS_AS(Tensor(DType::float32, Shape{16}, cuda::device_pool(0)), Unavailable);
  CHECK_THROWS_AS(cuda::device_pool(-1), InvalidArgument);
}

TEST_CASE("pinned memory is page-locked and pooled", "[cuda][allocator]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  Tensor t(DType::int64, Shape{1000}, cuda::pinned_pool());
  CHECK(t.memory_kind() == MemoryKind::pinned);
  cudaPointerAttributes attributes{};
  cuda::check(cudaPointerGetAttributes(&attributes, t.raw_data()), "cudaPointerGetAttributes");
  CHECK(attributes.type == cudaMemoryTypeHost);
  for (std::int64_t i = 0; i < 1000; ++i) t.data<std::int64_t>()[i] = i;
  CHECK(t.values<std::int64_t>()[999] == 999);
  // A freed block is reused, not freed and allocated again.
  const auto before = cuda::pinned_pool().stats().upstream_allocations;
  void* p = t.raw_data();
  t = Tensor();
  Tensor again(DType::int64, Shape{1000}, cuda::pinned_pool());
  CHECK(again.raw_data() == p);
  CHECK(cuda::pinned_pool().stats().upstream_allocations == before);
}

TEST_CASE("device memory holds device tensors", "[cuda][allocator]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  Tensor t(DType::float32, Shape{256}, cuda::device_pool(0));
  CHECK(t.memory_kind() == MemoryKind::device);
  CHECK(t.to_string() == "float32[256](device)");
  CHECK_THROWS_AS(t.item<float>(), InvalidArgument);  // not host memory
  std::vector<float> host(256, 1.5f);
  cuda::check(cudaMemcpy(t.raw_data(), host.data(), 1024, cudaMemcpyHostToDevice), "cudaMemcpy");
  CHECK(testing::copy_to_host<float>(t.raw_data(), 256) == host);
}

TEST_CASE("release_cached_memory hands the pools' free blocks back to CUDA", "[cuda][allocator]") {
  cuda::release_cached_memory();  // nothing cached, or no device: nothing to do, no error
  INGEST_REQUIRE_CUDA_DEVICE();
  Tensor in_use(DType::float32, Shape{4096}, cuda::device_pool(0));
  {
    Tensor pinned(DType::uint8, Shape{1 << 16}, cuda::pinned_pool());
    Tensor device(DType::uint8, Shape{1 << 16}, cuda::device_pool(0));
  }
  CHECK(cuda::pinned_pool().stats().bytes_cached >= (std::size_t{1} << 16));
  CHECK(cuda::device_pool(0).stats().bytes_cached >= (std::size_t{1} << 16));
  const auto held = cuda::device_pool(0).stats().bytes_from_upstream;
  cuda::release_cached_memory();
  CHECK(cuda::pinned_pool().stats().bytes_cached == 0);
  CHECK(cuda::device_pool(0).stats().bytes_cached == 0);
  // The block in use stays valid and the pool's own.
  CHECK(cuda::device_pool(0).stats().bytes_from_upstream < held);
  CHECK(cuda::device_pool(0).stats().bytes_from_upstream >= 4096 * sizeof(float));
  std::vector<float> host(4096, 2.5f);
  cuda::check(cudaMemcpy(in_use.raw_data(), host.data(), host.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy");
  CHECK(testing::copy_to_host<float>(in_use.raw_data(), host.size()) == host);
}
