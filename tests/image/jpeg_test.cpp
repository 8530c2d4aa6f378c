#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ingest/image/jpeg.hpp>

#include "support/images.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace ingest::image;

namespace {

int stored_pixel_format(std::int64_t channels) {
  return channels == 1 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_CMYK;
}

// The offset of the first start-of-frame marker's segment (baseline,
// extended or progressive), where height and width are stored.
std::size_t sof_offset(const std::string& jpeg) {
  for (std::size_t i = 2; i + 9 < jpeg.size(); ++i) {
    const auto m = static_cast<unsigned char>(jpeg[i + 1]);
    if (static_cast<unsigned char>(jpeg[i]) == 0xFF && (m == 0xC0 || m == 0xC1 || m == 0xC2)) {
      return i;
    }
  }
  throw std::runtime_error("no SOF marker");
}

std::string jpeg_with_size(std::string jpeg, unsigned height, unsigned width) {
  const std::size_t at = sof_offset(jpeg) + 5;  // marker 2, length 2, precision 1
  jpeg[at] = static_cast<char>(height >> 8);
  jpeg[at + 1] = static_cast<char>(height & 0xFF);
  jpeg[at + 2] = static_cast<char>(width >> 8);
  jpeg[at + 3] = static_cast<char>(width & 0xFF);
  return jpeg;
}

template <class E>
E decode_error(const std::string& bytes, const DecodeOptions& options = {}) {
  try {
    decode_jpeg(bytes, options);
  } catch (const E& e) {
    return e;
  }
  FAIL("no " << typeid(E).name() << " decoding " << bytes.size() << " bytes");
  throw;
}

// The last scan (SOS segment and its entropy-coded data) of a JPEG stream.
std::string last_scan(const std::string& jpeg) {
  std::size_t sos = std::string::npos;
  for (std::size_t i = 0; i + 1 < jpeg.size(); ++i) {
    if (static_cast<unsigned char>(jpeg[i]) == 0xFF &&
        static_cast<unsigned char>(jpeg[i + 1]) == 0xDA) {
      sos = i;
    }
  }
  const std::size_t eoi = jpeg.size() - 2;
  return jpeg.substr(sos, eoi - sos);
}

}  // namespace

TEST_CASE("decode_jpeg equals tjDecompress2 on every fixture, full and DCT-scaled",
          "[image][jpeg][fixtures]") {
  const auto& fixtures = image_manifest().at("jpeg");
  REQUIRE(fixtures.size() == 11);
  int compared = 0;
  for (const auto& f : fixtures) {
    const std::string bytes = image_fixture(f.at("file"));
    const std::int64_t stored = f.at("channels");
    for (int s : {1, 2, 4, 8}) {
      INFO(f.at("file").get<std::string>() << " at 1/" << s);
      const auto reference = tj_decode_scaled(bytes, stored_pixel_format(stored), s);
      if (!reference) continue;  // tjDecompress2 cannot be asked for this scale
      ++compared;
      const Tensor ours = decode_jpeg(bytes, {.scale_denom = s});
      CHECK(ours.shape() == reference->shape());
      CHECK(ours == *reference);
      if (stored == 4) continue;  // libjpeg has no CMYK -> gray or RGB (below)
      CHECK(decode_jpeg(bytes, {.channels = 1, .scale_denom = s}) ==
            tj_decode(bytes, TJPF_GRAY, s));
      CHECK(decode_jpeg(bytes, {.channels = 3, .scale_denom = s}) == tj_decode(bytes, TJPF_RGB, s));
    }
  }
  CHECK(compared == 41);  // all but the 1 x 1 file below full scale
}

