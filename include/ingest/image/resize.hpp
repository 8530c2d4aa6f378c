// resize: bilinear and area resampling of uint8 [H, W, C] images, the bytes of
// Pillow's Image.resize(BILINEAR / BOX, box) (tf.image.resize with antialias,
// torchvision's Resize). Thread-safe; coefficients computed once per call,
// result and scratch from the pooled allocator.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/types.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ingest::image {

/// How resize resamples.
enum class ResizeMethod : std::uint8_t {
  bilinear,  ///< Pillow BILINEAR (triangle filter), tf.image bilinear
  area,      ///< Pillow BOX: each output pixel averages the input area it covers, tf.image area
};

/// A region of the source in pixels, fractions allowed (Pillow's `box`).
struct SourceBox {
  /// The first row (may be fractional).
  double y = 0;
  /// The first column (may be fractional).
  double x = 0;
  /// Rows.
  double height = 0;
  /// Columns.
  double width = 0;
};

/// Options of resize.
struct ResizeOptions {
  /// The resampling filter: bilinear (default) or area.
  ResizeMethod method = ResizeMethod::bilinear;
  /// Bilinear only: widen the filter by the downscale factor (Pillow always
  /// does; tf.image.resize's antialias=True). False samples two pixels per
  /// axis, as tf.image.resize's default (half-pixel centres). Area always averages.
  bool antialias = true;
  /// Resample only this region of the input (default: all of it).
  std::optional<SourceBox> box = std::nullopt;
};

namespace detail {

// Pillow's Resample.c: PRECISION_BITS = 32 - 8 - 2.
inline constexpr int resize_precision_bits = 22;

// One axis's filter: for output index i, inputs [first(i), first(i) + count(i))
// with fixed-point weights. Each row of the table holds first, count, the
// ksize weights (zero past count), then the weights split for SSE2's
// 16-bit multiply-add: pairs of (weight >> 11) and of (weight & 2047), two
// taps to an int32, zero-padded to a multiple of four pairs.
class ResizeAxis {
 public:
  ResizeAxis(std::int64_t in_size, double in0, double in1, std::int64_t out_size,
             ResizeMethod method, bool antialias) {
    const bool box = method == ResizeMethod::area;
    const double support_1 = box ? 0.5 : 1.0;
    const double scale = (in1 - in0) / static_cast<double>(out_size);
    double filterscale = scale;
    if (filterscale < 1.0 || (!antialias && !box)) filterscale = 1.0;
    const double support = support_1 * filterscale;
    ksize_ = static_cast<std::int64_t>(std::ceil(support)) * 2 + 1;
    pairs_ = ((ksize_ + 1) / 2 + 3) / 4 * 4;
    storage_ = Tensor::zeros(DType::int32, Shape{out_size, stride()});
    std::int32_t* base = storage_.data<std::int32_t>();
    table_ = base;
    // Pillow computes each row's weights in double, normalises them to sum
    // to 1 and rounds them to fixed point; so does this, in the same order.
    double* w = nullptr;
    double stack_w[64];
    Tensor heap_w;
    if (ksize_ <= 64) {
      w = stack_w;
    } else {
      heap_w = Tensor(DType::float64, Shape{ksize_});
      w = heap_w.data<double>();
    }
    const double ss = 1.0 / filterscale;
    for (std::int64_t i = 0; i < out_size; ++i) {
      const double center = in0 + (static_cast<double>(i) + 0.5) * scale;
      // (int) truncates toward zero, as Pillow's C casts do.
      auto xmin = static_cast<std::int64_t>(static_cast<int>(center - support + 0.5));
      if (xmin < 0) xmin = 0;
      auto xmax = static_cast<std::int64_t>(static_cast<int>(center + support + 0.5));
      if (xmax > in_size) xmax = in_size;
      const std::int64_t n = std::max<std::int64_t>(xmax - xmin, 0);
      max_count_ = std::max(max_count_, n);
      double total = 0.0;
      for (std::int64_t x = 0; x < n; ++x) {
        const double t = (static_cast<double>(x + xmin) - center + 0.5) * ss;
        w[x] = box ? (t > -0.5 && t <= 0.5 ? 1.0 : 0.0) : std::max(0.0, 1.0 - std::fabs(t));
        total += w[x];
      }
      std::int32_t* row = base + i * stride();
      row[0] = static_cast<std::int32_t>(xmin);
      row[1] = static_cast<std::int32_t>(n);
      std::int32_t* k = row + 2;
      auto* hi = reinterpret_cast<std::uint32_t*>(k + ksize_);
      std::uint32_t* lo = hi + pairs_;
      for (std::int64_t x = 0; x < n; ++x) {
        const double weight = total != 0.0 ? w[x] / total : w[x];
        const double fixed = weight * (1 << resize_precision_bits);
        k[x] = static_cast<std::int32_t>(weight < 0 ? -0.5 + fixed : 0.5 + fixed);
        const auto shift = static_cast<unsigned>(16 * (x & 1));
        hi[x / 2] |= (static_cast<std::uint32_t>(k[x] >> 11) & 0xFFFFu) << shift;
        lo[x / 2] |= (static_cast<std::uint32_t>(k[x] & 2047) & 0xFFFFu) << shift;
      }
    }
  }

