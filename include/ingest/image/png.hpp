// decode_png (tf.io.decode_png, torchvision.io.decode_png) on libspng: 16-bit
// samples keep their high byte, alpha is kept when asked for and dropped
// (not composited) otherwise, as Pillow and tf do. Thread-safe (each call owns
// its decoder); bytes are read during the call only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>

#include <spng.h>

#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {
namespace detail {

/// One PNG stream being decoded: the header is read on construction.
class PngDecoder {
 public:
  /// Reads the header (and the chunks before the image data, for tRNS).
  /// Throws DataLossError if the bytes are not a PNG stream libspng accepts.
  PngDecoder(ByteView bytes, const DecodeOptions& options, std::string_view op)
      : options_(options), op_(op), ctx_(spng_ctx_new(0)) {
    if (ctx_.ctx == nullptr) throw std::bad_alloc();
    // Ancillary chunks (ICC profiles, text) are held in memory: bound them.
    check(spng_set_chunk_limits(ctx_.ctx, std::size_t{16} << 20, std::size_t{64} << 20));
    check(spng_set_png_buffer(ctx_.ctx, bytes.data(), bytes.size()));
    check(spng_get_ihdr(ctx_.ctx, &ihdr_));
    spng_trns trns{};
    const int r = spng_get_trns(ctx_.ctx, &trns);
    if (r != 0 && r != SPNG_ECHUNKAVAIL) check(r);
    has_trns_ = r == 0;
  }

  /// The stored size and channels (what `.channels = 0` gives): a palette
  /// with transparency (tRNS) counts as RGBA.
  ImageHeader header() const noexcept {
    return {ihdr_.height, ihdr_.width, stored_channels(), ImageFormat::png};
  }

  /// Decodes the whole image. Throws InvalidArgument for bad options or too
  /// many pixels, DataLossError for corrupt or truncated data.
  Tensor decode() {
    check_channels(options_.channels, true, op_);
    if (options_.scale_denom != 1) {
      throw InvalidArgument(std::string(op_) + ": scale_denom " +
                            std::to_string(options_.scale_denom) +
                            " needs a JPEG image; this is a PNG");
    }
    check_pixels(ihdr_.height, ihdr_.width, options_.max_pixels, op_, options_.file);
    const std::int64_t h = ihdr_.height, w = ihdr_.width;
    const std::int64_t channels = options_.channels == 0 ? stored_channels() : options_.channels;
    Tensor out = new_image(h, w, channels);
    const bool gray8 = ihdr_.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr_.bit_depth <= 8;
    // libspng converts straight into the tensor where it can (any type to RGB
    // or RGBA, gray up to 8 bits to gray); the rest goes through RGBA.
    if (channels == 3) return decode_into(out, SPNG_FMT_RGB8, 0);
    if (channels == 4) return decode_into(out, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS);
    if (channels == 1 && gray8) return decode_into(out, SPNG_FMT_G8, 0);
    Tensor rgba = new_image(h, w, 4);
    decode_into(rgba, SPNG_FMT_RGBA8, channels == 2 ? SPNG_DECODE_TRNS : 0);
    const std::uint8_t* in = rgba.data<std::uint8_t>();
    std::uint8_t* o = out.data<std::uint8_t>();
    const std::int64_t n = h * w;
    if (channels == 1) {
      for (std::int64_t i = 0; i < n; ++i, in += 4) o[i] = luma(in[0], in[1], in[2]);
    } else {  // gray + alpha, as stored
      for (std::int64_t i = 0; i < n; ++i, in += 4, o += 2) {
        o[0] = in[0];
        o[1] = in[3];
      }
    }
    return out;
  }

 private:
  struct Context {
    spng_ctx* ctx;
    explicit Context(spng_ctx* c) noexcept : ctx(c) {}
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    ~Context() { spng_ctx_free(ctx); }
  };

  std::int64_t stored_channels() const noexcept {
    switch (ihdr_.color_type) {
      case SPNG_COLOR_TYPE_GRAYSCALE: return 1;
      case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: return 2;
      case SPNG_COLOR_TYPE_INDEXED: return has_trns_ ? 4 : 3;
      case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: return 4;
      default: return 3;
    }
  }

  Tensor& decode_into(Tensor& out, spng_format format, int flags) {
    std::size_t size = 0;
    check(spng_decoded_image_size(ctx_.ctx, format, &size));
    if (size != out.nbytes()) {
      throw InternalError(std::string(op_) + ": libspng's image size " + std::to_string(size) +
                          " differs from the tensor's " + std::to_string(out.nbytes()));
    }
    check(spng_decode_image(ctx_.ctx, out.raw_data(), size, format, flags));
    // Read on to IEND, so that a file cut after its image data is an error
    // (as libpng's png_read_end makes it for tf.io.decode_png).
    check(spng_decode_chunks(ctx_.ctx));
    return out;
  }

  void check(int code) const {
    if (code == 0) return;
    if (code == SPNG_EMEM) throw std::bad_alloc();
    throw DataLossError(std::string(op_) + ": " + spng_strerror(code),
                        {.file = std::string(options_.file)});
  }

  DecodeOptions options_;
  std::string_view op_;
  Context ctx_;
  spng_ihdr ihdr_{};
  bool has_trns_ = false;
};

}  // namespace detail

/// Decodes a PNG image to uint8 [height, width, channels] (tf.io.decode_png
/// with dtype uint8). `.channels` 0 keeps what is stored (gray 1, gray+alpha
/// 2, RGB 3, RGBA or palette with transparency 4, palette 3); 1 is Pillow's
/// luma, 3 RGB, 4 RGBA (alpha from tRNS, else 255). Throws DataLossError for
/// corrupt, truncated or non-PNG bytes, InvalidArgument for bad options
/// (`.scale_denom` other than 1) or more than `.max_pixels` pixels.
inline Tensor decode_png(ByteView bytes, const DecodeOptions& options = {}) {
  detail::PngDecoder decoder(bytes, options, "decode_png");
  return decoder.decode();
}

}  // namespace ingest::image
