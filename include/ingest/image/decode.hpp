// Format-independent decoding: image_format (by magic bytes), read_header
// (size and channels without decoding) and decode_image (tf.io.decode_image,
// torchvision.io.decode_image), which hand JPEG to jpeg.hpp and PNG to
// png.hpp. Thread-safe; the bytes are read during the call only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/jpeg.hpp"
#include "ingest/image/png.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {

/// JPEG (starts FF D8 FF) or PNG (the 8-byte PNG signature); nullopt otherwise.
inline std::optional<ImageFormat> image_format(ByteView bytes) noexcept {
  const unsigned char* p = bytes.data();
  if (bytes.size() >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return ImageFormat::jpeg;
  static constexpr unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= 8 && std::equal(png, png + 8, p)) return ImageFormat::png;
  return std::nullopt;
}

namespace detail {

/// The format of `bytes`, or DataLossError naming `op` and the first bytes.
inline ImageFormat require_format(ByteView bytes, std::string_view op, std::string_view file) {
  if (auto f = image_format(bytes)) return *f;
  static constexpr char hex[] = "0123456789abcdef";
  std::string head;
  for (std::size_t i = 0; i < bytes.size() && i < 8; ++i) {
    if (i) head += ' ';
    head += hex[bytes.data()[i] >> 4];
    head += hex[bytes.data()[i] & 15];
  }
  throw DataLossError(std::string(op) + ": not a JPEG or PNG image (" +
                          std::to_string(bytes.size()) + " bytes" +
                          (head.empty() ? "" : ", starting " + head) + ")",
                      {.file = std::string(file)});
}

}  // namespace detail

/// Height, width, stored channels and format, from the headers alone (no
/// pixel is decoded; PNG chunks before the image data are read for tRNS).
/// Throws DataLossError for bytes that are not a readable JPEG or PNG header.
/// Only `.on_warning`, `.warnings` and `.file` of `options` apply.
inline ImageHeader read_header(ByteView bytes, const DecodeOptions& options = {}) {
  if (detail::require_format(bytes, "read_header", options.file) == ImageFormat::jpeg) {
    return detail::JpegDecoder(bytes, options, "read_header").header();
  }
  return detail::PngDecoder(bytes, options, "read_header").header();
}

/// Decodes a JPEG or PNG image, recognised by its magic bytes (tf.io.decode_image
/// with expand_animations=False). Throws DataLossError for other bytes, and
/// as decode_jpeg / decode_png.
inline Tensor decode_image(ByteView bytes, const DecodeOptions& options = {}) {
  if (detail::require_format(bytes, "decode_image", options.file) == ImageFormat::jpeg) {
    return decode_jpeg(bytes, options);
  }
  return decode_png(bytes, options);
}

}  // namespace ingest::image