  const std::int32_t* table() const noexcept { return table_; }
  std::int64_t stride() const noexcept { return 2 + ksize_ + 2 * pairs_; }
  /// Offsets in a row of the weights and of the split pairs (hi, then lo).
  static constexpr std::int64_t weights_at = 2;
  std::int64_t pairs_at() const noexcept { return 2 + ksize_; }
  std::int64_t pairs() const noexcept { return pairs_; }
  std::int64_t first(std::int64_t i) const noexcept { return table_[i * stride()]; }
  std::int64_t count(std::int64_t i) const noexcept { return table_[i * stride() + 1]; }
  /// The split sums stay within int32 only up to this many taps (a
  /// downscale by more than ~500); beyond it the scalar kernels run.
  bool splittable() const noexcept { return ksize_ <= 1024; }
  /// The largest count: the SIMD kernels run every output through this many
  /// taps (the weights past its own count are zero), so their loops have one
  /// trip count and no branch to mispredict.
  std::int64_t max_count() const noexcept { return max_count_; }

 private:
  std::int64_t ksize_ = 0;
  std::int64_t max_count_ = 0;
  std::int64_t pairs_ = 0;
  Tensor storage_;  // [out_size, stride()]
  const std::int32_t* table_ = nullptr;
};

inline std::uint8_t clip8(std::int32_t v) noexcept {
  const std::int32_t t = v >> resize_precision_bits;
  return static_cast<std::uint8_t>(t < 0 ? 0 : (t > 255 ? 255 : t));
}

// The portable kernels, on 32-bit accumulators exactly as Pillow's C code.
// Raw restrict pointers: byte stores could otherwise alias the table, which
// would then be reloaded after every pixel.

// Rows [row0, row0 + rows) of `in`, resampled horizontally into `out` (rows
// packed). C > 0: channels known at compile time.
template <int C>
void resize_horizontal(const ImageView& in, std::int64_t row0, std::int64_t rows,
                       const ResizeAxis& axis, std::int64_t out_width, std::uint8_t* out) {
  const std::int64_t channels = C > 0 ? C : in.channels;
  constexpr std::int32_t half = 1 << (resize_precision_bits - 1);
  const std::int32_t* __restrict table = axis.table();
  const std::int64_t stride = axis.stride();
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* __restrict src = in.data + (row0 + r) * in.row_stride;
    std::uint8_t* __restrict dst = out + r * out_width * channels;
    for (std::int64_t o = 0; o < out_width; ++o, dst += channels) {
      const std::int32_t* __restrict k = table + o * stride + ResizeAxis::weights_at;
      const std::uint8_t* __restrict p = src + std::int64_t{k[-2]} * channels;
      const std::int32_t n = k[-1];
      if constexpr (C > 0) {
        std::int32_t acc[C];
        for (int c = 0; c < C; ++c) acc[c] = half;
        for (std::int32_t x = 0; x < n; ++x, p += C) {
          for (int c = 0; c < C; ++c) acc[c] += p[c] * k[x];
        }
        for (int c = 0; c < C; ++c) dst[c] = clip8(acc[c]);
      } else {
        for (std::int64_t c = 0; c < channels; ++c) {
          std::int32_t acc = half;
          for (std::int32_t x = 0; x < n; ++x) acc += p[x * channels + c] * k[x];
          dst[c] = clip8(acc);
        }
      }
    }
  }
}