TEST_CASE("decode_jpeg equals tjDecompress2 on generated files of odd sizes and every subsampling",
          "[image][jpeg]") {
  const int subsamplings[] = {TJSAMP_444, TJSAMP_422, TJSAMP_420,
                              TJSAMP_440, TJSAMP_411, TJSAMP_GRAY};
  const int sizes[][2] = {{1, 1}, {2, 3}, {7, 9}, {8, 8}, {15, 17}, {16, 16}, {33, 31}, {47, 95}};
  std::uint32_t seed = 1;
  int compared = 0;
  for (int subsamp : subsamplings) {
    for (bool progressive : {false, true}) {
      for (const auto& size : sizes) {
        const std::string jpeg = tj_encode(size[1], size[0], subsamp, 90, progressive, seed++);
        const int pf = subsamp == TJSAMP_GRAY ? TJPF_GRAY : TJPF_RGB;
        for (int s : {1, 2, 4, 8}) {
          INFO("subsampling " << subsamp << (progressive ? " progressive " : " baseline ")
                              << size[0] << "x" << size[1] << " at 1/" << s);
          const auto reference = tj_decode_scaled(jpeg, pf, s);
          if (!reference) continue;  // a tiny image: tjDecompress2 picks another scale
          ++compared;
          CHECK(decode_jpeg(jpeg, {.scale_denom = s}) == *reference);
        }
      }
    }
  }
  CHECK(compared > 300);
}

TEST_CASE("CMYK JPEGs decode as stored, and to RGB and gray as Pillow converts them",
          "[image][jpeg][fixtures]") {
  const std::string bytes = image_fixture("jpeg/cmyk_40x30.jpg");
  const Tensor cmyk = decode_jpeg(bytes);
  CHECK(cmyk.shape() == Shape{30, 40, 4});
  CHECK(cmyk == tj_decode(bytes, TJPF_CMYK));
  // Pillow's Image.open(...).convert("RGB"), committed by generate.py.
  const Tensor pillow_rgb = image_tensor(image_fixture("jpeg/cmyk_40x30.rgb.raw"), 30, 40, 3);
  const Tensor rgb = decode_jpeg(bytes, {.channels = 3});
  CHECK(rgb == pillow_rgb);
  const Tensor gray = decode_jpeg(bytes, {.channels = 1});
  REQUIRE(gray.shape() == Shape{30, 40, 1});
  const std::uint8_t* p = pillow_rgb.data<std::uint8_t>();
  for (std::int64_t i = 0; i < 30 * 40; ++i) {
    CHECK(gray.data<std::uint8_t>()[i] ==
          image::detail::luma(p[3 * i], p[3 * i + 1], p[3 * i + 2]));
  }
  // Scaled decoding converts the same way.
  CHECK(decode_jpeg(bytes, {.scale_denom = 2}) == tj_decode(bytes, TJPF_CMYK, 2));
}

TEST_CASE("decode_and_crop_jpeg equals the full decode's window, edges included", "[image][jpeg]") {
  // Without a one-column margin around the window, libjpeg upsamples 4:2:x
  // chroma at the window's first and last column as at an image edge: those
  // columns differed by up to 18 grey levels. With it, every pixel is equal.
  const int subsamplings[] = {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_GRAY};
  Rng rng(42);
  for (int subsamp : subsamplings) {
    for (bool progressive : {false, true}) {
      const std::string jpeg = tj_encode(203, 157, subsamp, 90, progressive, 7);
      for (int s : {1, 2, 4, 8}) {
        const Tensor full = decode_jpeg(jpeg, {.scale_denom = s});
        const std::int64_t H = full.dim(0), W = full.dim(1);
        for (int t = 0; t < 40; ++t) {
          const auto y = static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(H)));
          const auto x = static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(W)));
          const CropWindow win{
              y, x, 1 + static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(H - y))),
              1 + static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(W - x)))};
          INFO("subsampling " << subsamp << " progressive " << progressive << " 1/" << s
                              << " window " << win.y << "," << win.x << " " << win.height << "x"
                              << win.width);
          const Tensor crop = decode_and_crop_jpeg(jpeg, win, {.scale_denom = s});
          CHECK(crop == crop_copy(full, win));
        }
      }
    }
  }
}

