// Crops and padding of uint8 [H, W, C] images (C = 1, 3 or 4): crop,
// center_crop (torchvision's CenterCrop), random_crop (tf.image.random_crop;
// of encoded bytes, only the window is decoded), pad (constant or reflect, as
// numpy and torchvision) and cutout. Each call copies once into a new tensor
// from the pooled allocator; thread-safe given one Rng per thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/decode.hpp"
#include "ingest/image/jpeg.hpp"
#include "ingest/image/png.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {

/// Pixels added on each side of an image.
struct Padding {
  /// Rows added above.
  std::int64_t top = 0;
  /// Rows added below.
  std::int64_t bottom = 0;
  /// Columns added on the left.
  std::int64_t left = 0;
  /// Columns added on the right.
  std::int64_t right = 0;
  /// Equal when every side is.
  friend bool operator==(const Padding&, const Padding&) = default;
};

/// How pad fills the added pixels.
enum class PadMode : std::uint8_t {
  constant,  ///< every added value is `PadOptions::value`
  reflect,   ///< mirrored about the edge pixel, which is not repeated (numpy's and torchvision's
             ///< 'reflect')
};

/// Options of pad.
struct PadOptions {
  /// How the added pixels are filled: a constant (default) or a reflection.
  PadMode mode = PadMode::constant;
  /// PadMode::constant: the value of every channel of the added pixels.
  std::uint8_t value = 0;
};

namespace detail {

/// `window` of `in` copied into a new image; the window may reach outside
/// the image, where every value is `fill`. One pass over the output.
inline Tensor copy_window(const ImageView& in, const CropWindow& window, std::uint8_t fill) {
  Tensor out = new_image(window.height, window.width, in.channels);
  if (out.nbytes() == 0) return out;  // an empty image padded by nothing
  const std::int64_t c = in.channels, row_bytes = window.width * c;
  // The columns of the window inside the image: [x0, x1) of the output.
  const std::int64_t x0 = std::clamp<std::int64_t>(-window.x, 0, window.width);
  const std::int64_t x1 = std::clamp<std::int64_t>(in.width - window.x, x0, window.width);
  std::uint8_t* dst = out.data<std::uint8_t>();
  for (std::int64_t y = 0; y < window.height; ++y, dst += row_bytes) {
    const std::int64_t sy = window.y + y;
    if (sy < 0 || sy >= in.height || x0 == x1) {
      std::memset(dst, fill, static_cast<std::size_t>(row_bytes));
      continue;
    }
    std::memset(dst, fill, static_cast<std::size_t>(x0 * c));
    std::memcpy(dst + x0 * c, in.data + sy * in.row_stride + (window.x + x0) * c,
                static_cast<std::size_t>((x1 - x0) * c));
    std::memset(dst + x1 * c, fill, static_cast<std::size_t>((window.width - x1) * c));
  }
  return out;
}

/// numpy's 'reflect' index: i mirrored about 0 and n - 1 (|i| < n needed).
constexpr std::int64_t reflect_index(std::int64_t i, std::int64_t n) noexcept {
  return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
}

/// `in` padded by `p`, reflected (each padding below the side it pads).
inline Tensor pad_reflect(const ImageView& in, const Padding& p) {
  const std::int64_t c = in.channels, width = in.width + p.left + p.right;
  Tensor out = new_image(in.height + p.top + p.bottom, width, c);
  std::uint8_t* dst = out.data<std::uint8_t>();
  for (std::int64_t y = 0; y < out.dim(0); ++y, dst += width * c) {
    const std::uint8_t* src = in.data + reflect_index(y - p.top, in.height) * in.row_stride;
    for (std::int64_t x = 0; x < p.left; ++x) {
      std::memcpy(dst + x * c, src + (p.left - x) * c, static_cast<std::size_t>(c));
    }
    std::memcpy(dst + p.left * c, src, static_cast<std::size_t>(in.width * c));
    for (std::int64_t x = 0; x < p.right; ++x) {
      std::memcpy(dst + (p.left + in.width + x) * c, src + (in.width - 2 - x) * c,
                  static_cast<std::size_t>(c));
    }
  }
  return out;
}

}  // namespace detail

