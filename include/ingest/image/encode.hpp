// encode_jpeg (tf.io.encode_jpeg): a uint8 [H, W, 1] or [H, W, 3] image to
// the bytes of a baseline JPEG file, on libjpeg-turbo's libjpeg API, byte for
// byte what TurboJPEG's tjCompress2 writes. Thread-safe (each call owns its
// compressor); the image is read during the call only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>

#include <jerror.h>

#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/libjpeg.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {

/// How much colour the JPEG keeps: full (4:4:4), half horizontally (4:2:2),
/// half both ways (4:2:0, what cameras and tf.io.encode_jpeg's default write).
enum class ChromaSubsampling : std::uint8_t { s444, s422, s420 };

/// Options of encode_jpeg: quality, chroma subsampling and the encoder's choices.
struct EncodeJpegOptions {
  /// 1..100, libjpeg's scale for its quantisation tables.
  int quality = 90;
  /// Ignored for 1 channel.
  ChromaSubsampling subsampling = ChromaSubsampling::s420;
};

namespace detail {

// Compressed bytes go through a fixed buffer into a std::string. A
// std::bad_alloc from the string must not cross libjpeg's C frames: the
// callback catches it, notes it and reports libjpeg's out-of-memory error,
// which longjmps back to jpeg_try from a frame with nothing to destroy.
struct JpegStringDestination {
  jpeg_destination_mgr pub;  // first: libjpeg hands callbacks a pointer to it
  std::string* out;
  bool out_of_memory;
  JOCTET buffer[16384];
};

inline JpegStringDestination* string_destination(j_compress_ptr cinfo) noexcept {
  return reinterpret_cast<JpegStringDestination*>(cinfo->dest);
}

inline void string_destination_flush(j_compress_ptr cinfo, std::size_t n) noexcept {
  JpegStringDestination* d = string_destination(cinfo);
  try {
    d->out->append(reinterpret_cast<const char*>(d->buffer), n);
  } catch (...) {
    d->out_of_memory = true;
  }
  if (d->out_of_memory) {
    cinfo->err->msg_code = JERR_OUT_OF_MEMORY;
    cinfo->err->msg_parm.i[0] = 0;
    (*cinfo->err->error_exit)(reinterpret_cast<j_common_ptr>(cinfo));
  }
  d->pub.next_output_byte = d->buffer;
  d->pub.free_in_buffer = sizeof d->buffer;
}

inline void string_destination_init(j_compress_ptr cinfo) noexcept {
  JpegStringDestination* d = string_destination(cinfo);
  d->pub.next_output_byte = d->buffer;
  d->pub.free_in_buffer = sizeof d->buffer;
}

// libjpeg calls this with the whole buffer full (free_in_buffer is stale).
inline boolean string_destination_empty(j_compress_ptr cinfo) noexcept {
  string_destination_flush(cinfo, sizeof string_destination(cinfo)->buffer);
  return TRUE;
}

inline void string_destination_term(j_compress_ptr cinfo) noexcept {
  const JpegStringDestination* d = string_destination(cinfo);
  string_destination_flush(cinfo, sizeof d->buffer - d->pub.free_in_buffer);
}

/// Compresses `image` (1 or 3 channels) with no checks of its own: libjpeg's
/// errors (an image libjpeg refuses) become InternalError, a failed
/// allocation std::bad_alloc. encode_jpeg validates first, so they do not
/// happen there.
inline std::string compress_jpeg(const ImageView& image, int quality,
                                 ChromaSubsampling subsampling) {
  struct Compressor {
    jpeg_compress_struct cinfo{};  // zeroed: destroying it before creation is a no-op
    Compressor() = default;
    Compressor(const Compressor&) = delete;
    Compressor& operator=(const Compressor&) = delete;
    ~Compressor() { jpeg_destroy_compress(&cinfo); }
  };
  std::string out;
  JpegErrorManager err;
  JpegStringDestination dest{};
  dest.out = &out;
  dest.pub.init_destination = string_destination_init;
  dest.pub.empty_output_buffer = string_destination_empty;
  dest.pub.term_destination = string_destination_term;
  Compressor compressor;  // after err and dest: destroyed while they exist
  jpeg_compress_struct* cinfo = &compressor.cinfo;
  cinfo->err = jpeg_errors(err);

  // tjCompress2's settings (setCompDefaults in turbojpeg.c), so the bytes
  // are its: libjpeg's defaults (Huffman tables not optimised, a JFIF APP0
  // marker), jpeg_set_quality forcing baseline tables, the fast integer
  // DCT below quality 96 and the accurate one from there (tjCompress2
  // without TJFLAG_ACCURATEDCT), and the luma sampling factors of its MCU
  // sizes (4:2:2 2x1, 4:2:0 2x2, chroma 1x1).
  const bool gray = image.channels == 1;
  int h_samp = 1, v_samp = 1;
  if (!gray && subsampling != ChromaSubsampling::s444) h_samp = 2;
  if (!gray && subsampling == ChromaSubsampling::s420) v_samp = 2;
  const auto height = static_cast<JDIMENSION>(image.height);
  const auto width = static_cast<JDIMENSION>(image.width);
  const std::uint8_t* data = image.data;
  const std::int64_t stride = image.row_stride;
  const bool ok = jpeg_try(err, [&] {
    jpeg_create_compress(cinfo);
    cinfo->dest = &dest.pub;
    cinfo->image_width = width;
    cinfo->image_height = height;
    cinfo->input_components = gray ? 1 : 3;
    cinfo->in_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(cinfo);
    jpeg_set_quality(cinfo, quality, TRUE);
    cinfo->dct_method = quality >= 96 ? JDCT_ISLOW : JDCT_FASTEST;
    jpeg_set_colorspace(cinfo, gray ? JCS_GRAYSCALE : JCS_YCbCr);
    cinfo->comp_info[0].h_samp_factor = h_samp;
    cinfo->comp_info[0].v_samp_factor = v_samp;
    if (!gray) {
      for (int c = 1; c < 3; ++c) {
        cinfo->comp_info[c].h_samp_factor = 1;
        cinfo->comp_info[c].v_samp_factor = 1;
      }
    }
    jpeg_start_compress(cinfo, TRUE);
    constexpr JDIMENSION batch_rows = 16;
    while (cinfo->next_scanline < height) {
      JSAMPROW rows[batch_rows];
      const JDIMENSION first = cinfo->next_scanline;
      const JDIMENSION n = height - first < batch_rows ? height - first : batch_rows;
      for (JDIMENSION i = 0; i < n; ++i) {
        // libjpeg's rows are not const, but compression only reads them.
        rows[i] = const_cast<JSAMPROW>(data + static_cast<std::int64_t>(first + i) * stride);
      }
      jpeg_write_scanlines(cinfo, rows, n);
    }
    jpeg_finish_compress(cinfo);
  });
  if (!ok) {
    if (dest.out_of_memory) throw std::bad_alloc();
    throw InternalError(std::string("encode_jpeg: libjpeg: ") + err.message);
  }
  return out;
}

}  // namespace detail

