// normalize: uint8 [H, W, C] images (C = 1, 3 or 4) to floating point,
// (x / 255 - mean[c]) / std[c] as torchvision's ToTensor + Normalize, fused
// with the change to [C, H, W] (or not) and the conversion to float32,
// float16 or bfloat16: one pass into a new tensor from the pooled allocator
// (normalize), or into one the caller gives, such as a slice of a batch
// (normalize_into). Thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "ingest/core/dtype.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {

enum class Layout : std::uint8_t {
  chw,  ///< [C, H, W]: channel planes (torchvision, the input of most CNNs)
  hwc,  ///< [H, W, C]: the image's own order (tf.image)
};

struct NormalizeOptions {
  Layout layout = Layout::chw;
  /// DType::float32, float16 or bfloat16.
  DType dtype = DType::float32;
};

namespace detail {

// The stored value of each output dtype, from float.
struct StoreFloat32 {
  using type = float;
  static float store(float v) noexcept { return v; }
};
struct StoreFloat16 {
  using type = std::uint16_t;
  static std::uint16_t store(float v) noexcept { return to_float16(v).bits; }
};
struct StoreBfloat16 {
  using type = std::uint16_t;
  static std::uint16_t store(float v) noexcept { return to_bfloat16(v).bits; }
};

// [H, W, C] out: value i of the image is channel i % C. The scale and bias
// repeat with period C; over a block of 8 pixels they are fixed tables, so the
// inner loop has a constant trip count (8 C values) and vectorises.
template <int C, class Store>
void normalize_hwc(const std::uint8_t* __restrict in, std::int64_t pixels, const float* scale,
                   const float* bias, typename Store::type* __restrict out) noexcept {
  constexpr int block = 8 * C;
  float s[block], b[block];
  for (int j = 0; j < block; ++j) {
    s[j] = scale[j % C];
    b[j] = bias[j % C];
  }
  const std::int64_t values = pixels * C, end = values / block * block;
  for (std::int64_t i = 0; i < end; i += block) {
    for (int j = 0; j < block; ++j) {
      out[i + j] = Store::store(static_cast<float>(in[i + j]) * s[j] + b[j]);
    }
  }
  for (std::int64_t i = end; i < values; ++i) {
    out[i] = Store::store(static_cast<float>(in[i]) * s[i - end] + b[i - end]);
  }
}

// [C, H, W] out: blocks of pixels go through normalize_hwc into a small
// buffer, then out to the C planes. GCC cannot vectorise the arithmetic
// straight from 3-byte pixels to planes (no stride-3 loads in SSE2), but it
// does the block's, and the buffer stays in L1: one pass over memory.
template <int C, class Store>
void normalize_chw(const std::uint8_t* __restrict in, std::int64_t pixels, const float* scale,
                   const float* bias, typename Store::type* __restrict out) noexcept {
  constexpr std::int64_t block = 64;
  typename Store::type buffer[block * C];
  for (std::int64_t p0 = 0; p0 < pixels; p0 += block) {
    const std::int64_t n = std::min(block, pixels - p0);
    normalize_hwc<C, Store>(in + p0 * C, n, scale, bias, buffer);
    for (int c = 0; c < C; ++c) {
      typename Store::type* __restrict plane = out + c * pixels + p0;
      for (std::int64_t j = 0; j < n; ++j) plane[j] = buffer[j * C + c];
    }
  }
}

template <class Store>
void normalize_any(const ImageView& in, Layout layout, const float* scale, const float* bias,
                   void* out) {
  auto* o = static_cast<typename Store::type*>(out);
  const std::int64_t n = in.height * in.width;
  const bool chw = layout == Layout::chw;
  switch (in.channels) {
    case 1: return normalize_hwc<1, Store>(in.data, n, scale, bias, o);  // the same bytes
    case 3:
      return chw ? normalize_chw<3, Store>(in.data, n, scale, bias, o)
                 : normalize_hwc<3, Store>(in.data, n, scale, bias, o);
    default:
      return chw ? normalize_chw<4, Store>(in.data, n, scale, bias, o)
                 : normalize_hwc<4, Store>(in.data, n, scale, bias, o);
  }
}

inline bool normalize_dtype(DType dtype) noexcept {
  return dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16;
}

inline Shape normalize_shape(const ImageView& in, Layout layout) {
  return layout == Layout::chw ? Shape{in.channels, in.height, in.width}
                               : Shape{in.height, in.width, in.channels};
}

/// normalize_into's checks and the arithmetic, once for both entry points;
/// `op` names the caller in errors.
inline void normalize_into(const Tensor& image, std::span<const float> mean,
                           std::span<const float> std, Tensor& out, Layout layout,
                           std::string_view op) {
  const ImageView in = transform_view(image, op);
  const auto channels = static_cast<std::size_t>(in.channels);
  if (mean.size() != channels || std.size() != channels) {
    throw InvalidArgument(std::string(op) + ": mean and std need one value per channel (" +
                          std::to_string(channels) + "), got " + std::to_string(mean.size()) +
                          " and " + std::to_string(std.size()));
  }
  float scale[4], bias[4];
  for (std::size_t c = 0; c < channels; ++c) {
    if (!std::isfinite(mean[c]) || !std::isfinite(std[c]) || std[c] == 0.0f) {
      throw InvalidArgument(std::string(op) +
                            ": mean and std must be finite and std not 0, got mean " +
                            std::to_string(mean[c]) + ", std " + std::to_string(std[c]) +
                            " for channel " + std::to_string(c));
    }
    scale[c] = static_cast<float>(1.0 / (255.0 * static_cast<double>(std[c])));
    bias[c] = static_cast<float>(-static_cast<double>(mean[c]) / static_cast<double>(std[c]));
  }
  if (!out.defined() || out.memory_kind() == MemoryKind::device || !normalize_dtype(out.dtype())) {
    throw InvalidArgument(std::string(op) +
                          ": out must be a host float32, float16 or bfloat16 tensor, got " +
                          std::string(dtype_name(out.dtype())) + out.shape().to_string() +
                          (out.defined() ? "" : " (undefined)"));
  }
  const Shape shape = normalize_shape(in, layout);
  if (!(out.shape() == shape)) {
    throw InvalidArgument(std::string(op) + ": out has shape " + out.shape().to_string() +
                          ", but the image " + image.shape().to_string() + " needs " +
                          shape.to_string() + (layout == Layout::chw ? " (chw)" : " (hwc)"));
  }
  // The loops read and write through __restrict pointers: no shared bytes.
  const auto in_begin = reinterpret_cast<std::uintptr_t>(in.data);
  const auto out_begin = reinterpret_cast<std::uintptr_t>(out.raw_data());
  if (image.nbytes() > 0 && out.nbytes() > 0 && in_begin < out_begin + out.nbytes() &&
      out_begin < in_begin + image.nbytes()) {
    throw InvalidArgument(std::string(op) + ": out shares memory with the image");
  }
  void* dst = out.raw_data();
  if (out.dtype() == DType::float32) {
    normalize_any<StoreFloat32>(in, layout, scale, bias, dst);
  } else if (out.dtype() == DType::float16) {
    normalize_any<StoreFloat16>(in, layout, scale, bias, dst);
  } else {
    normalize_any<StoreBfloat16>(in, layout, scale, bias, dst);
  }
}

}  // namespace detail

