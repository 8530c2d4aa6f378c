#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ingest/image/random_resized_crop.hpp>

#include "support/images.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

namespace {

// A random source replaying chosen draws, to check the window arithmetic
// against torchvision's get_params fed the same draws.
struct Scripted {
  std::vector<double> u;
  std::vector<std::uint64_t> ints;
  std::size_t iu = 0, ii = 0;
  double uniform01() { return u.at(iu++); }
  std::uint64_t uniform(std::uint64_t n) {
    const std::uint64_t v = ints.at(ii++);
    REQUIRE(v < n);
    return v;
  }
};

CropWindow window(std::int64_t h, std::int64_t w, Scripted s, RandomResizedCropOptions o = {}) {
  return random_resized_crop_window(h, w, o, s);
}

}  // namespace

TEST_CASE("the crop window follows torchvision's RandomResizedCrop.get_params",
          "[image][random_resized_crop]") {
  // Expected values: torchvision's get_params (Python) with the same draws.
  // First draw 104 x 104 does not fit 100 rows; the second, 52 x 66, does.
  CHECK(window(100, 200, {{0.5, 0.5, 0.1, 0.9}, {7, 134}}) == CropWindow{7, 134, 52, 66});
  CHECK(window(375, 500, {{0.25, 0.0}, {3, 11}}) == CropWindow{3, 11, 278, 209});
  // Python's round() rounds half to even: 2.5 -> 2, 3.5 -> 4.
  CHECK(window(5, 5, {{0.3, 0.7}, {1, 2}}, {.scale = {0.25, 0.25}, .ratio = {1, 1}}) ==
        CropWindow{1, 2, 2, 2});
  CHECK(window(5, 5, {{0.3, 0.7}, {1, 0}}, {.scale = {0.49, 0.49}, .ratio = {1, 1}}) ==
        CropWindow{1, 0, 4, 4});
  // Fallback: the centre crop, the whole image clamped to the ratio range.
  CHECK(window(100, 1000, {}, {.attempts = 0}) == CropWindow{0, 433, 100, 133});
  CHECK(window(1000, 100, {}, {.attempts = 0}) == CropWindow{433, 0, 133, 100});
  CHECK(window(300, 400, {}, {.attempts = 0}) == CropWindow{0, 0, 300, 400});
  CHECK(window(7, 3, {}, {.attempts = 0}) == CropWindow{1, 0, 4, 3});
  CHECK(window(1, 1, {}, {.attempts = 0}) == CropWindow{0, 0, 1, 1});
  // Ten draws too tall for a 10-row strip, then the fallback.
  Scripted tall{std::vector<double>(20, 0.99), {}};
  CHECK(window(10, 1000, tall) == CropWindow{0, 493, 10, 13});
  // Exactly `attempts` draws before falling back.
  Scripted three{std::vector<double>(6, 0.99), {}};
  CHECK(window(10, 1000, three, {.attempts = 3}) == CropWindow{0, 493, 10, 13});
}

TEST_CASE("sampled windows cover the scale and ratio ranges and stay inside the image",
          "[image][random_resized_crop]") {
  // A square image: wide and tall crops fit equally often, so the accepted
  // ratios stay log-symmetric (on a landscape image wide ones win).
  Rng rng(2024);
  const RandomResizedCropOptions o{};
  double log_ratio_sum = 0, min_scale = 1, max_scale = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const CropWindow w = random_resized_crop_window(600, 600, o, rng);
    REQUIRE(w.y >= 0);
    REQUIRE(w.x >= 0);
    REQUIRE(w.height >= 1);
    REQUIRE(w.width >= 1);
    REQUIRE(w.y + w.height <= 600);
    REQUIRE(w.x + w.width <= 600);
    const double scale = static_cast<double>(w.height * w.width) / (600.0 * 600.0);
    const double ratio = static_cast<double>(w.width) / static_cast<double>(w.height);
    CHECK(ratio >= 0.75 * 0.99);
    CHECK(ratio <= 4.0 / 3.0 * 1.01);
    min_scale = std::min(min_scale, scale);
    max_scale = std::max(max_scale, scale);
    log_ratio_sum += std::log(ratio);
  }
  CHECK(min_scale < 0.085);
  CHECK(min_scale > 0.075);
  CHECK(max_scale > 0.95);
  CHECK(std::abs(log_ratio_sum / n) < 0.01);  // log-uniform around 1
  // The same seed draws the same windows.
  Rng a(5), b(5);
  for (int i = 0; i < 100; ++i) {
    CHECK(random_resized_crop_window(480, 640, o, a) == random_resized_crop_window(480, 640, o, b));
  }
}

TEST_CASE("random_resized_crop is deterministic for a seed and has the output's shape",
          "[image][random_resized_crop]") {
  const std::string jpeg = image_fixture("jpeg/rgb420_256x256_q90.jpg");
  Rng a(1), b(1), c(2);
  const Tensor x = random_resized_crop(jpeg, {}, a);
  CHECK(x.shape() == Shape{224, 224, 3});
  CHECK(x.dtype() == DType::uint8);
  CHECK(x == random_resized_crop(jpeg, {}, b));
  CHECK_FALSE(x == random_resized_crop(jpeg, {}, c));
  Rng d(3);
  CHECK(random_resized_crop(jpeg, {.size = {100, 150}, .decode = {.channels = 1}}, d).shape() ==
        Shape{100, 150, 1});
  // Upscaling a small image works too (no DCT scale then).
  Rng e(4);
  CHECK(random_resized_crop(image_fixture("jpeg/rgb420_17x13.jpg"), {}, e).shape() ==
        Shape{224, 224, 3});
}

