// random_resized_crop: torchvision's RandomResizedCrop fused with decoding (tf:
// sample_distorted_bounding_box + decode_and_crop_jpeg + resize): the window comes
// from the header, only it is decoded, at the largest DCT scale keeping the
// output's size, then resized. Thread-safe given one Rng per thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/decode.hpp"
#include "ingest/image/jpeg.hpp"
#include "ingest/image/png.hpp"
#include "ingest/image/resize.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {

/// A closed interval [min, max].
struct Interval {
  /// The lower bound.
  double min = 0;
  /// The upper bound.
  double max = 0;
};

/// Options of random_resized_crop: the output size, the ranges its window is drawn from, and
/// how the window is decoded and resized.
struct RandomResizedCropOptions {
  /// The output's size.
  Size size = {224, 224};
  /// The crop's area as a fraction of the image's, drawn uniformly.
  Interval scale = {0.08, 1.0};
  /// The crop's width / height, drawn log-uniformly.
  Interval ratio = {3.0 / 4.0, 4.0 / 3.0};
  /// Draws before falling back to the centre crop.
  int attempts = 10;
  /// How the window is resized to `size`.
  ResizeMethod method = ResizeMethod::bilinear;
  /// Bilinear only: widen the filter by the downscale factor (see ResizeOptions::antialias).
  bool antialias = true;
  /// The largest DCT downscale used when decoding JPEG (1, 2, 4 or 8); 1
  /// decodes the window at full resolution.
  int max_scale_denom = 8;
  /// How to decode (`.scale_denom` must stay 1: the crop picks the scale).
  DecodeOptions decode = {};
};

namespace detail {

inline void check_random_resized_crop(const RandomResizedCropOptions& o) {
  auto fail = [](const std::string& what) {
    throw InvalidArgument("random_resized_crop: " + what);
  };
  if (o.size.height <= 0 || o.size.width <= 0) {
    fail("size must be positive, got " + std::to_string(o.size.height) + " x " +
         std::to_string(o.size.width));
  }
  if (!(o.scale.min >= 0 && o.scale.min <= o.scale.max && std::isfinite(o.scale.max))) {
    fail("scale must satisfy 0 <= min <= max, got [" + std::to_string(o.scale.min) + ", " +
         std::to_string(o.scale.max) + "]");
  }
  if (!(o.ratio.min > 0 && o.ratio.min <= o.ratio.max && std::isfinite(o.ratio.max))) {
    fail("ratio must satisfy 0 < min <= max, got [" + std::to_string(o.ratio.min) + ", " +
         std::to_string(o.ratio.max) + "]");
  }
  if (o.attempts < 0) fail("attempts must be >= 0, got " + std::to_string(o.attempts));
  if (o.max_scale_denom != 1 && o.max_scale_denom != 2 && o.max_scale_denom != 4 &&
      o.max_scale_denom != 8) {
    fail("max_scale_denom must be 1, 2, 4 or 8, got " + std::to_string(o.max_scale_denom));
  }
  if (o.decode.scale_denom != 1) {
    fail(
        "decode.scale_denom must be 1 (the crop chooses the scale; bound it with max_scale_denom)");
  }
}

/// The largest s in {1, 2, 4, 8}, s <= max_denom, with crop / s >= size.
inline int crop_scale_denom(const CropWindow& crop, Size size, int max_denom) noexcept {
  for (int s = max_denom; s > 1; s /= 2) {
    if (crop.height >= size.height * s && crop.width >= size.width * s) return s;
  }
  return 1;
}

inline ResizeOptions crop_resize_options(const RandomResizedCropOptions& o) {
  return {.method = o.method, .antialias = o.antialias};
}

}  // namespace detail

