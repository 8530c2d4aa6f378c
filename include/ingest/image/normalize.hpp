// normalize: uint8 [H, W, C] images (C = 1, 3 or 4) to floating point,
// (x / 255 - mean[c]) / std[c] as torchvision's ToTensor + Normalize, fused
// with the change to [C, H, W] (or not) and the conversion to float32,
// float16 or bfloat16: one pass into a new tensor from the pooled allocator
// (normalize), into one the caller gives, such as a slice of a batch
// (normalize_into), or, through normalize_in_batch, straight into its slot of
// the batch that batch() builds (no per-image float tensor, no copy into the
// batch). Thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ingest/core/batch_traits.hpp"
#include "ingest/core/dtype.hpp"
#include "ingest/core/element_size.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/types.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define INGEST_NORMALIZE_AVX2 1
#else
#define INGEST_NORMALIZE_AVX2 0
#endif

namespace ingest::image {

/// The dimension order of a normalized image.
enum class Layout : std::uint8_t {
  chw,  ///< [C, H, W]: channel planes (torchvision, the input of most CNNs)
  hwc,  ///< [H, W, C]: the image's own order (tf.image)
};

/// Options of normalize, normalize_into and normalize_in_batch.
struct NormalizeOptions {
  /// The result's dimension order: [C, H, W] (default) or [H, W, C].
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
//
// `plane`: the distance between the output planes (the image's pixels; a
// tail of an image written in place passes the whole image's).
template <int C, class Store>
void normalize_chw(const std::uint8_t* __restrict in, std::int64_t pixels, const float* scale,
                   const float* bias, typename Store::type* __restrict out,
                   std::int64_t plane) noexcept {
  constexpr std::int64_t block = 64;
  typename Store::type buffer[block * C];
  for (std::int64_t p0 = 0; p0 < pixels; p0 += block) {
    const std::int64_t n = std::min(block, pixels - p0);
    normalize_hwc<C, Store>(in + p0 * C, n, scale, bias, buffer);
    for (int c = 0; c < C; ++c) {
      typename Store::type* __restrict to = out + c * plane + p0;
      for (std::int64_t j = 0; j < n; ++j) to[j] = buffer[j * C + c];
    }
  }
}

#if INGEST_NORMALIZE_AVX2
inline bool normalize_avx2_available() noexcept {
  static const bool available = __builtin_cpu_supports("avx2");
  return available;
}

// normalize_chw<3, StoreFloat32> with AVX2, chosen at run time: 16 pixels
// (48 bytes) at a time are split into their R, G and B bytes with three
// byte shuffles each, widened to 8 floats at a time, and computed as
// x * scale + bias with a multiply then an add (no FMA: the same two
// roundings as the portable loop, so the same bits). The pixels past the
// last 16 go through the portable loop.
__attribute__((target("avx2"))) inline void normalize_chw3_f32_avx2(
    const std::uint8_t* __restrict in, std::int64_t pixels, const float* scale, const float* bias,
    float* __restrict out) noexcept {
  const __m128i shuffle[3][3] = {
      {_mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
       _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1),
       _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13)},
      {_mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
       _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1),
       _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14)},
      {_mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
       _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1),
       _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15)}};
  __m256 s[3], b[3];
  for (int c = 0; c < 3; ++c) {
    s[c] = _mm256_set1_ps(scale[c]);
    b[c] = _mm256_set1_ps(bias[c]);
  }
  const std::int64_t end = pixels / 16 * 16;
  // An output larger than a core's L2 cache (a 224 x 224 image is 588 KiB)
  // is written with streaming stores where its planes are 32-byte aligned:
  // its lines would leave the cache before anything reads them, and a plain
  // store first reads each line it writes from memory.
  const bool stream = pixels * 3 * static_cast<std::int64_t>(sizeof(float)) >= (512 << 10) &&
                      reinterpret_cast<std::uintptr_t>(out) % 32 == 0 && pixels % 8 == 0;
  for (std::int64_t p = 0; p < end; p += 16) {
    const std::uint8_t* src = in + p * 3;
    const __m128i v0 = _mm_loadu_si128(static_cast<const __m128i*>(static_cast<const void*>(src)));
    const __m128i v1 =
        _mm_loadu_si128(static_cast<const __m128i*>(static_cast<const void*>(src + 16)));
    const __m128i v2 =
        _mm_loadu_si128(static_cast<const __m128i*>(static_cast<const void*>(src + 32)));
    for (int c = 0; c < 3; ++c) {
      const __m128i bytes = _mm_or_si128(
          _mm_or_si128(_mm_shuffle_epi8(v0, shuffle[c][0]), _mm_shuffle_epi8(v1, shuffle[c][1])),
          _mm_shuffle_epi8(v2, shuffle[c][2]));
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
      float* to = out + c * pixels + p;
      const __m256 x0 = _mm256_add_ps(_mm256_mul_ps(lo, s[c]), b[c]);
      const __m256 x1 = _mm256_add_ps(_mm256_mul_ps(hi, s[c]), b[c]);
      if (stream) {
        _mm256_stream_ps(to, x0);
        _mm256_stream_ps(to + 8, x1);
      } else {
        _mm256_storeu_ps(to, x0);
        _mm256_storeu_ps(to + 8, x1);
      }
    }
  }
  if (stream) _mm_sfence();  // the streamed lines are visible before the batch is handed on
  // The rest through the portable loop, into the same planes.
  normalize_chw<3, StoreFloat32>(in + end * 3, pixels - end, scale, bias, out + end, pixels);
}
#endif

