#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <ingest/image/normalize.hpp>
#include <ingest/ingest.hpp>

using namespace ingest;
using namespace ingest::image;

namespace {

// Every uint8 value in each channel: [16, 16, c], value (y * 16 + x + 37 k) % 256.
Tensor all_values(std::int64_t c) {
  Tensor t(DType::uint8, Shape{16, 16, c});
  for (std::int64_t p = 0; p < 256; ++p) {
    for (std::int64_t k = 0; k < c; ++k) {
      t.data<std::uint8_t>()[p * c + k] = static_cast<std::uint8_t>((p + 37 * k) % 256);
    }
  }
  return t;
}

// The documented float32 arithmetic, one value at a time.
float reference(std::uint8_t x, float mean, float std) {
  const auto scale = static_cast<float>(1.0 / (255.0 * static_cast<double>(std)));
  const auto bias = static_cast<float>(-static_cast<double>(mean) / static_cast<double>(std));
  return static_cast<float>(x) * scale + bias;
}

// Round to nearest, ties to even, by search: the representable value nearest
// to v among `candidates` (ascending), ties to the even bit pattern.
template <class Convert>
std::uint16_t nearest(float v, std::uint16_t lo, std::uint16_t hi, Convert to_value) {
  std::uint16_t best = lo;
  double best_d = std::numeric_limits<double>::infinity();
  for (std::uint32_t b = lo; b <= hi; ++b) {
    const double d = std::fabs(static_cast<double>(to_value(static_cast<std::uint16_t>(b))) - v);
    if (d < best_d || (d == best_d && (b & 1) == 0)) {
      best = static_cast<std::uint16_t>(b);
      best_d = d;
    }
  }
  return best;
}

// float16 by exhaustive search over the finite halves of v's sign.
std::uint16_t half_by_search(float v) {
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  return static_cast<std::uint16_t>(sign | nearest(std::fabs(v), 0, 0x7bff, [](std::uint16_t b) {
                                      return to_float(float16_t{b});
                                    }));
}

// bfloat16: the nearer of the two truncations around v.
std::uint16_t bfloat_by_search(float v) {
  const auto lo = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16);
  return nearest(v, lo, static_cast<std::uint16_t>(lo + 1),
                 [](std::uint16_t b) { return to_float(bfloat16_t{b}); });
}

const float imagenet_mean[] = {0.485f, 0.456f, 0.406f, 0.5f};
const float imagenet_std[] = {0.229f, 0.224f, 0.225f, 0.25f};

}  // namespace

TEST_CASE("to_float16 and to_bfloat16 round to nearest, ties to even", "[image][normalize]") {
  CHECK(to_float16(1.0f).bits == 0x3c00);
  CHECK(to_float16(-2.0f).bits == 0xc000);
  CHECK(to_float16(65504.0f).bits == 0x7bff);
  CHECK(to_float16(65519.99f).bits == 0x7bff);
  CHECK(to_float16(65520.0f).bits == 0x7c00);  // the tie above the largest half: infinity
  CHECK(to_float16(std::numeric_limits<float>::infinity()).bits == 0x7c00);
  CHECK(to_float16(std::numeric_limits<float>::quiet_NaN()).bits == 0x7e00);
  CHECK(to_float16(0x1p-24f).bits == 0x0001);         // smallest subnormal
  CHECK(to_float16(0x1p-25f).bits == 0x0000);         // tie: to even (0)
  CHECK(to_float16(3 * 0x1p-25f).bits == 0x0002);     // tie between 1 and 2: even
  CHECK(to_float16(1.0f + 0x1p-11f).bits == 0x3c00);  // tie: to even
  CHECK(to_float16(1.0f + 3 * 0x1p-11f).bits == 0x3c02);
  CHECK(to_float16(0x1p-14f).bits == 0x0400);             // smallest normal
  CHECK(to_float16(0x1p-14f - 0x1p-25f).bits == 0x0400);  // tie rounds up into the normals
  CHECK(to_bfloat16(1.0f).bits == 0x3f80);
  CHECK(to_bfloat16(1.0f + 0x1p-8f).bits == 0x3f80);  // tie: to even
  CHECK(to_bfloat16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);
  CHECK(to_bfloat16(-std::numeric_limits<float>::max()).bits == 0xff80);  // rounds to -infinity
  CHECK((to_bfloat16(std::numeric_limits<float>::quiet_NaN()).bits & 0x7fc0) == 0x7fc0);
  CHECK(to_float(float16_t{0x0001}) == 0x1p-24f);
  CHECK(to_float(float16_t{0xfbff}) == -65504.0f);
  CHECK(to_float(bfloat16_t{0x3f80}) == 1.0f);
}

