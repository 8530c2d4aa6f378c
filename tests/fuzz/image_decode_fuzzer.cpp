// libFuzzer target: the image decoders over arbitrary bytes. The first byte
// picks the operation (decode_image, decode_jpeg, decode_png, read_header,
// decode_and_crop_jpeg, random_resized_crop), the channels, the DCT scale and
// whether libjpeg warnings are errors or counted; the rest is the encoded
// image. Any input must end in an image or an ingest::Error: never a crash,
// a hang, a read out of bounds, a longjmp over a live C++ object or an
// allocation beyond max_pixels (kept at 4 M pixels here, so the fuzzer's
// memory limit is never the thing that stops it).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include <ingest/image/image.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  namespace img = ingest::image;
  const std::uint8_t control = data[0];
  const img::ByteView bytes(data + 1, size - 1);
  static std::atomic<std::uint64_t> warnings{0};
  constexpr int channels[] = {0, 1, 3, 4};
  const img::DecodeOptions options{
      .channels = channels[(control >> 3) & 3],
      .scale_denom = 1 << ((control >> 5) & 3),
      .max_pixels = std::uint64_t{1} << 22,
      .on_warning = (control & 0x80) ? img::OnWarning::count : img::OnWarning::error,
      .warnings = &warnings,
  };
  std::uint64_t sum = 0;
  auto keep = [&sum](const ingest::Tensor& t) {
    for (std::uint8_t v : t.values<std::uint8_t>()) sum += v;
  };
  try {
    switch (control & 7) {
      case 0: keep(img::decode_image(bytes, options)); break;
      case 1: keep(img::decode_jpeg(bytes, options)); break;
      case 2: keep(img::decode_png(bytes, options)); break;
      case 3: {
        const img::ImageHeader h = img::read_header(bytes, options);
        sum += static_cast<std::uint64_t>(h.height + h.width + h.channels);
        break;
      }
      case 4:
      case 5: {
        // A window derived from the size, inside the image when it is small.
        const auto n = static_cast<std::int64_t>(size);
        keep(img::decode_and_crop_jpeg(bytes, {(n >> 2) % 7, (n >> 4) % 5, 1 + n % 13, 1 + n % 11},
                                       options));
        break;
      }
      default: {
        ingest::Rng rng(size);
        img::DecodeOptions decode = options;
        decode.scale_denom = 1;
        keep(img::random_resized_crop(
            bytes, {.size = {16, 24}, .max_scale_denom = options.scale_denom, .decode = decode},
            rng));
        break;
      }
    }
  } catch (const ingest::Error&) {
  }
  if (sum == 0xdeadbeef) std::puts("");  // keep the pixels
  return 0;
}