TEST_CASE("decoding the window at full scale equals full decode, crop and resize",
          "[image][random_resized_crop]") {
  for (const char* name : {"jpeg/rgb420_256x256_q90.jpg", "jpeg/rgb420_97x131.jpg",
                           "jpeg/progressive420_99x75.jpg", "jpeg/cmyk_40x30.jpg"}) {
    const std::string bytes = image_fixture(name);
    const Tensor full = decode_jpeg(bytes, {.channels = 3});
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      INFO(name << " seed " << seed);
      const RandomResizedCropOptions o{
          .size = {64, 48}, .max_scale_denom = 1, .decode = {.channels = 3}};
      Rng a(seed), b(seed);
      CHECK(random_resized_crop(bytes, o, a) == random_resized_crop(full, o, b));
    }
  }
}

TEST_CASE("decoding at a DCT scale stays close to full decode, crop and resize",
          "[image][random_resized_crop]") {
  // 1024 x 768 with crops of 250 to 768 pixels: to 224 x 224 some decode at
  // 1/2; to 64 x 64 most at 1/4 or 1/8. The reference is torchvision's path:
  // the whole image decoded, cropped, resized with Pillow's bilinear filter.
  const std::string jpeg = tj_encode(1024, 768, TJSAMP_420, 90, false, 77);
  const Tensor full = decode_jpeg(jpeg);
  for (Size size : {Size{224, 224}, Size{64, 64}}) {
    double worst_mean = 0;
    int worst_max = 0, scaled = 0;
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
      const RandomResizedCropOptions o{.size = size};
      Rng a(seed), b(seed), c(seed);
      const CropWindow w = random_resized_crop_window(768, 1024, o, c);
      if (image::detail::crop_scale_denom(w, size, 8) == 1) continue;
      ++scaled;
      const PixelDiff d =
          pixel_diff(random_resized_crop(jpeg, o, a), random_resized_crop(full, o, b));
      worst_mean = std::max(worst_mean, d.mean);
      worst_max = std::max(worst_max, d.max);
    }
    INFO("to " << size.height << "x" << size.width << ": " << scaled << " of 40 at a DCT scale; "
               << "worst mean difference " << worst_mean << ", worst pixel " << worst_max);
    CHECK(scaled >= 10);
    CHECK(worst_mean < 2.5);
    CHECK(worst_max < 64);
    WARN("random_resized_crop at DCT scale vs full decode (to "
         << size.height << "x" << size.width << "): worst mean |diff| " << worst_mean
         << ", worst max " << worst_max);
  }
}

TEST_CASE("crop_scale_denom picks the largest scale that keeps the output's size",
          "[image][random_resized_crop]") {
  using image::detail::crop_scale_denom;
  CHECK(crop_scale_denom({0, 0, 447, 1000}, {224, 224}, 8) == 1);
  CHECK(crop_scale_denom({0, 0, 448, 448}, {224, 224}, 8) == 2);
  CHECK(crop_scale_denom({0, 0, 895, 2000}, {224, 224}, 8) == 2);
  CHECK(crop_scale_denom({0, 0, 896, 896}, {224, 224}, 8) == 4);
  CHECK(crop_scale_denom({0, 0, 1792, 1792}, {224, 224}, 8) == 8);
  CHECK(crop_scale_denom({0, 0, 1792, 1792}, {224, 224}, 2) == 2);
  CHECK(crop_scale_denom({0, 0, 1792, 1792}, {224, 224}, 1) == 1);
  CHECK(crop_scale_denom({0, 0, 9000, 100}, {224, 224}, 8) == 1);
}

TEST_CASE("random_resized_crop of a PNG decodes it whole, then crops and resizes",
          "[image][random_resized_crop][fixtures]") {
  const std::string png = image_fixture("png/rgba8.png");
  const Tensor decoded = decode_png(png, {.channels = 3});
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    Rng a(seed), b(seed);
    const RandomResizedCropOptions o{.size = {32, 32}, .decode = {.channels = 3}};
    CHECK(random_resized_crop(png, o, a) == random_resized_crop(decoded, o, b));
  }
}

TEST_CASE("random_resized_crop rejects bad options and bad bytes", "[image][random_resized_crop]") {
  const std::string jpeg = image_fixture("jpeg/gray_45x33.jpg");
  Rng rng(1);
  const RandomResizedCropOptions bad[] = {
      {.size = {0, 224}},          {.scale = {0.5, 0.1}},
      {.scale = {-0.1, 1}},        {.scale = {0.1, INFINITY}},
      {.ratio = {0, 1}},           {.ratio = {2, 1}},
      {.ratio = {1, NAN}},         {.attempts = -1},
      {.max_scale_denom = 3},      {.decode = {.scale_denom = 2}},
      {.decode = {.channels = 2}},
  };
  for (const auto& o : bad) CHECK_THROWS_AS(random_resized_crop(jpeg, o, rng), InvalidArgument);
  CHECK_THROWS_AS(random_resized_crop(Tensor(), {}, rng), InvalidArgument);
  CHECK_THROWS_AS(random_resized_crop(std::string("nope"), {}, rng), DataLossError);
  CHECK_THROWS_AS(random_resized_crop(jpeg.substr(0, 50), {}, rng), DataLossError);
  CHECK_THROWS_AS(random_resized_crop(jpeg, {.decode = {.max_pixels = 100}}, rng), InvalidArgument);
  Rng r(1);
  CHECK_THROWS_AS(random_resized_crop_window(0, 10, {}, r), InvalidArgument);
}
