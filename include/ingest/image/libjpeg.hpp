// What the JPEG decoder (jpeg.hpp) and encoder (encode.hpp) share of
// libjpeg-turbo's libjpeg API: the error manager that turns libjpeg's
// error_exit into a longjmp back to jpeg_try, never across C++ frames with
// live destructors. Each decoder or encoder owns one, so calls are thread-safe.
#pragma once

#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE

#include <jpeglib.h>

#include "ingest/image/types.hpp"

#if !defined(LIBJPEG_TURBO_VERSION_NUMBER) || LIBJPEG_TURBO_VERSION_NUMBER < 2000000
#error "ingest/image needs libjpeg-turbo >= 2.0 (jpeg_crop_scanline, jpeg_skip_scanlines)"
#endif

namespace ingest::image::detail {

// libjpeg reports errors by calling error_exit, which must not return. It
// longjmps back to jpeg_try: no C++ exception ever crosses libjpeg's C
// frames, and the code between setjmp and longjmp holds only trivially
// destructible objects, so the jump skips no destructor.
struct JpegErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg hands callbacks a pointer to it
  std::jmp_buf jump;
  OnWarning on_warning = OnWarning::error;
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] inline void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Level -1 is a warning (corrupt data libjpeg can still decode); the others
// are trace messages, never printed.
inline void jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  if (err->pub.num_warnings++ == 0 || err->on_warning == OnWarning::error) {
    (*cinfo->err->format_message)(cinfo, err->message);
  }
  if (err->on_warning == OnWarning::error) std::longjmp(err->jump, 1);
}

inline void jpeg_output_message(j_common_ptr) {}

/// libjpeg's standard error manager in `err`, with the callbacks above: the
/// value for a compress or decompress struct's `err`, set before its creation.
inline jpeg_error_mgr* jpeg_errors(JpegErrorManager& err) noexcept {
  jpeg_error_mgr* pub = jpeg_std_error(&err.pub);
  pub->error_exit = jpeg_error_exit;
  pub->emit_message = jpeg_emit_message;
  pub->output_message = jpeg_output_message;
  return pub;
}

/// Runs `f` (calls into libjpeg) with the jump buffer armed; false if libjpeg
/// failed (the message is in err.message). `f` must not throw and must hold
/// only trivially destructible locals. Never inlined: setjmp's frame must
/// stay the same while `f` runs.
template <class F>
[[gnu::noinline]] bool jpeg_try(JpegErrorManager& err, F&& f) noexcept {
  if (setjmp(err.jump) != 0) return false;
  f();
  return true;
}

}  // namespace ingest::image::detail
