#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <ingest/image/resize.hpp>

#include "support/images.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

namespace {

Tensor channel(const Tensor& image, std::int64_t c) {
  const std::int64_t h = image.dim(0), w = image.dim(1), n = image.dim(2);
  Tensor out(DType::uint8, Shape{h, w, 1});
  for (std::int64_t i = 0; i < h * w; ++i) {
    out.data<std::uint8_t>()[i] = image.data<std::uint8_t>()[i * n + c];
  }
  return out;
}

Tensor photo(int h, int w, int c, std::uint32_t seed) {
  const auto px = photo_pixels(w, h, c, seed);
  return image_tensor(std::string(px.begin(), px.end()), h, w, c);
}

}  // namespace

TEST_CASE("resize matches Pillow's BILINEAR and BOX within one grey level",
          "[image][resize][fixtures]") {
  const auto& cases = image_manifest().at("resize");
  REQUIRE(cases.size() == 42);
  std::int64_t values = 0, differ = 0;
  for (const auto& c : cases) {
    const std::int64_t h = c.at("height"), w = c.at("width"), ch = c.at("channels");
    const std::int64_t oh = c.at("out_height"), ow = c.at("out_width");
    const Tensor input = image_tensor(image_fixture(c.at("input")), h, w, ch);
    const Tensor expected = image_tensor(image_fixture(c.at("expected")), oh, ow, ch);
    ResizeOptions options{.method = c.at("method") == "area" ? ResizeMethod::area
                                                             : ResizeMethod::bilinear};
    if (c.contains("box")) {
      const auto& b = c.at("box");
      options.box = SourceBox{b.at("y"), b.at("x"), b.at("height"), b.at("width")};
    }
    INFO(c.at("expected").get<std::string>());
    const Tensor ours = resize(input, {oh, ow}, options);
    REQUIRE(ours.shape() == expected.shape());
    const PixelDiff d = pixel_diff(ours, expected);
    CHECK(d.max <= 1);
    values += ours.num_elements();
    differ += d.differ;
  }
  // The arithmetic is Pillow's, so in practice every value is equal.
  INFO(differ << " of " << values << " values differ");
  CHECK(differ == 0);
}

TEST_CASE("resize without antialiasing samples two pixels per axis, as tf.image.resize",
          "[image][resize]") {
  const Tensor img = photo(16, 24, 3, 1);
  const auto* p = img.data<std::uint8_t>();
  // Half size: each output is the mean of a 2x2 block (half-pixel centres).
  const Tensor half = resize(img, {8, 12}, {.antialias = false});
  // A quarter: the mean of the middle 2x2 of each 4x4 block.
  const Tensor quarter = resize(img, {4, 6}, {.antialias = false});
  auto at = [p](std::int64_t y, std::int64_t x, std::int64_t c) { return p[(y * 24 + x) * 3 + c]; };
  for (std::int64_t y = 0; y < 8; ++y) {
    for (std::int64_t x = 0; x < 12; ++x) {
      for (std::int64_t c = 0; c < 3; ++c) {
        // Separable: rows first (rounded to 8 bits), then columns.
        const int r0 = (at(2 * y, 2 * x, c) + at(2 * y, 2 * x + 1, c) + 1) / 2;
        const int r1 = (at(2 * y + 1, 2 * x, c) + at(2 * y + 1, 2 * x + 1, c) + 1) / 2;
        CHECK(int{half.data<std::uint8_t>()[(y * 12 + x) * 3 + c]} == (r0 + r1 + 1) / 2);
        if (y < 4 && x < 6) {
          const int q0 = (at(4 * y + 1, 4 * x + 1, c) + at(4 * y + 1, 4 * x + 2, c) + 1) / 2;
          const int q1 = (at(4 * y + 2, 4 * x + 1, c) + at(4 * y + 2, 4 * x + 2, c) + 1) / 2;
          CHECK(int{quarter.data<std::uint8_t>()[(y * 6 + x) * 3 + c]} == (q0 + q1 + 1) / 2);
        }
      }
    }
  }
  // Area ignores the flag: it always averages what each pixel covers.
  CHECK(resize(img, {4, 6}, {.method = ResizeMethod::area, .antialias = false}) ==
        resize(img, {4, 6}, {.method = ResizeMethod::area}));
  CHECK_FALSE(resize(img, {4, 6}, {.antialias = false}) == resize(img, {4, 6}));
}

