// What the image tests share: the fixtures of tests/fixtures/image (see
// generate.py there) and their manifest, TurboJPEG as the reference decoder
// (tjDecompress2) and as an encoder of synthetic JPEGs (tjCompress2), and
// pixel-difference statistics.
#pragma once

#include <turbojpeg.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ingest/image/image.hpp>

#include "support/files.hpp"
#include "support/paths.hpp"

namespace ingest::testing {

// Paths are built by appending: GCC 12 at -O1 (the tests' level) flags
// `std::string&& + const char*` with a false -Warray-bounds (a known GCC 12
// false positive in the inlined memcpy of the moved string).
inline std::string image_fixture_dir() {
  std::string dir = INGEST_FIXTURES_DIR;
  dir += "/image";
  return dir;
}

/// The bytes of fixture `rel` (a path relative to tests/fixtures/image).
inline std::string image_fixture(const std::string& rel) {
  std::string path = image_fixture_dir();
  path += '/';
  path += rel;
  return file_contents(path);
}

inline const nlohmann::json& image_manifest() {
  static const nlohmann::json m = nlohmann::json::parse(image_fixture("manifest.json"));
  return m;
}

/// A uint8 [h, w, c] tensor holding `bytes` (which must fill it).
inline Tensor image_tensor(const std::string& bytes, std::int64_t h, std::int64_t w,
                           std::int64_t c) {
  Tensor t(DType::uint8, Shape{h, w, c});
  if (bytes.size() != t.nbytes()) throw std::runtime_error("image_tensor: wrong byte count");
  std::copy(bytes.begin(), bytes.end(), t.data<std::uint8_t>());
  return t;
}

/// The input image of a manifest case ("input", "height", "width", "channels").
inline Tensor fixture_input(const nlohmann::json& c) {
  return image_tensor(image_fixture(c.at("input")), c.at("height"), c.at("width"),
                      c.at("channels"));
}

/// A uint8 [h, w, c] image whose value at (y, x, ch) is y * 16 + x * 4 + ch + 1
/// (wrapping past 255), so a test can tell every small image's values apart.
inline Tensor numbered_image(std::int64_t h, std::int64_t w, std::int64_t c) {
  // Filled through a vector: GCC 12 sees a zero-sized region behind a pooled
  // block's pointer when such a loop is inlined (-Wstringop-overflow).
  std::vector<std::uint8_t> v;
  for (std::int64_t y = 0; y < h; ++y) {
    for (std::int64_t x = 0; x < w; ++x) {
      for (std::int64_t k = 0; k < c; ++k) {
        v.push_back(static_cast<std::uint8_t>(y * 16 + x * 4 + k + 1));
      }
    }
  }
  return Tensor::from_values<std::uint8_t>(v, Shape{h, w, c});
}

/// Owns a TurboJPEG handle.
class TjHandle {
 public:
  explicit TjHandle(tjhandle h) : h_(h) {
    if (!h_) throw std::runtime_error("tjInit failed");
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  ~TjHandle() { tjDestroy(h_); }
  tjhandle get() const noexcept { return h_; }

 private:
  tjhandle h_;
};

// tjDecompress2 to the size of the image at 1/scale_denom.
inline Tensor tj_decompress(const std::string& jpeg, int pixel_format, int scale_denom) {
  TjHandle tj(tjInitDecompress());
  auto* buf = reinterpret_cast<const unsigned char*>(jpeg.data());
  const auto size = static_cast<unsigned long>(jpeg.size());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.get(), buf, size, &width, &height, &subsamp, &colorspace) != 0) {
    throw std::runtime_error(std::string("tjDecompressHeader3: ") + tjGetErrorStr2(tj.get()));
  }
  const tjscalingfactor factor{1, scale_denom};
  const int w = TJSCALED(width, factor), h = TJSCALED(height, factor);
  const int c = tjPixelSize[pixel_format];
  Tensor out(DType::uint8, Shape{h, w, c});
  if (tjDecompress2(tj.get(), buf, size, out.data<std::uint8_t>(), w, 0, h, pixel_format, 0) != 0) {
    throw std::runtime_error(std::string("tjDecompress2: ") + tjGetErrorStr2(tj.get()));
  }
  return out;
}

