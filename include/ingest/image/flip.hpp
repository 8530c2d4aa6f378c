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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define INGEST_FLIP_SSSE3 1
#else
#define INGEST_FLIP_SSSE3 0
#endif

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

#if INGEST_FLIP_SSSE3
inline bool flip_ssse3_available() noexcept {
  static const bool available = __builtin_cpu_supports("ssse3");
  return available;
}

// The byte shuffles that reverse 16 RGB pixels (48 bytes, three vectors):
// output vector k takes its bytes from input vector j through masks[k][j]
// (-1: none from there).
struct ReverseMasks {
  std::int8_t masks[3][3][16];
};
constexpr ReverseMasks make_reverse_masks() noexcept {
  ReverseMasks r{};
  for (auto& out : r.masks)
    for (auto& in : out)
      for (auto& b : in) b = -1;
  for (int i = 0; i < 48; ++i) {
    const int from = 3 * (15 - i / 3) + i % 3;
    r.masks[i / 16][from / 16][i % 16] = static_cast<std::int8_t>(from % 16);
  }
  return r;
}
inline constexpr ReverseMasks reverse_masks = make_reverse_masks();

// reverse_pixels<3> with SSSE3, chosen at run time: 16 pixels at a time,
// six byte shuffles; the pixels left over through the portable loop.
__attribute__((target("ssse3"))) inline void reverse_pixels3_ssse3(
    const std::uint8_t* __restrict src, std::int64_t width, std::uint8_t* __restrict dst) noexcept {
  const auto load = [](const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); };
  __m128i mask[3][3];
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 3; ++j) mask[k][j] = load(reverse_masks.masks[k][j]);
  std::int64_t x = 0;
  for (; x + 16 <= width; x += 16) {
    const std::uint8_t* from = src + (width - 16 - x) * 3;
    const __m128i v0 = load(from), v1 = load(from + 16), v2 = load(from + 32);
    for (int k = 0; k < 3; ++k) {
      const __m128i out = _mm_or_si128(
          _mm_or_si128(_mm_shuffle_epi8(v0, mask[k][0]), _mm_shuffle_epi8(v1, mask[k][1])),
          _mm_shuffle_epi8(v2, mask[k][2]));
      _mm_storeu_si128(static_cast<__m128i*>(static_cast<void*>(dst + x * 3 + 16 * k)), out);
    }
  }
  // The rest: the first width - x pixels of src, reversed.
  reverse_pixels<3>(src, width - x, dst + x * 3);
}
#endif

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
      case 3:
#if INGEST_FLIP_SSSE3
        if (detail::flip_ssse3_available()) {
          detail::reverse_pixels3_ssse3(src, in.width, dst);
          break;
        }
#endif
        detail::reverse_pixels<3>(src, in.width, dst);
        break;
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
