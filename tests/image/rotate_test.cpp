#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include <ingest/image/rotate.hpp>

#include "support/images.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

TEST_CASE("rotate matches Pillow's Image.rotate(BILINEAR, fillcolor)",
          "[image][rotate][fixtures]") {
  const auto& cases = image_manifest().at("rotate");
  REQUIRE(cases.size() == 14);
  std::int64_t values = 0, differ = 0;
  int max = 0;
  for (const auto& c : cases) {
    const Tensor input = fixture_input(c);
    const Tensor expected =
        image_tensor(image_fixture(c.at("expected")), input.dim(0), input.dim(1), input.dim(2));
    INFO(c.at("expected").get<std::string>());
    const Tensor ours = rotate(input, c.at("degrees").get<double>(),
                               {.fill = static_cast<std::uint8_t>(c.at("fill").get<int>())});
    REQUIRE(ours.shape() == expected.shape());
    const PixelDiff d = pixel_diff(ours, expected);
    CHECK(d.max <= 1);
    max = std::max(max, d.max);
    values += ours.num_elements();
    differ += d.differ;
  }
  // The arithmetic is Pillow's (double coordinates, truncation), so every
  // value is equal: measured 0 of 44,037 values differ (max difference 0).
  INFO(differ << " of " << values << " values differ, by at most " << max);
  CHECK(differ == 0);
  CHECK(values == 44037);
}

TEST_CASE("rotate by whole turns and half turns moves pixels exactly", "[image][rotate]") {
  Tensor img(DType::uint8, Shape{3, 4, 3});
  for (std::int64_t i = 0; i < img.num_elements(); ++i) {
    img.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i * 7);
  }
  CHECK(rotate(img, 0) == img);
  CHECK(rotate(img, 360) == img);
  CHECK(rotate(img, -720) == img);
  const Tensor half = rotate(img, 180);
  for (std::int64_t y = 0; y < 3; ++y) {
    for (std::int64_t x = 0; x < 4; ++x) {
      for (std::int64_t c = 0; c < 3; ++c) {
        CHECK(half.data<std::uint8_t>()[(y * 4 + x) * 3 + c] ==
              img.data<std::uint8_t>()[((2 - y) * 4 + (3 - x)) * 3 + c]);
      }
    }
  }
}

TEST_CASE("rotate turns counter-clockwise for positive degrees", "[image][rotate]") {
  // A 3 x 3 gray image with one bright pixel right of the centre: a quarter
  // turn counter-clockwise moves it above the centre.
  Tensor img = Tensor::zeros(DType::uint8, Shape{3, 3, 1});
  img.data<std::uint8_t>()[1 * 3 + 2] = 200;
  const Tensor ccw = rotate(img, 90);
  CHECK(ccw.data<std::uint8_t>()[0 * 3 + 1] == 200);
  CHECK(ccw.data<std::uint8_t>()[1 * 3 + 2] == 0);
  const Tensor cw = rotate(img, -90);
  CHECK(cw.data<std::uint8_t>()[2 * 3 + 1] == 200);
}

TEST_CASE("rotate fills what comes from outside the image, every channel", "[image][rotate]") {
  // 4 channels: a 45-degree turn of a 5 x 5 image leaves the corners outside.
  Tensor img(DType::uint8, Shape{5, 5, 4});
  for (auto& v : img.values<std::uint8_t>()) v = 100;
  const Tensor out = rotate(img, 45, {.fill = 9});
  for (std::int64_t c = 0; c < 4; ++c) {
    CHECK(out.data<std::uint8_t>()[c] == 9);                      // top left corner
    CHECK(out.data<std::uint8_t>()[(2 * 5 + 2) * 4 + c] == 100);  // centre
  }
  // 1 x 1: the centre maps onto itself at any angle.
  Tensor one(DType::uint8, Shape{1, 1, 3});
  one.data<std::uint8_t>()[0] = 1;
  one.data<std::uint8_t>()[1] = 2;
  one.data<std::uint8_t>()[2] = 3;
  CHECK(rotate(one, 37.5) == one);
}

TEST_CASE("rotate rejects bad images and angles, naming itself", "[image][rotate][errors]") {
  const Tensor img = Tensor::zeros(DType::uint8, Shape{4, 4, 3});
  CHECK_THROWS_WITH(rotate(img, std::numeric_limits<double>::quiet_NaN()),
                    Catch::Contains("rotate: degrees must be finite"));
  CHECK_THROWS_AS(rotate(img, std::numeric_limits<double>::infinity()), InvalidArgument);
  CHECK_THROWS_WITH(rotate(Tensor::zeros(DType::uint8, Shape{4, 4, 2}), 5),
                    Catch::Contains("rotate: expected 1, 3 or 4 channels, got 2"));
  CHECK_THROWS_WITH(rotate(Tensor::zeros(DType::float32, Shape{4, 4, 3}), 5),
                    Catch::Contains("rotate: expected a host uint8 image"));
  CHECK_THROWS_AS(rotate(Tensor::zeros(DType::uint8, Shape{4, 4}), 5), InvalidArgument);
}
