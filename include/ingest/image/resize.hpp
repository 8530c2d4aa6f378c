// resize(image, {height, width}, {.method, .antialias, .box}): bilinear and
// area (box) resampling of uint8 [H, W, C] images, computed as Pillow's
// Image.resize(..., BILINEAR / BOX, box) computes it (separable convolution,
// the filter's support widened by the downscale factor, 22-bit fixed-point
// coefficients, horizontal then vertical pass with 8-bit rounding between),
// so results equal Pillow's. tf.image.resize(antialias=True) and
// torchvision's Resize are the other counterparts. Thread-safe; the result
// and scratch come from the pooled allocator, coefficients are computed once
// per call, never per pixel.
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

namespace ingest::image {

enum class ResizeMethod : std::uint8_t {
  bilinear,  ///< Pillow BILINEAR (triangle filter), tf.image bilinear
  area,      ///< Pillow BOX: each output pixel averages the input area it covers, tf.image area
};

/// A region of the source in pixels, fractions allowed (Pillow's `box`).
struct SourceBox {
  double y = 0;
  double x = 0;
  double height = 0;
  double width = 0;
};

struct ResizeOptions {
  ResizeMethod method = ResizeMethod::bilinear;
  /// Bilinear only: widen the filter by the downscale factor (Pillow always
  /// does; tf.image.resize's antialias=True). False samples two pixels per
  /// axis, as tf.image.resize's default (half-pixel centres). Area always averages.
  bool antialias = true;
  /// Resample only this region of the input (default: all of it).
  std::optional<SourceBox> box = std::nullopt;
};

namespace detail {

/// A uint8 [height, width, channels] image in memory someone else owns, rows
/// `row_stride` bytes apart (a crop of a larger image, without copying).
struct ImageView {
  const std::uint8_t* data = nullptr;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t channels = 0;
  std::int64_t row_stride = 0;
};

inline ImageView view_of(const Tensor& image, std::string_view op) {
  const ImageDims d = image_dims(image, op);
  return {image.data<std::uint8_t>(), d.height, d.width, d.channels, d.width * d.channels};
}

// Pillow's Resample.c: PRECISION_BITS = 32 - 8 - 2.
inline constexpr int resize_precision_bits = 22;

// One axis's filter: for output index i, inputs [first(i), first(i) + count(i))
// with fixed-point weights weights(i)[0..count(i)).
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
    storage_ = Tensor(DType::int32, Shape{out_size, ksize_ + 2});
    std::int32_t* base = storage_.data<std::int32_t>();
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
      double total = 0.0;
      for (std::int64_t x = 0; x < n; ++x) {
        const double t = (static_cast<double>(x + xmin) - center + 0.5) * ss;
        w[x] = box ? (t > -0.5 && t <= 0.5 ? 1.0 : 0.0) : std::max(0.0, 1.0 - std::fabs(t));
        total += w[x];
      }
      std::int32_t* row = base + i * (ksize_ + 2);
      row[0] = static_cast<std::int32_t>(xmin);
      row[1] = static_cast<std::int32_t>(n);
      for (std::int64_t x = 0; x < n; ++x) {
        const double k = total != 0.0 ? w[x] / total : w[x];
        const double fixed = k * (1 << resize_precision_bits);
        row[2 + x] = static_cast<std::int32_t>(k < 0 ? -0.5 + fixed : 0.5 + fixed);
      }
    }
  }

  std::int64_t first(std::int64_t i) const noexcept { return row(i)[0]; }
  std::int64_t count(std::int64_t i) const noexcept { return row(i)[1]; }
  const std::int32_t* weights(std::int64_t i) const noexcept { return row(i) + 2; }

 private:
  const std::int32_t* row(std::int64_t i) const noexcept {
    return storage_.data<std::int32_t>() + i * (ksize_ + 2);
  }
  std::int64_t ksize_ = 0;
  Tensor storage_;  // [out_size, 2 + ksize]: first, count, weights
};

inline std::uint8_t clip8(std::int32_t v) noexcept {
  const std::int32_t t = v >> resize_precision_bits;
  return static_cast<std::uint8_t>(t < 0 ? 0 : (t > 255 ? 255 : t));
}

