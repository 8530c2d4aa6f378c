#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <ingest/image/crop.hpp>

#include "support/images.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

namespace {

std::uint8_t at(const Tensor& t, std::int64_t y, std::int64_t x, std::int64_t c = 0) {
  return t.data<std::uint8_t>()[(y * t.dim(1) + x) * t.dim(2) + c];
}

}  // namespace

TEST_CASE("center_crop equals torchvision's CenterCrop (Pillow's crop, padded with 0)",
          "[image][crop][fixtures]") {
  const auto& cases = image_manifest().at("center_crop");
  REQUIRE(cases.size() == 10);
  for (const auto& c : cases) {
    const Tensor input = fixture_input(c);
    const std::int64_t oh = c.at("out_height"), ow = c.at("out_width");
    INFO(c.at("expected").get<std::string>());
    CHECK(center_crop(input, {oh, ow}) ==
          image_tensor(image_fixture(c.at("expected")), oh, ow, input.dim(2)));
  }
}

TEST_CASE("pad equals Pillow's ImageOps.expand and numpy's reflect", "[image][pad][fixtures]") {
  const auto& cases = image_manifest().at("pad");
  REQUIRE(cases.size() == 12);
  for (const auto& c : cases) {
    const Tensor input = fixture_input(c);
    const auto& p = c.at("padding");
    const Padding padding{p.at("top"), p.at("bottom"), p.at("left"), p.at("right")};
    PadOptions options;
    if (c.at("mode") == "reflect") {
      options.mode = PadMode::reflect;
    } else {
      options.value = static_cast<std::uint8_t>(c.at("value").get<int>());
    }
    INFO(c.at("expected").get<std::string>());
    const std::int64_t h = input.dim(0) + padding.top + padding.bottom;
    const std::int64_t w = input.dim(1) + padding.left + padding.right;
    CHECK(pad(input, padding, options) ==
          image_tensor(image_fixture(c.at("expected")), h, w, input.dim(2)));
  }
}

TEST_CASE("crop copies a window inside the image", "[image][crop]") {
  const Tensor img = numbered_image(5, 6, 3);
  const CropWindow w{1, 2, 3, 4};
  const Tensor out = crop(img, w);
  CHECK(out == crop_copy(img, w));
  CHECK_FALSE(out.shares_storage_with(img));
  CHECK(crop(img, {0, 0, 5, 6}) == img);
  const Tensor one = numbered_image(1, 1, 4);
  CHECK(crop(one, {0, 0, 1, 1}) == one);
}

TEST_CASE("center_crop rounds the offset half to even, as Python's round", "[image][crop]") {
  const Tensor img = numbered_image(7, 6, 1);
  // H - h = 3: 1.5 rounds to 2; W - w = 5: 2.5 rounds to 2; 1 -> 0.5 -> 0.
  CHECK(center_crop(img, {4, 1}) == crop(img, {2, 2, 4, 1}));
  CHECK(center_crop(img, {6, 5}) == crop(img, {0, 0, 6, 5}));
  CHECK(center_crop(img, {2, 4}) == crop(img, {2, 1, 2, 4}));  // 2.5 -> 2, 1.0 -> 1
  CHECK(center_crop(img, {7, 6}) == img);
}

TEST_CASE("center_crop larger than the image pads with 0 as torchvision", "[image][crop]") {
  // 1 x 1 to 4 x 3: (4 - 1) // 2 = 1 row above, (3 - 1) // 2 = 1 column left.
  const Tensor one = numbered_image(1, 1, 3);
  const Tensor out = center_crop(one, {4, 3});
  REQUIRE(out.shape() == Shape{4, 3, 3});
  for (std::int64_t y = 0; y < 4; ++y) {
    for (std::int64_t x = 0; x < 3; ++x) {
      for (std::int64_t c = 0; c < 3; ++c)
        CHECK(at(out, y, x, c) == (y == 1 && x == 1 ? c + 1 : 0));
    }
  }
  // One side larger, the other cropped: 3 x 5 to 6 x 2 (rows padded 1 above,
  // 2 below; columns from round(1.5) = 2).
  const Tensor img = numbered_image(3, 5, 1);
  const Tensor mixed = center_crop(img, {6, 2});
  for (std::int64_t y = 0; y < 6; ++y) {
    for (std::int64_t x = 0; x < 2; ++x) {
      CHECK(at(mixed, y, x) == (y >= 1 && y < 4 ? at(img, y - 1, x + 2) : 0));
    }
  }
}

