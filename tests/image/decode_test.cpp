#include <catch2/catch.hpp>

#include <string>

#include <ingest/image/decode.hpp>

#include "support/images.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

TEST_CASE("image_format recognises JPEG and PNG by their magic bytes", "[image][decode]") {
  CHECK(image_format(image_fixture("jpeg/gray_45x33.jpg")) == ImageFormat::jpeg);
  CHECK(image_format(image_fixture("png/palette.png")) == ImageFormat::png);
  CHECK(image_format(std::string("\xFF\xD8\xFF", 3)) == ImageFormat::jpeg);
  CHECK(image_format(std::string("\xFF\xD8", 2)) == std::nullopt);
  CHECK(image_format(std::string("\x89PNG\r\n\x1a", 7)) == std::nullopt);
  CHECK(image_format(std::string("GIF89a")) == std::nullopt);
  CHECK(image_format(std::string()) == std::nullopt);
  CHECK(format_name(ImageFormat::jpeg) == "jpeg");
  CHECK(format_name(ImageFormat::png) == "png");
}

TEST_CASE("read_header gives what decoding with channels 0 gives, without decoding",
          "[image][decode][fixtures]") {
  for (const char* kind : {"jpeg", "png"}) {
    for (const auto& f : image_manifest().at(kind)) {
      const std::string bytes = image_fixture(f.at("file"));
      INFO(f.at("file").get<std::string>());
      const ImageHeader h = read_header(bytes);
      const Tensor t = decode_image(bytes);
      CHECK(h.height == t.dim(0));
      CHECK(h.width == t.dim(1));
      CHECK(h.channels == t.dim(2));
      CHECK(h.format == (std::string(kind) == "jpeg" ? ImageFormat::jpeg : ImageFormat::png));
      CHECK(h.height == f.at("height").get<std::int64_t>());
    }
  }
  // Only the header is needed: a JPEG cut after its markers still has one.
  const std::string jpeg = image_fixture("jpeg/rgb420_256x256_q90.jpg");
  CHECK(read_header(jpeg.substr(0, 700)) == ImageHeader{256, 256, 3, ImageFormat::jpeg});
  // A palette with transparency is RGBA, one without RGB.
  CHECK(read_header(image_fixture("png/palette_trns.png")).channels == 4);
  CHECK(read_header(image_fixture("png/palette.png")).channels == 3);
  CHECK(read_header(image_fixture("jpeg/cmyk_40x30.jpg")) ==
        ImageHeader{30, 40, 4, ImageFormat::jpeg});
}

TEST_CASE("decode_image dispatches by format and passes the options on", "[image][decode]") {
  const std::string jpeg = image_fixture("jpeg/rgb444_61x47.jpg");
  const std::string png = image_fixture("png/rgba8.png");
  CHECK(decode_image(jpeg) == decode_jpeg(jpeg));
  CHECK(decode_image(jpeg, {.channels = 1, .scale_denom = 4}) ==
        decode_jpeg(jpeg, {.channels = 1, .scale_denom = 4}));
  CHECK(decode_image(png) == decode_png(png));
  CHECK(decode_image(png, {.channels = 3}) == decode_png(png, {.channels = 3}));
  CHECK_THROWS_AS(decode_image(png, {.scale_denom = 2}), InvalidArgument);
  CHECK_THROWS_AS(decode_image(jpeg, {.channels = 4}), InvalidArgument);
  CHECK_THROWS_AS(decode_image(jpeg, {.max_pixels = 100}), InvalidArgument);
  CHECK_THROWS_AS(decode_image(png, {.max_pixels = 100}), InvalidArgument);
}

TEST_CASE("bytes that are not an image raise DataLossError naming what they start with",
          "[image][decode]") {
  for (auto* f : {+[](const std::string& b) { decode_image(b, {.file = "a.bin"}); },
                  +[](const std::string& b) { read_header(b, {.file = "a.bin"}); }}) {
    try {
      f(std::string("GIF89a\x01\x02\x03", 9));
      FAIL("no error");
    } catch (const DataLossError& e) {
      CHECK_THAT(e.what(), Catch::Contains("not a JPEG or PNG image (9 bytes, starting 47 49 46 38 "
                                           "39 61 01 02)"));
      CHECK(e.context().file == "a.bin");
    }
  }
  CHECK_THROWS_WITH(decode_image(std::string()), Catch::Contains("(0 bytes)"));
  CHECK_THROWS_AS(read_header(std::string("\xFF\xD8\xFF", 3)), DataLossError);
  CHECK_THROWS_AS(read_header(std::string("\x89PNG\r\n\x1a\n", 8)), DataLossError);
}