TEST_CASE("resize resamples every channel alike, for any channel count", "[image][resize]") {
  for (int c : {1, 2, 3, 4, 5}) {
    const Tensor img = photo(37, 29, c, 10 + c);
    for (Size size : {Size{11, 13}, Size{60, 41}, Size{37, 7}, Size{5, 29}}) {
      for (ResizeMethod m : {ResizeMethod::bilinear, ResizeMethod::area}) {
        INFO(c << " channels to " << size.height << "x" << size.width);
        const Tensor all = resize(img, size, {.method = m});
        CHECK(all.shape() == Shape{size.height, size.width, c});
        for (std::int64_t k = 0; k < c; ++k) {
          CHECK(channel(all, k) == resize(channel(img, k), size, {.method = m}));
        }
      }
    }
  }
}

TEST_CASE("the SIMD kernels equal the portable ones on crops, boxes and strong downscales",
          "[image][resize]") {
  // The portable kernels are Pillow's arithmetic; the SSE2 ones must give
  // the same bytes everywhere, including crops of a larger image (rows
  // further apart than their width), the image's last rows (where they read
  // a padded copy) and downscales past their limit (where they hand over).
  Rng rng(99);
  int cases = 0;
  for (int c : {1, 2, 3, 4}) {
    const Tensor big = photo(97, 131, c, static_cast<std::uint32_t>(c));
    const auto whole = image::detail::view_of(big, "test");
    for (int t = 0; t < 60; ++t) {
      auto pick = [&rng](std::int64_t n) { return static_cast<std::int64_t>(rng.uniform(n)); };
      const std::int64_t y = pick(97), x = pick(131);
      const std::int64_t h = 1 + pick(97 - y), w = 1 + pick(131 - x);
      const image::detail::ImageView crop{whole.data + y * whole.row_stride + x * c, h, w, c,
                                          whole.row_stride};
      const Size size{1 + pick(150), 1 + pick(150)};
      ResizeOptions o{.method = t % 2 ? ResizeMethod::area : ResizeMethod::bilinear,
                      .antialias = t % 5 != 0};
      if (t % 3 == 0) {
        const double by = rng.uniform01() * static_cast<double>(h) * 0.5;
        const double bx = rng.uniform01() * static_cast<double>(w) * 0.5;
        o.box = SourceBox{by, bx, (static_cast<double>(h) - by) * (0.5 + rng.uniform01() / 2),
                          (static_cast<double>(w) - bx) * (0.5 + rng.uniform01() / 2)};
      }
      INFO(c << " channels, crop " << y << "," << x << " " << h << "x" << w << " to " << size.height
             << "x" << size.width << " case " << t);
      CHECK(image::detail::resize_view(crop, size, o, "test") ==
            image::detail::resize_view(crop, size, o, "test", false));
      ++cases;
    }
  }
  // 3000 columns to 2: 1,501 taps each, past the SIMD kernels' limit.
  const Tensor wide = photo(3, 3000, 3, 5);
  const auto v = image::detail::view_of(wide, "test");
  CHECK(image::detail::resize_view(v, {2, 2}, {}, "test") ==
        image::detail::resize_view(v, {2, 2}, {}, "test", false));
  CHECK(cases == 240);
}