TEST_CASE("decode_and_crop_jpeg on fixtures: corners, full rows and columns, channels",
          "[image][jpeg][fixtures]") {
  for (const char* name : {"jpeg/rgb420_97x131.jpg", "jpeg/progressive420_99x75.jpg",
                           "jpeg/gray_45x33.jpg", "jpeg/cmyk_40x30.jpg", "jpeg/rgb420_1x1.jpg"}) {
    const std::string bytes = image_fixture(name);
    for (int channels : {0, 1, 3}) {
      const Tensor full = decode_jpeg(bytes, {.channels = channels});
      const std::int64_t H = full.dim(0), W = full.dim(1);
      const CropWindow windows[] = {{0, 0, H, W},         {0, 0, 1, 1},
                                    {H - 1, W - 1, 1, 1}, {0, W / 2, H, W - W / 2},
                                    {H / 3, 0, 1, W},     {H / 2, W / 3, H - H / 2, 1}};
      for (const CropWindow& win : windows) {
        if (win.height <= 0 || win.width <= 0) continue;
        INFO(name << " channels " << channels << " window " << win.y << "," << win.x << " "
                  << win.height << "x" << win.width);
        CHECK(decode_and_crop_jpeg(bytes, win, {.channels = channels}) == crop_copy(full, win));
      }
    }
  }
}

TEST_CASE("decode_jpeg accepts every byte container", "[image][jpeg]") {
  const std::string bytes = image_fixture("jpeg/rgb420_17x13.jpg");
  const Tensor expected = decode_jpeg(bytes);
  CHECK(expected.shape() == Shape{13, 17, 3});
  CHECK(expected.dtype() == DType::uint8);
  const std::string_view view = bytes;
  const std::vector<std::uint8_t> vec(bytes.begin(), bytes.end());
  const std::vector<std::byte> bvec(
      reinterpret_cast<const std::byte*>(bytes.data()),
      reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
  CHECK(decode_jpeg(view) == expected);
  CHECK(decode_jpeg(vec) == expected);
  CHECK(decode_jpeg(std::span<const std::byte>(bvec)) == expected);
  CHECK(decode_jpeg(ByteView(bytes.data(), bytes.size())) == expected);
  CHECK(decode_jpeg(std::string(bytes)) == expected);  // a temporary lives through the call
}

TEST_CASE("decode_jpeg rejects bad options and windows with InvalidArgument", "[image][jpeg]") {
  const std::string bytes = image_fixture("jpeg/rgb420_97x131.jpg");  // 131 rows, 97 columns
  for (int c : {-1, 2, 4, 5}) CHECK_THROWS_AS(decode_jpeg(bytes, {.channels = c}), InvalidArgument);
  for (int s : {0, 3, 16, -2}) {
    CHECK_THROWS_AS(decode_jpeg(bytes, {.scale_denom = s}), InvalidArgument);
  }
  const CropWindow bad[] = {{-1, 0, 1, 1},  {0, -1, 1, 1}, {0, 0, 0, 5},   {0, 0, 5, 0},
                            {0, 0, 132, 1}, {0, 0, 1, 98}, {130, 0, 2, 1}, {0, 96, 1, 2}};
  for (const CropWindow& w : bad) {
    CHECK_THROWS_AS(decode_and_crop_jpeg(bytes, w), InvalidArgument);
  }
  // The window is in pixels of the scaled image: 1/2 is 66 x 49.
  CHECK(decode_and_crop_jpeg(bytes, {65, 48, 1, 1}, {.scale_denom = 2}).shape() == Shape{1, 1, 3});
  CHECK_THROWS_AS(decode_and_crop_jpeg(bytes, {66, 0, 1, 1}, {.scale_denom = 2}), InvalidArgument);
  try {
    decode_and_crop_jpeg(bytes, {0, 0, 200, 1}, {.file = "cat.jpg"});
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().file == "cat.jpg");
    CHECK_THAT(e.what(), Catch::Contains("131 x 97"));
  }
}