TEST_CASE("normalize: (x / 255 - mean) / std for every value, each dtype and layout",
          "[image][normalize]") {
  for (std::int64_t c : {1, 3, 4}) {
    const Tensor img = all_values(c);
    const std::span<const float> mean(imagenet_mean, static_cast<std::size_t>(c));
    const std::span<const float> std(imagenet_std, static_cast<std::size_t>(c));
    for (Layout layout : {Layout::chw, Layout::hwc}) {
      for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
        INFO(c << " channels, " << (layout == Layout::chw ? "chw" : "hwc") << ", "
               << dtype_name(dtype));
        const Tensor out = normalize(img, mean, std, {.layout = layout, .dtype = dtype});
        REQUIRE(out.dtype() == dtype);
        REQUIRE(out.shape() == (layout == Layout::chw ? Shape{c, 16, 16} : Shape{16, 16, c}));
        double worst = 0;  // against torchvision's formula in double
        for (std::int64_t p = 0; p < 256; ++p) {
          for (std::int64_t k = 0; k < c; ++k) {
            const std::uint8_t x = img.data<std::uint8_t>()[p * c + k];
            const float ref =
                reference(x, mean[static_cast<std::size_t>(k)], std[static_cast<std::size_t>(k)]);
            const std::int64_t i = layout == Layout::chw ? k * 256 + p : p * c + k;
            if (dtype == DType::float32) {
              const float v = out.data<float>()[i];
              REQUIRE(v == ref);
              const double exact = (x / 255.0 - mean[static_cast<std::size_t>(k)]) /
                                   std[static_cast<std::size_t>(k)];
              worst = std::max(worst, std::fabs(v - exact) / std::max(std::fabs(exact), 1.0));
            } else if (dtype == DType::float16) {
              REQUIRE(out.data<float16_t>()[i].bits == half_by_search(ref));
            } else {
              REQUIRE(out.data<bfloat16_t>()[i].bits == bfloat_by_search(ref));
            }
          }
        }
        // Against (x / 255 - mean) / std in double: a few float32 ulps.
        CHECK(worst < 4e-7);
      }
    }
  }
}

TEST_CASE("normalize's layouts: chw planes and hwc pixels, and 1 x 1 images",
          "[image][normalize]") {
  Tensor img(DType::uint8, Shape{1, 2, 3});
  const std::uint8_t px[] = {0, 51, 255, 102, 153, 204};
  std::copy(std::begin(px), std::end(px), img.data<std::uint8_t>());
  const Tensor chw = normalize(img, {0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f});
  const Tensor hwc =
      normalize(img, {0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}, {.layout = Layout::hwc});
  // x / 255 in float32 (x * (1 / 255) rounded): 0.2 and 0.6 and 1 as floats.
  const float expected_chw[] = {0.0f, 0.4f, 0.2f, 0.6f, 1.0f, 0.8f};
  const float expected_hwc[] = {0.0f, 0.2f, 1.0f, 0.4f, 0.6f, 0.8f};
  for (int i = 0; i < 6; ++i) {
    CHECK(chw.data<float>()[i] == Approx(expected_chw[i]).margin(1e-7));
    CHECK(hwc.data<float>()[i] == Approx(expected_hwc[i]).margin(1e-7));
  }
  Tensor one(DType::uint8, Shape{1, 1, 1});
  one.data<std::uint8_t>()[0] = 255;
  const Tensor h = normalize(one, {0.5f}, {0.5f}, {.dtype = DType::float16});
  CHECK(h.shape() == Shape{1, 1, 1});
  CHECK(h.data<float16_t>()[0].bits == 0x3c00);  // (1 - 0.5) / 0.5 = 1
  const Tensor b = normalize(one, {0.5f}, {0.5f}, {.dtype = DType::bfloat16});
  CHECK(b.data<bfloat16_t>()[0].bits == 0x3f80);
}