TEST_CASE("resize keeps constants constant and the identity is a copy", "[image][resize]") {
  Tensor flat(DType::uint8, Shape{19, 23, 3});
  for (auto& v : flat.values<std::uint8_t>()) v = 77;
  for (Size size : {Size{1, 1}, Size{7, 5}, Size{19, 23}, Size{200, 3}, Size{64, 64}}) {
    for (ResizeMethod m : {ResizeMethod::bilinear, ResizeMethod::area}) {
      const Tensor out = resize(flat, size, {.method = m});
      for (std::uint8_t v : out.values<std::uint8_t>()) CHECK(v == 77);
    }
  }
  const Tensor img = photo(19, 23, 3, 5);
  const Tensor same = resize(img, {19, 23});
  CHECK(same == img);
  CHECK_FALSE(same.shares_storage_with(img));
  // A box of the whole image is no box.
  CHECK(resize(img, {10, 10}, {.box = SourceBox{0, 0, 19, 23}}) == resize(img, {10, 10}));
  // A whole-pixel box equals resizing the crop... only when the filter does
  // not reach past the box (Pillow reads neighbours); at the same size it is a crop.
  CHECK(resize(img, {5, 6}, {.box = SourceBox{3, 4, 5, 6}}) == crop_copy(img, {3, 4, 5, 6}));
  // A 1 x 1 image upscales to a constant.
  const Tensor dot = photo(1, 1, 3, 2);
  const Tensor big = resize(dot, {9, 4});
  for (std::int64_t i = 0; i < 36; ++i) {
    CHECK(big.data<std::uint8_t>()[i * 3 + 1] == dot.data<std::uint8_t>()[1]);
  }
}

TEST_CASE("resize rejects what is not an image, empty sizes and boxes outside the image",
          "[image][resize]") {
  const Tensor img = photo(10, 12, 3, 1);
  CHECK_THROWS_AS(resize(Tensor(), {4, 4}), InvalidArgument);
  CHECK_THROWS_AS(resize(Tensor(DType::float32, Shape{10, 12, 3}), {4, 4}), InvalidArgument);
  CHECK_THROWS_AS(resize(Tensor(DType::uint8, Shape{10, 12}), {4, 4}), InvalidArgument);
  CHECK_THROWS_AS(resize(Tensor(DType::uint8, Shape{10, 12, 0}), {4, 4}), InvalidArgument);
  CHECK_THROWS_AS(resize(Tensor(DType::uint8, Shape{0, 12, 3}), {4, 4}), InvalidArgument);
  CHECK_THROWS_AS(resize(img, {0, 4}), InvalidArgument);
  CHECK_THROWS_AS(resize(img, {4, -1}), InvalidArgument);
  CHECK_THROWS_AS(resize(img, {std::int64_t{1} << 31, 1}), InvalidArgument);
  const SourceBox bad[] = {{-0.5, 0, 1, 1}, {0, 0, 0, 1},    {0, 0, 11, 1},
                           {9.5, 0, 1, 1},  {0, 11.5, 1, 1}, {0, 0, 1, std::nan("")}};
  for (const SourceBox& b : bad) CHECK_THROWS_AS(resize(img, {4, 4}, {.box = b}), InvalidArgument);
  CHECK_THROWS_WITH(resize(Tensor(DType::int32, Shape{2, 2, 1}), {1, 1}),
                    Catch::Contains("resize: expected a host uint8 image"));
}

TEST_CASE("a strong downscale averages over its whole support", "[image][resize]") {
  // 1000 columns to 1: every input column contributes (antialiasing).
  Tensor row(DType::uint8, Shape{1, 1000, 1});
  for (std::int64_t x = 0; x < 1000; ++x) row.data<std::uint8_t>()[x] = x < 500 ? 0 : 200;
  CHECK(int{resize(row, {1, 1}).data<std::uint8_t>()[0]} == 100);
  CHECK(int{resize(row, {1, 1}, {.method = ResizeMethod::area}).data<std::uint8_t>()[0]} == 100);
  CHECK(int{resize(row, {1, 2}, {.method = ResizeMethod::area}).data<std::uint8_t>()[1]} == 200);
}