TEST_CASE("an image above max_pixels is refused before anything is decoded or allocated",
          "[image][jpeg]") {
  const std::string bytes = image_fixture("jpeg/rgb420_256x256_q90.jpg");
  CHECK(decode_jpeg(bytes, {.max_pixels = 65536}).shape() == Shape{256, 256, 3});
  CHECK_THROWS_AS(decode_jpeg(bytes, {.max_pixels = 65535}), InvalidArgument);
  // A header announcing 60,000 x 60,000 (3.6 G pixels, 10.8 GB decoded) over
  // 28 KB of data: InvalidArgument, not an allocation of 10.8 GB or a
  // decode of garbage (which would raise DataLossError).
  const std::string bomb = jpeg_with_size(bytes, 60000, 60000);
  const auto e = decode_error<InvalidArgument>(bomb);
  CHECK_THAT(e.what(), Catch::Contains("60000 x 60000") && Catch::Contains("max_pixels"));
  CHECK_THROWS_AS(decode_and_crop_jpeg(bomb, {0, 0, 8, 8}), InvalidArgument);
  CHECK_THROWS_AS(decode_jpeg(jpeg_with_size(bytes, 60000, 60000), {.scale_denom = 8}),
                  InvalidArgument);
  // Progressive files would make libjpeg allocate whole-image coefficient buffers.
  const std::string progressive = image_fixture("jpeg/progressive420_99x75.jpg");
  CHECK_THROWS_AS(decode_jpeg(jpeg_with_size(progressive, 60000, 60000)), InvalidArgument);
}

TEST_CASE("truncated JPEGs raise DataLossError at every length, or decode with counted warnings",
          "[image][jpeg]") {
  for (const char* name : {"jpeg/rgb420_97x131.jpg", "jpeg/progressive420_99x75.jpg"}) {
    const std::string bytes = image_fixture(name);
    for (std::size_t n = 0; n < bytes.size(); n += (n < 700 ? 1 : 37)) {
      INFO(name << " cut to " << n << " bytes");
      const std::string cut = bytes.substr(0, n);
      CHECK_THROWS_AS(decode_jpeg(cut), DataLossError);
      // Counting: either the header is incomplete (an error) or the image
      // decodes, its missing part grey, with at least one warning counted.
      std::atomic<std::uint64_t> warnings{0};
      try {
        const Tensor t = decode_jpeg(cut, {.on_warning = OnWarning::count, .warnings = &warnings});
        CHECK(t.shape() == decode_jpeg(bytes).shape());
        CHECK(warnings.load() >= 1);
      } catch (const DataLossError&) {
      }
    }
    CHECK_NOTHROW(decode_jpeg(bytes));
  }
  // Cut inside the tables: counting lets libjpeg read its own fake EOI
  // marker, then it finds no image; the position is past the data.
  const std::string cut = image_fixture("jpeg/rgb420_97x131.jpg").substr(0, 100);
  CHECK_THAT(decode_error<DataLossError>(cut, {.on_warning = OnWarning::count}).what(),
             Catch::Contains("(after all 100 bytes)"));
  CHECK_THAT(
      decode_error<DataLossError>(cut).what(),
      Catch::Contains("Premature end of JPEG file (at byte ") && Catch::Contains(" of 100)"));
}

