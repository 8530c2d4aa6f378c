#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <ingest/image/encode.hpp>
#include <ingest/image/jpeg.hpp>

#include "support/images.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

namespace {

struct Sampling {
  int tj;  // TJSAMP_*
  int channels;
  ChromaSubsampling ours;
};

const Sampling samplings[] = {
    {TJSAMP_GRAY, 1, ChromaSubsampling::s420},
    {TJSAMP_444, 3, ChromaSubsampling::s444},
    {TJSAMP_422, 3, ChromaSubsampling::s422},
    {TJSAMP_420, 3, ChromaSubsampling::s420},
};

// The pixels tj_encode compresses for the same arguments.
Tensor noise_photo(int width, int height, int channels, std::uint32_t seed = 1) {
  const auto px = photo_pixels(width, height, channels, seed);
  return image_tensor(std::string(px.begin(), px.end()), height, width, channels);
}

}  // namespace

TEST_CASE("encode_jpeg writes tjCompress2's bytes for every subsampling, quality and odd size",
          "[image][encode]") {
  const int sizes[][2] = {{1, 1}, {17, 33}, {33, 17}, {256, 256}};  // width, height
  for (const Sampling& s : samplings) {
    for (const auto& size : sizes) {
      const Tensor image = noise_photo(size[0], size[1], s.channels);
      // 95 and 96 straddle tjCompress2's switch from the fast to the accurate DCT.
      for (int quality : {1, 50, 75, 90, 95, 96, 100}) {
        INFO("subsampling " << s.tj << ", " << size[0] << " x " << size[1] << ", quality "
                            << quality);
        const std::string ours = encode_jpeg(image, {.quality = quality, .subsampling = s.ours});
        CHECK(ours == tj_encode(size[0], size[1], s.tj, quality));
      }
    }
  }
}

TEST_CASE("encode_jpeg: defaults are quality 90, 4:2:0, and gray ignores the subsampling",
          "[image][encode]") {
  const Tensor rgb = noise_photo(40, 24, 3, 7);
  CHECK(encode_jpeg(rgb) ==
        encode_jpeg(rgb, {.quality = 90, .subsampling = ChromaSubsampling::s420}));
  const Tensor gray = noise_photo(40, 24, 1, 7);
  const std::string g = encode_jpeg(gray);
  CHECK(encode_jpeg(gray, {.subsampling = ChromaSubsampling::s444}) == g);
  CHECK(encode_jpeg(gray, {.subsampling = ChromaSubsampling::s422}) == g);
  // A JFIF file: SOI, then the APP0 marker.
  REQUIRE(g.size() > 10);
  CHECK(g.substr(0, 4) == "\xFF\xD8\xFF\xE0");
  CHECK(g.substr(6, 5) == std::string("JFIF\0", 5));
  CHECK(g.substr(g.size() - 2) == "\xFF\xD9");
}

TEST_CASE("encode_jpeg round-trips through decode_jpeg close to the original", "[image][encode]") {
  // Measured on this photo-like image (gradients plus uniform noise of +-20,
  // which JPEG mostly drops, chroma most): the largest and the mean absolute
  // difference after decode_jpeg, in the comments; the bounds leave a little room.
  struct Case {
    const Sampling& s;
    int quality;
    int max_diff;
    double mean_diff;
  };
  const Case cases[] = {
      {samplings[0], 100, 2, 0.15},  // gray q100: 1, 0.095
      {samplings[1], 100, 5, 0.6},   // 4:4:4 q100: 4, 0.48
      {samplings[0], 90, 18, 3.5},   // gray q90: 15, 3.12
      {samplings[1], 90, 46, 6.6},   // 4:4:4 q90: 42, 6.14
      {samplings[2], 90, 44, 8.3},   // 4:2:2 q90: 40, 7.81
      {samplings[3], 90, 45, 8.9},   // 4:2:0 q90: 41, 8.39
      {samplings[3], 75, 46, 9.8},   // 4:2:0 q75: 42, 9.29
  };
  for (const Case& c : cases) {
    const Tensor image = noise_photo(97, 61, c.s.channels, 3);
    const std::string jpeg = encode_jpeg(image, {.quality = c.quality, .subsampling = c.s.ours});
    const Tensor back = decode_jpeg(jpeg);
    REQUIRE(back.shape() == image.shape());
    const PixelDiff d = pixel_diff(back, image);
    INFO("subsampling " << c.s.tj << ", quality " << c.quality << ": max " << d.max << ", mean "
                        << d.mean);
    CHECK(d.max <= c.max_diff);
    CHECK(d.mean <= c.mean_diff);
    // And the decoder sees what libjpeg-turbo's own decoder sees.
    CHECK(back == tj_decode(jpeg, c.s.channels == 1 ? TJPF_GRAY : TJPF_RGB));
  }
}

