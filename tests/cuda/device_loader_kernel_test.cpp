// Kernels reading loaded batches on the consumer's stream (the kernels are
// in test_kernels.cu, compiled by nvcc). A consumer stream kept busy reads
// every batch long after the host dropped it: the loader must not have
// overwritten the buffer by then.
#include <catch2/catch.hpp>

#include <cstdint>

#include <ingest/cuda/device_loader.hpp>
#include <ingest/ingest.hpp>

#include "cuda/test_kernels.hpp"
#include "support/cuda_testing.hpp"

using namespace ingest;
using namespace ingest::testing;

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
    cuda::check(launch_spin(500'000, stream), "kernel launch");  // the stream falls behind the host
    cuda::check(
        launch_check_batch(b.data<std::int64_t>(), rows, b.index(), counters, counters + 1, stream),
        "kernel launch");
    ++seen;
  }  // each batch is dropped right after its kernels were queued
  const auto result = copy_to_host<unsigned long long>(counters, 2, stream);
  cuda::check(cudaFree(counters), "cudaFree");
  CHECK(seen == batches);
  CHECK(result[0] == 0);
  CHECK(result[1] == static_cast<unsigned long long>(rows * batches * (batches - 1) / 2));
}