// Output rows [o0, out_height): row o reads rows axis.first(o) - row0 ...
// of `in`, bytes [b0, row bytes) of each.
inline void resize_vertical_tail(const ImageView& in, std::int64_t row0, const ResizeAxis& axis,
                                 std::int64_t out_height, std::int64_t b0, std::uint8_t* out) {
  constexpr std::int32_t half = 1 << (resize_precision_bits - 1);
  constexpr std::int64_t block = 512;
  const std::int64_t row_bytes = in.width * in.channels;
  const std::int32_t* __restrict table = axis.table();
  const std::int64_t stride = axis.stride();
  std::int32_t acc[block];
  for (std::int64_t o = 0; o < out_height; ++o) {
    const std::int32_t* __restrict k = table + o * stride + ResizeAxis::weights_at;
    const std::uint8_t* __restrict src = in.data + (std::int64_t{k[-2]} - row0) * in.row_stride;
    const std::int32_t n = k[-1];
    std::uint8_t* __restrict dst = out + o * row_bytes;
    for (std::int64_t b = b0; b < row_bytes; b += block) {
      const std::int64_t len = std::min(block, row_bytes - b);
      for (std::int64_t i = 0; i < len; ++i) acc[i] = half;
      for (std::int32_t y = 0; y < n; ++y) {
        const std::uint8_t* __restrict s = src + y * in.row_stride + b;
        const std::int32_t ky = k[y];
        for (std::int64_t i = 0; i < len; ++i) acc[i] += s[i] * ky;
      }
      for (std::int64_t i = 0; i < len; ++i) dst[b + i] = clip8(acc[i]);
    }
  }
}

#if defined(__SSE2__)
// SSE2 kernels (every x86-64 has SSE2), the same integers as the portable
// ones: each 22-bit weight is split into k >> 11 and k & 2047, both fit the
// 16-bit operands of _mm_madd_epi16 (which multiplies two taps and adds
// them in one int32 lane), and sum(p * k) = (sum(p * hi) << 11) + sum(p * lo).
namespace sse2 {

// (hi << 11) + lo + 1/2, shifted down to 8 bits (not yet clamped).
inline __m128i finish(__m128i hi, __m128i lo) noexcept {
  const __m128i half = _mm_set1_epi32(1 << (resize_precision_bits - 1));
  return _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(hi, 11), lo), half),
                        resize_precision_bits);
}

inline __m128i load8(const std::uint8_t* p) noexcept {
  return _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                           _mm_setzero_si128());
}

// How far past a row's last byte the SIMD horizontal kernels may read: taps
// up to the axis's largest count from each output's first input, two at a
// time (C > 1) or eight (gray), plus a partial load.
inline std::int64_t horizontal_overread(const ResizeAxis& axis, std::int64_t channels) noexcept {
  return (axis.max_count() + 8) * channels + 8;
}

