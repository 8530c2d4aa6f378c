// rotate: bilinear rotation of uint8 [H, W, C] images (C = 1, 3 or 4) about
// their centre, the output the input's size, as PIL's Image.rotate(angle,
// BILINEAR, expand=False, fillcolor) and torchvision's rotate on a PIL image.
// One pass into a new tensor from the pooled allocator; thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {

/// Options of rotate.
struct RotateOptions {
  /// The value of every channel of the output pixels whose source lies
  /// outside the image (Pillow's fillcolor, torchvision's fill).
  std::uint8_t fill = 0;
};

namespace detail {

// Pillow's Image.rotate matrix rounds cos and sin to 15 decimals (so that
// multiples of 90 degrees are exact); Python's round(x, 15) is close to this.
inline double round15(double x) noexcept { return std::nearbyint(x * 1e15) / 1e15; }

// Output pixel (x, y) samples the input at (a[0] x' + a[1] y' + a[2], a[3] x'
// + a[4] y' + a[5]), x' = x + 0.5, y' = y + 0.5 (pixel centres), as Pillow's
// affine_transform; bilinear_filter is Pillow's: outside [0, W) x [0, H) is
// fill, else the four nearest pixel centres with edge pixels repeated, the
// result truncated to an integer.
template <int C>
void rotate_pixels(const ImageView& in, const double (&a)[6], std::uint8_t fill,
                   std::uint8_t* __restrict out) noexcept {
  const auto w = static_cast<double>(in.width), h = static_cast<double>(in.height);
  for (std::int64_t y = 0; y < in.height; ++y) {
    const double yc = static_cast<double>(y) + 0.5;
    for (std::int64_t x = 0; x < in.width; ++x, out += C) {
      const double xc = static_cast<double>(x) + 0.5;
      double xin = a[0] * xc + a[1] * yc + a[2];
      double yin = a[3] * xc + a[4] * yc + a[5];
      if (!(xin >= 0.0 && xin < w && yin >= 0.0 && yin < h)) {
        for (int c = 0; c < C; ++c) out[c] = fill;
        continue;
      }
      xin -= 0.5;
      yin -= 0.5;
      const double fx = std::floor(xin), fy = std::floor(yin);
      const double dx = xin - fx, dy = yin - fy;
      const auto ix = static_cast<std::int64_t>(fx), iy = static_cast<std::int64_t>(fy);
      const std::int64_t x0 = ix < 0 ? 0 : ix, x1 = ix + 1 < in.width ? ix + 1 : in.width - 1;
      const std::uint8_t* r0 = in.data + (iy < 0 ? 0 : iy) * in.row_stride;
      const std::uint8_t* r1 = iy + 1 < in.height ? in.data + (iy + 1) * in.row_stride : nullptr;
      for (int c = 0; c < C; ++c) {
        const double a0 = r0[x0 * C + c], b0 = r0[x1 * C + c];
        const double v1 = a0 + (b0 - a0) * dx;
        double v2 = v1;
        if (r1 != nullptr) {
          const double a1 = r1[x0 * C + c], b1 = r1[x1 * C + c];
          v2 = a1 + (b1 - a1) * dx;
        }
        out[c] = static_cast<std::uint8_t>(v1 + (v2 - v1) * dy);
      }
    }
  }
}

}  // namespace detail

/// `image` (uint8 [H, W, C]) rotated `degrees` counter-clockwise about its
/// centre (W / 2, H / 2), bilinear, the output the input's size, computed as
/// Pillow computes Image.rotate(degrees, Image.BILINEAR, expand=False,
/// fillcolor=(fill, ...)): each output pixel centre is mapped back through
/// the inverse rotation in double, the four nearest input pixels are
/// interpolated and the result truncated; source points outside the image
/// give `.fill`. Channels are interpolated independently (Pillow
/// premultiplies RGBA by alpha first; this does not). Throws InvalidArgument
/// for a tensor that is not such an image or a degrees that is not finite.
inline Tensor rotate(const Tensor& image, double degrees, const RotateOptions& options = {}) {
  const detail::ImageView in = detail::transform_view(image, "rotate");
  if (!std::isfinite(degrees)) {
    throw InvalidArgument("rotate: degrees must be finite, got " + std::to_string(degrees));
  }
  // Pillow: angle % 360 (Python's modulo, never negative), negated in radians.
  double angle = std::fmod(degrees, 360.0);
  if (angle < 0) angle += 360.0;
  const double radians = -(angle * (3.14159265358979323846 / 180.0));
  const double c = detail::round15(std::cos(radians)), s = detail::round15(std::sin(radians));
  const double cx = static_cast<double>(in.width) / 2.0, cy = static_cast<double>(in.height) / 2.0;
  const double a[6] = {c, s, c * -cx + s * -cy + 0.0 + cx, -s, c, -s * -cx + c * -cy + 0.0 + cy};
  Tensor out = detail::new_image(in.height, in.width, in.channels);
  std::uint8_t* dst = out.data<std::uint8_t>();
  switch (in.channels) {
    case 1: detail::rotate_pixels<1>(in, a, options.fill, dst); break;
    case 3: detail::rotate_pixels<3>(in, a, options.fill, dst); break;
    default: detail::rotate_pixels<4>(in, a, options.fill, dst); break;
  }
  return out;
}

}  // namespace ingest::image