TEST_CASE("normalize rejects bad input, naming itself", "[image][normalize][errors]") {
  const Tensor img = all_values(3);
  CHECK_THROWS_WITH(
      normalize(img, {0.5f, 0.5f}, {1.0f, 1.0f, 1.0f}),
      Catch::Contains("normalize: mean and std need one value per channel (3), got 2 and 3"));
  CHECK_THROWS_WITH(normalize(img, {0.5f, 0.5f, 0.5f}, {1.0f, 0.0f, 1.0f}),
                    Catch::Contains("normalize: mean and std must be finite and std not 0") &&
                        Catch::Contains("for channel 1"));
  CHECK_THROWS_AS(normalize(img, {std::nanf(""), 0.5f, 0.5f}, {1.0f, 1.0f, 1.0f}), InvalidArgument);
  CHECK_THROWS_AS(
      normalize(img, {0.5f, 0.5f, 0.5f}, {1.0f, std::numeric_limits<float>::infinity(), 1.0f}),
      InvalidArgument);
  CHECK_THROWS_WITH(
      normalize(img, {0.5f, 0.5f, 0.5f}, {1.0f, 1.0f, 1.0f}, {.dtype = DType::uint8}),
      Catch::Contains("normalize: dtype must be float32, float16 or bfloat16, got uint8"));
  CHECK_THROWS_WITH(normalize(Tensor::zeros(DType::uint8, Shape{2, 2, 2}), {0.f, 0.f}, {1.f, 1.f}),
                    Catch::Contains("normalize: expected 1, 3 or 4 channels, got 2"));
  CHECK_THROWS_WITH(
      normalize(Tensor::zeros(DType::float32, Shape{2, 2, 3}), {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f}),
      Catch::Contains("normalize: expected a host uint8 image"));
}

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::equal(static_cast<const std::byte*>(a.raw_data()),
                    static_cast<const std::byte*>(a.raw_data()) + a.nbytes(),
                    static_cast<const std::byte*>(b.raw_data()));
}

// A tensor whose every byte is 0xA5: a pattern no normalize output leaves behind.
Tensor filled(DType dtype, Shape shape) {
  Tensor t(dtype, shape);
  std::fill_n(static_cast<std::byte*>(t.raw_data()), t.nbytes(), std::byte{0xA5});
  return t;
}

}  // namespace

TEST_CASE("normalize_into writes normalize's values bit for bit, each dtype and layout",
          "[image][normalize]") {
  for (std::int64_t c : {1, 3, 4}) {
    const Tensor img = all_values(c);
    const std::span<const float> mean(imagenet_mean, static_cast<std::size_t>(c));
    const std::span<const float> std(imagenet_std, static_cast<std::size_t>(c));
    for (Layout layout : {Layout::chw, Layout::hwc}) {
      for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
        INFO(c << " channels, " << (layout == Layout::chw ? "chw" : "hwc") << ", "
               << dtype_name(dtype));
        const Tensor expected = normalize(img, mean, std, {.layout = layout, .dtype = dtype});
        Tensor out = filled(dtype, expected.shape());
        normalize_into(img, mean, std, out, layout);  // an lvalue
        CHECK(same_bytes(out, expected));
        Tensor again = filled(dtype, expected.shape());
        normalize_into(img, mean, std, Tensor(again), layout);  // a temporary sharing storage
        CHECK(same_bytes(again, expected));
      }
    }
  }
  // The braced-list overloads, lvalue and temporary; chw by default.
  const Tensor img = all_values(3);
  const Tensor expected = normalize(img, {0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f});
  Tensor out = filled(DType::float32, Shape{3, 16, 16});
  normalize_into(img, {0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}, out);
  CHECK(same_bytes(out, expected));
  Tensor batch = filled(DType::float32, Shape{1, 3, 16, 16});
  normalize_into(img, {0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}, batch.slice(0));
  CHECK(same_bytes(batch.slice(0), expected));
}

