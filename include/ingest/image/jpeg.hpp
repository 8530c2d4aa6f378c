// decode_jpeg (tf.io.decode_jpeg, torchvision.io.decode_jpeg) with DCT-domain
// downscaling, and decode_and_crop_jpeg (tf.io.decode_and_crop_jpeg), on
// libjpeg-turbo's libjpeg API: pixel for pixel what tjDecompress2 gives.
// Thread-safe (each call owns its decoder); bytes are read during the call only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/image/libjpeg.hpp"
#include "ingest/image/types.hpp"

namespace ingest::image {
namespace detail {

// Progressive files are decoded scan by scan; a hostile one with thousands
// of tiny scans takes minutes. libjpeg-turbo's own fuzzers stop at 500.
inline constexpr int jpeg_max_scans = 500;

struct JpegProgress {
  jpeg_progress_mgr pub;  // first: libjpeg hands callbacks a pointer to it
};

inline void jpeg_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  if (reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > jpeg_max_scans) {
    auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof err->message, "more than %d scans", jpeg_max_scans);
    std::longjmp(err->jump, 1);
  }
}

/// CMYK (as libjpeg outputs it: inverted when an Adobe marker says so, as
/// Photoshop writes it) to RGB, as Pillow's cmyk2rgb.
inline void cmyk_to_rgb(const std::uint8_t* in, std::uint8_t* out, std::int64_t n,
                        bool inverted) noexcept {
  auto muldiv255 = [](unsigned a, unsigned b) {
    const unsigned t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (std::int64_t i = 0; i < n; ++i, in += 4, out += 3) {
    const unsigned x = inverted ? 255u : 0u;
    const unsigned nk = 255u - (in[3] ^ x);
    for (int c = 0; c < 3; ++c) {
      out[c] = static_cast<std::uint8_t>(nk - muldiv255(in[c] ^ x, nk));
    }
  }
}

inline void cmyk_to_gray(const std::uint8_t* in, std::uint8_t* out, std::int64_t n,
                         bool inverted) noexcept {
  for (std::int64_t i = 0; i < n; ++i, in += 4) {
    std::uint8_t rgb[3];
    cmyk_to_rgb(in, rgb, 1, inverted);
    out[i] = luma(rgb[0], rgb[1], rgb[2]);
  }
}

/// One JPEG stream being decoded: the header is read on construction, then
/// decode() runs once. Not copyable or movable (libjpeg keeps pointers into it).
class JpegDecoder {
 public:
  /// Reads the header. Throws DataLossError if the bytes are not a JPEG
  /// stream libjpeg can parse.
  JpegDecoder(ByteView bytes, const DecodeOptions& options, std::string_view op)
      : bytes_(bytes), options_(options), op_(op) {
    err_.on_warning = options.on_warning;
    handle_.cinfo.err = jpeg_errors(err_);
    progress_.pub.progress_monitor = jpeg_progress;
    jpeg_decompress_struct* cinfo = &handle_.cinfo;
    const unsigned char* data = bytes.data();
    const auto size = static_cast<unsigned long>(bytes.size());
    JpegProgress* progress = &progress_;
    if (!jpeg_try(err_, [cinfo, data, size, progress] {
          jpeg_create_decompress(cinfo);
          cinfo->progress = &progress->pub;
          jpeg_mem_src(cinfo, data, size);
          jpeg_read_header(cinfo, TRUE);
        })) {
      fail();
    }
  }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  /// The stored size and channels (what `.channels = 0` gives).
  ImageHeader header() const noexcept {
    const jpeg_decompress_struct& c = handle_.cinfo;
    return {c.image_height, c.image_width, stored_channels(), ImageFormat::jpeg};
  }

  /// Throws InvalidArgument unless `scale_denom` is 1, 2, 4 or 8.
  void check_scale_denom(int scale_denom) const {
    if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8) {
      throw InvalidArgument(std::string(op_) + ": scale_denom must be 1, 2, 4 or 8, got " +
                            std::to_string(scale_denom));
    }
  }

  /// The size of the image decoded at 1/scale_denom (libjpeg rounds up).
  Size scaled_size(int scale_denom) const noexcept {
    const jpeg_decompress_struct& c = handle_.cinfo;
    return {(static_cast<std::int64_t>(c.image_height) + scale_denom - 1) / scale_denom,
            (static_cast<std::int64_t>(c.image_width) + scale_denom - 1) / scale_denom};
  }

  /// Decodes at 1/scale_denom, only `window` (in the scaled image's pixels)
  /// if given. Throws InvalidArgument for bad options, a window outside the
  /// image or too many pixels; DataLossError for corrupt data.
  Tensor decode(int scale_denom, std::optional<CropWindow> window) {
    check_channels(options_.channels, false, op_);
    check_scale_denom(scale_denom);
    jpeg_decompress_struct* cinfo = &handle_.cinfo;
    check_pixels(cinfo->image_height, cinfo->image_width, options_.max_pixels, op_, options_.file);
    const Size full = scaled_size(scale_denom);
    const CropWindow win = window.value_or(CropWindow{0, 0, full.height, full.width});
    if (win.y < 0 || win.x < 0 || win.height <= 0 || win.width <= 0 ||
        win.y + win.height > full.height || win.x + win.width > full.width) {
      throw InvalidArgument(
          std::string(op_) + ": crop window {y " + std::to_string(win.y) + ", x " +
              std::to_string(win.x) + ", height " + std::to_string(win.height) + ", width " +
              std::to_string(win.width) + "} is not inside the " + std::to_string(full.height) +
              " x " + std::to_string(full.width) + " image",
          {.file = std::string(options_.file)});
    }

    const Conversion conv = conversion();
    cinfo->out_color_space = conv.space;
    cinfo->scale_num = 1;
    cinfo->scale_denom = static_cast<unsigned>(scale_denom);
    // dct_method and do_fancy_upsampling keep libjpeg's defaults (accurate
    // integer IDCT, fancy upsampling), as tjDecompress2's: the same pixels.
    // One more column on each side: libjpeg treats the cropped region's
    // edges as the image's, so chroma upsampling there would see no
    // neighbour; with the margin the window's pixels equal a full decode's.
    const std::int64_t left = win.x > 0 ? win.x - 1 : 0;
    const std::int64_t right = std::min(full.width, win.x + win.width + 1);
    auto xoffset = static_cast<JDIMENSION>(left);
    auto crop_width = static_cast<JDIMENSION>(right - left);
    const bool crop_columns = right - left != full.width;
    const auto skip_rows = static_cast<JDIMENSION>(win.y);
    if (!jpeg_try(err_, [cinfo, crop_columns, skip_rows, &xoffset, &crop_width] {
          jpeg_start_decompress(cinfo);
          // Widens the window to iMCU boundaries; xoffset and width come back adjusted.
          if (crop_columns) jpeg_crop_scanline(cinfo, &xoffset, &crop_width);
          if (skip_rows > 0) jpeg_skip_scanlines(cinfo, skip_rows);
        })) {
      fail();
    }
    if (static_cast<std::int64_t>(cinfo->output_height) != full.height ||
        static_cast<std::int64_t>(cinfo->output_width) != crop_width ||
        cinfo->output_components != conv.decoded_channels) {
      throw InternalError(std::string(op_) + ": libjpeg's output size differs from the expected");
    }

    Tensor out = new_image(win.height, win.width, conv.channels);
    const std::int64_t column = win.x - static_cast<std::int64_t>(xoffset);
    const bool direct = column == 0 && crop_width == win.width && !conv.from_cmyk;
    // libjpeg decodes into the tensor's rows directly, or into a few
    // scratch rows that are then cut to the window and converted.
    constexpr int batch_rows = 16;
    const auto decoded_row_bytes = static_cast<std::int64_t>(crop_width) * cinfo->output_components;
    Tensor scratch;
    if (!direct) scratch = new_image(batch_rows, crop_width, cinfo->output_components);
    RowSink sink{out.data<std::uint8_t>(),
                 direct ? nullptr : scratch.data<std::uint8_t>(),
                 win.width * conv.channels,
                 decoded_row_bytes,
                 column * cinfo->output_components,
                 win.width,
                 conv.channels,
                 conv.from_cmyk,
                 cinfo->saw_Adobe_marker != 0};
    const auto rows = static_cast<JDIMENSION>(win.height);
    const bool to_end = win.y + win.height == full.height;
    bool stalled = false;  // libjpeg returned no row (never with a memory source)
    if (!jpeg_try(err_, [cinfo, &sink, rows, to_end, &stalled] {
          JDIMENSION done = 0;
          while (done < rows) {
            JSAMPROW pointers[batch_rows];
            const JDIMENSION want = rows - done < batch_rows ? rows - done : batch_rows;
            for (JDIMENSION i = 0; i < want; ++i) pointers[i] = sink.target(done, i);
            // libjpeg returns a row or two per call: the scratch rows are
            // filled before they are cut, as copies of a row each to the
            // output (not in cache yet) cost far more than one of 16 rows.
            JDIMENSION got = 0;
            while (got < want) {
              const JDIMENSION n = jpeg_read_scanlines(cinfo, pointers + got, want - got);
              if (n == 0) {
                stalled = true;
                return;
              }
              got += n;
            }
            sink.store(done, got);
            done += got;
          }
          // Reading to the end checks the rest of the stream; a window that
          // stops earlier leaves the rest undecoded (the destructor aborts).
          if (to_end) jpeg_finish_decompress(cinfo);
        })) {
      fail();
    }
    if (stalled) {
      throw DataLossError(std::string(op_) + ": libjpeg stopped before the last row",
                          {.file = std::string(options_.file)});
    }
    if (options_.on_warning == OnWarning::count && options_.warnings != nullptr &&
        err_.pub.num_warnings > 0) {
      options_.warnings->fetch_add(static_cast<std::uint64_t>(err_.pub.num_warnings),
                                   std::memory_order_relaxed);
    }
    return out;
  }

 private:
  struct Handle {
    jpeg_decompress_struct cinfo{};  // zeroed: destroying it before creation is a no-op
    Handle() = default;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { jpeg_destroy_decompress(&cinfo); }
  };

  // How the stored colour space becomes the requested channels: libjpeg's
  // own conversions, except from CMYK, which libjpeg does not convert.
  struct Conversion {
    J_COLOR_SPACE space;   // what libjpeg outputs
    int decoded_channels;  // its components
    int channels;          // the tensor's
    bool from_cmyk;        // CMYK output converted by us
  };

  std::int64_t stored_channels() const noexcept {
    switch (handle_.cinfo.jpeg_color_space) {
      case JCS_GRAYSCALE: return 1;
      case JCS_YCbCr:
      case JCS_RGB: return 3;
      case JCS_CMYK:
      case JCS_YCCK: return 4;
      default: return handle_.cinfo.num_components;
    }
  }

  Conversion conversion() const noexcept {
    const J_COLOR_SPACE stored = handle_.cinfo.jpeg_color_space;
    const bool cmyk = stored == JCS_CMYK || stored == JCS_YCCK;
    const int n = handle_.cinfo.num_components;
    switch (options_.channels) {
      case 1:
        return cmyk ? Conversion{JCS_CMYK, 4, 1, true} : Conversion{JCS_GRAYSCALE, 1, 1, false};
      case 3: return cmyk ? Conversion{JCS_CMYK, 4, 3, true} : Conversion{JCS_RGB, 3, 3, false};
      default:
        if (cmyk) return {JCS_CMYK, 4, 4, false};
        if (stored == JCS_GRAYSCALE) return {JCS_GRAYSCALE, 1, 1, false};
        if (stored == JCS_YCbCr || stored == JCS_RGB) return {JCS_RGB, 3, 3, false};
        return {stored, n, n, false};  // unknown: the components as stored
    }
  }

  // Where decoded rows go (plain data: it lives inside jpeg_try).
  struct RowSink {
    std::uint8_t* out;
    std::uint8_t* scratch;  // null: libjpeg writes into `out`
    std::int64_t out_row_bytes;
    std::int64_t scratch_row_bytes;
    std::int64_t scratch_offset;  // bytes from a scratch row's start to the window
    std::int64_t width;
    int channels;
    bool from_cmyk;
    bool adobe_inverted;

    JSAMPROW target(JDIMENSION done, JDIMENSION i) const noexcept {
      if (!scratch) return out + static_cast<std::int64_t>(done + i) * out_row_bytes;
      return scratch + static_cast<std::int64_t>(i) * scratch_row_bytes;
    }
    void store(JDIMENSION done, JDIMENSION got) const noexcept {
      if (!scratch) return;
      for (JDIMENSION i = 0; i < got; ++i) {
        const std::uint8_t* in =
            scratch + static_cast<std::int64_t>(i) * scratch_row_bytes + scratch_offset;
        std::uint8_t* o = out + static_cast<std::int64_t>(done + i) * out_row_bytes;
        if (!from_cmyk) {
          std::memcpy(o, in, static_cast<std::size_t>(out_row_bytes));
        } else if (channels == 3) {
          cmyk_to_rgb(in, o, width, adobe_inverted);
        } else {
          cmyk_to_gray(in, o, width, adobe_inverted);
        }
      }
    }
  };

  [[noreturn]] void fail() const {
    std::string message = std::string(op_) + ": " + err_.message;
    // Past the end, libjpeg's memory source reads a fake EOI marker of its
    // own: compare addresses as integers, not as pointers into one array.
    const jpeg_source_mgr* src = handle_.cinfo.src;
    const auto begin = reinterpret_cast<std::uintptr_t>(bytes_.data());
    const auto at = src != nullptr ? reinterpret_cast<std::uintptr_t>(src->next_input_byte) : 0;
    if (at >= begin && at <= begin + bytes_.size()) {
      message +=
          " (at byte " + std::to_string(at - begin) + " of " + std::to_string(bytes_.size()) + ")";
    } else if (src != nullptr) {
      message += " (after all " + std::to_string(bytes_.size()) + " bytes)";
    }
    throw DataLossError(std::move(message), {.file = std::string(options_.file)});
  }

  ByteView bytes_;
  DecodeOptions options_;
  std::string_view op_;
  JpegErrorManager err_;
  JpegProgress progress_{};
  Handle handle_;  // last: destroyed first, while err_ and progress_ still exist
};

}  // namespace detail

