// The demo's data set: ImageNet-style labelled photographs, generated once,
// deterministically, as 256 x 256 JPEGs (quality 90, 4:2:0) in TFRecord
// shards of tf.Examples ("image/encoded", "image/class/label"), as
// ImageNet's TFRecord conversion writes them. Each picture is a landscape of
// its class: a sky-to-ground gradient in the class's colours, soft blobs and
// grain, so it compresses like a photograph (about 15-20 KB).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ingest/image/image.hpp>
#include <ingest/ingest.hpp>

namespace demo {

inline constexpr int num_classes = 10;

struct DataSpec {
  std::int64_t images = 2'000;
  std::int64_t shards = 8;
  int size = 256;
  std::uint64_t seed = 2026;
  /// The directory name: a different spec never reuses another's files.
  std::string name() const {
    return "images-" + std::to_string(images) + "-" + std::to_string(size) + "px-" +
           std::to_string(shards) + "shards-seed" + std::to_string(seed) + "-v1";
  }
};

namespace detail {

// A double in [0, 1) from the generator.
inline double unit(ingest::Rng& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

}  // namespace detail

/// Picture `index` of class `label`: uint8 [size, size, 3].
inline ingest::Tensor photo(std::int64_t index, std::int64_t label, int size, std::uint64_t seed) {
  ingest::Rng rng(ingest::element_seed(seed, 0, static_cast<std::uint64_t>(index)));
  using detail::unit;
  // The class's palette: a hue per class, with jitter per picture.
  const double hue = 2 * M_PI * (static_cast<double>(label) + 0.3 * unit(rng)) / num_classes;
  auto colour = [&](double shift, double light) {
    return std::array<double, 3>{light * (0.55 + 0.45 * std::cos(hue + shift)),
                                 light * (0.55 + 0.45 * std::cos(hue + shift - 2.1)),
                                 light * (0.55 + 0.45 * std::cos(hue + shift + 2.1))};
  };
  const auto sky = colour(0.0, 235), ground = colour(1.5, 120);
  const double horizon = size * (0.35 + 0.3 * unit(rng));
  struct Blob {
    double y, x, ry, rx;
    std::array<double, 3> c;
  };
  std::vector<Blob> blobs(3 + rng.uniform(4));
  for (Blob& b : blobs) {
    b = {size * unit(rng), size * unit(rng), size * (0.05 + 0.2 * unit(rng)),
         size * (0.05 + 0.2 * unit(rng)), colour(6.28 * unit(rng), 90 + 150 * unit(rng))};
  }
  ingest::Tensor out(ingest::DType::uint8, ingest::Shape{size, size, 3});
  std::uint8_t* px = out.data<std::uint8_t>();
  std::uint64_t grain = rng.next() | 1;
  for (int y = 0; y < size; ++y) {
    const double t = std::clamp((y - horizon) / (0.15 * size) + 0.5, 0.0, 1.0);
    for (int x = 0; x < size; ++x) {
      double c[3];
      for (int k = 0; k < 3; ++k) c[k] = sky[k] * (1 - t) + ground[k] * t;
      for (const Blob& b : blobs) {
        const double dy = (y - b.y) / b.ry, dx = (x - b.x) / b.rx, d = dy * dy + dx * dx;
        if (d < 1.5) {
          const double w = std::clamp(1.5 - d, 0.0, 1.0);
          for (int k = 0; k < 3; ++k) c[k] = c[k] * (1 - w) + b.c[k] * w;
        }
      }
      grain ^= grain << 13, grain ^= grain >> 7, grain ^= grain << 17;  // xorshift
      const double noise = static_cast<double>(grain >> 59) - 16.0;     // grain of +-16 levels
      for (int k = 0; k < 3; ++k) {
        *px++ = static_cast<std::uint8_t>(std::clamp(c[k] + 0.5 * noise, 0.0, 255.0));
      }
    }
  }
  return out;
}

/// The label of picture `index` (classes in turn, as a shuffled ImageNet shard has them all).
inline std::int64_t label_of(std::int64_t index) { return (index * 7) % num_classes; }

/// The shards' paths of `spec` under `dir`.
inline std::vector<std::string> shard_paths(const std::filesystem::path& dir,
                                            const DataSpec& spec) {
  std::vector<std::string> paths;
  for (std::int64_t s = 0; s < spec.shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "train-%05lld-of-%05lld.tfrecord", static_cast<long long>(s),
                  static_cast<long long>(spec.shards));
    paths.push_back((dir / name).string());
  }
  return paths;
}

/// The shards of a data set, and whether this run wrote them.
struct DataSet {
  std::vector<std::string> shards;
  bool written = false;
};

/// The data set of `spec` in `cache / spec.name()`: reused if complete,
/// otherwise written (shards on every core, a progress bar on stderr) into a
/// temporary directory renamed into place when done, so an interrupted run
/// leaves nothing half-written behind.
inline DataSet ensure_data(const std::filesystem::path& cache, const DataSpec& spec, bool quiet) {
  const std::filesystem::path dir = cache / spec.name();
  if (std::filesystem::exists(dir / "COMPLETE")) return {shard_paths(dir, spec), false};
  std::filesystem::create_directories(cache);
  const std::filesystem::path tmp =
      cache / (spec.name() + ".tmp-" + std::to_string(static_cast<long long>(::getpid())));
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  const std::vector<std::string> paths = shard_paths(tmp, spec);
  std::atomic<std::int64_t> done{0}, next_shard{0}, bytes{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto writer = [&] {
    try {
      ingest::ExampleBuilder builder;
      std::string record;
      for (std::int64_t s; (s = next_shard.fetch_add(1)) < spec.shards;) {
        ingest::TFRecordWriter out(paths[static_cast<std::size_t>(s)]);
        for (std::int64_t i = spec.images * s / spec.shards;
             i < spec.images * (s + 1) / spec.shards; ++i) {
          const std::int64_t label = label_of(i);
          const std::string jpeg =
              ingest::image::encode_jpeg(photo(i, label, spec.size, spec.seed), {.quality = 90});
          builder.clear();
          builder.add_bytes("image/encoded", {jpeg}).add_int64s("image/class/label", {label});
          builder.serialize_to(record);
          out.write(record);
          bytes += static_cast<std::int64_t>(jpeg.size());
          ++done;
        }
        out.close();
      }
    } catch (...) {
      std::lock_guard lock(error_mu);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::jthread> threads;
  for (unsigned t = 0; t < cores; ++t) threads.emplace_back(writer);
  if (!quiet) std::fprintf(stderr, "writing %s (once; later runs reuse it)\n", dir.c_str());
  for (std::int64_t n = 0; n < spec.images && !failed;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    n = done.load();
    if (!quiet) {
      const int width = 40, filled = static_cast<int>(width * n / spec.images);
      std::fprintf(stderr, "\r  [%s%s] %5lld / %lld images, %.1f MB",
                   std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                   static_cast<long long>(n), static_cast<long long>(spec.images),
                   static_cast<double>(bytes.load()) / 1e6);
    }
  }
  threads.clear();  // joins
  if (error) {
    std::filesystem::remove_all(tmp);
    std::rethrow_exception(error);
  }
  if (!quiet) std::fprintf(stderr, "\n");
  std::ofstream(tmp / "COMPLETE") << spec.images << " images in " << spec.shards << " shards\n";
  std::filesystem::remove_all(dir);
  std::filesystem::rename(tmp, dir);
  return {shard_paths(dir, spec), true};
}

}  // namespace demo
