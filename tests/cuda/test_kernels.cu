// The CUDA tests' kernels (declared in test_kernels.hpp).
#include "cuda/test_kernels.hpp"

namespace ingest::testing {
namespace {

__global__ void spin(std::uint64_t ns) {
  std::uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

__global__ void check_batch(const std::int64_t* values, std::int64_t n, std::int64_t expected,
                            unsigned long long* errors, unsigned long long* sum) {
  for (std::int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (values[i] != expected) atomicAdd(errors, 1ull);
    atomicAdd(sum, static_cast<unsigned long long>(values[i]));
  }
}

}  // namespace

cudaError_t launch_spin(std::uint64_t ns, cudaStream_t stream) {
  spin<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

cudaError_t launch_check_batch(const std::int64_t* values, std::int64_t n, std::int64_t expected,
                               unsigned long long* errors, unsigned long long* sum,
                               cudaStream_t stream) {
  check_batch<<<32, 256, 0, stream>>>(values, n, expected, errors, sum);
  return cudaGetLastError();
}

}  // namespace ingest::testing