/// Decodes a JPEG image to uint8 [height, width, channels] (tf.io.decode_jpeg;
/// `.scale_denom` as its `ratio`). Throws DataLossError for corrupt,
/// truncated or non-JPEG bytes (and for libjpeg's warnings under
/// OnWarning::error), InvalidArgument for bad options or more than
/// `.max_pixels` pixels.
inline Tensor decode_jpeg(ByteView bytes, const DecodeOptions& options = {}) {
  detail::JpegDecoder decoder(bytes, options, "decode_jpeg");
  return decoder.decode(options.scale_denom, std::nullopt);
}

/// Decodes only `window` of a JPEG image (tf.io.decode_and_crop_jpeg): the
/// rows above it are skipped without inverse DCT, those below are never
/// read, and only the iMCU columns it touches are reconstructed. The window
/// is in pixels of the image decoded at 1/`.scale_denom`; the result equals
/// that window of decode_jpeg's. Damage below the window goes unnoticed (its
/// data is never read), as with tf. Throws as decode_jpeg, and
/// InvalidArgument if the window is empty or not inside the image.
inline Tensor decode_and_crop_jpeg(ByteView bytes, CropWindow window,
                                   const DecodeOptions& options = {}) {
  detail::JpegDecoder decoder(bytes, options, "decode_and_crop_jpeg");
  return decoder.decode(options.scale_denom, window);
}

}  // namespace ingest::image
