// W4, W4-RRC and W5 (../shared/bench/WORKLOADS.md), the image pipelines, on
// 2,000 generated 256 x 256 RGB JPEGs of quality 90 (photo-like: gradients
// plus noise) in 8 TFRecord shards of tf.Examples (`image/encoded`,
// `image/class/label`), files in page cache. Every rate is in images/s, held
// against the decode limit measured in the same run: tjDecompress2 full
// decodes of the same JPEGs on one thread, x the cores.
//   W4/decode_one_thread   the limit's measurement (one reused TurboJPEG handle)
//   W4/pipeline            read -> parse -> decode -> random crop 224 -> random
//                          flip -> normalise (CHW float32) -> batch(64) ->
//                          prefetch, every knob autotuned; the normalisation
//                          writes into the batch (normalize_in_batch)
//   W4_RRC/pipeline        the same with random_resized_crop to 224 instead of
//                          decode + crop (only the window is decoded)
//   W4/image_folder        W4 on the same JPEGs as files (one per image, in
//                          num_classes class directories, page cache):
//                          image_folder -> random_map(read_file, decode, the
//                          same transform) -> batch(64) -> prefetch
//   W5/memory_cache, W5/file_cache  W4 with cache() (or cache(path)) after the
//                          decode: the counters give epoch 1 and epoch 2 rates
//                          and epoch2_over_epoch1
#include <stdlib.h>
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/image/image.hpp>
#include <ingest/ingest.hpp>

#include "support/bench.hpp"
#include "support/files.hpp"
#include "support/images.hpp"