TEST_CASE("normalize_into fills slices of a batch in place, leaving the others untouched",
          "[image][normalize]") {
  const float mean[] = {0.485f, 0.456f, 0.406f}, std[] = {0.229f, 0.224f, 0.225f};
  for (Layout layout : {Layout::chw, Layout::hwc}) {
    for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
      INFO((layout == Layout::chw ? "chw" : "hwc") << ", " << dtype_name(dtype));
      const Shape one = layout == Layout::chw ? Shape{3, 5, 7} : Shape{5, 7, 3};
      Tensor batch = filled(dtype, Shape{4, one[0], one[1], one[2]});
      const Tensor untouched = filled(dtype, one);
      Tensor images[4];
      for (std::int64_t i : {1, 3}) {
        images[i] = Tensor(DType::uint8, Shape{5, 7, 3});
        for (std::int64_t k = 0; k < 5 * 7 * 3; ++k) {
          images[i].data<std::uint8_t>()[k] = static_cast<std::uint8_t>(k * 7 + i * 50);
        }
        normalize_into(images[i], mean, std, batch.slice(i), layout);
      }
      for (std::int64_t i : {1, 3}) {
        CHECK(same_bytes(batch.slice(i),
                         normalize(images[i], mean, std, {.layout = layout, .dtype = dtype})));
      }
      CHECK(same_bytes(batch.slice(0), untouched));
      CHECK(same_bytes(batch.slice(2), untouched));
    }
  }
}

TEST_CASE("normalize_into rejects bad input and outputs, naming itself, out untouched",
          "[image][normalize][errors]") {
  const Tensor img = all_values(3);  // [16, 16, 3]
  const Tensor pristine = filled(DType::float32, Shape{3, 16, 16});
  Tensor out = filled(DType::float32, Shape{3, 16, 16});
  CHECK_THROWS_WITH(
      normalize_into(img, {0.5f, 0.5f}, {1.0f, 1.0f, 1.0f}, out),
      Catch::Contains("normalize_into: mean and std need one value per channel (3), got 2 and 3"));
  CHECK_THROWS_WITH(normalize_into(img, {0.5f, 0.5f, 0.5f}, {1.0f, 0.0f, 1.0f}, out),
                    Catch::Contains("normalize_into: mean and std must be finite and std not 0"));
  CHECK_THROWS_WITH(normalize_into(Tensor::zeros(DType::float32, Shape{16, 16, 3}), {0.f, 0.f, 0.f},
                                   {1.f, 1.f, 1.f}, out),
                    Catch::Contains("normalize_into: expected a host uint8 image"));
  CHECK_THROWS_WITH(normalize_into(Tensor::zeros(DType::uint8, Shape{16, 16, 2}), {0.f, 0.f},
                                   {1.f, 1.f}, Tensor::zeros(DType::float32, Shape{2, 16, 16})),
                    Catch::Contains("normalize_into: expected 1, 3 or 4 channels, got 2"));
  // The output's dtype.
  for (DType dtype : {DType::uint8, DType::float64, DType::int32}) {
    CHECK_THROWS_WITH(
        normalize_into(img, {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f}, Tensor(dtype, Shape{3, 16, 16})),
        Catch::Contains("normalize_into: out must be a host float32, float16 or bfloat16 tensor, "
                        "got " +
                        std::string(dtype_name(dtype)) + "[3, 16, 16]"));
  }
  CHECK_THROWS_WITH(normalize_into(img, {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f}, Tensor()),
                    Catch::Contains("(undefined)"));
  // The output's shape: the other layout's, a wrong size, a batch instead of a slice.
  CHECK_THROWS_WITH(
      normalize_into(img, {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f}, out, Layout::hwc),
      Catch::Contains("normalize_into: out has shape [3, 16, 16], but the image [16, 16, 3] "
                      "needs [16, 16, 3] (hwc)"));
  CHECK_THROWS_WITH(
      normalize_into(img, {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f},
                     Tensor(DType::float16, Shape{3, 16, 15})),
      Catch::Contains("out has shape [3, 16, 15], but the image [16, 16, 3] needs [3, 16, 16] "
                      "(chw)"));
  CHECK_THROWS_AS(normalize_into(img, {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f},
                                 Tensor(DType::float32, Shape{1, 3, 16, 16})),
                  InvalidArgument);
  CHECK(same_bytes(out, pristine));
  // An output sharing bytes with the image (both views of one buffer).
  std::vector<float> buffer(3 * 16 * 16 * 2);
  const Tensor inside = Tensor::from_external(buffer.data(), DType::uint8, Shape{16, 16, 3}, [] {});
  const Tensor over =
      Tensor::from_external(buffer.data() + 100, DType::float32, Shape{3, 16, 16}, [] {});
  CHECK_THROWS_WITH(normalize_into(inside, {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f}, Tensor(over)),
                    Catch::Contains("normalize_into: out shares memory with the image"));
  const Tensor apart =
      Tensor::from_external(buffer.data() + 3 * 16 * 16, DType::float32, Shape{3, 16, 16}, [] {});
  CHECK_NOTHROW(normalize_into(inside, {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f}, Tensor(apart)));
}

