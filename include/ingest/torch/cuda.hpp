// Device batches as CUDA torch tensors: a field of a cuda::DeviceBatch
// becomes a torch tensor on the batch's device, viewing the loader's buffer
// (no copy), ordered after the loader's copy on a torch stream (the stream
// waits on the copy's event; the host never blocks). Needs ingest::cuda and a
// libtorch built with CUDA; Debian's libtorch-dev is CPU-only, and there a
// call is a compile-time error that says so (the header itself compiles).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/cuda/device_loader.hpp"
#include "ingest/torch/tensor.hpp"

// libtorch's CUDA headers need the configuration header a CUDA build installs.
#if __has_include(<c10/cuda/impl/cuda_cmake_macros.h>)
#include <c10/cuda/CUDAStream.h>
/// 1 where libtorch has CUDA (device batches convert), 0 where it is CPU-only.
#define INGEST_TORCH_HAS_CUDA 1
#else
#define INGEST_TORCH_HAS_CUDA 0
#endif

namespace ingest::torch {

#if INGEST_TORCH_HAS_CUDA

/// Field `i` of `batch` as a CUDA torch tensor on the batch's device, with
/// no copy: `stream` waits on the loader's copy (batch.wait(stream)), and
/// the buffer returns to the loader only after the tensor is gone and the
/// work queued on `stream` by then has run. Use the tensor on `stream` (or
/// record it on another with Tensor::record_stream, as for any CUDA
/// tensor). Throws InvalidArgument for a field out of range or a dtype
/// libtorch lacks, CudaError if the wait cannot be enqueued.
inline at::Tensor to_tensor(cuda::DeviceBatch& batch, std::size_t i, c10::cuda::CUDAStream stream) {
  const at::ScalarType type = scalar_type(batch.dtype(i));
  batch.wait(stream.stream());
  Tensor field = batch.field(i);
  if (!field.defined()) return {};
  const at::Device device(at::kCUDA, static_cast<at::DeviceIndex>(batch.device()));
  return detail::wrap(std::move(field), type, device);
}

/// Field `i` on libtorch's current stream of the batch's device
/// (c10::cuda::getCurrentCUDAStream): what torch's own operations run on.
inline at::Tensor to_tensor(cuda::DeviceBatch& batch, std::size_t i = 0) {
  return to_tensor(batch, i,
                   c10::cuda::getCurrentCUDAStream(static_cast<at::DeviceIndex>(batch.device())));
}

/// Every field of `batch`, in order, on libtorch's current stream.
inline std::vector<at::Tensor> to_tensors(cuda::DeviceBatch& batch) {
  std::vector<at::Tensor> out;
  out.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) out.push_back(to_tensor(batch, i));
  return out;
}

#else

namespace detail {
template <class>
inline constexpr bool libtorch_has_cuda = false;
}  // namespace detail

/// Without a CUDA build of libtorch: a compile-time error that says so.
template <class Batch>
requires std::is_same_v<std::remove_cvref_t<Batch>, cuda::DeviceBatch> at::Tensor to_tensor(
    Batch&&, std::size_t = 0) {
  static_assert(detail::libtorch_has_cuda<Batch>,
                "ingest::torch::to_tensor(DeviceBatch): this libtorch is built without CUDA "
                "(Debian's libtorch-dev is CPU-only); device batches need a CUDA build of "
                "libtorch. With this one, load host batches and call to_tensor on them.");
  return {};
}

/// Without a CUDA build of libtorch: a compile-time error that says so.
template <class Batch>
requires std::is_same_v<std::remove_cvref_t<Batch>, cuda::DeviceBatch> std::vector<at::Tensor>
to_tensors(Batch&&) {
  static_assert(detail::libtorch_has_cuda<Batch>,
                "ingest::torch::to_tensors(DeviceBatch): this libtorch is built without CUDA "
                "(Debian's libtorch-dev is CPU-only); device batches need a CUDA build of "
                "libtorch.");
  return {};
}

#endif

}  // namespace ingest::torch