/// `image` (uint8 [H, W, C]) as `.dtype` values (x / 255 - mean[c]) / std[c],
/// torchvision's ToTensor (which scales by 1/255) then Normalize(mean, std):
/// the mean and std are in [0, 1] units, e.g. ImageNet's {0.485, 0.456,
/// 0.406} and {0.229, 0.224, 0.225}. Computed as x * scale[c] + bias[c] in
/// float32, scale = 1 / (255 std) and bias = -mean / std rounded from double
/// (within 4e-7, relative to max(1, |result|), of the exact formula on the
/// ImageNet constants, every uint8 value), then rounded to nearest even
/// for float16 and bfloat16. `.layout` chw gives [C, H, W], hwc [H, W, C].
/// Throws InvalidArgument for a tensor that is not such an image, mean or std
/// of another length than C, a std of 0 or any value not finite, or another
/// dtype.
inline Tensor normalize(const Tensor& image, std::span<const float> mean,
                        std::span<const float> std, const NormalizeOptions& options = {}) {
  const detail::ImageView in = detail::transform_view(image, "normalize");
  if (!detail::normalize_dtype(options.dtype)) {
    throw InvalidArgument("normalize: dtype must be float32, float16 or bfloat16, got " +
                          std::string(dtype_name(options.dtype)));
  }
  Tensor out(options.dtype, detail::normalize_shape(in, options.layout));
  detail::normalize_into(image, mean, std, out, options.layout, "normalize");
  return out;
}

/// normalize with braced lists: normalize(image, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f,
/// 0.225f}).
inline Tensor normalize(const Tensor& image, std::initializer_list<float> mean,
                        std::initializer_list<float> std, const NormalizeOptions& options = {}) {
  return normalize(image, std::span<const float>(mean.begin(), mean.size()),
                   std::span<const float>(std.begin(), std.size()), options);
}

/// normalize, written into `out` instead of a new tensor: out's dtype
/// (float32, float16 or bfloat16) is the output's, and its shape must be
/// the image's in `layout`, [C, H, W] or [H, W, C]. The values are
/// normalize's, bit for bit. Meant for filling a batch in place:
/// normalize_into(crop, mean, std, batch.slice(i)) writes the i-th image of a
/// float32 [N, 3, H, W] batch (a slice is a view of the batch's storage).
/// Throws InvalidArgument as normalize, and for an `out` of another dtype or
/// shape (naming both shapes), on the device, or sharing bytes with the image;
/// on a throw, `out` is untouched.
inline void normalize_into(const Tensor& image, std::span<const float> mean,
                           std::span<const float> std, Tensor& out, Layout layout = Layout::chw) {
  detail::normalize_into(image, mean, std, out, layout, "normalize_into");
}

/// normalize_into for a temporary view, such as batch.slice(i).
inline void normalize_into(const Tensor& image, std::span<const float> mean,
                           std::span<const float> std, Tensor&& out, Layout layout = Layout::chw) {
  detail::normalize_into(image, mean, std, out, layout, "normalize_into");
}

/// normalize_into with braced lists.
inline void normalize_into(const Tensor& image, std::initializer_list<float> mean,
                           std::initializer_list<float> std, Tensor& out,
                           Layout layout = Layout::chw) {
  detail::normalize_into(image, std::span<const float>(mean.begin(), mean.size()),
                         std::span<const float>(std.begin(), std.size()), out, layout,
                         "normalize_into");
}

/// normalize_into with braced lists, for a temporary view.
inline void normalize_into(const Tensor& image, std::initializer_list<float> mean,
                           std::initializer_list<float> std, Tensor&& out,
                           Layout layout = Layout::chw) {
  detail::normalize_into(image, std::span<const float>(mean.begin(), mean.size()),
                         std::span<const float>(std.begin(), std.size()), out, layout,
                         "normalize_into");
}

}  // namespace ingest::image