/// The crop window of torchvision's RandomResizedCrop.get_params for an image
/// of height x width: up to `attempts` draws of an area fraction (uniform in
/// `scale`) and an aspect ratio (log-uniform in `ratio`), sides rounded half
/// to even; the first that fits is placed uniformly. Otherwise the centre
/// crop: the whole image, clamped to the ratio range. `rng` needs
/// uniform01() and uniform(n) (ingest::Rng).
template <class Random>
CropWindow random_resized_crop_window(std::int64_t height, std::int64_t width,
                                      const RandomResizedCropOptions& options, Random& rng) {
  detail::check_random_resized_crop(options);
  if (height <= 0 || width <= 0) {
    throw InvalidArgument("random_resized_crop: empty image (" + std::to_string(height) + " x " +
                          std::to_string(width) + ")");
  }
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_min = std::log(options.ratio.min), log_max = std::log(options.ratio.max);
  for (int attempt = 0; attempt < options.attempts; ++attempt) {
    const double target_area =
        area * (options.scale.min + (options.scale.max - options.scale.min) * rng.uniform01());
    const double aspect = std::exp(log_min + (log_max - log_min) * rng.uniform01());
    const std::int64_t w = detail::round_half_even(std::sqrt(target_area * aspect));
    const std::int64_t h = detail::round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const auto y =
          static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(height - h + 1)));
      const auto x =
          static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(width - w + 1)));
      return {y, x, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  std::int64_t w = width, h = height;
  if (in_ratio < options.ratio.min) {
    h = detail::round_half_even(static_cast<double>(w) / options.ratio.min);
  } else if (in_ratio > options.ratio.max) {
    w = detail::round_half_even(static_cast<double>(h) * options.ratio.max);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

/// RandomResizedCrop of an already decoded uint8 [H, W, C] image
/// (torchvision's transform on a PIL image: crop, then Pillow's resize).
inline Tensor random_resized_crop(const Tensor& image, const RandomResizedCropOptions& options,
                                  Rng& rng) {
  const detail::ImageView view = detail::view_of(image, "random_resized_crop");
  const CropWindow crop = random_resized_crop_window(view.height, view.width, options, rng);
  return detail::resize_view(detail::crop_view(view, crop), options.size,
                             detail::crop_resize_options(options), "random_resized_crop");
}

/// RandomResizedCrop of an encoded image, decoding only the crop: a JPEG's
/// window is decoded at the largest DCT scale 1/s (s <= max_scale_denom)
/// keeping it at least `size`, then resized from its exact (fractional)
/// extent at that scale; other formats are decoded whole, then cropped and
/// resized. Throws as decode_image, and InvalidArgument for bad options.
inline Tensor random_resized_crop(ByteView bytes, const RandomResizedCropOptions& options,
                                  Rng& rng) {
  constexpr std::string_view op = "random_resized_crop";
  detail::check_random_resized_crop(options);
  const ResizeOptions resize_options = detail::crop_resize_options(options);
  if (detail::require_format(bytes, op, options.decode.file) == ImageFormat::png) {
    detail::PngDecoder decoder(bytes, options.decode, op);
    const ImageHeader header = decoder.header();
    const CropWindow crop = random_resized_crop_window(header.height, header.width, options, rng);
    const Tensor image = decoder.decode();
    return detail::resize_view(detail::crop_view(detail::view_of(image, op), crop), options.size,
                               resize_options, op);
  }
  detail::JpegDecoder decoder(bytes, options.decode, op);
  const ImageHeader header = decoder.header();
  const CropWindow crop = random_resized_crop_window(header.height, header.width, options, rng);
  const int s = detail::crop_scale_denom(crop, options.size, options.max_scale_denom);
  if (s == 1) {
    const Tensor window = decoder.decode(1, crop);
    return detail::resize_view(detail::view_of(window, op), options.size, resize_options, op);
  }
  // The whole scaled pixels covering the crop; the resize then reads the
  // crop's exact extent from them (a box with fractional edges).
  const Size scaled = decoder.scaled_size(s);
  const std::int64_t y0 = crop.y / s, x0 = crop.x / s;
  const std::int64_t y1 = std::min(scaled.height, (crop.y + crop.height + s - 1) / s);
  const std::int64_t x1 = std::min(scaled.width, (crop.x + crop.width + s - 1) / s);
  const Tensor tile = decoder.decode(s, CropWindow{y0, x0, y1 - y0, x1 - x0});
  const double inv = 1.0 / s;  // exact: s is a power of two
  ResizeOptions boxed = resize_options;
  boxed.box =
      SourceBox{static_cast<double>(crop.y) * inv - static_cast<double>(y0),
                static_cast<double>(crop.x) * inv - static_cast<double>(x0),
                static_cast<double>(crop.height) * inv, static_cast<double>(crop.width) * inv};
  return detail::resize_view(detail::view_of(tile, op), options.size, boxed, op);
}

}  // namespace ingest::image
