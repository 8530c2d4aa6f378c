// CUDA errors as ingest::Errors, and the device queries. These run on any
// machine: without a GPU they check that "no device" is reported as such.
#include <catch2/catch.hpp>

#include <string>

#include <ingest/cuda/error.hpp>

#include "support/cuda_testing.hpp"

using namespace ingest;

TEST_CASE("CUDA errors name the call and the CUDA error", "[cuda][errors]") {
  CHECK_NOTHROW(cuda::check(cudaSuccess, "cudaMalloc"));
  try {
    cuda::check(cudaErrorMemoryAllocation, "cudaMalloc");
    FAIL("no exception");
  } catch (const cuda::CudaError& e) {
    CHECK(e.code() == cudaErrorMemoryAllocation);
    CHECK(e.call() == "cudaMalloc");
    CHECK(std::string(e.kind()) == "CudaError");
    CHECK(std::string(e.what()) ==
          "CudaError: cudaMalloc failed: cudaErrorMemoryAllocation (out of memory)");
  }
  // A CudaError is an ingest::Error (it travels through pipelines as one).
  CHECK_THROWS_AS(cuda::check(cudaErrorInvalidValue, "cudaMemcpyAsync"), Error);
}

TEST_CASE("no-device CUDA errors become ingest::Unavailable", "[cuda][errors]") {
  for (cudaError_t code :
       {cudaErrorInsufficientDriver, cudaErrorNoDevice, cudaErrorStubLibrary,
        cudaErrorInitializationError, cudaErrorDevicesUnavailable, cudaErrorInvalidDevice}) {
    INFO(cudaGetErrorName(code));
    CHECK(cuda::is_no_device_error(code));
    try {
      cuda::check(code, "cudaSetDevice");
      FAIL("no exception");
    } catch (const Unavailable& e) {
      CHECK(e.message() == std::string("no CUDA device: cudaSetDevice failed: ") +
                               cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")");
    }
  }
  CHECK_FALSE(cuda::is_no_device_error(cudaErrorMemoryAllocation));
  CHECK_FALSE(cuda::is_no_device_error(cudaErrorIllegalAddress));
}

TEST_CASE("device queries agree on whether there is a device", "[cuda][errors]") {
  const int n = cuda::device_count();
  CHECK(n >= 0);
  if (n == 0) {
    // This machine has no GPU (or no driver): the reason is named.
    try {
      cuda::require_device(0);
      FAIL("require_device did not throw without a device");
    } catch (const Unavailable& e) {
      CHECK(e.message().rfind("no CUDA device: ", 0) == 0);
      CHECK(e.message().find(" failed: cudaError") != std::string::npos);
    }
  } else {
    CHECK_NOTHROW(cuda::require_device(0));
    CHECK_THROWS_AS(cuda::require_device(n), Unavailable);  // one past the last device
    int current = -1;
    cuda::check(cudaGetDevice(&current), "cudaGetDevice");
    { const cuda::DeviceGuard guard(n - 1); }
    int after = -1;
    cuda::check(cudaGetDevice(&after), "cudaGetDevice");
    CHECK(after == current);  // the guard restored the device
  }
}