TEST_CASE("random_crop: offsets uniform over every position, reproducible for a seed",
          "[image][crop]") {
  const Tensor img = numbered_image(4, 5, 3);
  Rng rng(2024), draws(2024);
  int seen[2][4] = {};
  for (int i = 0; i < 400; ++i) {
    const auto y = static_cast<std::int64_t>(draws.uniform(2));
    const auto x = static_cast<std::int64_t>(draws.uniform(4));
    REQUIRE(random_crop(img, {3, 2}, rng) == crop(img, {y, x, 3, 2}));
    ++seen[y][x];
  }
  for (const auto& row : seen) {
    for (int n : row) CHECK(n > 25);  // 50 expected at each of the 8 offsets
  }
  // The whole image, and a 1 x 1 one, have one position.
  CHECK(random_crop(img, {4, 5}, rng) == img);
  const Tensor one = numbered_image(1, 1, 1);
  CHECK(random_crop(one, {1, 1}, rng) == one);
}

TEST_CASE("random_crop of JPEG or PNG bytes equals random_crop of the decoded image",
          "[image][crop][jpeg]") {
  // The same draws from the header's size, the same pixels as decode-then-crop
  // (the JPEG's window decoded alone), at every size up to the whole image.
  const std::string jpeg = tj_encode(203, 157, TJSAMP_420, 90, false, 5);
  const Tensor decoded = decode_jpeg(jpeg);
  Rng rng(99), reference(99);
  for (std::int64_t t = 0; t < 60; ++t) {
    const Size size{1 + (t * 37) % 157, 1 + (t * 53) % 203};
    INFO("size " << size.height << " x " << size.width);
    CHECK(random_crop(jpeg, size, rng) == random_crop(decoded, size, reference));
  }
  CHECK(random_crop(jpeg, {157, 203}, rng) == random_crop(decoded, {157, 203}, reference));
  const Tensor half = decode_jpeg(jpeg, {.scale_denom = 2});
  CHECK(random_crop(jpeg, {40, 50}, rng, {.scale_denom = 2}) ==
        random_crop(half, {40, 50}, reference));
  const Tensor gray = decode_jpeg(jpeg, {.channels = 1});
  CHECK(random_crop(jpeg, {64, 64}, rng, {.channels = 1}) ==
        random_crop(gray, {64, 64}, reference));
  const std::string png = image_fixture("png/palette.png");
  const Tensor png_decoded = decode_png(png);
  CHECK(random_crop(png, {5, 7}, rng) == random_crop(png_decoded, {5, 7}, reference));
  CHECK(rng.uniform(1000) == reference.uniform(1000));

  CHECK_THROWS_WITH(
      random_crop(jpeg, {158, 10}, rng),
      Catch::Contains("random_crop: crop size 158 x 10 is larger than the image, 157 x 203"));
  CHECK_THROWS_WITH(random_crop(jpeg, {10, 10}, rng, {.scale_denom = 3}),
                    Catch::Contains("random_crop: scale_denom must be 1, 2, 4 or 8, got 3"));
  CHECK_THROWS_AS(random_crop(std::string("not an image"), {1, 1}, rng), DataLossError);
}