/// `window` of `image` (uint8 [H, W, C]), copied (tf.image.crop_to_bounding_box,
/// torchvision's crop, PIL's Image.crop inside the image). Throws
/// InvalidArgument for an empty window or one not inside the image.
inline Tensor crop(const Tensor& image, const CropWindow& window) {
  const detail::ImageView in = detail::transform_view(image, "crop");
  detail::check_size({window.height, window.width}, "crop", "window size");
  if (window.y < 0 || window.x < 0 || window.y > in.height - window.height ||
      window.x > in.width - window.width) {
    throw InvalidArgument("crop: window {y " + std::to_string(window.y) + ", x " +
                          std::to_string(window.x) + ", height " + std::to_string(window.height) +
                          ", width " + std::to_string(window.width) + "} is not inside the " +
                          std::to_string(in.height) + " x " + std::to_string(in.width) + " image");
  }
  return detail::copy_window(in, window, 0);
}

/// The centre `size` of `image`, as torchvision's CenterCrop: the top row is
/// int(round((H - height) / 2.0)) (Python's round, ties to even), the left
/// column likewise. A side larger than the image's is first padded with 0,
/// (d // 2 before, the rest after, d the difference) as torchvision pads,
/// so the output is always `size`. Throws InvalidArgument for an empty size.
inline Tensor center_crop(const Tensor& image, Size size) {
  const detail::ImageView in = detail::transform_view(image, "center_crop");
  detail::check_size(size, "center_crop");
  auto start = [](std::int64_t have, std::int64_t want) {
    return want > have ? -((want - have) / 2)
                       : detail::round_half_even(static_cast<double>(have - want) / 2.0);
  };
  return detail::copy_window(
      in, {start(in.height, size.height), start(in.width, size.width), size.height, size.width}, 0);
}

namespace detail {

/// random_crop's window in a height x width image: the row offset is
/// rng.uniform(height - size.height + 1), then the column's likewise.
inline CropWindow random_crop_window(std::int64_t height, std::int64_t width, Size size, Rng& rng,
                                     std::string_view op) {
  check_size(size, op);
  if (size.height > height || size.width > width) {
    throw InvalidArgument(std::string(op) + ": crop size " + std::to_string(size.height) + " x " +
                          std::to_string(size.width) + " is larger than the image, " +
                          std::to_string(height) + " x " + std::to_string(width));
  }
  const auto y =
      static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(height - size.height + 1)));
  const auto x =
      static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(width - size.width + 1)));
  return {y, x, size.height, size.width};
}

}  // namespace detail

/// A `size` crop of `image` at an offset uniform over every position inside
/// it (tf.image.random_crop; torchvision's RandomCrop without padding): the
/// row offset is rng.uniform(H - height + 1), then the column's likewise.
/// Throws InvalidArgument for an empty size or one larger than the image.
inline Tensor random_crop(const Tensor& image, Size size, Rng& rng) {
  const detail::ImageView in = detail::transform_view(image, "random_crop");
  return detail::copy_window(
      in, detail::random_crop_window(in.height, in.width, size, rng, "random_crop"), 0);
}

/// random_crop of an encoded JPEG or PNG image, decoding only the window
/// where it can: the window is drawn from the header's size as above, so the
/// result and the draws equal random_crop(decode_image(bytes, options), size,
/// rng)'s. A JPEG's window is decoded alone (decode_and_crop_jpeg, in pixels
/// of the image at 1/`.scale_denom`); a PNG is decoded whole, then cropped.
/// Throws as decode_image, and as random_crop for the size.
inline Tensor random_crop(ByteView bytes, Size size, Rng& rng, const DecodeOptions& options = {}) {
  constexpr std::string_view op = "random_crop";
  if (detail::require_format(bytes, op, options.file) == ImageFormat::png) {
    detail::PngDecoder decoder(bytes, options, op);
    const ImageHeader header = decoder.header();
    const CropWindow window =
        detail::random_crop_window(header.height, header.width, size, rng, op);
    const Tensor image = decoder.decode();
    return detail::copy_window(detail::transform_view(image, op), window, 0);
  }
  detail::JpegDecoder decoder(bytes, options, op);
  decoder.check_scale_denom(options.scale_denom);
  const Size full = decoder.scaled_size(options.scale_denom);
  return decoder.decode(options.scale_denom,
                        detail::random_crop_window(full.height, full.width, size, rng, op));
}