TEST_CASE("corrupt data that still decodes is an error or counted, by option", "[image][jpeg]") {
  const std::string bytes = image_fixture("jpeg/rgb422_64x48.jpg");
  // Garbage between the entropy-coded data and EOI: libjpeg warns
  // "Corrupt JPEG data: 3 extraneous bytes before marker 0xd9".
  std::string corrupt = bytes;
  corrupt.insert(corrupt.size() - 2, "\x01\x02\x03", 3);
  const auto e = decode_error<DataLossError>(corrupt, {.file = "dog.jpg"});
  CHECK_THAT(e.what(), Catch::Contains("extraneous bytes before marker 0xd9"));
  CHECK(e.context().file == "dog.jpg");
  CHECK_THAT(e.what(), Catch::Contains("at byte"));
  std::atomic<std::uint64_t> warnings{5};
  const Tensor t = decode_jpeg(corrupt, {.on_warning = OnWarning::count, .warnings = &warnings});
  CHECK(warnings.load() == 6);
  CHECK(t == decode_jpeg(bytes));
  CHECK(decode_jpeg(corrupt, {.on_warning = OnWarning::count}) == t);  // no counter: ignored
  CHECK(decode_jpeg(bytes, {.on_warning = OnWarning::count, .warnings = &warnings}) == t);
  CHECK(warnings.load() == 6);
}

TEST_CASE("non-JPEG and damaged bytes raise DataLossError, never crash", "[image][jpeg]") {
  CHECK_THROWS_AS(decode_jpeg(std::string()), DataLossError);
  CHECK_THROWS_AS(decode_jpeg(std::string("not a jpeg at all")), DataLossError);
  CHECK_THROWS_AS(decode_jpeg(image_fixture("png/rgb8.png")), DataLossError);
  CHECK_THROWS_AS(decode_jpeg(std::string("\xFF\xD8\xFF\xD9", 4)), DataLossError);
  const auto e = decode_error<DataLossError>(std::string("\xFF\xD8\xFF\xE0garbage", 11));
  CHECK_THAT(e.what(), Catch::StartsWith("DataLossError: decode_jpeg: "));
  // Random damage: each result is an image or an ingest::Error.
  const std::string bytes = image_fixture("jpeg/progressive420_99x75.jpg");
  Rng rng(3);
  int decoded = 0, failed = 0;
  for (int t = 0; t < 300; ++t) {
    std::string damaged = bytes;
    for (int k = 0; k < 4; ++k) {
      damaged[rng.uniform(damaged.size())] = static_cast<char>(rng.uniform(256));
    }
    for (OnWarning w : {OnWarning::error, OnWarning::count}) {
      try {
        const Tensor img = decode_jpeg(damaged, {.max_pixels = 1 << 22, .on_warning = w});
        CHECK(img.rank() == 3);
        ++decoded;
      } catch (const Error&) {
        ++failed;
      }
    }
  }
  CHECK(decoded > 0);
  CHECK(failed > 0);
}

TEST_CASE("a progressive JPEG with thousands of scans is refused", "[image][jpeg]") {
  const std::string bytes = tj_encode(32, 32, TJSAMP_420, 90, true, 9);
  const std::string scan = last_scan(bytes);
  std::string many = bytes.substr(0, bytes.size() - 2);
  for (int i = 0; i < 600; ++i) many += scan;
  many += "\xFF\xD9";
  // Repeated refinement scans are a warning (bogus progression) that
  // counting lets through; the scan limit stops the decode.
  const auto e = decode_error<DataLossError>(many, {.on_warning = OnWarning::count});
  CHECK_THAT(e.what(), Catch::Contains("more than 500 scans"));
  CHECK_THROWS_AS(decode_jpeg(many), DataLossError);
}

TEST_CASE("a decode error inside a map names the element", "[image][jpeg]") {
  const std::string good = image_fixture("jpeg/gray_45x33.jpg");
  auto ds =
      from_vector<std::string>({good, good.substr(0, 100), good}).map([](const std::string& b) {
        return decode_jpeg(b);
      });
  const auto outcomes = collect_outcomes(ds);
  REQUIRE(outcomes.size() == 3);
  CHECK(outcomes[0].value);
  CHECK_THAT(outcomes[1].error,
             Catch::StartsWith("DataLossError: decode_jpeg") && Catch::Contains("element 1"));
  CHECK(outcomes[2].value);
}
