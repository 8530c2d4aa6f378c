// Mirror images of uint8 [H, W, C] images (C = 1, 3 or 4): flip_left_right,
// flip_up_down and random_flip_left_right (tf.image's flips, torchvision's
// RandomHorizontalFlip, PIL's Image.transpose). Each flip copies once into a
// new tensor from the pooled allocator; thread-safe given one Rng per thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "ingest/core/errors.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {

namespace detail {

// One row's pixels in reverse order; C known at compile time so that the
// per-pixel copy is a register move.
template <int C>
void reverse_pixels(const std::uint8_t* __restrict src, std::int64_t width,
                    std::uint8_t* __restrict dst) noexcept {
  for (std::int64_t x = 0; x < width; ++x) {
    for (int c = 0; c < C; ++c) dst[x * C + c] = src[(width - 1 - x) * C + c];
  }
}

}  // namespace detail

/// `image` (uint8 [H, W, C]) mirrored left to right (tf.image.flip_left_right,
/// PIL's Image.transpose(FLIP_LEFT_RIGHT)). Throws InvalidArgument for a
/// tensor that is not such an image.
inline Tensor flip_left_right(const Tensor& image) {
  const detail::ImageView in = detail::transform_view(image, "flip_left_right");
  Tensor out = detail::new_image(in.height, in.width, in.channels);
  const std::int64_t row_bytes = in.width * in.channels;
  for (std::int64_t y = 0; y < in.height; ++y) {
    const std::uint8_t* src = in.data + y * in.row_stride;
    std::uint8_t* dst = out.data<std::uint8_t>() + y * row_bytes;
    switch (in.channels) {
      case 1: detail::reverse_pixels<1>(src, in.width, dst); break;
      case 3: detail::reverse_pixels<3>(src, in.width, dst); break;
      default: detail::reverse_pixels<4>(src, in.width, dst); break;
    }
  }
  return out;
}

/// `image` (uint8 [H, W, C]) mirrored top to bottom (tf.image.flip_up_down,
/// PIL's Image.transpose(FLIP_TOP_BOTTOM)). Throws InvalidArgument for a
/// tensor that is not such an image.
inline Tensor flip_up_down(const Tensor& image) {
  const detail::ImageView in = detail::transform_view(image, "flip_up_down");
  Tensor out = detail::new_image(in.height, in.width, in.channels);
  if (out.nbytes() == 0) return out;  // no pointers to pass to memcpy
  const std::int64_t row_bytes = in.width * in.channels;
  for (std::int64_t y = 0; y < in.height; ++y) {
    std::memcpy(out.data<std::uint8_t>() + y * row_bytes,
                in.data + (in.height - 1 - y) * in.row_stride, static_cast<std::size_t>(row_bytes));
  }
  return out;
}

/// flip_left_right(image) with probability `p`, else `image` itself (the same
/// storage, no copy), as tf.image.random_flip_left_right and torchvision's
/// RandomHorizontalFlip(p): one rng.uniform01() per call, flipped when it is
/// below `p`. Throws InvalidArgument for p outside [0, 1] (or NaN) and for a
/// tensor that is not an image, whatever the draw.
inline Tensor random_flip_left_right(const Tensor& image, Rng& rng, double p = 0.5) {
  detail::transform_view(image, "random_flip_left_right");
  if (!(p >= 0.0 && p <= 1.0)) {
    throw InvalidArgument("random_flip_left_right: p must be in [0, 1], got " + std::to_string(p));
  }
  return rng.uniform01() < p ? flip_left_right(image) : image;
}

}  // namespace ingest::image
