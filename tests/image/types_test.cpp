#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <ingest/image/types.hpp>

using namespace ingest;
using namespace ingest::image;

TEST_CASE("ByteView views any contiguous range of bytes without copying", "[image][types]") {
  const std::string s = "abc";
  const std::vector<std::uint8_t> v = {1, 2, 3, 4};
  const std::vector<std::byte> b(2);
  const std::array<char, 5> a{};
  CHECK(ByteView(s).data() == reinterpret_cast<const unsigned char*>(s.data()));
  CHECK(ByteView(s).size() == 3);
  CHECK(ByteView(std::string_view(s).substr(1)).size() == 2);
  CHECK(ByteView(v).size() == 4);
  CHECK(ByteView(std::span<const std::byte>(b)).size() == 2);
  CHECK(ByteView(a).size() == 5);
  CHECK(ByteView(s.data(), 2).size() == 2);
  CHECK(ByteView().empty());
  CHECK(ByteView(std::string()).empty());
  // Wider elements and C arrays (a literal's NUL) are not bytes.
  static_assert(!std::is_constructible_v<ByteView, std::vector<int>>);
  static_assert(!std::is_constructible_v<ByteView, const char(&)[4]>);
  static_assert(std::is_convertible_v<const std::string&, ByteView>);
}

TEST_CASE("image_dims accepts host uint8 H x W x C tensors only", "[image][types]") {
  const auto d = image::detail::image_dims(Tensor(DType::uint8, Shape{4, 5, 3}), "op");
  CHECK(d.height == 4);
  CHECK(d.width == 5);
  CHECK(d.channels == 3);
  CHECK(image::detail::image_dims(Tensor(DType::uint8, Shape{0, 5, 1}), "op").height == 0);
  CHECK_THROWS_WITH(image::detail::image_dims(Tensor(DType::float32, Shape{4, 5, 3}), "flip"),
                    Catch::StartsWith("InvalidArgument: flip: expected a host uint8 image") &&
                        Catch::Contains("float32[4, 5, 3]"));
  CHECK_THROWS_AS(image::detail::image_dims(Tensor(DType::uint8, Shape{4, 5}), "op"),
                  InvalidArgument);
  CHECK_THROWS_AS(image::detail::image_dims(Tensor(DType::uint8, Shape{4, 5, 0}), "op"),
                  InvalidArgument);
  CHECK_THROWS_WITH(image::detail::image_dims(Tensor(), "op"), Catch::Contains("(undefined)"));
  const Tensor t = image::detail::new_image(2, 3, 4);
  CHECK(t.shape() == Shape{2, 3, 4});
  CHECK(t.dtype() == DType::uint8);
  CHECK(t.allocator() == &default_allocator());
}

TEST_CASE("channel and pixel checks name the operation and the file", "[image][types]") {
  for (int c : {0, 1, 3}) CHECK_NOTHROW(image::detail::check_channels(c, false, "op"));
  CHECK_NOTHROW(image::detail::check_channels(4, true, "op"));
  CHECK_THROWS_WITH(image::detail::check_channels(4, false, "decode_jpeg"),
                    "InvalidArgument: decode_jpeg: channels must be 0, 1, 3, got 4");
  CHECK_THROWS_AS(image::detail::check_channels(2, true, "op"), InvalidArgument);
  CHECK_NOTHROW(image::detail::check_pixels(65535, 65535, std::uint64_t{65535} * 65535, "op", ""));
  try {
    image::detail::check_pixels(60000, 60000, default_max_pixels, "decode_png", "x.png");
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().file == "x.png");
    CHECK_THAT(e.what(), Catch::Contains("60000 x 60000 pixels exceeds max_pixels (178956970)"));
  }
}

TEST_CASE("luma is Pillow's L conversion and keeps gray gray", "[image][types]") {
  for (unsigned v = 0; v < 256; ++v) CHECK(image::detail::luma(v, v, v) == v);
  CHECK(image::detail::luma(255, 0, 0) ==
        76);  // Pillow: Image.new("RGB", (1, 1), (255, 0, 0)).convert("L")
  CHECK(image::detail::luma(0, 255, 0) == 150);
  CHECK(image::detail::luma(0, 0, 255) == 29);
}
