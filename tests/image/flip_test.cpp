#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ingest/image/flip.hpp>

#include "support/images.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

TEST_CASE("flips equal Pillow's Image.transpose", "[image][flip][fixtures]") {
  const auto& cases = image_manifest().at("flip");
  REQUIRE(cases.size() == 4);
  for (const auto& c : cases) {
    const Tensor input = fixture_input(c);
    const Tensor expected =
        image_tensor(image_fixture(c.at("expected")), input.dim(0), input.dim(1), input.dim(2));
    INFO(c.at("expected").get<std::string>());
    CHECK((c.at("flip") == "left_right" ? flip_left_right(input) : flip_up_down(input)) ==
          expected);
  }
}

TEST_CASE("flips of 1-, 3- and 4-channel images keep each pixel's channels together",
          "[image][flip]") {
  for (std::int64_t c : {1, 3, 4}) {
    INFO(c << " channels");
    const Tensor img = numbered_image(2, 3, c);
    const Tensor lr = flip_left_right(img), ud = flip_up_down(img);
    REQUIRE(lr.shape() == img.shape());
    for (std::int64_t y = 0; y < 2; ++y) {
      for (std::int64_t x = 0; x < 3; ++x) {
        for (std::int64_t k = 0; k < c; ++k) {
          CHECK(lr.data<std::uint8_t>()[(y * 3 + x) * c + k] == y * 16 + (2 - x) * 4 + k + 1);
          CHECK(ud.data<std::uint8_t>()[(y * 3 + x) * c + k] == (1 - y) * 16 + x * 4 + k + 1);
        }
      }
    }
    CHECK(flip_left_right(lr) == img);
    CHECK_FALSE(lr.shares_storage_with(img));
  }
  const Tensor one = numbered_image(1, 1, 3);
  CHECK(flip_left_right(one) == one);
  CHECK(flip_up_down(one) == one);
  const Tensor empty = Tensor::zeros(DType::uint8, Shape{2, 0, 3});
  CHECK(flip_left_right(empty).shape() == empty.shape());
  CHECK(flip_up_down(empty).shape() == empty.shape());
}

TEST_CASE("random_flip_left_right: one draw, reproducible for a seed", "[image][flip]") {
  const Tensor img = numbered_image(4, 5, 3);
  const Tensor flipped = flip_left_right(img);
  // Which calls flip follows the seed's uniform01() draws exactly.
  Rng rng(42), draws(42);
  int flips = 0;
  for (int i = 0; i < 200; ++i) {
    const bool expect = draws.uniform01() < 0.5;
    const Tensor out = random_flip_left_right(img, rng);
    CHECK(out == (expect ? flipped : img));
    if (!expect) CHECK(out.shares_storage_with(img));  // no copy when not flipped
    flips += expect;
  }
  CHECK(flips > 70);
  CHECK(flips < 130);
  Rng r(1);
  for (int i = 0; i < 20; ++i) {
    CHECK(random_flip_left_right(img, r, 0.0) == img);
    CHECK(random_flip_left_right(img, r, 1.0) == flipped);
  }
}

TEST_CASE("flips reject bad images and probabilities, naming the op", "[image][flip][errors]") {
  Rng rng(1);
  const Tensor two = Tensor::zeros(DType::uint8, Shape{3, 3, 2});
  CHECK_THROWS_WITH(flip_left_right(two), Catch::Contains("flip_left_right: expected 1, 3 or 4"));
  CHECK_THROWS_WITH(flip_up_down(Tensor::zeros(DType::int32, Shape{3, 3, 3})),
                    Catch::Contains("flip_up_down: expected a host uint8 image"));
  CHECK_THROWS_WITH(random_flip_left_right(Tensor(), rng),
                    Catch::Contains("random_flip_left_right: expected a host uint8 image"));
  const Tensor img = numbered_image(2, 2, 3);
  CHECK_THROWS_WITH(random_flip_left_right(img, rng, 1.5),
                    Catch::Contains("random_flip_left_right: p must be in [0, 1], got 1.5"));
  CHECK_THROWS_AS(random_flip_left_right(img, rng, -0.1), InvalidArgument);
  CHECK_THROWS_AS(random_flip_left_right(img, rng, std::nan("")), InvalidArgument);
}

#if INGEST_FLIP_SSSE3
TEST_CASE("flip's SSSE3 kernel (3 channels) reverses pixels as the portable loop does",
          "[image][flip]") {
  if (!ingest::image::detail::flip_ssse3_available()) {
    WARN("no SSSE3 on this CPU: the kernel is not used, nothing to compare");
    return;
  }
  // Widths around the 16-pixel step (0 to 15 left over), and 224.
  std::vector<std::int64_t> widths;
  for (std::int64_t w = 0; w <= 40; ++w) widths.push_back(w);
  widths.push_back(224);
  for (const std::int64_t w : widths) {
    INFO("width " << w);
    std::vector<std::uint8_t> src(static_cast<std::size_t>(w * 3));
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 37 + 11);
    std::vector<std::uint8_t> portable(src.size() + 1, 0xA5), fast(src.size() + 1, 0xA5);
    ingest::image::detail::reverse_pixels<3>(src.data(), w, portable.data());
    ingest::image::detail::reverse_pixels3_ssse3(src.data(), w, fast.data());
    CHECK(portable == fast);
    CHECK(fast.back() == 0xA5);  // nothing written past the row
  }
}
#endif