/// libjpeg-turbo's own decode (tjDecompress2, default flags: accurate DCT,
/// fancy upsampling) to `pixel_format` at 1/scale_denom, as [H, W, C].
/// tjDecompress2 takes a size, not a scale, and picks the largest scaling
/// factor that fits it: for tiny images several factors give the same size
/// (3 x 2 is 1 x 1 at 1/4 and 1/8), and no other factor can be asked for;
/// those return nullopt.
inline std::optional<Tensor> tj_decode_scaled(const std::string& jpeg, int pixel_format,
                                              int scale_denom) {
  TjHandle tj(tjInitDecompress());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.get(), reinterpret_cast<const unsigned char*>(jpeg.data()),
                          static_cast<unsigned long>(jpeg.size()), &width, &height, &subsamp,
                          &colorspace) != 0) {
    throw std::runtime_error(std::string("tjDecompressHeader3: ") + tjGetErrorStr2(tj.get()));
  }
  const tjscalingfactor wanted{1, scale_denom};
  int n = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&n);
  for (int i = 0; i < n; ++i) {
    const tjscalingfactor f = factors[i];
    if (TJSCALED(width, f) <= TJSCALED(width, wanted) &&
        TJSCALED(height, f) <= TJSCALED(height, wanted)) {
      if (f.num * scale_denom != f.denom) return std::nullopt;  // tj would pick f
      break;
    }
  }
  return tj_decompress(jpeg, pixel_format, scale_denom);
}

/// tj_decode_scaled where the scale is known to be available.
inline Tensor tj_decode(const std::string& jpeg, int pixel_format, int scale_denom = 1) {
  auto t = tj_decode_scaled(jpeg, pixel_format, scale_denom);
  if (!t) throw std::runtime_error("tjDecompress2 cannot decode this image at this scale");
  return std::move(*t);
}

/// Smooth gradients plus noise (compresses like a photograph), deterministic in `seed`.
inline std::vector<std::uint8_t> photo_pixels(int width, int height, int channels,
                                              std::uint32_t seed) {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(width) * height * channels);
  Rng rng(seed);
  const double a = rng.uniform01() * 6.28, b = rng.uniform01() * 6.28;
  std::size_t i = 0;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        double v = 128 + 70 * std::sin(x / (7.0 + c) + a) * std::cos(y / (9.0 + 2 * c) + b) +
                   40 * std::sin((x + y) / 23.0 + c) + (rng.uniform01() - 0.5) * 40;
        px[i++] = static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return px;
}

/// A JPEG made by tjCompress2: `subsamp` TJSAMP_*, gray when TJSAMP_GRAY.
inline std::string tj_encode(int width, int height, int subsamp, int quality = 90,
                             bool progressive = false, std::uint32_t seed = 1) {
  const int channels = subsamp == TJSAMP_GRAY ? 1 : 3;
  const auto px = photo_pixels(width, height, channels, seed);
  TjHandle tj(tjInitCompress());
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int flags = progressive ? TJFLAG_PROGRESSIVE : 0;
  if (tjCompress2(tj.get(), px.data(), width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &out,
                  &size, subsamp, quality, flags) != 0) {
    throw std::runtime_error(std::string("tjCompress2: ") + tjGetErrorStr2(tj.get()));
  }
  std::string jpeg(reinterpret_cast<const char*>(out), size);
  tjFree(out);
  return jpeg;
}

/// How far apart two images of the same shape are.
struct PixelDiff {
  int max = 0;              // largest absolute difference
  double mean = 0;          // mean absolute difference
  std::int64_t differ = 0;  // values that differ
};

inline PixelDiff pixel_diff(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape())) {
    throw std::runtime_error("pixel_diff: shapes " + a.shape().to_string() + " and " +
                             b.shape().to_string());
  }
  PixelDiff d;
  const auto x = a.values<std::uint8_t>(), y = b.values<std::uint8_t>();
  double total = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int diff = std::abs(int{x[i]} - int{y[i]});
    d.max = std::max(d.max, diff);
    d.differ += diff != 0;
    total += diff;
  }
  d.mean = x.empty() ? 0 : total / static_cast<double>(x.size());
  return d;
}

/// `window` of `image`, copied.
inline Tensor crop_copy(const Tensor& image, const image::CropWindow& window) {
  const std::int64_t c = image.dim(2), row = image.dim(1) * c;
  Tensor out(DType::uint8, Shape{window.height, window.width, c});
  for (std::int64_t y = 0; y < window.height; ++y) {
    const std::uint8_t* src = image.data<std::uint8_t>() + (window.y + y) * row + window.x * c;
    std::copy(src, src + window.width * c, out.data<std::uint8_t>() + y * window.width * c);
  }
  return out;
}

}  // namespace ingest::testing
