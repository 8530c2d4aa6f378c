// What the image headers share: the view of encoded bytes every decoder takes,
// the decode options and header, and the checks and allocation of uint8
// [height, width, channels] image tensors (the layout of tf.image and of a PIL
// image's bytes). Plain values and functions: safe to use from any thread.
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>

#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"

/// The image part (CMake target ingest::image; include <ingest/image/image.hpp>): JPEG and PNG
/// decoding, JPEG encoding and the transforms of uint8 [H, W, C] Tensors.
namespace ingest::image {

/// Encoded image bytes, not owned: anything contiguous of one-byte elements
/// (std::string, std::string_view, std::vector<std::uint8_t>,
/// std::span<const std::byte>, a TFRecord record, a file's bytes). Decoders
/// read it only during the call.
class ByteView {
 public:
  constexpr ByteView() noexcept = default;
  /// The `size` bytes at `data` (not owned: they must outlive the view).
  ByteView(const void* data, std::size_t size) noexcept
      : data_(static_cast<const unsigned char*>(data)), size_(size) {}
  /// Any contiguous range of one-byte trivially copyable elements (not a C
  /// array: a string literal's terminating NUL would be taken for data).
  template <std::ranges::contiguous_range R>
  requires(!std::is_array_v<std::remove_cvref_t<R>> && sizeof(std::ranges::range_value_t<R>) == 1 &&
           std::is_trivially_copyable_v<std::ranges::range_value_t<R>>) ByteView(const R& bytes)
  noexcept  // NOLINT(google-explicit-constructor): a view, like string_view
      : data_(reinterpret_cast<const unsigned char*>(std::ranges::data(bytes))),
        size_(std::ranges::size(bytes)) {}

  /// The first byte.
  const unsigned char* data() const noexcept { return data_; }
  /// The number of bytes.
  std::size_t size() const noexcept { return size_; }
  /// Whether it holds no bytes.
  bool empty() const noexcept { return size_ == 0; }

