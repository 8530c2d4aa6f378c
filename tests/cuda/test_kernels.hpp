// Kernels of the CUDA tests, compiled by nvcc (test_kernels.cu) and queued
// from test files that the host compiler builds with the tests' shared
// precompiled header: nvcc then parses only these few lines, not Catch2 and
// the library (the library's headers under nvcc are checked by
// ingest_headers_nvcc and the nvcc-built example and benchmark). Each
// function queues its kernel on `stream` and returns what the launch
// reported (cudaGetLastError).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ingest::testing {

/// A kernel that runs for `ns` nanoseconds of GPU time.
cudaError_t launch_spin(std::uint64_t ns, cudaStream_t stream);

/// A kernel that adds to *errors the number of the `n` values differing
/// from `expected`, and to *sum all values.
cudaError_t launch_check_batch(const std::int64_t* values, std::int64_t n, std::int64_t expected,
                               unsigned long long* errors, unsigned long long* sum,
                               cudaStream_t stream);

}  // namespace ingest::testing
