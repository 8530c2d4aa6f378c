// The image part's single-thread costs, each a ratio of libjpeg-turbo's own
// full decode (tjDecompress2 with a reused handle, the limit W4 is judged
// against) of the same JPEG in the same run: decode_jpeg (should be 1.0),
// torchvision's RandomResizedCrop path (full decode, crop, Pillow-bilinear
// resize to 224) and the fused random_resized_crop (window only, at a DCT
// scale when large enough). 256 x 256 q90 is W4's image; 800 x 600 is
// nearer ImageNet's average, where DCT scaling starts to pay.
#include <turbojpeg.h>

#include <cstdint>
#include <string>
#include <vector>

#include <ingest/image/image.hpp>

#include "support/bench.hpp"
#include "support/images.hpp"

namespace {

namespace img = ingest::image;

void tj_decompress2(benchmark::State& state, const std::string& jpeg) {
  ingest::testing::TjHandle tj(tjInitDecompress());
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  const auto* buf = reinterpret_cast<const unsigned char*>(jpeg.data());
  tjDecompressHeader3(tj.get(), buf, jpeg.size(), &w, &h, &subsamp, &colorspace);
  std::vector<unsigned char> out(static_cast<std::size_t>(w) * h * 3);
  for (auto _ : state) {
    if (tjDecompress2(tj.get(), buf, jpeg.size(), out.data(), w, 0, h, TJPF_RGB, 0) != 0) {
      state.SkipWithError(tjGetErrorStr2(tj.get()));
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void decode_jpeg(benchmark::State& state, const std::string& jpeg) {
  for (auto _ : state) benchmark::DoNotOptimize(img::decode_jpeg(jpeg, {.channels = 3}));
  state.SetItemsProcessed(state.iterations());
}

void full_decode_crop_resize(benchmark::State& state, const std::string& jpeg) {
  ingest::Rng rng(1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        img::random_resized_crop(img::decode_jpeg(jpeg, {.channels = 3}), {}, rng));
  }
  state.SetItemsProcessed(state.iterations());
}

void random_resized_crop(benchmark::State& state, const std::string& jpeg) {
  ingest::Rng rng(1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(img::random_resized_crop(jpeg, {.decode = {.channels = 3}}, rng));
  }
  state.SetItemsProcessed(state.iterations());
}

void resize_to_224(benchmark::State& state, const std::string& jpeg) {
  const ingest::Tensor image = img::decode_jpeg(jpeg, {.channels = 3});
  for (auto _ : state) benchmark::DoNotOptimize(img::resize(image, {224, 224}));
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

void ingest::bench::register_benchmarks(const Config& config) {
  static std::vector<std::string> images;  // outlive the registered benchmarks
  images.push_back(testing::tj_encode(256, 256, TJSAMP_420, 90, false, 4));
  if (!config.smoke) images.push_back(testing::tj_encode(800, 600, TJSAMP_420, 90, false, 4));
  for (const std::string& jpeg : images) {
    const img::ImageHeader h = img::read_header(jpeg);
    const std::string size = std::to_string(h.width) + "x" + std::to_string(h.height);
    const std::string prefix = "image/" + size + "/";
    note("image " + size + " q90 4:2:0: " + std::to_string(jpeg.size()) + " bytes");
    auto add = [&](const char* name, void (*fn)(benchmark::State&, const std::string&)) {
      auto* b = benchmark::RegisterBenchmark((prefix + name).c_str(), fn, jpeg);
      b->Unit(benchmark::kMicrosecond);
      if (config.smoke) b->Iterations(3);
    };
    add("tj_decompress2", tj_decompress2);
    add("decode_jpeg", decode_jpeg);
    add("full_decode_crop_resize", full_decode_crop_resize);
    add("random_resized_crop", random_resized_crop);
    add("resize_to_224", resize_to_224);
    set_reference(prefix, prefix + "tj_decompress2");
  }
}