// One row of C-byte pixels (C = 3 or 4), every output through the same
// number of tap pairs; reads up to horizontal_overread bytes past the row.
template <int C>
void horizontal_row(const std::uint8_t* src, const ResizeAxis& axis, std::int64_t out_width,
                    std::uint8_t* dst) noexcept {
  const std::int32_t* table = axis.table();
  const std::int64_t stride = axis.stride(), pairs_at = axis.pairs_at(), pairs = axis.pairs();
  const std::int64_t steps = (axis.max_count() + 1) / 2;
  for (std::int64_t o = 0; o < out_width; ++o, dst += C) {
    const std::int32_t* row = table + o * stride;
    const std::uint8_t* p = src + std::int64_t{row[0]} * C;
    const std::int32_t* hi = row + pairs_at;
    const std::int32_t* lo = hi + pairs;
    __m128i h = _mm_setzero_si128(), l = _mm_setzero_si128();
    for (std::int64_t x = 0; x < steps; ++x, p += 2 * C) {
      const __m128i px = load8(p);  // two pixels' channels as 16-bit lanes
      const __m128i pair = _mm_unpacklo_epi16(px, _mm_srli_si128(px, 2 * C));
      h = _mm_add_epi32(h, _mm_madd_epi16(pair, _mm_set1_epi32(hi[x])));
      l = _mm_add_epi32(l, _mm_madd_epi16(pair, _mm_set1_epi32(lo[x])));
    }
    __m128i v = finish(h, l);
    v = _mm_packus_epi16(_mm_packs_epi32(v, v), v);
    const std::int32_t bytes = _mm_cvtsi128_si32(v);
    std::memcpy(dst, &bytes, C);
  }
}

// One row of gray pixels, eight taps per step; reads up to
// horizontal_overread bytes past the row.
inline void horizontal_row_gray(const std::uint8_t* src, const ResizeAxis& axis,
                                std::int64_t out_width, std::uint8_t* dst) noexcept {
  const std::int32_t* table = axis.table();
  const std::int64_t stride = axis.stride(), pairs_at = axis.pairs_at(), pairs = axis.pairs();
  const std::int64_t taps = axis.max_count();
  for (std::int64_t o = 0; o < out_width; ++o) {
    const std::int32_t* row = table + o * stride;
    const std::uint8_t* p = src + row[0];
    const std::int32_t* hi = row + pairs_at;
    const std::int32_t* lo = hi + pairs;
    __m128i h = _mm_setzero_si128(), l = _mm_setzero_si128();
    for (std::int64_t x = 0; x < taps; x += 8) {
      const __m128i px = load8(p + x);
      h = _mm_add_epi32(
          h, _mm_madd_epi16(px, _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + x / 2))));
      l = _mm_add_epi32(
          l, _mm_madd_epi16(px, _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + x / 2))));
    }
    __m128i v = _mm_add_epi32(_mm_slli_epi32(h, 11), l);
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
    dst[o] = clip8(_mm_cvtsi128_si32(v) + (1 << (resize_precision_bits - 1)));
  }
}

// Vertical pass, eight bytes at a time; returns where the scalar tail starts.
inline std::int64_t vertical(const ImageView& in, std::int64_t row0, const ResizeAxis& axis,
                             std::int64_t out_height, std::uint8_t* out) noexcept {
  const std::int64_t row_bytes = in.width * in.channels;
  const std::int64_t end = row_bytes / 8 * 8;
  const std::int32_t* table = axis.table();
  const std::int64_t stride = axis.stride(), pairs_at = axis.pairs_at(), pairs = axis.pairs();
  const __m128i zero = _mm_setzero_si128();
  for (std::int64_t o = 0; o < out_height; ++o) {
    const std::int32_t* row = table + o * stride;
    const std::uint8_t* src = in.data + (std::int64_t{row[0]} - row0) * in.row_stride;
    const std::int32_t n = row[1];
    const std::int32_t* hi = row + pairs_at;
    const std::int32_t* lo = hi + pairs;
    std::uint8_t* dst = out + o * row_bytes;
    for (std::int64_t i = 0; i < end; i += 8) {
      __m128i h0 = zero, h1 = zero, l0 = zero, l1 = zero;
      for (std::int32_t y = 0; y < n; y += 2) {
        const __m128i a = load8(src + y * in.row_stride + i);
        const __m128i b = y + 1 < n ? load8(src + (y + 1) * in.row_stride + i) : zero;
        const __m128i ab0 = _mm_unpacklo_epi16(a, b), ab1 = _mm_unpackhi_epi16(a, b);
        const __m128i kh = _mm_set1_epi32(hi[y / 2]), kl = _mm_set1_epi32(lo[y / 2]);
        h0 = _mm_add_epi32(h0, _mm_madd_epi16(ab0, kh));
        h1 = _mm_add_epi32(h1, _mm_madd_epi16(ab1, kh));
        l0 = _mm_add_epi32(l0, _mm_madd_epi16(ab0, kl));
        l1 = _mm_add_epi32(l1, _mm_madd_epi16(ab1, kl));
      }
      const __m128i v = _mm_packs_epi32(finish(h0, l0), finish(h1, l1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + i), _mm_packus_epi16(v, v));
    }
  }
  return end;
}

}  // namespace sse2
#endif