/// `image` with `padding` added on each side (tf.image.pad_to_bounding_box
/// and tf.pad; torchvision's Pad; numpy.pad): PadMode::constant fills with
/// `.value`, PadMode::reflect mirrors about the edge pixel without repeating
/// it (numpy's 'reflect'), so each reflected padding must be smaller than the
/// side it pads. Throws InvalidArgument for a negative padding, a reflected
/// one that is too large, or an output side of 2^31 or more.
inline Tensor pad(const Tensor& image, const Padding& padding, const PadOptions& options = {}) {
  const detail::ImageView in = detail::transform_view(image, "pad");
  const Padding& p = padding;
  auto fail = [&](const std::string& why) {
    throw InvalidArgument("pad: " + why + " (padding {top " + std::to_string(p.top) + ", bottom " +
                          std::to_string(p.bottom) + ", left " + std::to_string(p.left) +
                          ", right " + std::to_string(p.right) + "}, image " +
                          std::to_string(in.height) + " x " + std::to_string(in.width) + ")");
  };
  constexpr std::int64_t max_side = detail::max_image_side;
  if (p.top < 0 || p.bottom < 0 || p.left < 0 || p.right < 0) fail("padding must not be negative");
  // Each term is checked before it is added, so the sums cannot overflow.
  if (p.top > max_side || p.bottom > max_side || p.left > max_side || p.right > max_side ||
      in.height + p.top + p.bottom > max_side || in.width + p.left + p.right > max_side) {
    fail("the padded image's sides must be below 2^31");
  }
  if (options.mode == PadMode::reflect) {
    if (std::max(p.top, p.bottom) >= in.height || std::max(p.left, p.right) >= in.width) {
      fail("reflect padding must be smaller than the side it pads");
    }
    return detail::pad_reflect(in, p);
  }
  return detail::copy_window(
      in, {-p.top, -p.left, in.height + p.top + p.bottom, in.width + p.left + p.right},
      options.value);
}

/// `image` with a `size` box set to `fill` (Cutout, DeVries and Taylor 2017):
/// the box's centre is a pixel drawn uniformly over the whole image (row
/// rng.uniform(H), then column rng.uniform(W)), the box covers rows
/// [cy - height / 2, cy - height / 2 + height) and the columns likewise,
/// clipped to the image, so near an edge less than `size` is erased (unlike
/// torchvision's RandomErasing, which keeps the box inside). For an odd side
/// the box has that side, where the paper's code gives one less. Throws
/// InvalidArgument for an empty size.
inline Tensor cutout(const Tensor& image, Size size, Rng& rng, std::uint8_t fill = 0) {
  const detail::ImageView in = detail::transform_view(image, "cutout");
  detail::check_size(size, "cutout");
  if (in.height == 0 || in.width == 0) {
    throw InvalidArgument("cutout: the image is empty (" + image.shape().to_string() + ")");
  }
  const auto cy = static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(in.height)));
  const auto cx = static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(in.width)));
  const std::int64_t y0 = std::max<std::int64_t>(cy - size.height / 2, 0);
  const std::int64_t y1 = std::min(cy - size.height / 2 + size.height, in.height);
  const std::int64_t x0 = std::max<std::int64_t>(cx - size.width / 2, 0);
  const std::int64_t x1 = std::min(cx - size.width / 2 + size.width, in.width);
  Tensor out = detail::new_image(in.height, in.width, in.channels);
  const std::int64_t c = in.channels, row_bytes = in.width * c;
  std::uint8_t* dst = out.data<std::uint8_t>();
  for (std::int64_t y = 0; y < in.height; ++y, dst += row_bytes) {
    std::memcpy(dst, in.data + y * in.row_stride, static_cast<std::size_t>(row_bytes));
    if (y >= y0 && y < y1) std::memset(dst + x0 * c, fill, static_cast<std::size_t>((x1 - x0) * c));
  }
  return out;
}

}  // namespace ingest::image