template <class Store>
void normalize_any(const ImageView& in, Layout layout, const float* scale, const float* bias,
                   void* out) {
  auto* o = static_cast<typename Store::type*>(out);
  const std::int64_t n = in.height * in.width;
  const bool chw = layout == Layout::chw;
  switch (in.channels) {
    case 1: return normalize_hwc<1, Store>(in.data, n, scale, bias, o);  // the same bytes
    case 3:
#if INGEST_NORMALIZE_AVX2
      if constexpr (std::is_same_v<Store, StoreFloat32>) {
        if (chw && normalize_avx2_available()) {
          return normalize_chw3_f32_avx2(in.data, n, scale, bias, o);
        }
      }
#endif
      return chw ? normalize_chw<3, Store>(in.data, n, scale, bias, o, n)
                 : normalize_hwc<3, Store>(in.data, n, scale, bias, o);
    default:
      return chw ? normalize_chw<4, Store>(in.data, n, scale, bias, o, n)
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

/// The per-channel constants, x * scale[c] + bias[c], after checking `mean`
/// and `std` for `channels` channels; `op` names the caller in errors.
struct NormalizeConstants {
  float scale[4]{};
  float bias[4]{};
};
inline NormalizeConstants normalize_constants(std::span<const float> mean,
                                              std::span<const float> std, std::int64_t channels,
                                              std::string_view op) {
  const auto n = static_cast<std::size_t>(channels);
  if (mean.size() != n || std.size() != n) {
    throw InvalidArgument(std::string(op) + ": mean and std need one value per channel (" +
                          std::to_string(n) + "), got " + std::to_string(mean.size()) + " and " +
                          std::to_string(std.size()));
  }
  NormalizeConstants k;
  for (std::size_t c = 0; c < n; ++c) {
    if (!std::isfinite(mean[c]) || !std::isfinite(std[c]) || std[c] == 0.0f) {
      throw InvalidArgument(std::string(op) +
                            ": mean and std must be finite and std not 0, got mean " +
                            std::to_string(mean[c]) + ", std " + std::to_string(std[c]) +
                            " for channel " + std::to_string(c));
    }
    k.scale[c] = static_cast<float>(1.0 / (255.0 * static_cast<double>(std[c])));
    k.bias[c] = static_cast<float>(-static_cast<double>(mean[c]) / static_cast<double>(std[c]));
  }
  return k;
}

/// The arithmetic: `in` normalized into `out` (of the dtype, holding the
/// view's values in `layout`), no checks.
inline void normalize_to(const ImageView& in, const NormalizeConstants& k, Layout layout,
                         DType dtype, void* out) {
  if (dtype == DType::float32) {
    normalize_any<StoreFloat32>(in, layout, k.scale, k.bias, out);
  } else if (dtype == DType::float16) {
    normalize_any<StoreFloat16>(in, layout, k.scale, k.bias, out);
  } else {
    normalize_any<StoreBfloat16>(in, layout, k.scale, k.bias, out);
  }
}

inline void check_normalize_dtype(DType dtype, std::string_view op) {
  if (!normalize_dtype(dtype)) {
    throw InvalidArgument(std::string(op) + ": dtype must be float32, float16 or bfloat16, got " +
                          std::string(dtype_name(dtype)));
  }
}

/// normalize_into's checks and the arithmetic, once for both entry points;
/// `op` names the caller in errors.
inline void normalize_into(const Tensor& image, std::span<const float> mean,
                           std::span<const float> std, Tensor& out, Layout layout,
                           std::string_view op) {
  const ImageView in = transform_view(image, op);
  const NormalizeConstants k = normalize_constants(mean, std, in.channels, op);
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
  normalize_to(in, k, layout, out.dtype(), out.raw_data());
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
  detail::check_normalize_dtype(options.dtype, "normalize");
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

/// A normalize not done yet: what normalize_in_batch returns. batch() (and
/// the map-and-batch it fuses into) writes it straight into its slot of the
/// float batch, on the thread that computed the element: the batch of
/// PendingNormalize elements is the Tensor [N, C, H, W] (or [N, H, W, C])
/// that batching normalize's results would give, bit for bit, without a
/// float tensor per image or a copy of it into the batch. tensor() does the
/// normalize now, outside a batch. It holds the image (shared, not copied).
class PendingNormalize {
 public:
  /// normalize(image, mean, std, {layout, dtype}), now.
  Tensor tensor() const {
    Tensor out(dtype_, shape());
    write_to(out.raw_data());
    return out;
  }
  /// The result's dtype and shape.
  DType dtype() const noexcept { return dtype_; }
  /// The result's shape: [C, H, W] or [H, W, C] as the layout says.
  Shape shape() const { return detail::normalize_shape(view(), layout_); }
  /// The image to normalize.
  const Tensor& image() const noexcept { return image_; }
  /// Writes the result to `out` (dtype() values, shape()'s number of them).
  void write_to(void* out) const { detail::normalize_to(view(), k_, layout_, dtype_, out); }

  /// Made by normalize_in_batch, which checks the image and the constants.
  PendingNormalize(Tensor image, detail::NormalizeConstants k, const NormalizeOptions& options)
      : image_(std::move(image)), k_(k), layout_(options.layout), dtype_(options.dtype) {}

 private:
  detail::ImageView view() const { return detail::view_of(image_, "normalize_in_batch"); }

  Tensor image_;
  detail::NormalizeConstants k_;
  Layout layout_;
  DType dtype_;
};

/// normalize(image, mean, std, options), done where the result goes: in a
/// batch, straight into the batch's slot (see PendingNormalize). Checks
/// what normalize checks, now, and throws its InvalidArgument (naming
/// normalize_in_batch).
inline PendingNormalize normalize_in_batch(const Tensor& image, std::span<const float> mean,
                                           std::span<const float> std,
                                           const NormalizeOptions& options = {}) {
  constexpr std::string_view op = "normalize_in_batch";
  const detail::ImageView in = detail::transform_view(image, op);
  detail::check_normalize_dtype(options.dtype, op);
  return PendingNormalize(image, detail::normalize_constants(mean, std, in.channels, op), options);
}

/// normalize_in_batch with braced lists.
inline PendingNormalize normalize_in_batch(const Tensor& image, std::initializer_list<float> mean,
                                           std::initializer_list<float> std,
                                           const NormalizeOptions& options = {}) {
  return normalize_in_batch(image, std::span<const float>(mean.begin(), mean.size()),
                            std::span<const float>(std.begin(), std.size()), options);
}

}  // namespace ingest::image

namespace ingest {

/// PendingNormalize elements batch into the Tensor of their results: each is
/// normalized into its slot of the batch (batch_traits<Tensor>'s buffer,
/// with its checks: equal dtype and shape).
template <>
struct batch_traits<image::PendingNormalize> {
  /// The batch: one Tensor with a leading batch dimension.
  using batch_type = Tensor;
  /// Normalizes each element straight into its slot of the batch buffer.
  class builder {
   public:
    /// A batch of `spec.capacity` slots from `spec.allocator`.
    explicit builder(const BatchSpec& spec) : tensors_(spec) {}
    /// Normalizes `value` into slot `slot`; throws InvalidArgument if its dtype or shape differs
    /// from the batch's first.
    void set(std::size_t slot, image::PendingNormalize&& value) {
      value.write_to(tensors_.slot_bytes(slot, value.dtype(), value.shape()));
    }
    /// The batch of the first `count` slots; throws InvalidArgument if none was set.
    Tensor finish(std::size_t count) && { return std::move(tensors_).finish(count); }

   private:
    batch_traits<Tensor>::builder tensors_;
  };
};

/// A PendingNormalize holds its image (the result is written into the batch).
template <>
struct element_size<image::PendingNormalize> {
  /// The bytes of the image it holds.
  static std::size_t bytes(const image::PendingNormalize& p) { return p.image().nbytes(); }
};

}  // namespace ingest