inline void resize_vertical(const ImageView& in, std::int64_t row0, const ResizeAxis& axis,
                            std::int64_t out_height, std::uint8_t* out, bool simd) {
  std::int64_t done = 0;
#if defined(__SSE2__)
  if (simd && axis.splittable()) done = sse2::vertical(in, row0, axis, out_height, out);
#else
  (void)simd;
#endif
  if (done < in.width * in.channels) resize_vertical_tail(in, row0, axis, out_height, done, out);
}

inline void resize_horizontal_any(const ImageView& in, std::int64_t row0, std::int64_t rows,
                                  const ResizeAxis& axis, std::int64_t out_width, std::uint8_t* out,
                                  bool simd) {
#if defined(__SSE2__)
  if (simd && axis.splittable() && (in.channels == 1 || in.channels == 3 || in.channels == 4)) {
    auto row = [&](const std::uint8_t* src, std::uint8_t* dst) {
      if (in.channels == 1) return sse2::horizontal_row_gray(src, axis, out_width, dst);
      if (in.channels == 3) return sse2::horizontal_row<3>(src, axis, out_width, dst);
      return sse2::horizontal_row<4>(src, axis, out_width, dst);
    };
    // Rows closer to the buffer's end than the kernels' over-read are read
    // from a padded copy.
    const std::int64_t row_bytes = in.width * in.channels;
    const std::int64_t overread = sse2::horizontal_overread(axis, in.channels);
    const std::int64_t safe_rows = in.height - 1 - (overread + in.row_stride - 1) / in.row_stride;
    Tensor padded;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::uint8_t* src = in.data + (row0 + r) * in.row_stride;
      std::uint8_t* dst = out + r * out_width * in.channels;
      if (row0 + r < safe_rows) {
        row(src, dst);
      } else {
        if (!padded.defined()) padded = Tensor::zeros(DType::uint8, Shape{row_bytes + overread});
        std::memcpy(padded.raw_data(), src, static_cast<std::size_t>(row_bytes));
        row(padded.data<std::uint8_t>(), dst);
      }
    }
    return;
  }
#else
  (void)simd;
#endif
  switch (in.channels) {
    case 1: return resize_horizontal<1>(in, row0, rows, axis, out_width, out);
    case 3: return resize_horizontal<3>(in, row0, rows, axis, out_width, out);
    case 4: return resize_horizontal<4>(in, row0, rows, axis, out_width, out);
    default: return resize_horizontal<0>(in, row0, rows, axis, out_width, out);
  }
}

