// local_device(): the CUDA device this process of a distributed job uses,
// local_rank modulo the devices it sees, for DeviceLoaderOptions::device and
// cudaSetDevice. Where the launcher gives each process its own GPU
// (CUDA_VISIBLE_DEVICES, srun --gpus-per-task=1), that is device 0.
#pragma once

#include <cuda_runtime.h>

#include "ingest/core/errors.hpp"
#include "ingest/cuda/error.hpp"
#include "ingest/distributed/world.hpp"

namespace ingest::cuda {

/// The device for `w`: w.local_rank % the number of visible devices, so the
/// processes on a node spread over its GPUs. Throws ingest::Unavailable,
/// naming the reason, where there is no CUDA device (no driver, no GPU), a
/// CudaError for other CUDA failures, and what distributed::world() throws.
inline int local_device(const distributed::World& w = distributed::world()) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count < 1) throw Unavailable("no CUDA device: cudaGetDeviceCount found none");
  return w.local_rank % count;
}

}  // namespace ingest::cuda