// Rows [row0, row0 + rows) of `in`, resampled horizontally into `out` (rows
// packed). C > 0: channels known at compile time.
template <int C>
void resize_horizontal(const ImageView& in, std::int64_t row0, std::int64_t rows,
                       const ResizeAxis& axis, std::int64_t out_width, std::uint8_t* out) {
  const std::int64_t channels = C > 0 ? C : in.channels;
  constexpr std::int32_t half = 1 << (resize_precision_bits - 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* src = in.data + (row0 + r) * in.row_stride;
    std::uint8_t* dst = out + r * out_width * channels;
    for (std::int64_t o = 0; o < out_width; ++o, dst += channels) {
      const std::uint8_t* p = src + axis.first(o) * channels;
      const std::int32_t* k = axis.weights(o);
      const std::int64_t n = axis.count(o);
      if constexpr (C > 0) {
        std::int32_t acc[C];
        for (int c = 0; c < C; ++c) acc[c] = half;
        for (std::int64_t x = 0; x < n; ++x, p += C) {
          for (int c = 0; c < C; ++c) acc[c] += p[c] * k[x];
        }
        for (int c = 0; c < C; ++c) dst[c] = clip8(acc[c]);
      } else {
        for (std::int64_t c = 0; c < channels; ++c) {
          std::int32_t acc = half;
          for (std::int64_t x = 0; x < n; ++x) acc += p[x * channels + c] * k[x];
          dst[c] = clip8(acc);
        }
      }
    }
  }
}

// Vertical pass: output row o reads rows axis.first(o) - row0 ... of `in`.
// A row of accumulators per block of bytes keeps the inner loop a plain
// multiply-add over contiguous bytes, which the compiler vectorises.
inline void resize_vertical(const ImageView& in, std::int64_t row0, const ResizeAxis& axis,
                            std::int64_t out_height, std::uint8_t* out) {
  constexpr std::int32_t half = 1 << (resize_precision_bits - 1);
  constexpr std::int64_t block = 512;
  const std::int64_t row_bytes = in.width * in.channels;
  std::int32_t acc[block];
  for (std::int64_t o = 0; o < out_height; ++o) {
    const std::uint8_t* src = in.data + (axis.first(o) - row0) * in.row_stride;
    const std::int32_t* k = axis.weights(o);
    const std::int64_t n = axis.count(o);
    std::uint8_t* dst = out + o * row_bytes;
    for (std::int64_t b = 0; b < row_bytes; b += block) {
      const std::int64_t len = std::min(block, row_bytes - b);
      for (std::int64_t i = 0; i < len; ++i) acc[i] = half;
      for (std::int64_t y = 0; y < n; ++y) {
        const std::uint8_t* s = src + y * in.row_stride + b;
        const std::int32_t ky = k[y];
        for (std::int64_t i = 0; i < len; ++i) acc[i] += s[i] * ky;
      }
      for (std::int64_t i = 0; i < len; ++i) dst[b + i] = clip8(acc[i]);
    }
  }
}

inline void resize_horizontal_any(const ImageView& in, std::int64_t row0, std::int64_t rows,
                                  const ResizeAxis& axis, std::int64_t out_width,
                                  std::uint8_t* out) {
  switch (in.channels) {
    case 1: return resize_horizontal<1>(in, row0, rows, axis, out_width, out);
    case 3: return resize_horizontal<3>(in, row0, rows, axis, out_width, out);
    case 4: return resize_horizontal<4>(in, row0, rows, axis, out_width, out);
    default: return resize_horizontal<0>(in, row0, rows, axis, out_width, out);
  }
}

/// resize on a view (see the public resize); `op` names the caller in errors.
inline Tensor resize_view(const ImageView& in, Size size, const ResizeOptions& options,
                          std::string_view op) {
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
    resize_vertical(in, 0, vertical, size.height, dst);
    return out;
  }
  const ResizeAxis horizontal(in.width, box.x, box.x + box.width, size.width, options.method,
                              options.antialias);
  if (!need_v) {
    resize_horizontal_any(in, 0, in.height, horizontal, size.width, dst);
    return out;
  }
  // Only the rows the vertical pass reads go through the horizontal one.
  const std::int64_t first_row = vertical.first(0);
  const std::int64_t last_row = vertical.first(size.height - 1) + vertical.count(size.height - 1);
  Tensor temp = new_image(last_row - first_row, size.width, in.channels);
  resize_horizontal_any(in, first_row, last_row - first_row, horizontal, size.width,
                        temp.data<std::uint8_t>());
  const ImageView mid{temp.data<std::uint8_t>(), last_row - first_row, size.width, in.channels,
                      size.width * in.channels};
  resize_vertical(mid, first_row, vertical, size.height, dst);
  return out;
}

}  // namespace detail

/// `image` (uint8 [H, W, C]) resampled to `size` (Pillow's Image.resize with
/// BILINEAR or BOX; tf.image.resize with antialias=True). Channels are
/// resampled independently (Pillow premultiplies RGBA by alpha first; this
/// does not). Throws InvalidArgument for a tensor that is not such an image,
/// a size that is not positive, or a box outside the image.
inline Tensor resize(const Tensor& image, Size size, const ResizeOptions& options = {}) {
  return detail::resize_view(detail::view_of(image, "resize"), size, options, "resize");
}

}  // namespace ingest::image
