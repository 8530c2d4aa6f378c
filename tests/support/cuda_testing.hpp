// Helpers of the CUDA tests: skip cleanly where there is no device (ctest
// reports a test that prints "SKIPPED:" as skipped, see tests/CMakeLists.txt),
// and copy device memory back for checking.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <ingest/cuda/error.hpp>

namespace ingest::testing {

/// Without a usable CUDA device: prints "SKIPPED: no CUDA device: <why>"
/// and returns true.
inline bool skip_without_cuda_device() {
  try {
    cuda::require_device(0);
    return false;
  } catch (const Unavailable& e) {
    std::cout << "SKIPPED: " << e.message() << std::endl;
    return true;
  }
}

/// Returns from the test case, reported as skipped, without a CUDA device.
#define INGEST_REQUIRE_CUDA_DEVICE()                           \
  do {                                                         \
    if (::ingest::testing::skip_without_cuda_device()) return; \
  } while (false)

/// `n` values of type T at device address `p`, copied back on `stream`.
template <class T>
std::vector<T> copy_to_host(const void* p, std::size_t n, cudaStream_t stream = nullptr) {
  std::vector<T> out(n);
  if (n == 0) return out;
  cuda::check(cudaMemcpyAsync(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync");
  cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return out;
}

/// A stream created for a test, destroyed after it.
class TestStream {
 public:
  TestStream() {
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  ~TestStream() { (void)cudaStreamDestroy(stream_); }
  operator cudaStream_t() const noexcept { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace ingest::testing