 private:
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A size in pixels, height first (as tf.image and torchvision's `size`).
struct Size {
  /// Rows.
  std::int64_t height = 0;
  /// Columns.
  std::int64_t width = 0;
  /// Equal when both dimensions are.
  friend bool operator==(const Size&, const Size&) = default;
};

/// A rectangle of whole pixels: rows [y, y + height), columns [x, x + width).
struct CropWindow {
  /// The first row.
  std::int64_t y = 0;
  /// The first column.
  std::int64_t x = 0;
  /// Rows.
  std::int64_t height = 0;
  /// Columns.
  std::int64_t width = 0;
  /// Equal when every field is.
  friend bool operator==(const CropWindow&, const CropWindow&) = default;
};

/// The encoded formats the decoders read.
enum class ImageFormat : std::uint8_t { jpeg, png };

/// "jpeg" or "png".
constexpr std::string_view format_name(ImageFormat f) noexcept {
  return f == ImageFormat::jpeg ? "jpeg" : "png";
}

/// What read_header finds without decoding. `channels` is what decoding with
/// `.channels = 0` gives.
struct ImageHeader {
  /// Rows.
  std::int64_t height = 0;
  /// Columns.
  std::int64_t width = 0;
  /// Channels as stored (what decoding with `.channels = 0` gives).
  std::int64_t channels = 0;
  /// The encoded format.
  ImageFormat format = ImageFormat::jpeg;
  /// Equal when every field is.
  friend bool operator==(const ImageHeader&, const ImageHeader&) = default;
};

/// What a decoder does with libjpeg's warnings (corrupt data it can still
/// decode, such as a truncated file whose missing rows come out grey).
enum class OnWarning : std::uint8_t {
  error,  ///< raise DataLossError at the first warning
  count,  ///< decode anyway; add the warnings to `DecodeOptions::warnings` (if set)
};

/// Pillow's Image.MAX_IMAGE_PIXELS: larger images are refused before any
/// pixel memory is allocated (decompression bombs).
inline constexpr std::uint64_t default_max_pixels = 178'956'970;

/// How a decoder decodes: the channels, a DCT downscale, the pixel limit, what a warning does.
struct DecodeOptions {
  /// 0: as stored (JPEG: 1 gray, 3 RGB, 4 CMYK; PNG: 1 gray, 2 gray+alpha,
  /// 3 RGB, 4 RGBA or palette with transparency); 1: gray; 3: RGB; 4: RGBA
  /// (PNG only).
  int channels = 0;
  /// JPEG only: decode at 1/scale_denom of the size (1, 2, 4 or 8) with
  /// libjpeg-turbo's scaled inverse DCT, much faster than decode-then-resize.
  int scale_denom = 1;
  /// Images with more pixels (height x width as stored) raise InvalidArgument.
  std::uint64_t max_pixels = default_max_pixels;
  /// What a libjpeg warning (corrupt data it can still decode) does; raise by default.
  OnWarning on_warning = OnWarning::error;
  /// With OnWarning::count: the number of warnings is added here.
  std::atomic<std::uint64_t>* warnings = nullptr;
  /// Where the bytes came from, for errors (ErrorContext::file).
  std::string_view file = {};
};

namespace detail {

/// Height, width and channels of a uint8 [H, W, C] image tensor.
struct ImageDims {
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t channels = 0;
};

/// The dims of `image`, or InvalidArgument naming `op` if it is not a
/// defined host uint8 tensor of rank 3 with at least one channel.
inline ImageDims image_dims(const Tensor& image, std::string_view op) {
  if (!image.defined() || image.dtype() != DType::uint8 || image.rank() != 3 || image.dim(2) < 1 ||
      image.memory_kind() == MemoryKind::device) {
    throw InvalidArgument(std::string(op) + ": expected a host uint8 image [height, width, " +
                          "channels], got " + std::string(dtype_name(image.dtype())) +
                          image.shape().to_string() + (image.defined() ? "" : " (undefined)"));
  }
  return {image.dim(0), image.dim(1), image.dim(2)};
}

/// A new uint8 [height, width, channels] tensor from the pooled allocator.
inline Tensor new_image(std::int64_t height, std::int64_t width, std::int64_t channels) {
  return Tensor(DType::uint8, Shape{height, width, channels});
}

/// InvalidArgument unless `channels` is one the decoders accept.
inline void check_channels(int channels, bool allow_rgba, std::string_view op) {
  if (channels == 0 || channels == 1 || channels == 3 || (allow_rgba && channels == 4)) return;
  throw InvalidArgument(std::string(op) + ": channels must be 0, 1, 3" +
                        (allow_rgba ? " or 4" : "") + ", got " + std::to_string(channels));
}

/// InvalidArgument if an image of height x width exceeds `max_pixels`.
inline void check_pixels(std::uint64_t height, std::uint64_t width, std::uint64_t max_pixels,
                         std::string_view op, std::string_view file) {
  // height and width are below 2^32 (JPEG: 65,500, PNG: 2^31), so no overflow.
  if (height * width <= max_pixels) return;
  throw InvalidArgument(std::string(op) + ": image of " + std::to_string(height) + " x " +
                            std::to_string(width) + " pixels exceeds max_pixels (" +
                            std::to_string(max_pixels) + ")",
                        {.file = std::string(file)});
}

/// A uint8 [height, width, channels] image in memory someone else owns, rows
/// `row_stride` bytes apart (a crop of a larger image, without copying).
struct ImageView {
  const std::uint8_t* data = nullptr;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t channels = 0;
  std::int64_t row_stride = 0;
};

inline ImageView view_of(const Tensor& image, std::string_view op) {
  const ImageDims d = image_dims(image, op);
  return {image.data<std::uint8_t>(), d.height, d.width, d.channels, d.width * d.channels};
}

/// view_of for the transforms, which take gray, RGB or RGBA only:
/// InvalidArgument naming `op` for another tensor or channel count.
inline ImageView transform_view(const Tensor& image, std::string_view op) {
  const ImageView v = view_of(image, op);
  if (v.channels != 1 && v.channels != 3 && v.channels != 4) {
    throw InvalidArgument(std::string(op) + ": expected 1, 3 or 4 channels, got " +
                          std::to_string(v.channels) + " (image " + image.shape().to_string() +
                          ")");
  }
  return v;
}

/// The largest height or width an image op makes (Pillow's and libjpeg's
/// sides are int): sums of sides and paddings below it cannot overflow.
inline constexpr std::int64_t max_image_side = 0x7fffffff;

/// InvalidArgument naming `op` unless both sides of `size` (called `what`)
/// are in [1, max_image_side].
inline void check_size(Size size, std::string_view op, std::string_view what = "size") {
  if (size.height >= 1 && size.width >= 1 && size.height <= max_image_side &&
      size.width <= max_image_side) {
    return;
  }
  throw InvalidArgument(std::string(op) + ": " + std::string(what) +
                        " must be positive and below 2^31, got " + std::to_string(size.height) +
                        " x " + std::to_string(size.width));
}

/// `window` of `image` as a view (no copy).
inline ImageView crop_view(const ImageView& image, const CropWindow& window) noexcept {
  return {image.data + window.y * image.row_stride + window.x * image.channels, window.height,
          window.width, image.channels, image.row_stride};
}

/// Python's round(): to nearest, ties to even (the default rounding mode).
inline std::int64_t round_half_even(double x) noexcept {
  return static_cast<std::int64_t>(std::nearbyint(x));
}

/// Pillow's RGB -> L conversion (ITU-R 601-2 luma in 16-bit fixed point,
/// weights summing to 65536: gray stays gray).
constexpr std::uint8_t luma(unsigned r, unsigned g, unsigned b) noexcept {
  return static_cast<std::uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

}  // namespace detail
}  // namespace ingest::image