TEST_CASE("pad: constant and reflect by hand, 1 and 4 channels", "[image][pad]") {
  // One gray row 1 2 3 (numbered: 1, 5, 9), two columns each side.
  const Tensor row = numbered_image(1, 3, 1);
  const Tensor r = pad(row, {0, 0, 2, 2}, {.mode = PadMode::reflect});
  const int expected[] = {9, 5, 1, 5, 9, 5, 1};
  for (std::int64_t x = 0; x < 7; ++x) CHECK(at(r, 0, x) == expected[x]);
  const Tensor c = pad(row, {1, 0, 0, 1}, {.value = 200});
  REQUIRE(c.shape() == Shape{2, 4, 1});
  for (std::int64_t x = 0; x < 4; ++x) CHECK(at(c, 0, x) == 200);
  CHECK(at(c, 1, 0) == 1);
  CHECK(at(c, 1, 3) == 200);
  // 4 channels, reflected rows: row -1 is row 1.
  const Tensor rgba = numbered_image(3, 2, 4);
  const Tensor p = pad(rgba, {1, 1, 1, 1}, {.mode = PadMode::reflect});
  REQUIRE(p.shape() == Shape{5, 4, 4});
  for (std::int64_t ch = 0; ch < 4; ++ch) {
    CHECK(at(p, 0, 0, ch) == at(rgba, 1, 1, ch));
    CHECK(at(p, 4, 3, ch) == at(rgba, 1, 0, ch));
    CHECK(at(p, 2, 1, ch) == at(rgba, 1, 0, ch));
  }
  // A 1 x 1 image pads with constants only; no padding is a copy.
  const Tensor one = numbered_image(1, 1, 3);
  CHECK(pad(one, {}, {.mode = PadMode::reflect}) == one);
  CHECK(pad(one, {1, 1, 1, 1}).shape() == Shape{3, 3, 3});
  // Empty images: padding by nothing stays empty; padding rows adds zeros.
  const Tensor empty = Tensor::zeros(DType::uint8, Shape{0, 3, 3});
  CHECK(pad(empty, {}).shape() == empty.shape());
  CHECK(pad(empty, {1, 0, 0, 0}) == Tensor::zeros(DType::uint8, Shape{1, 3, 3}));
  CHECK(center_crop(empty, {2, 2}) == Tensor::zeros(DType::uint8, Shape{2, 2, 3}));
}

TEST_CASE("cutout: the box centred on a uniform pixel, clipped at the edges", "[image][cutout]") {
  const Tensor img = numbered_image(3, 3, 3);
  int corner_cases = 0;
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    Rng rng(seed), draws(seed);
    const auto cy = static_cast<std::int64_t>(draws.uniform(3));
    const auto cx = static_cast<std::int64_t>(draws.uniform(3));
    const Tensor out = cutout(img, {3, 3}, rng, 7);
    // Rows [cy - 1, cy + 2) and columns likewise, clipped.
    std::int64_t filled = 0;
    for (std::int64_t y = 0; y < 3; ++y) {
      for (std::int64_t x = 0; x < 3; ++x) {
        const bool in_box = y >= cy - 1 && y < cy + 2 && x >= cx - 1 && x < cx + 2;
        for (std::int64_t c = 0; c < 3; ++c)
          CHECK(at(out, y, x, c) == (in_box ? 7 : at(img, y, x, c)));
        filled += in_box;
      }
    }
    if (cy == 0 && cx == 0) {
      ++corner_cases;
      CHECK(filled == 4);  // the top-left corner: a 2 x 2 box is left of the 3 x 3
    }
  }
  CHECK(corner_cases > 0);
  // Even sides: a 2 x 4 box spans [cy - 1, cy + 1) x [cx - 2, cx + 2).
  const Tensor big = numbered_image(6, 8, 1);
  Rng rng(5), draws(5);
  const auto cy = static_cast<std::int64_t>(draws.uniform(6));
  const auto cx = static_cast<std::int64_t>(draws.uniform(8));
  const Tensor out = cutout(big, {2, 4}, rng);
  for (std::int64_t y = 0; y < 6; ++y) {
    for (std::int64_t x = 0; x < 8; ++x) {
      const bool in_box = y >= cy - 1 && y < cy + 1 && x >= cx - 2 && x < cx + 2;
      CHECK(at(out, y, x) == (in_box ? 0 : at(big, y, x)));
    }
  }
  // 1 x 1: always erased.
  Rng one_rng(1);
  CHECK(at(cutout(numbered_image(1, 1, 1), {1, 1}, one_rng, 3), 0, 0) == 3);
}