namespace {

namespace img = ingest::image;
using Example = std::pair<ingest::Tensor, std::int64_t>;

constexpr std::size_t num_shards = 8;
constexpr std::int64_t num_classes = 10;
constexpr std::int64_t batch_size = 64;
constexpr img::Size crop_size{224, 224};
constexpr std::uint64_t seed = 7;

// The generated data set; removed when the process exits.
struct W4Data {
  std::filesystem::path dir;
  std::vector<std::string> shards;
  std::vector<std::string> jpegs;  // every image, in memory, for the limit
  std::filesystem::path folder;    // the same images as files, image_folder's layout
  std::int64_t bytes = 0;
  ~W4Data() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

W4Data& data() {
  static W4Data d;
  return d;
}

void generate(std::int64_t n) {
  W4Data& d = data();
  std::string pattern = (std::filesystem::temp_directory_path() / "ingest-w4-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  d.dir = pattern;
  ingest::ExampleBuilder builder;
  std::string record;
  for (std::size_t s = 0; s < num_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "train-%05zu-of-%05zu", s, num_shards);
    d.shards.push_back((d.dir / name).string());
    ingest::TFRecordWriter writer(d.shards.back());
    const std::int64_t begin = n * static_cast<std::int64_t>(s) / num_shards;
    const std::int64_t end = n * static_cast<std::int64_t>(s + 1) / num_shards;
    for (std::int64_t i = begin; i < end; ++i) {
      d.jpegs.push_back(ingest::testing::tj_encode(256, 256, TJSAMP_420, 90, false,
                                                   static_cast<std::uint32_t>(i + 1)));
      const std::string_view image = d.jpegs.back();
      builder.clear();
      builder.add_bytes("image/encoded", {image}).add_int64s("image/class/label", {i % 1000});
      builder.serialize_to(record);
      writer.write(record);
      d.bytes += static_cast<std::int64_t>(image.size());
    }
    writer.close();
  }
  // The same JPEGs as files: folder/class_K/image_I.jpg, image I in class I % num_classes.
  d.folder = d.dir / "folder";
  for (std::size_t i = 0; i < d.jpegs.size(); ++i) {
    char cls[32], name[32];
    std::snprintf(cls, sizeof cls, "class_%02lld",
                  static_cast<long long>(static_cast<std::int64_t>(i) % num_classes));
    std::snprintf(name, sizeof name, "image_%05zu.jpg", i);
    const std::filesystem::path dir = d.folder / cls;
    std::filesystem::create_directories(dir);
    ingest::testing::write_file((dir / name).string(), d.jpegs[i]);
  }
}

std::int64_t num_images() { return static_cast<std::int64_t>(data().jpegs.size()); }

const ingest::ExampleSpec& spec() {
  static const ingest::ExampleSpec s{
      {"image/encoded", ingest::FixedLenFeature{.dtype = ingest::FeatureType::bytes}},
      {"image/class/label", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
  };
  return s;
}

// The records of the shards, read by a parallel interleave.
auto records() {
  return ingest::from_vector(data().shards)
      .interleave([](const std::string& path) { return ingest::tfrecord(path); },
                  {.cycle_length = 4, .parallelism = ingest::autotune});
}

// A record to (the JPEG decoded to uint8 [256, 256, 3], label).
struct ParseDecode {
  Example operator()(const std::string& record) const {
    thread_local ingest::ParsedExample parsed;
    ingest::parse_example(record, spec(), parsed);
    return {img::decode_jpeg(parsed.at(0).bytes[0], {.channels = 3}),
            parsed.at(1).values.data<std::int64_t>()[0]};
  }
};

// The training transform after the decode: random crop, random flip,
// normalisation to CHW float32 (ImageNet's mean and deviation), the last
// done by batch() straight into the image's slot of the float batch
// (normalize_in_batch): no float tensor per image, no copy of it.
using Augmented = std::pair<img::PendingNormalize, std::int64_t>;

struct Augment {
  Augmented operator()(Example x, ingest::Rng& rng) const {
    ingest::Tensor crop = img::random_crop(x.first, crop_size, rng);
    ingest::Tensor flipped = img::random_flip_left_right(crop, rng);
    return {normalize(flipped), x.second};
  }
  static img::PendingNormalize normalize(const ingest::Tensor& image) {
    return img::normalize_in_batch(image, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f},
                                   {.layout = img::Layout::chw, .dtype = ingest::DType::float32});
  }
};

struct DecodeAugment {
  Augmented operator()(const std::string& record, ingest::Rng& rng) const {
    return Augment{}(ParseDecode{}(record), rng);
  }
};

// W4-RRC: the crop sampled from the header, only its window decoded.
struct RandomResizedCrop {
  Augmented operator()(const std::string& record, ingest::Rng& rng) const {
    thread_local ingest::ParsedExample parsed;
    ingest::parse_example(record, spec(), parsed);
    ingest::Tensor crop = img::random_resized_crop(
        parsed.at(0).bytes[0], {.size = crop_size, .decode = {.channels = 3}}, rng);
    return {Augment::normalize(img::random_flip_left_right(crop, rng)),
            parsed.at(1).values.data<std::int64_t>()[0]};
  }
};

// W4 from files: an (path, label) of image_folder to (the transformed image, label).
struct ReadDecodeAugment {
  Augmented operator()(const std::pair<std::string, std::int64_t>& sample, ingest::Rng& rng) const {
    const std::string jpeg = ingest::read_file(sample.first);
    return Augment{}({img::decode_jpeg(jpeg, {.channels = 3}), sample.second}, rng);
  }
};

template <class Pipeline>
void run_epochs(benchmark::State& state, const Pipeline& pipeline) {
  std::int64_t images = 0;
  for (auto _ : state) {
    auto it = pipeline.iterator();
    while (auto batch = it.next()) images += batch->first.shape()[0];
  }
  state.SetItemsProcessed(images);
}

void decode_one_thread(benchmark::State& state) {
  ingest::testing::TjHandle tj(tjInitDecompress());
  std::vector<unsigned char> out(256 * 256 * 3);
  std::size_t k = 0;
  for (auto _ : state) {
    const std::string& jpeg = data().jpegs[k++ % data().jpegs.size()];
    if (tjDecompress2(tj.get(), reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(),
                      out.data(), 256, 0, 256, TJPF_RGB, 0) != 0) {
      state.SkipWithError(tjGetErrorStr2(tj.get()));
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// W4 with `Transform` (DecodeAugment, or RandomResizedCrop for W4-RRC).
template <class Transform>
void w4_pipeline(benchmark::State& state) {
  run_epochs(state, records()
                        .random_map(Transform{}, {.seed = seed, .parallelism = ingest::autotune})
                        .batch(batch_size)
                        .prefetch(ingest::autotune));
}

void w4_image_folder(benchmark::State& state) {
  const auto samples = ingest::image_folder(data().folder.string());
  if (static_cast<std::int64_t>(samples.class_names().size()) != num_classes) {
    state.SkipWithError("image_folder found another number of classes");
    return;
  }
  run_epochs(
      state,
      samples.random_map(ReadDecodeAugment{}, {.seed = seed, .parallelism = ingest::autotune})
          .batch(batch_size)
          .prefetch(ingest::autotune));
}

// Two epochs over a cache of decoded images: each epoch's rate as a counter.
template <class Cached>
void two_epochs(benchmark::State& state, const Cached& cached) {
  const auto pipeline =
      cached.random_map(Augment{}, {.seed = seed, .parallelism = ingest::autotune})
          .batch(batch_size)
          .repeat(2)
          .prefetch(ingest::autotune);
  const std::int64_t batches_per_epoch = (num_images() + batch_size - 1) / batch_size;
  double epoch1_s = 0, epoch2_s = 0;
  for (auto _ : state) {
    auto it = pipeline.iterator();
    const auto start = std::chrono::steady_clock::now();
    auto boundary = start;
    std::int64_t batches = 0;
    while (auto batch = it.next()) {
      benchmark::DoNotOptimize(batch->first.raw_data());
      if (++batches == batches_per_epoch) boundary = std::chrono::steady_clock::now();
    }
    const auto end = std::chrono::steady_clock::now();
    epoch1_s += std::chrono::duration<double>(boundary - start).count();
    epoch2_s += std::chrono::duration<double>(end - boundary).count();
    if (batches != 2 * batches_per_epoch) state.SkipWithError("wrong number of batches");
  }
  const double n = static_cast<double>(num_images()) * static_cast<double>(state.iterations());
  state.counters["epoch1_images_per_s"] = n / epoch1_s;
  state.counters["epoch2_images_per_s"] = n / epoch2_s;
  state.counters["epoch2_over_epoch1"] = epoch1_s / epoch2_s;
  state.SetItemsProcessed(2 * static_cast<std::int64_t>(n));
}

void w5_memory_cache(benchmark::State& state) {
  two_epochs(state, records().map(ParseDecode{}, {.parallelism = ingest::autotune}).cache());
}

void w5_file_cache(benchmark::State& state) {
  const std::string path = (data().dir / "decoded.cache").string();
  two_epochs(state, records().map(ParseDecode{}, {.parallelism = ingest::autotune}).cache(path));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data().dir)) {
    if (entry.path().filename().string().starts_with("decoded.cache")) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
}

}  // namespace

namespace ingest::bench {

void register_benchmarks(const Config& config) {
  generate(config.smoke ? 128 : 2'000);
  note("W4: " + std::to_string(num_images()) + " JPEGs of 256 x 256, " +
       std::to_string(data().bytes / num_images()) + " bytes each on average, in " +
       std::to_string(num_shards) + " TFRecord shards and as files in " +
       std::to_string(num_classes) + " class directories");
  const auto ms = [](benchmark::internal::Benchmark* b) {
    return b->Unit(benchmark::kMillisecond);
  };
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  benchmark::RegisterBenchmark("W4/decode_one_thread", decode_one_thread);
  ms(benchmark::RegisterBenchmark("W4/pipeline", w4_pipeline<DecodeAugment>)->UseRealTime());
  ms(benchmark::RegisterBenchmark("W4/image_folder", w4_image_folder)->UseRealTime());
  ms(benchmark::RegisterBenchmark("W4_RRC/pipeline", w4_pipeline<RandomResizedCrop>)
         ->UseRealTime());
  ms(benchmark::RegisterBenchmark("W5/memory_cache", w5_memory_cache)->UseRealTime());
  ms(benchmark::RegisterBenchmark("W5/file_cache", w5_file_cache)->UseRealTime());
  set_reference("W4/pipeline", "W4/decode_one_thread", cores, "x decode limit");
  set_reference("W4/image_folder", "W4/decode_one_thread", cores, "x decode limit");
  set_reference("W4_RRC/", "W4/decode_one_thread", cores, "x decode limit");
}

}  // namespace ingest::bench
