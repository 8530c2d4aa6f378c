#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstdint>
#include <string>

#include <ingest/image/png.hpp>

#include "support/images.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

namespace {

// `png` with its IHDR's width and height replaced (and the chunk's CRC fixed).
std::string png_with_size(std::string png, std::uint32_t height, std::uint32_t width) {
  auto put = [&png](std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) png[at + i] = static_cast<char>(v >> (24 - 8 * i));
  };
  put(16, width);  // signature 8, length 4, "IHDR" 4
  put(20, height);
  const auto crc = static_cast<std::uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17));  // type + 13 data bytes
  put(29, crc);
  return png;
}

}  // namespace

TEST_CASE("decode_png gives Pillow's pixels for every colour type and channel count",
          "[image][png][fixtures]") {
  const auto& fixtures = image_manifest().at("png");
  REQUIRE(fixtures.size() == 11);
  for (const auto& f : fixtures) {
    const std::string bytes = image_fixture(f.at("file"));
    const std::int64_t h = f.at("height"), w = f.at("width"), stored = f.at("stored_channels");
    for (const auto& [key, raw] : f.at("expected").items()) {
      const int channels = std::stoi(key);
      INFO(f.at("file").get<std::string>() << " channels " << channels);
      const std::int64_t c = channels == 0 ? stored : channels;
      const Tensor expected = image_tensor(image_fixture(raw), h, w, c);
      const Tensor ours = decode_png(bytes, {.channels = channels});
      CHECK(ours.shape() == expected.shape());
      CHECK(ours == expected);
    }
  }
}

TEST_CASE("16-bit PNGs keep the high byte, alpha is kept on request and dropped otherwise",
          "[image][png][fixtures]") {
  const std::string rgba16 = image_fixture("png/rgba16.png");
  const Tensor all = decode_png(rgba16);  // as stored: RGBA
  REQUIRE(all.shape() == Shape{17, 23, 4});
  const Tensor rgb = decode_png(rgba16, {.channels = 3});
  const Tensor gray = decode_png(rgba16, {.channels = 1});
  for (std::int64_t i = 0; i < 17 * 23; ++i) {
    const std::uint8_t* px = all.data<std::uint8_t>() + 4 * i;
    for (int c = 0; c < 3; ++c) CHECK(rgb.data<std::uint8_t>()[3 * i + c] == px[c]);
    CHECK(gray.data<std::uint8_t>()[i] == image::detail::luma(px[0], px[1], px[2]));
  }
  // Gray + alpha as stored stays two channels; RGBA adds 255 where there is no alpha.
  CHECK(decode_png(image_fixture("png/gray_alpha8.png")).dim(2) == 2);
  const Tensor opaque = decode_png(image_fixture("png/rgb8.png"), {.channels = 4});
  for (std::int64_t i = 0; i < 17 * 23; ++i) CHECK(opaque.data<std::uint8_t>()[4 * i + 3] == 255);
}

TEST_CASE("decode_png rejects bad options, oversized and damaged files", "[image][png]") {
  const std::string bytes = image_fixture("png/rgb8.png");
  for (int c : {-1, 2, 5}) CHECK_THROWS_AS(decode_png(bytes, {.channels = c}), InvalidArgument);
  CHECK_THROWS_AS(decode_png(bytes, {.scale_denom = 2}), InvalidArgument);
  CHECK(decode_png(bytes, {.max_pixels = 17 * 23}).shape() == Shape{17, 23, 3});
  CHECK_THROWS_AS(decode_png(bytes, {.max_pixels = 17 * 23 - 1}), InvalidArgument);
  // A 60,000 x 60,000 header over 1 KB of data: refused before allocating.
  try {
    decode_png(png_with_size(bytes, 60000, 60000), {.file = "bomb.png"});
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.what(), Catch::Contains("60000 x 60000") && Catch::Contains("max_pixels"));
    CHECK(e.context().file == "bomb.png");
  }
  // A header claiming more rows than the data holds: DataLossError.
  CHECK_THROWS_AS(decode_png(png_with_size(bytes, 100, 23)), DataLossError);

  CHECK_THROWS_AS(decode_png(std::string()), DataLossError);
  CHECK_THROWS_AS(decode_png(std::string("\x89PNG\r\n\x1a\n", 8)), DataLossError);
  CHECK_THROWS_AS(decode_png(image_fixture("jpeg/gray_45x33.jpg")), DataLossError);
  for (std::size_t n = 0; n + 4 < bytes.size(); ++n) {
    INFO("cut to " << n);
    CHECK_THROWS_AS(decode_png(bytes.substr(0, n)), DataLossError);
  }
  // Only the last 4 bytes, IEND's CRC, may go missing unnoticed (libspng
  // stops at IEND's type): every pixel is there.
  for (std::size_t n = bytes.size() - 4; n < bytes.size(); ++n) {
    CHECK(decode_png(bytes.substr(0, n)) == decode_png(bytes));
  }
  try {
    std::string bad_crc = bytes;
    bad_crc[30] ^= 1;  // IHDR's CRC
    decode_png(bad_crc, {.file = "x.png"});
    FAIL("no error");
  } catch (const DataLossError& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("DataLossError: decode_png: "));
    CHECK(e.context().file == "x.png");
  }
  // Random damage: an image or an ingest::Error, never a crash.
  Rng rng(11);
  int failed = 0;
  for (int t = 0; t < 300; ++t) {
    std::string damaged = bytes;
    damaged[rng.uniform(damaged.size())] = static_cast<char>(rng.uniform(256));
    try {
      const Tensor img = decode_png(damaged, {.channels = static_cast<int>(rng.uniform(2)) * 3});
      CHECK(img.rank() == 3);
    } catch (const Error&) {
      ++failed;
    }
  }
  CHECK(failed > 0);
}