TEST_CASE("encode_jpeg accepts slices and the largest side libjpeg-turbo writes",
          "[image][encode]") {
  // A view into a batch: its offset into the shared storage is honoured.
  Tensor batch(DType::uint8, Shape{3, 9, 11, 3});
  const auto px = photo_pixels(11, 9 * 3, 3, 5);
  std::copy(px.begin(), px.end(), batch.data<std::uint8_t>());
  const Tensor second = batch.slice(1);
  const Tensor copy = second.clone();
  CHECK(encode_jpeg(second) == encode_jpeg(copy));

  const Tensor wide = Tensor::zeros(DType::uint8, Shape{1, 65500, 1});
  CHECK(decode_jpeg(encode_jpeg(wide)).shape() == Shape{1, 65500, 1});
  const Tensor tall = Tensor::zeros(DType::uint8, Shape{65500, 1, 3});
  CHECK(decode_jpeg(encode_jpeg(tall)).shape() == Shape{65500, 1, 3});
}

TEST_CASE("encode_jpeg is thread-safe: concurrent calls give the sequential bytes",
          "[image][encode]") {
  std::vector<Tensor> images;
  std::vector<std::string> expected;
  for (std::uint32_t i = 0; i < 4; ++i) {
    images.push_back(noise_photo(64 + static_cast<int>(i), 48, 3, i));
    expected.push_back(encode_jpeg(images.back()));
  }
  std::vector<std::string> got(images.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < images.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 20; ++round) got[i] = encode_jpeg(images[i]);
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(got == expected);
}

TEST_CASE("encode_jpeg rejects what it cannot encode with InvalidArgument", "[image][encode]") {
  const Tensor rgb = noise_photo(8, 8, 3);
  CHECK_THROWS_WITH(encode_jpeg(Tensor(DType::float32, Shape{8, 8, 3})),
                    Catch::Contains("encode_jpeg: expected a host uint8 image"));
  CHECK_THROWS_WITH(encode_jpeg(Tensor(DType::uint8, Shape{8, 8})),
                    Catch::Contains("encode_jpeg: expected a host uint8 image"));
  CHECK_THROWS_AS(encode_jpeg(Tensor(DType::uint8, Shape{1, 8, 8, 3})), InvalidArgument);
  CHECK_THROWS_AS(encode_jpeg(Tensor()), InvalidArgument);
  CHECK_THROWS_AS(encode_jpeg(Tensor(DType::uint8, Shape{8, 8, 0})), InvalidArgument);
  for (std::int64_t c : {2, 4, 5}) {
    CHECK_THROWS_WITH(
        encode_jpeg(Tensor(DType::uint8, Shape{8, 8, c})),
        Catch::Contains("encode_jpeg: expected 1 (grayscale) or 3 (RGB) channels, got " +
                        std::to_string(c)));
  }
  CHECK_THROWS_WITH(encode_jpeg(Tensor(DType::uint8, Shape{0, 8, 3})),
                    Catch::Contains("encode_jpeg: cannot encode an empty image ([0, 8, 3])"));
  CHECK_THROWS_AS(encode_jpeg(Tensor(DType::uint8, Shape{8, 0, 1})), InvalidArgument);
  CHECK_THROWS_WITH(encode_jpeg(Tensor(DType::uint8, Shape{1, 65501, 1})),
                    Catch::Contains("height and width must be at most 65500"));
  CHECK_THROWS_AS(encode_jpeg(Tensor(DType::uint8, Shape{65536, 1, 1})), InvalidArgument);
  for (int q : {-1, 0, 101, 1000}) {
    CHECK_THROWS_WITH(
        encode_jpeg(rgb, {.quality = q}),
        Catch::Contains("encode_jpeg: quality must be in 1..100, got " + std::to_string(q)));
  }
  CHECK_THROWS_AS(encode_jpeg(rgb, {.subsampling = static_cast<ChromaSubsampling>(7)}),
                  InvalidArgument);
}

TEST_CASE("a libjpeg error while encoding becomes an ingest error, the compressor freed",
          "[image][encode]") {
  // Past encode_jpeg's checks, libjpeg itself refuses a side over 65,500:
  // its error_exit longjmps back to jpeg_try, and the error is thrown from
  // there (ASan sees nothing leaked).
  const Tensor wide = Tensor::zeros(DType::uint8, Shape{1, 65501, 1});
  const image::detail::ImageView view = image::detail::view_of(wide, "test");
  CHECK_THROWS_WITH(image::detail::compress_jpeg(view, 90, ChromaSubsampling::s420),
                    Catch::Contains("encode_jpeg: libjpeg: Maximum supported image dimension"));
  CHECK_THROWS_AS(image::detail::compress_jpeg(view, 90, ChromaSubsampling::s420), InternalError);
}
