// Kernels reading loaded batches on the consumer's stream (compiled by
// nvcc). A consumer stream kept busy reads every batch long after the host
// dropped it: the loader must not have overwritten the buffer by then.
#include <catch2/catch.hpp>

#include <cstdint>

#include <ingest/cuda/device_loader.hpp>
#include <ingest/ingest.hpp>

#include "support/cuda_testing.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {

// Runs for `ns` nanoseconds of GPU time.
__global__ void spin(std::uint64_t ns) {
  std::uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

// Adds to *errors the number of values differing from `expected`, and to *sum all values.
__global__ void check_batch(const std::int64_t* values, std::int64_t n, std::int64_t expected,
                            unsigned long long* errors, unsigned long long* sum) {
  for (std::int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (values[i] != expected) atomicAdd(errors, 1ull);
    atomicAdd(sum, static_cast<unsigned long long>(values[i]));
  }
}

}  // namespace

TEST_CASE("kernels on a lagging consumer stream read every batch intact",
          "[cuda][device_loader][kernel]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  TestStream stream;
  constexpr std::int64_t rows = 1 << 16, batches = 64;
  unsigned long long* counters = nullptr;  // errors, sum
  cuda::check(cudaMalloc(&counters, 2 * sizeof(unsigned long long)), "cudaMalloc");
  cuda::check(cudaMemset(counters, 0, 2 * sizeof(unsigned long long)), "cudaMemset");
  auto ds = range(batches * rows).map([](std::int64_t x) { return x / rows; }).batch(rows);
  std::int64_t seen = 0;
  for (auto& b : cuda::DeviceLoader(ds.prefetch(2), {.depth = 2})) {
    b.wait(stream);
    spin<<<1, 1, 0, stream>>>(500'000);  // the stream falls behind the host
    check_batch<<<32, 256, 0, stream>>>(b.data<std::int64_t>(), rows, b.index(), counters,
                                        counters + 1);
    cuda::check(cudaGetLastError(), "kernel launch");
    ++seen;
  }  // each batch is dropped right after its kernels were queued
  const auto result = copy_to_host<unsigned long long>(counters, 2, stream);
  cuda::check(cudaFree(counters), "cudaFree");
  CHECK(seen == batches);
  CHECK(result[0] == 0);
  CHECK(result[1] == static_cast<unsigned long long>(rows * batches * (batches - 1) / 2));
}
