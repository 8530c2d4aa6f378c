// ingest::torch with the CUDA part: pinned host batches become CPU torch
// tensors without a copy; device batches from cuda::DeviceLoader become CUDA
// torch tensors ordered on a torch stream (where libtorch has CUDA). Without
// a device, or with a CPU-only libtorch (Debian's), those tests report skipped.
// libtorch's headers define glog's CHECK: they come first, and Catch2's
// replaces it (once: in a unity group, Catch2 may be in already).
#include <ingest/cuda/allocator.hpp>
#include <ingest/cuda/device_loader.hpp>
#include <ingest/ingest.hpp>
#include <ingest/torch/cuda.hpp>
#ifndef CATCH_VERSION_MAJOR
#undef CHECK
#endif
#include <catch2/catch.hpp>

#include <cstdint>
#include <iostream>
#include <vector>

#include "support/cuda_testing.hpp"

TEST_CASE("to_tensor: a pinned tensor is a CPU torch tensor on the same bytes", "[torch][cuda]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  ingest::Tensor t(ingest::DType::float32, ingest::Shape{4, 4}, ingest::cuda::pinned_pool());
  for (std::int64_t i = 0; i < 16; ++i) t.data<float>()[i] = static_cast<float>(i);
  REQUIRE(t.memory_kind() == ingest::MemoryKind::pinned);
  const void* bytes = t.raw_data();
  const at::Tensor x = ingest::torch::to_tensor(std::move(t));
  CHECK(x.device().is_cpu());
  CHECK(x.data_ptr() == bytes);
  CHECK(x.sum().item<float>() == 120.0f);
}

TEST_CASE("to_tensor: device batches become CUDA torch tensors on a torch stream",
          "[torch][cuda]") {
#if INGEST_TORCH_HAS_CUDA
  INGEST_REQUIRE_CUDA_DEVICE();
  auto batches =
      ingest::range(60)
          .map([](std::int64_t i) { return std::make_pair(i, static_cast<float>(i) / 2); })
          .batch(20);
  std::int64_t seen = 0;
  std::vector<at::Tensor> kept;
  for (auto& batch : ingest::cuda::DeviceLoader(batches, {.depth = 2})) {
    const void* ids_bytes = batch.data(0);
    at::Tensor ids = ingest::torch::to_tensor(batch, 0);
    const std::vector<at::Tensor> both = ingest::torch::to_tensors(batch);
    CHECK(ids.device().is_cuda());
    CHECK(ids.device().index() == batch.device());
    CHECK(ids.data_ptr() == ids_bytes);
    CHECK(both[1].scalar_type() == at::kFloat);
    // Read on the current stream, which waits for the loader's copy.
    const at::Tensor host = ids.cpu();
    for (std::int64_t k = 0; k < 20; ++k) CHECK(host[k].item<std::int64_t>() == seen + k);
    kept.push_back(ids);  // outlives its batch: the buffer stays the tensor's
    seen += 20;
  }
  CHECK(seen == 60);
  // After the loader is gone, the kept tensors still hold their batches.
  CHECK(kept[0].sum().item<std::int64_t>() == 19 * 20 / 2);
  CHECK(kept[2].sum().item<std::int64_t>() == (40 + 59) * 20 / 2);
#else
  std::cout << "SKIPPED: this libtorch is built without CUDA (Debian's libtorch-dev is "
               "CPU-only): device batches do not convert (a compile-time error says so)"
            << std::endl;
#endif
}
