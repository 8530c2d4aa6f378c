// The demo's training step on a CUDA device (gpu_step.cu, built with nvcc):
// a kernel that reads the whole batch it is fed (a sum of its floats) and
// then runs for a fixed time, timed with CUDA events, so that the share of
// the run the GPU spent idle, waiting for input, is measured on the GPU.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace demo::gpu {

/// The name of device 0, or empty where there is no usable CUDA device.
std::string device_name();

/// The GPU's steps, launched on a stream of their own; each step's start and
/// end are recorded with events.
class Trainer {
 public:
  /// Steps of `step` each (in SM clock cycles at the device's rated clock).
  Trainer(std::chrono::microseconds step, std::int64_t max_steps);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  cudaStream_t stream() const noexcept { return stream_; }
  /// Marks time 0 (waits for the device to reach it): `host_ns` is the host
  /// clock's reading then, on the clock of the trace (ingest's now_ns()).
  void start(std::int64_t host_ns);
  /// Enqueues one step over `images` (`count` floats on the device).
  void step(const float* images, std::int64_t count);
  /// Waits for every step; returns the steps' spans as (start, duration) in
  /// host ns.
  std::vector<std::pair<std::int64_t, std::int64_t>> finish();

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t origin_ = nullptr;
  std::vector<cudaEvent_t> begin_, end_;
  float* sink_ = nullptr;
  long long cycles_ = 0;
  std::int64_t host_origin_ns_ = 0;
  std::size_t steps_ = 0;
};

}  // namespace demo::gpu
