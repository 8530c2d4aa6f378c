// expect: ingest::torch::to_tensor(DeviceBatch): this libtorch is built without CUDA
// A device batch handed to a libtorch built without CUDA (Debian's libtorch-dev).
#include <ingest/ingest.hpp>
#include <ingest/torch/cuda.hpp>

at::Tensor images(ingest::cuda::DeviceBatch& batch) { return ingest::torch::to_tensor(batch, 0); }