/// resize on a view (see the public resize); `op` names the caller in errors.
/// `simd` false runs the portable kernels only (the tests' reference).
inline Tensor resize_view(const ImageView& in, Size size, const ResizeOptions& options,
                          std::string_view op, bool simd = true) {
  constexpr std::int64_t max_side = 0x7fffffff;
  if (size.height <= 0 || size.width <= 0 || size.height > max_side || size.width > max_side) {
    throw InvalidArgument(std::string(op) + ": output size must be positive and below 2^31, got " +
                          std::to_string(size.height) + " x " + std::to_string(size.width));
  }
  if (in.height <= 0 || in.width <= 0 || in.height > max_side || in.width > max_side) {
    throw InvalidArgument(std::string(op) + ": cannot resize an image of " +
                          std::to_string(in.height) + " x " + std::to_string(in.width) + " pixels");
  }
  const SourceBox box = options.box.value_or(
      SourceBox{0, 0, static_cast<double>(in.height), static_cast<double>(in.width)});
  // Written so that NaNs fail too.
  if (!(box.y >= 0 && box.x >= 0 && box.height > 0 && box.width > 0 &&
        box.y + box.height <= static_cast<double>(in.height) &&
        box.x + box.width <= static_cast<double>(in.width))) {
    throw InvalidArgument(std::string(op) + ": box {y " + std::to_string(box.y) + ", x " +
                          std::to_string(box.x) + ", height " + std::to_string(box.height) +
                          ", width " + std::to_string(box.width) + "} is not inside the " +
                          std::to_string(in.height) + " x " + std::to_string(in.width) + " image");
  }
  Tensor out = new_image(size.height, size.width, in.channels);
  std::uint8_t* dst = out.data<std::uint8_t>();
  const bool need_h =
      size.width != in.width || box.x != 0 || box.width != static_cast<double>(in.width);
  const bool need_v =
      size.height != in.height || box.y != 0 || box.height != static_cast<double>(in.height);
  if (!need_h && !need_v) {
    const std::int64_t row_bytes = in.width * in.channels;
    for (std::int64_t r = 0; r < in.height; ++r) {
      std::memcpy(dst + r * row_bytes, in.data + r * in.row_stride,
                  static_cast<std::size_t>(row_bytes));
    }
    return out;
  }
  const ResizeAxis vertical(in.height, box.y, box.y + box.height, size.height, options.method,
                            options.antialias);
  if (!need_h) {
    resize_vertical(in, 0, vertical, size.height, dst, simd);
    return out;
  }
  const ResizeAxis horizontal(in.width, box.x, box.x + box.width, size.width, options.method,
                              options.antialias);
  if (!need_v) {
    resize_horizontal_any(in, 0, in.height, horizontal, size.width, dst, simd);
    return out;
  }
  // Only the rows the vertical pass reads go through the horizontal one.
  const std::int64_t first_row = vertical.first(0);
  const std::int64_t last_row = vertical.first(size.height - 1) + vertical.count(size.height - 1);
  Tensor temp = new_image(last_row - first_row, size.width, in.channels);
  resize_horizontal_any(in, first_row, last_row - first_row, horizontal, size.width,
                        temp.data<std::uint8_t>(), simd);
  const ImageView mid{temp.data<std::uint8_t>(), last_row - first_row, size.width, in.channels,
                      size.width * in.channels};
  resize_vertical(mid, first_row, vertical, size.height, dst, simd);
  return out;
}

}  // namespace detail

/// `image` (uint8 [H, W, C]) resampled to `size` (Pillow's Image.resize with
/// BILINEAR or BOX; tf.image.resize with antialias=True), computed as Pillow
/// computes it: separable, the filter's support widened by the downscale
/// factor, 22-bit fixed-point weights, the horizontal pass first and rounded
/// to 8 bits, then the vertical one; the bytes equal Pillow's. Channels are
/// resampled independently (Pillow premultiplies RGBA by alpha first; this
/// does not). Throws InvalidArgument for a tensor that is not such an image,
/// a size that is not positive, or a box outside the image.
inline Tensor resize(const Tensor& image, Size size, const ResizeOptions& options = {}) {
  return detail::resize_view(detail::view_of(image, "resize"), size, options, "resize");
}

}  // namespace ingest::image
