// CUDA errors as ingest::Errors. Every CUDA runtime call of ingest goes
// through check(), which names the call and the CUDA error: "no CUDA
// device here" (no driver, no GPU, a stub library, a device index out of
// range) becomes ingest::Unavailable, anything else cuda::CudaError. Also
// the device queries the tests and examples use to skip without a GPU.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"

/// The CUDA backend (target ingest::cuda, never included by ingest.hpp): the
/// device loader, pinned and device allocators, CUDA errors.
namespace ingest::cuda {

/// A CUDA runtime call failed (other than for want of a device).
class CudaError : public Error {
 public:
  /// The error of CUDA call `call` (e.g. "cudaMemcpyAsync") returning `code`;
  /// the message is describe(code, call).
  CudaError(cudaError_t code, std::string call, ErrorContext context = {})
      : Error(describe(code, call), std::move(context)), code_(code), call_(std::move(call)) {
    compose();
  }
  const char* kind() const noexcept override { return "CudaError"; }
  /// The CUDA error code.
  cudaError_t code() const noexcept { return code_; }
  /// The failed call, e.g. "cudaMemcpyAsync".
  const std::string& call() const noexcept { return call_; }

  /// "cudaMemcpyAsync failed: cudaErrorInvalidValue (invalid argument)".
  static std::string describe(cudaError_t code, std::string_view call) {
    return std::string(call) + " failed: " + cudaGetErrorName(code) + " (" +
           cudaGetErrorString(code) + ")";
  }

 private:
  cudaError_t code_;
  std::string call_;
};

/// True for the errors that mean there is no usable CUDA device here.
constexpr bool is_no_device_error(cudaError_t code) noexcept {
  switch (code) {
    case cudaErrorInsufficientDriver:  // no driver, or one older than the runtime
    case cudaErrorNoDevice:            // a driver, no GPU
    case cudaErrorStubLibrary:         // the driver is a stub (a container without GPU access)
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:  // every device busy (exclusive mode) or unavailable
    case cudaErrorInvalidDevice:       // a device index beyond the devices present
      return true;
    default: return false;
  }
}

namespace detail {
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_cuda_error(cudaError_t code,
                                                                    const char* call) {
  (void)cudaGetLastError();  // reset the thread's last error (sticky errors stay sticky)
  if (is_no_device_error(code)) {
    throw Unavailable("no CUDA device: " + CudaError::describe(code, call));
  }
  throw CudaError(code, call);
}
}  // namespace detail

/// Throws ingest::Unavailable (no device) or CudaError unless `code` is
/// cudaSuccess; `call` names the CUDA call that returned it.
inline void check(cudaError_t code, const char* call) {
  if (code != cudaSuccess) [[unlikely]]
    detail::throw_cuda_error(code, call);
}

/// Number of CUDA devices; 0 where there is no driver or no GPU. Throws
/// CudaError for other failures.
inline int device_count() {
  int n = 0;
  const cudaError_t code = cudaGetDeviceCount(&n);
  if (code == cudaSuccess) return n;
  if (is_no_device_error(code)) {
    (void)cudaGetLastError();
    return 0;
  }
  detail::throw_cuda_error(code, "cudaGetDeviceCount");
}

/// Makes `device` current for the calling thread until destruction, then
/// restores the previous device. Throws Unavailable if there is no such device.
class DeviceGuard {
 public:
  /// Makes `device` current; Unavailable if there is no such device, CudaError
  /// if the call fails otherwise.
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { (void)cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

/// Throws ingest::Unavailable, naming the reason, unless CUDA device
/// `device` is present and usable from this process.
inline void require_device(int device = 0) {
  const DeviceGuard guard(device);
  check(cudaFree(nullptr), "cudaFree(nullptr)");  // initialises the device's context
}

}  // namespace ingest::cuda