namespace {
// Image k of a set: [5, 7, c], its values shifted by k.
Tensor image_k(std::int64_t c, int k) {
  Tensor t(DType::uint8, Shape{5, 7, c});
  for (std::int64_t i = 0; i < t.num_elements(); ++i)
    t.data<std::uint8_t>()[i] = static_cast<std::uint8_t>((i * 11 + k * 29) % 256);
  return t;
}
}  // namespace

TEST_CASE("normalize_in_batch: batches normalize's results bit for bit, without a copy per image",
          "[image][normalize]") {
  for (std::int64_t c : {1, 3, 4}) {
    std::vector<Tensor> images;
    for (int k = 0; k < 7; ++k) images.push_back(image_k(c, k));
    const std::span<const float> mean(imagenet_mean, static_cast<std::size_t>(c));
    const std::span<const float> std(imagenet_std, static_cast<std::size_t>(c));
    for (Layout layout : {Layout::chw, Layout::hwc}) {
      for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
        const NormalizeOptions options{.layout = layout, .dtype = dtype};
        // tensor(): normalize now.
        const PendingNormalize one = normalize_in_batch(images[0], mean, std, options);
        CHECK(one.dtype() == dtype);
        CHECK(one.shape() == normalize(images[0], mean, std, options).shape());
        CHECK(same_bytes(one.tensor(), normalize(images[0], mean, std, options)));
        CHECK(ingest::detail::element_bytes(one) == images[0].nbytes());  // what it holds
        // batch(3) of 7: two full batches and a remainder of one; the map
        // sequential, parallel (fused into map-and-batch) and autotuned.
        for (std::int64_t parallelism : {std::int64_t{1}, std::int64_t{2}, autotune}) {
          INFO(c << " channels, " << (layout == Layout::chw ? "chw" : "hwc") << ", "
                 << dtype_name(dtype) << ", parallelism " << parallelism);
          auto it = from_vector(images)
                        .map(
                            [&](const Tensor& img) {
                              return std::pair{normalize_in_batch(img, mean, std, options),
                                               std::int64_t{img.data<std::uint8_t>()[0]}};
                            },
                            {.parallelism = parallelism})
                        .batch(3)
                        .iterator();
          std::size_t first = 0;
          while (auto batch = it.next()) {
            const Tensor& got = batch->first;
            REQUIRE(got.shape()[0] ==
                    static_cast<std::int64_t>(std::min<std::size_t>(3, 7 - first)));
            for (std::int64_t i = 0; i < got.shape()[0]; ++i) {
              const Tensor& img = images[first + static_cast<std::size_t>(i)];
              CHECK(same_bytes(got.slice(i), normalize(img, mean, std, options)));
              CHECK(batch->second.data<std::int64_t>()[i] == img.data<std::uint8_t>()[0]);
            }
            first += static_cast<std::size_t>(got.shape()[0]);
          }
          CHECK(first == images.size());
        }
      }
    }
  }
}