TEST_CASE("crops, pad and cutout reject bad input, naming the op", "[image][crop][errors]") {
  const Tensor img = numbered_image(4, 4, 3);
  Rng rng(1);
  CHECK_THROWS_WITH(crop(img, {1, 1, 4, 2}),
                    Catch::Contains("crop: window {y 1, x 1, height 4, width 2} is not inside "
                                    "the 4 x 4 image"));
  CHECK_THROWS_WITH(crop(img, {-1, 0, 2, 2}), Catch::Contains("is not inside"));
  CHECK_THROWS_WITH(
      crop(img, {0, 0, 0, 2}),
      Catch::Contains("crop: window size must be positive and below 2^31, got 0 x 2"));
  CHECK_THROWS_WITH(
      center_crop(img, {2, -1}),
      Catch::Contains("center_crop: size must be positive and below 2^31, got 2 x -1"));
  CHECK_THROWS_AS(center_crop(img, {std::int64_t{1} << 31, 1}), InvalidArgument);
  CHECK_THROWS_WITH(
      random_crop(img, {5, 2}, rng),
      Catch::Contains("random_crop: crop size 5 x 2 is larger than the image, 4 x 4"));
  CHECK_THROWS_WITH(random_crop(img, {0, 0}, rng),
                    Catch::Contains("random_crop: size must be positive"));
  CHECK_THROWS_WITH(pad(img, {0, -1, 0, 0}), Catch::Contains("pad: padding must not be negative"));
  CHECK_THROWS_WITH(pad(img, {0, 0, INT64_MAX, INT64_MAX}),
                    Catch::Contains("pad: the padded image's sides must be below 2^31"));
  CHECK_THROWS_WITH(pad(img, {0, 0, 4, 0}, {.mode = PadMode::reflect}),
                    Catch::Contains("pad: reflect padding must be smaller than the side it pads "
                                    "(padding {top 0, bottom 0, left 4, right 0}, image 4 x 4)"));
  CHECK_NOTHROW(pad(img, {3, 3, 3, 3}, {.mode = PadMode::reflect}));
  CHECK_THROWS_WITH(cutout(img, {0, 1}, rng), Catch::Contains("cutout: size must be positive"));
  CHECK_THROWS_WITH(cutout(Tensor::zeros(DType::uint8, Shape{0, 4, 3}), {1, 1}, rng),
                    Catch::Contains("cutout: the image is empty"));
  const Tensor two = Tensor::zeros(DType::uint8, Shape{4, 4, 2});
  CHECK_THROWS_WITH(crop(two, {0, 0, 1, 1}), Catch::Contains("crop: expected 1, 3 or 4 channels"));
  CHECK_THROWS_WITH(center_crop(Tensor::zeros(DType::uint8, Shape{4, 4}), {1, 1}),
                    Catch::Contains("center_crop: expected a host uint8 image"));
  CHECK_THROWS_WITH(random_crop(two, {1, 1}, rng),
                    Catch::Contains("random_crop: expected 1, 3 or 4"));
  CHECK_THROWS_WITH(pad(two, {}), Catch::Contains("pad: expected 1, 3 or 4"));
  CHECK_THROWS_WITH(cutout(two, {1, 1}, rng), Catch::Contains("cutout: expected 1, 3 or 4"));
}