/// Encodes `image`, uint8 [height, width, channels] with 1 channel (a
/// grayscale JPEG) or 3 (RGB, stored as YCbCr with `.subsampling`), as a
/// baseline JPEG file at `.quality` (tf.io.encode_jpeg's quality and
/// chroma_downsampling; PIL's Image.save(quality=...)). With the same
/// quality and subsampling the bytes equal tjCompress2's with default flags
/// (TJSAMP_GRAY for 1 channel; TurboJPEG's TJ_* environment variables
/// unset): the same libjpeg settings, including its choice of the fast
/// integer DCT below quality 96. Throws InvalidArgument for another dtype,
/// rank or channel count, an empty image, a side over 65,500 pixels
/// (libjpeg-turbo's limit, a little under the format's 65,535), or a quality
/// outside 1..100; std::bad_alloc if memory runs out.
inline std::string encode_jpeg(const Tensor& image, const EncodeJpegOptions& options = {}) {
  constexpr std::string_view op = "encode_jpeg";
  const detail::ImageView view = detail::view_of(image, op);
  if (view.channels != 1 && view.channels != 3) {
    throw InvalidArgument("encode_jpeg: expected 1 (grayscale) or 3 (RGB) channels, got " +
                          std::to_string(view.channels) + " (image " + image.shape().to_string() +
                          ")");
  }
  if (view.height == 0 || view.width == 0) {
    throw InvalidArgument("encode_jpeg: cannot encode an empty image (" +
                          image.shape().to_string() + ")");
  }
  if (view.height > JPEG_MAX_DIMENSION || view.width > JPEG_MAX_DIMENSION) {
    throw InvalidArgument("encode_jpeg: height and width must be at most " +
                          std::to_string(JPEG_MAX_DIMENSION) + " (libjpeg-turbo's limit), got " +
                          image.shape().to_string());
  }
  if (options.quality < 1 || options.quality > 100) {
    throw InvalidArgument("encode_jpeg: quality must be in 1..100, got " +
                          std::to_string(options.quality));
  }
  if (options.subsampling != ChromaSubsampling::s444 &&
      options.subsampling != ChromaSubsampling::s422 &&
      options.subsampling != ChromaSubsampling::s420) {
    throw InvalidArgument("encode_jpeg: subsampling must be s444, s422 or s420, got " +
                          std::to_string(static_cast<int>(options.subsampling)));
  }
  return detail::compress_jpeg(view, options.quality, options.subsampling);
}

}  // namespace ingest::image
