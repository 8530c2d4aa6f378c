// DLPack interop: Tensors out as DLManagedTensor (to_dlpack) and in again
// (from_dlpack), without copying, so batches can go to other frameworks.
// Ownership is shared through the deleter: an exported tensor keeps its
// storage alive until the consumer calls the deleter. Needs <dlpack/dlpack.h>
// (Debian: libdlpack-dev); not included by <ingest/ingest.hpp>.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ingest/core/allocator.hpp"
#include "ingest/core/dtype.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/shape.hpp"
#include "ingest/core/tensor.hpp"

namespace ingest {

namespace detail {
// DLPack 0.6 has no boolean type code; 0.8 added kDLBool = 6, which
// PyTorch, JAX and NumPy use for bool. We write 6 either way.
inline constexpr std::uint8_t dl_bool_code = 6;
}  // namespace detail

/// The DLPack data type of a DType (bool is type code 6, DLPack >= 0.8's kDLBool).
constexpr DLDataType to_dlpack_dtype(DType t) noexcept {
  const auto bits = static_cast<std::uint8_t>(dtype_size(t) * 8);
  std::uint8_t code = kDLUInt;
  switch (t) {
    case DType::boolean: code = detail::dl_bool_code; break;
    case DType::uint8:
    case DType::uint16:
    case DType::uint32:
    case DType::uint64: code = kDLUInt; break;
    case DType::int8:
    case DType::int16:
    case DType::int32:
    case DType::int64: code = kDLInt; break;
    case DType::float16:
    case DType::float32:
    case DType::float64: code = kDLFloat; break;
    case DType::bfloat16: code = kDLBfloat; break;
  }
  return DLDataType{code, bits, 1};
}

/// The DType of a DLPack data type, or nothing if ingest has no such type
/// (vector lanes, complex numbers, opaque handles, unusual widths).
constexpr std::optional<DType> from_dlpack_dtype(DLDataType t) noexcept {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case kDLInt:
      switch (t.bits) {
        case 8: return DType::int8;
        case 16: return DType::int16;
        case 32: return DType::int32;
        case 64: return DType::int64;
        default: return std::nullopt;
      }
    case kDLUInt:
      switch (t.bits) {
        case 8: return DType::uint8;
        case 16: return DType::uint16;
        case 32: return DType::uint32;
        case 64: return DType::uint64;
        default: return std::nullopt;
      }
    case kDLFloat:
      switch (t.bits) {
        case 16: return DType::float16;
        case 32: return DType::float32;
        case 64: return DType::float64;
        default: return std::nullopt;
      }
    case kDLBfloat: return t.bits == 16 ? std::optional<DType>(DType::bfloat16) : std::nullopt;
    case detail::dl_bool_code:
      return t.bits == 8 ? std::optional<DType>(DType::boolean) : std::nullopt;
    default: return std::nullopt;
  }
}

/// The DLPack device type of a memory kind: kDLCPU, kDLCUDAHost or kDLCUDA.
constexpr DLDeviceType to_dlpack_device(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::host: return kDLCPU;
    case MemoryKind::pinned: return kDLCUDAHost;
    case MemoryKind::device: return kDLCUDA;
  }
  return kDLCPU;
}

namespace detail {
// The manager of an exported tensor: a Tensor sharing the storage, and the
// shape and strides the DLTensor points into.
struct DLPackExport {
  Tensor tensor;
  std::int64_t shape[Shape::max_rank];
  std::int64_t strides[Shape::max_rank];
  DLManagedTensor managed;
};
}  // namespace detail

/// Exports `t` without copying: the result shares t's storage, which stays
/// alive until the consumer calls result->deleter(result). Shape and
/// (compact, row-major) strides are filled in; `device_id` is recorded for
/// device and pinned memory (0 for host memory). An undefined tensor
/// exports as shape [0] with a null data pointer.
inline DLManagedTensor* to_dlpack(const Tensor& t, int device_id = 0) {
  auto* e = new detail::DLPackExport{t, {}, {}, {}};
  const std::size_t rank = t.rank();
  std::int64_t stride = 1;
  for (std::size_t i = rank; i-- > 0;) {
    e->shape[i] = t.shape()[i];
    e->strides[i] = stride;
    stride *= t.shape()[i] > 0 ? t.shape()[i] : 1;
  }
  DLTensor& dl = e->managed.dl_tensor;
  dl.data = e->tensor.raw_data();
  dl.device = DLDevice{to_dlpack_device(t.memory_kind()),
                       t.memory_kind() == MemoryKind::host ? 0 : device_id};
  dl.ndim = static_cast<int>(rank);
  dl.dtype = to_dlpack_dtype(t.dtype());
  dl.shape = e->shape;
  dl.strides = e->strides;
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<detail::DLPackExport*>(self->manager_ctx);
  };
  return &e->managed;
}

/// Imports a DLPack tensor without copying. On success the Tensor owns
/// `managed`: its deleter runs when the last Tensor sharing the storage is
/// destroyed. Throws InvalidArgument (and leaves `managed` to the caller)
/// for a null tensor, a device other than CPU / CUDA host / CUDA, a data
/// type ingest does not have, or strides that are not compact row-major.
inline Tensor from_dlpack(DLManagedTensor* managed) {
  if (managed == nullptr) throw InvalidArgument("from_dlpack: null DLManagedTensor");
  const DLTensor& dl = managed->dl_tensor;
  MemoryKind kind = MemoryKind::host;
  switch (dl.device.device_type) {
    case kDLCPU: kind = MemoryKind::host; break;
    case kDLCUDAHost: kind = MemoryKind::pinned; break;
    case kDLCUDA: kind = MemoryKind::device; break;
    default:
      throw InvalidArgument("from_dlpack: unsupported device type " +
                            std::to_string(static_cast<int>(dl.device.device_type)));
  }
  const std::optional<DType> dtype = from_dlpack_dtype(dl.dtype);
  if (!dtype) {
    throw InvalidArgument(
        "from_dlpack: unsupported data type (code " + std::to_string(dl.dtype.code) + ", bits " +
        std::to_string(dl.dtype.bits) + ", lanes " + std::to_string(dl.dtype.lanes) + ")");
  }
  if (dl.ndim < 0 || static_cast<std::size_t>(dl.ndim) > Shape::max_rank) {
    throw InvalidArgument("from_dlpack: rank " + std::to_string(dl.ndim) + " exceeds " +
                          std::to_string(Shape::max_rank));
  }
  const auto rank = static_cast<std::size_t>(dl.ndim);
  const Shape shape(std::span<const std::int64_t>(dl.shape, rank));
  // Bounded before the stride products below can overflow.
  detail::checked_byte_size(shape, dtype_size(*dtype), "from_dlpack");
  if (dl.strides != nullptr) {
    std::int64_t expected = 1;
    for (std::size_t i = rank; i-- > 0;) {
      if (shape[i] > 1 && dl.strides[i] != expected) {
        throw InvalidArgument(
            "from_dlpack: only compact row-major tensors can be imported; "
            "dimension " +
            std::to_string(i) + " has stride " + std::to_string(dl.strides[i]));
      }
      expected *= shape[i] > 0 ? shape[i] : 1;
    }
  }
  void* data = static_cast<std::byte*>(dl.data) + dl.byte_offset;
  return Tensor::from_external(
      data, *dtype, shape,
      [managed] {
        if (managed->deleter) managed->deleter(managed);
      },
      kind);
}

}  // namespace ingest