TEST_CASE("normalize_in_batch rejects bad input, naming itself, and a batch of mixed shapes fails",
          "[image][normalize][errors]") {
  const Tensor img = image_k(3, 0);
  CHECK_THROWS_WITH(normalize_in_batch(img, {0.5f, 0.5f}, {0.2f, 0.2f}),
                    Catch::Contains("normalize_in_batch: mean and std need one value per channel"));
  CHECK_THROWS_WITH(normalize_in_batch(img, {0.5f, 0.5f, 0.5f}, {0.2f, 0.0f, 0.2f}),
                    Catch::Contains("normalize_in_batch: mean and std must be finite"));
  CHECK_THROWS_WITH(
      normalize_in_batch(img, {0.5f, 0.5f, 0.5f}, {0.2f, 0.2f, 0.2f}, {.dtype = DType::int32}),
      Catch::Contains("normalize_in_batch: dtype must be float32, float16 or bfloat16"));
  CHECK_THROWS_WITH(
      normalize_in_batch(Tensor(DType::uint8, Shape{4, 4, 2}), {0.5f, 0.5f}, {0.2f, 0.2f}),
      Catch::Contains("normalize_in_batch: expected 1, 3 or 4 channels"));
  // Images of two sizes in one batch: batch's own error.
  const std::vector<Tensor> mixed{image_k(3, 0), Tensor(DType::uint8, Shape{6, 7, 3})};
  auto it = from_vector(mixed)
                .map([](const Tensor& x) {
                  return normalize_in_batch(x, {0.5f, 0.5f, 0.5f}, {0.2f, 0.2f, 0.2f});
                })
                .batch(2)
                .iterator();
  CHECK_THROWS_WITH(it.next(), Catch::Contains("batch: elements must have equal dtype and shape") &&
                                   Catch::Contains("float32[3, 6, 7]"));
}

#if INGEST_NORMALIZE_AVX2
TEST_CASE("normalize's AVX2 kernel (float32, chw, 3 channels) equals the portable loop",
          "[image][normalize]") {
  if (!ingest::image::detail::normalize_avx2_available()) {
    WARN("no AVX2 on this CPU: the kernel is not used, nothing to compare");
    return;
  }
  const float scale[3] = {0.0171f, 0.0175f, 0.0174f}, bias[3] = {-2.1179f, -2.0357f, -1.8044f};
  // Pixel counts around the 16-pixel step (tails of 0 to 15), and 224 x 224
  // and 232 x 232 crops (outputs of 512 KiB or more: streaming stores).
  std::vector<std::int64_t> counts;
  for (std::int64_t n = 0; n <= 40; ++n) counts.push_back(n);
  counts.push_back(224 * 224);
  counts.push_back(232 * 232);
  for (const std::int64_t n : counts) {
    // Planes at a 32-byte aligned address (streamed when large) and at one
    // 4 bytes past it (plain stores).
    for (const std::size_t shift : {std::size_t{0}, std::size_t{1}}) {
      INFO(n << " pixels, output shifted by " << shift << " floats from 32-byte alignment");
      std::vector<std::uint8_t> in(static_cast<std::size_t>(n * 3));
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 89 + 7);
      std::vector<float> portable(in.size() + 1, -1.0f), storage(in.size() + 1 + 8 + shift, -1.0f);
      const auto misalign = reinterpret_cast<std::uintptr_t>(storage.data()) % 32 / sizeof(float);
      float* avx2 = storage.data() + (misalign == 0 ? 0 : 8 - misalign) + shift;
      ingest::image::detail::normalize_chw<3, ingest::image::detail::StoreFloat32>(
          in.data(), n, scale, bias, portable.data(), n);
      ingest::image::detail::normalize_chw3_f32_avx2(in.data(), n, scale, bias, avx2);
      CHECK(std::memcmp(portable.data(), avx2, portable.size() * sizeof(float)) == 0);
      CHECK(avx2[in.size()] == -1.0f);  // nothing written past the planes
    }
  }
}
#endif
