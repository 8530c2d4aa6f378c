// libtorch interop (namespace ingest::torch, CMake target ingest::torch):
// ingest Tensors and batches become torch tensors without a copy. The torch
// tensor's storage is the ingest buffer, and it holds a share of the buffer's
// owner until libtorch frees the storage, so the batch may be dropped first.
// Never included by <ingest/ingest.hpp>; device batches are in torch/cuda.hpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "ingest/core/dtype.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/shape.hpp"
#include "ingest/core/tensor.hpp"

#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

namespace ingest::torch {

/// 1 where libtorch has unsigned 16, 32 and 64-bit types (libtorch 2.3 on).
#if defined(TORCH_VERSION_MAJOR) && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3))
#define INGEST_TORCH_HAS_WIDE_UNSIGNED 1
#else
#define INGEST_TORCH_HAS_WIDE_UNSIGNED 0
#endif

/// The libtorch scalar type of `dtype`. Throws InvalidArgument for a type
/// this libtorch lacks (uint16, uint32 and uint64 before libtorch 2.3).
inline at::ScalarType scalar_type(DType dtype) {
  switch (dtype) {
    case DType::boolean: return at::ScalarType::Bool;
    case DType::uint8: return at::ScalarType::Byte;
    case DType::int8: return at::ScalarType::Char;
    case DType::int16: return at::ScalarType::Short;
    case DType::int32: return at::ScalarType::Int;
    case DType::int64: return at::ScalarType::Long;
    case DType::float16: return at::ScalarType::Half;
    case DType::bfloat16: return at::ScalarType::BFloat16;
    case DType::float32: return at::ScalarType::Float;
    case DType::float64: return at::ScalarType::Double;
#if INGEST_TORCH_HAS_WIDE_UNSIGNED
    case DType::uint16: return at::ScalarType::UInt16;
    case DType::uint32: return at::ScalarType::UInt32;
    case DType::uint64: return at::ScalarType::UInt64;
#else
    case DType::uint16:
    case DType::uint32:
    case DType::uint64: break;
#endif
  }
  throw InvalidArgument("ingest::torch: this libtorch has no " + std::string(dtype_name(dtype)) +
                        " type (libtorch 2.3 added uint16, uint32 and uint64); convert the "
                        "tensor to a signed type of twice the width in the pipeline");
}

namespace detail {

// Wraps `t`'s bytes in a torch tensor on `device` whose storage context owns
// `t` (one heap-held share of its buffer, released when libtorch frees the storage).
inline at::Tensor wrap(Tensor t, const at::ScalarType type, const at::Device device) {
  std::int64_t sizes[Shape::max_rank];
  for (std::size_t i = 0; i < t.rank(); ++i) sizes[i] = t.shape()[i];
  const at::IntArrayRef size_ref(sizes, t.rank());
  void* data = t.raw_data();
  auto* owner = new Tensor(std::move(t));
  // From here the maker owns `owner`: it deletes it if make_tensor throws.
  return at::for_blob(data, size_ref)
      .context(owner, [](void* p) { delete static_cast<Tensor*>(p); })
      .options(at::TensorOptions().dtype(type).device(device))
      .target_device(device)
      .make_tensor();
}

template <class>
using AsTorch = at::Tensor;

}  // namespace detail

/// `t` as a CPU torch tensor of the same dtype and shape, sharing t's bytes
/// (no copy: data_ptr() is t.raw_data()). The torch tensor keeps the bytes
/// alive until it (and every view of it) is gone; writes through either are
/// seen by both. Host and pinned memory only: a device tensor (a field of a
/// cuda::DeviceBatch) goes through torch/cuda.hpp's to_tensor(batch, i),
/// which orders it on a stream; here it throws InvalidArgument, as does a
/// dtype libtorch lacks (see scalar_type). An undefined Tensor gives an
/// undefined torch tensor.
inline at::Tensor to_tensor(Tensor t) {
  if (!t.defined()) return {};
  if (t.memory_kind() == MemoryKind::device) {
    throw InvalidArgument(
        "ingest::torch::to_tensor: the tensor is in device memory; convert the "
        "cuda::DeviceBatch with to_tensor(batch, field) from <ingest/torch/cuda.hpp>");
  }
  const at::ScalarType type = scalar_type(t.dtype());
  return detail::wrap(std::move(t), type, at::Device(at::kCPU));
}

/// A batch of several fields (what batch() makes of a tuple): each Tensor
/// as to_tensor(Tensor) makes it, in a tuple of torch tensors.
template <class... Ts>
requires(std::is_same_v<Ts, Tensor>&&...) std::tuple<detail::AsTorch<Ts>...> to_tensor(
    std::tuple<Ts...> batch) {
  return std::apply([](auto&&... f) { return std::make_tuple(to_tensor(std::move(f))...); },
                    std::move(batch));
}

/// A batch of two fields (what batch() makes of a pair): both as torch tensors.
inline std::pair<at::Tensor, at::Tensor> to_tensor(std::pair<Tensor, Tensor> batch) {
  return {to_tensor(std::move(batch.first)), to_tensor(std::move(batch.second))};
}

}  // namespace ingest::torch
