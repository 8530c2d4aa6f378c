// ingest's side of scripts/compare.sh (../../shared/bench/WORKLOADS.md): writes
// each workload's data with ingest's writers, runs ingest's pipeline or the
// workload's limit (a no-library loop), and prints one JSON line per epoch in
// the format every peer of bench/compare/peers/ prints:
//   {"system": ..., "epoch": k, "records": n, "checksum": sum of labels, "seconds": t}
// Usage:
//   ingest_compare gen <data-dir> <w3|w4|w4l> <records>
//   ingest_compare run <ingest|limit|limit-function|limit-read> <workload> <data-dir> [epochs]
// A run's clock starts before the pipeline is built and stops after its last
// batch; a limit's inputs (records, JPEGs) are read into memory before it starts.
#include <fcntl.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/image/image.hpp>
#include <ingest/ingest.hpp>

#include "support/w3_data.hpp"

extern "C" std::int64_t ingest_compare_w2(std::int64_t x);

namespace {

namespace fs = std::filesystem;
namespace img = ingest::image;
using Clock = std::chrono::steady_clock;

// Once: glibc's hardware_concurrency reads /sys/devices/system/cpu on every
// call (open, read, close), which cost the limits' loops more than the work
// of a W3 record when they called it per element.
std::size_t cores() {
  static const std::size_t n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}

struct Epoch {
  std::int64_t records = 0;
  std::int64_t checksum = 0;
};

void print_epoch(const std::string& system, int epoch, const Epoch& e, double seconds) {
  std::printf(
      "{\"system\": \"%s\", \"epoch\": %d, \"records\": %lld, \"checksum\": %lld, "
      "\"seconds\": %.6f}\n",
      system.c_str(), epoch, static_cast<long long>(e.records), static_cast<long long>(e.checksum),
      seconds);
  std::fflush(stdout);
}

// Runs `epoch` (which returns an Epoch) `epochs` times, timing each.
void timed_epochs(const std::string& system, int epochs, const std::function<Epoch()>& epoch) {
  for (int k = 1; k <= epochs; ++k) {
    const auto start = Clock::now();
    const Epoch e = epoch();
    print_epoch(system, k, e, std::chrono::duration<double>(Clock::now() - start).count());
  }
}

// Runs body(t) on one thread per core at once and sums their Epochs.
Epoch on_every_core(const std::function<Epoch(std::size_t)>& body) {
  std::vector<Epoch> parts(cores());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < parts.size(); ++t)
    threads.emplace_back([&, t] { parts[t] = body(t); });
  for (auto& th : threads) th.join();
  Epoch all;
  for (const Epoch& p : parts) {
    all.records += p.records;
    all.checksum += p.checksum;
  }
  return all;
}

std::vector<std::string> shards(const fs::path& dir, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("train-") && name.ends_with(suffix)) out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// --- data ------------------------------------------------------------------

// W3: bench/support/w3_data.hpp's shards, the bytes W3's benchmarks read.
void generate_w3(const fs::path& dir, std::int64_t n) {
  std::vector<std::string> plain, gzip;
  ingest::bench::w3::write_shards(dir, n, plain, gzip, [](const std::string&) {});
}

// Smooth gradients plus noise (compresses like a photograph), deterministic in `seed`.
ingest::Tensor photo(std::int64_t height, std::int64_t width, std::uint64_t seed) {
  ingest::Rng rng(seed);
  const double a = rng.uniform01() * 6.28, b = rng.uniform01() * 6.28;
  ingest::Tensor t(ingest::DType::uint8, ingest::Shape{height, width, 3});
  std::uint8_t* px = t.data<std::uint8_t>();
  std::vector<double> sx(static_cast<std::size_t>(width * 3)),
      cy(static_cast<std::size_t>(height * 3)),
      diag(static_cast<std::size_t>((width + height) * 3));
  for (std::int64_t c = 0; c < 3; ++c) {
    const auto cc = static_cast<double>(c);
    for (std::int64_t x = 0; x < width; ++x)
      sx[static_cast<std::size_t>(x * 3 + c)] = std::sin(static_cast<double>(x) / (7.0 + cc) + a);
    for (std::int64_t y = 0; y < height; ++y)
      cy[static_cast<std::size_t>(y * 3 + c)] =
          std::cos(static_cast<double>(y) / (9.0 + 2 * cc) + b);
    for (std::int64_t d = 0; d < width + height; ++d)
      diag[static_cast<std::size_t>(d * 3 + c)] = std::sin(static_cast<double>(d) / 23.0 + cc);
  }
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      for (std::int64_t c = 0; c < 3; ++c) {
        const double v =
            128 +
            70 * sx[static_cast<std::size_t>(x * 3 + c)] * cy[static_cast<std::size_t>(y * 3 + c)] +
            40 * diag[static_cast<std::size_t>((x + y) * 3 + c)] + (rng.uniform01() - 0.5) * 40;
        *px++ = static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return t;
}

// W4 (256 x 256) or W4L (640-1,024 px on the long side, width / height between
// 3:4 and 16:9): n JPEGs of quality 90 in 8 shards of tf.Examples
// (`image/encoded`, `image/class/label` = i % 1000).
void generate_images(const fs::path& dir, std::int64_t n, bool large) {
  constexpr std::size_t num_shards = 8;
  ingest::Rng sizes(large ? 11 : 10);
  ingest::ExampleBuilder builder;
  std::string record;
  for (std::size_t s = 0; s < num_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "train-%05zu-of-%05zu", s, num_shards);
    ingest::TFRecordWriter writer((dir / name).string());
    const std::int64_t begin = n * static_cast<std::int64_t>(s) / num_shards;
    const std::int64_t end = n * static_cast<std::int64_t>(s + 1) / num_shards;
    for (std::int64_t i = begin; i < end; ++i) {
      std::int64_t h = 256, w = 256;
      if (large) {
        const auto longest = static_cast<double>(640 + sizes.uniform(385));
        const double ratio =
            std::exp(std::log(0.75) + sizes.uniform01() * std::log(16.0 / 9 / 0.75));
        w = std::lround(ratio >= 1 ? longest : longest * ratio);
        h = std::lround(ratio >= 1 ? longest / ratio : longest);
      }
      const std::string jpeg =
          img::encode_jpeg(photo(h, w, static_cast<std::uint64_t>(i) + 1), {.quality = 90});
      builder.clear();
      builder.add_bytes("image/encoded", {jpeg}).add_int64s("image/class/label", {i % 1000});
      builder.serialize_to(record);
      writer.write(record);
    }
    writer.close();
  }
}

// --- W1 and W2 -------------------------------------------------------------

constexpr std::int64_t w1_batch = 256;
// W2's function: bench/compare/w2_function.cpp, in a shared library the
// Python peers load too.
std::int64_t w2_function(std::int64_t x) { return ingest_compare_w2(x); }

template <class Dataset>
Epoch drain_int_batches(const Dataset& ds) {
  Epoch e;
  auto it = ds.iterator();
  while (auto b = it.next()) {
    for (std::int64_t v : b->template values<std::int64_t>()) e.checksum += v;
    e.records += b->shape()[0];
  }
  return e;
}

// --- W3 --------------------------------------------------------------------

// Every record of the shards, read into memory for the limits.
std::vector<std::string> read_records(const std::vector<std::string>& files,
                                      ingest::Compression compression = ingest::Compression::none) {
  std::vector<std::string> records;
  auto it = ingest::tfrecord(files, {.compression = compression}).iterator();
  while (auto r = it.next()) records.push_back(std::move(*r));
  return records;
}

template <class Pipeline>
Epoch drain_w3(const Pipeline& ds) {
  Epoch e;
  auto it = ds.iterator();
  while (auto b = it.next()) {
    const auto& [images, labels] = *b;
    for (std::int64_t v : labels.template values<std::int64_t>()) e.checksum += v;
    e.records += labels.shape()[0];
  }
  return e;
}

// W3's function as a programmer without a library writes it: the record
// parsed (a thread_local ParsedExample, as the function's), its image bytes
// written to `out` (32 * 32 * 3 floats) as (x - 127.5) / 127.5, no Tensor and
// no allocation; returns the label.
std::int64_t w3_decode_into(const std::string& record, float* out) {
  constexpr std::size_t image_bytes = ingest::bench::w3::image_bytes;
  thread_local ingest::ParsedExample parsed;
  ingest::parse_example(record, ingest::bench::w3::w3_spec(), parsed);
  const std::string_view bytes = parsed.at(0).bytes[0];
  if (bytes.size() != image_bytes) throw std::runtime_error("W3: an image is not 3,072 bytes");
  const auto* in = reinterpret_cast<const std::uint8_t*>(bytes.data());
  for (std::size_t i = 0; i < image_bytes; ++i)
    out[i] = (static_cast<float>(in[i]) - 127.5f) / 127.5f;
  return parsed.at(1).values.data<std::int64_t>()[0];
}

// The function alone on every core (its share of the records in memory),
// each image written into one reused buffer.
Epoch w3_function_every_core(const std::vector<std::string>& records) {
  return on_every_core([&](std::size_t t) {
    std::vector<float> image(ingest::bench::w3::image_bytes);
    Epoch e;
    double sum = 0;
    for (std::size_t i = t; i < records.size(); i += cores()) {
      e.checksum += w3_decode_into(records[i], image.data());
      sum += image[0];
      ++e.records;
    }
    if (sum == 1e300) std::puts("");  // keeps the images computed
    return e;
  });
}

// One thread's buffers for w3_shaped_loop: its share of the shuffle buffer
// (images and labels) and a batch. Allocated and touched before the clock
// starts, reused by every epoch (as ingest's pooled tensors are).
struct W3Buffers {
  std::vector<float> slots;
  std::vector<std::int64_t> slot_labels;
  std::vector<float> images;
  std::vector<std::int64_t> labels;
};

std::vector<W3Buffers> w3_buffers() {
  constexpr std::size_t image_bytes = ingest::bench::w3::image_bytes;
  const std::size_t buffer_size = 10'000 / cores();
  const auto batch = static_cast<std::size_t>(w1_batch);
  std::vector<W3Buffers> all(cores());
  for (W3Buffers& b : all) {
    b.slots.assign(buffer_size * image_bytes, 0.0f);
    b.slot_labels.assign(buffer_size, 0);
    b.images.assign(batch * image_bytes, 0.0f);
    b.labels.assign(batch, 0);
  }
  return all;
}

// W3's shape without a library, on every core, allocating nothing: each
// thread holds its share of the 10,000-element shuffle buffer as slots
// (image and label); once they are full, a random slot leaves (memcpy into
// the [256, 32, 32, 3] batch) and the next record is decoded straight into it.
Epoch w3_shaped_loop(const std::vector<std::string>& records, std::vector<W3Buffers>& buffers) {
  return on_every_core([&](std::size_t t) {
    constexpr std::size_t image_bytes = ingest::bench::w3::image_bytes;
    const std::size_t buffer_size = 10'000 / cores();
    const auto batch = static_cast<std::size_t>(w1_batch);
    std::mt19937_64 rng(7 + t);
    std::vector<float>& slots = buffers[t].slots;
    std::vector<std::int64_t>& slot_labels = buffers[t].slot_labels;
    std::vector<float>& images = buffers[t].images;
    std::vector<std::int64_t>& labels = buffers[t].labels;
    std::size_t used = 0, filled = 0;
    Epoch e;
    double sum = 0;
    auto emit = [&](std::size_t slot) {
      std::memcpy(images.data() + filled * image_bytes, slots.data() + slot * image_bytes,
                  image_bytes * sizeof(float));
      labels[filled] = slot_labels[slot];
      if (++filled == batch) {
        sum += images[0];
        for (std::int64_t l : labels) e.checksum += l;
        e.records += static_cast<std::int64_t>(filled);
        filled = 0;
      }
    };
    for (std::size_t i = t; i < records.size(); i += cores()) {
      std::size_t slot = used;
      if (used < buffer_size) {
        ++used;
      } else {
        slot = rng() % buffer_size;
        emit(slot);
      }
      slot_labels[slot] = w3_decode_into(records[i], slots.data() + slot * image_bytes);
    }
    for (std::size_t slot = 0; slot < used; ++slot) emit(slot);
    for (std::size_t k = 0; k < filled; ++k) e.checksum += labels[k];
    e.records += static_cast<std::int64_t>(filled);
    if (sum == 1e300) std::puts("");
    return e;
  });
}

// W3's reading alone, on every core, allocating nothing: each thread reads its
// share of the shards whole (read() into a buffer allocated and touched before
// the clock starts), walks the TFRecord framing and checks both CRCs of every
// record (ingest's crc32c), without parsing. This is what the pipeline does
// beyond the loop above, whose records are in memory before its clock starts.
// The labels come from the records read beforehand; the count is checked.
Epoch w3_read_every_core(const std::vector<std::string>& files,
                         std::vector<std::vector<char>>& buffers, const Epoch& expected) {
  const Epoch read = on_every_core([&](std::size_t t) {
    std::vector<char>& buf = buffers[t];
    Epoch e;
    for (std::size_t f = t; f < files.size(); f += cores()) {
      const int fd = ::open(files[f].c_str(), O_RDONLY);
      if (fd < 0) throw std::runtime_error("cannot open " + files[f]);
      std::size_t size = 0;
      ssize_t got;
      while ((got = ::read(fd, buf.data() + size, buf.size() - size)) > 0)
        size += static_cast<std::size_t>(got);
      ::close(fd);
      if (got < 0) throw std::runtime_error("cannot read " + files[f]);
      const char* p = buf.data();
      for (std::size_t pos = 0; pos + 12 <= size;) {
        std::uint64_t length;
        std::uint32_t length_crc, data_crc;
        std::memcpy(&length, p + pos, 8);
        std::memcpy(&length_crc, p + pos + 8, 4);
        if (size - pos < 16 || length > size - pos - 16)
          throw std::runtime_error("W3 read: truncated " + files[f]);
        std::memcpy(&data_crc, p + pos + 12 + length, 4);
        if (ingest::masked_crc32c(p + pos, 8) != length_crc ||
            ingest::masked_crc32c(p + pos + 12, length) != data_crc)
          throw std::runtime_error("W3 read: corrupt record in " + files[f]);
        pos += 16 + length;
        ++e.records;
      }
    }
    return e;
  });
  if (read.records != expected.records) throw std::runtime_error("W3 read: a record count differs");
  return expected;
}

// Per thread, a buffer as large as the largest shard, allocated and touched.
std::vector<std::vector<char>> w3_read_buffers(const std::vector<std::string>& files) {
  std::uintmax_t largest = 0;
  for (const std::string& f : files) largest = std::max(largest, fs::file_size(f));
  return std::vector<std::vector<char>>(cores(), std::vector<char>(largest));
}

// Inflate of the GZIP shards on every core (each thread its share of the
// files, no parsing) with the engine ingest uses: ISA-L's igzip where ingest
// was built with it, else zlib. The labels come from the records read beforehand.
Epoch w3_inflate_every_core(const std::vector<std::string>& files, const Epoch& expected) {
  on_every_core([&](std::size_t t) {
    std::vector<unsigned char> in(1 << 18), out(1 << 18);
    std::uint64_t produced = 0;
    for (std::size_t f = t; f < files.size(); f += cores()) {
      std::FILE* file = std::fopen(files[f].c_str(), "rb");
      if (!file) throw std::runtime_error("cannot open " + files[f]);
#if defined(INGEST_HAVE_ISAL)
      auto st = std::make_unique<inflate_state>();
      isal_inflate_init(st.get());
      st->crc_flag = ISAL_GZIP;
      while (st->block_state != ISAL_BLOCK_FINISH) {
        if (st->avail_in == 0) {
          const std::size_t got = std::fread(in.data(), 1, in.size(), file);
          if (got == 0) break;
          st->next_in = in.data();
          st->avail_in = static_cast<std::uint32_t>(got);
        }
        st->next_out = out.data();
        st->avail_out = static_cast<std::uint32_t>(out.size());
        if (isal_inflate(st.get()) != ISAL_DECOMP_OK) throw std::runtime_error("inflate failed");
        produced += out.size() - st->avail_out;
      }
#else
      z_stream zs{};
      inflateInit2(&zs, MAX_WBITS + 16);
      int rc = Z_OK;
      while (rc != Z_STREAM_END) {
        if (zs.avail_in == 0) {
          const std::size_t got = std::fread(in.data(), 1, in.size(), file);
          if (got == 0) break;
          zs.next_in = in.data();
          zs.avail_in = static_cast<uInt>(got);
        }
        zs.next_out = out.data();
        zs.avail_out = static_cast<uInt>(out.size());
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) throw std::runtime_error("inflate failed");
        produced += out.size() - zs.avail_out;
      }
      inflateEnd(&zs);
#endif
      std::fclose(file);
    }
    if (produced == 0 && t < files.size()) throw std::runtime_error("inflate produced nothing");
    return Epoch{};
  });
  return expected;
}

// --- W4, W4-RRC, W4L, W4L-RRC ------------------------------------------------

using Example = std::pair<ingest::Tensor, std::int64_t>;
using Augmented = std::pair<img::PendingNormalize, std::int64_t>;
constexpr img::Size crop_size{224, 224};

const ingest::ExampleSpec& image_spec() {
  static const ingest::ExampleSpec s{
      {"image/encoded", ingest::FixedLenFeature{.dtype = ingest::FeatureType::bytes}},
      {"image/class/label", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
  };
  return s;
}

img::PendingNormalize normalize(const ingest::Tensor& image) {
  return img::normalize_in_batch(image, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f},
                                 {.layout = img::Layout::chw, .dtype = ingest::DType::float32});
}

// Random crop 224 (only the window decoded), random flip, normalise (CHW
// float32, into the batch).
struct DecodeAugment {
  Augmented operator()(const std::string& record, ingest::Rng& rng) const {
    thread_local ingest::ParsedExample parsed;
    ingest::parse_example(record, image_spec(), parsed);
    const ingest::Tensor crop =
        img::random_crop(parsed.at(0).bytes[0], crop_size, rng, {.channels = 3});
    return {normalize(img::random_flip_left_right(crop, rng)),
            parsed.at(1).values.data<std::int64_t>()[0]};
  }
};

// RandomResizedCrop to 224 (only the window decoded), random flip, normalise.
struct RandomResizedCrop {
  Augmented operator()(const std::string& record, ingest::Rng& rng) const {
    thread_local ingest::ParsedExample parsed;
    ingest::parse_example(record, image_spec(), parsed);
    const ingest::Tensor crop = img::random_resized_crop(
        parsed.at(0).bytes[0], {.size = crop_size, .decode = {.channels = 3}}, rng);
    return {normalize(img::random_flip_left_right(crop, rng)),
            parsed.at(1).values.data<std::int64_t>()[0]};
  }
};

// A record to (the JPEG decoded to uint8 [H, W, 3], label): W5 caches these.
struct ParseDecode {
  std::pair<ingest::Tensor, std::int64_t> operator()(const std::string& record) const {
    thread_local ingest::ParsedExample parsed;
    ingest::parse_example(record, image_spec(), parsed);
    return {img::decode_jpeg(parsed.at(0).bytes[0], {.channels = 3}),
            parsed.at(1).values.data<std::int64_t>()[0]};
  }
};

// W4's transform after the decode (W5: on the cached images).
struct Augment {
  Augmented operator()(const std::pair<ingest::Tensor, std::int64_t>& x, ingest::Rng& rng) const {
    const ingest::Tensor crop = img::random_crop(x.first, crop_size, rng);
    return {normalize(img::random_flip_left_right(crop, rng)), x.second};
  }
};

template <class Transform>
Epoch w4_pipeline(const std::vector<std::string>& files) {
  const auto ds = ingest::from_vector(files)
                      .interleave([](const std::string& path) { return ingest::tfrecord(path); },
                                  {.cycle_length = 4, .parallelism = ingest::autotune})
                      .random_map(Transform{}, {.seed = 7, .parallelism = ingest::autotune})
                      .batch(64)
                      .prefetch(ingest::autotune);
  return drain_w3(ds);
}

// The JPEGs and labels of the shards, in memory.
struct Jpegs {
  std::vector<std::string> bytes;
  std::vector<std::int64_t> labels;
};

Jpegs read_jpegs(const std::vector<std::string>& files) {
  Jpegs j;
  ingest::ParsedExample parsed;
  for (const std::string& r : read_records(files)) {
    ingest::parse_example(r, image_spec(), parsed);
    j.bytes.emplace_back(parsed.at(0).bytes[0]);
    j.labels.push_back(parsed.at(1).values.data<std::int64_t>()[0]);
  }
  return j;
}

// Full tjDecompress2 decodes of the JPEGs on every core at once (one handle
// per thread, each its share of the images).
Epoch decode_every_core(const Jpegs& j) {
  return on_every_core([&](std::size_t t) {
    tjhandle tj = tjInitDecompress();
    std::vector<unsigned char> out;
    Epoch e;
    for (std::size_t i = t; i < j.bytes.size(); i += cores()) {
      const auto* jpeg = reinterpret_cast<const unsigned char*>(j.bytes[i].data());
      int w = 0, h = 0, subsamp = 0, colorspace = 0;
      if (tjDecompressHeader3(tj, jpeg, j.bytes[i].size(), &w, &h, &subsamp, &colorspace) != 0 ||
          (out.resize(static_cast<std::size_t>(w) * h * 3),
           tjDecompress2(tj, jpeg, j.bytes[i].size(), out.data(), w, 0, h, TJPF_RGB, 0) != 0)) {
        throw std::runtime_error(std::string("tjDecompress2: ") + tjGetErrorStr2(tj));
      }
      e.checksum += j.labels[i];
      ++e.records;
    }
    tjDestroy(tj);
    return e;
  });
}

int run(const std::string& system, const std::string& workload, const fs::path& data, int epochs) {
  if (workload == "W1" || workload == "W2") {
    std::int64_t n = 0;
    std::ifstream(data / (workload == "W1" ? "w1" : "w2") / "n") >> n;
    if (n <= 0) throw std::runtime_error("no element count under " + data.string());
    if (workload == "W1" && system == "ingest") {
      timed_epochs(system, epochs, [n] {
        return drain_int_batches(ingest::range(n)
                                     .map([](std::int64_t x) { return 2 * x + 1; })
                                     .batch(w1_batch, {.drop_remainder = true})
                                     .prefetch(2));
      });
    } else if (workload == "W1" && system == "limit") {
      // A reused batch buffer written (2x + 1) and summed.
      timed_epochs(system, epochs, [n] {
        std::vector<std::int64_t> buffer(w1_batch);
        Epoch e;
        for (std::int64_t base = 0; base + w1_batch <= n; base += w1_batch) {
          volatile std::int64_t* buf = buffer.data();
          for (std::int64_t i = 0; i < w1_batch; ++i) buf[i] = 2 * (base + i) + 1;
          for (std::int64_t i = 0; i < w1_batch; ++i) e.checksum += buf[i];
          e.records += w1_batch;
        }
        return e;
      });
    } else if (workload == "W2" && system == "ingest") {
      timed_epochs(system, epochs, [n] {
        return drain_int_batches(ingest::range(n)
                                     .map(w2_function, {.parallelism = ingest::autotune})
                                     .batch(w1_batch)
                                     .prefetch(ingest::autotune));
      });
    } else if (workload == "W2" && system == "limit") {
      timed_epochs(system, epochs, [n] {
        return on_every_core([n](std::size_t t) {
          Epoch e;
          for (auto x = static_cast<std::int64_t>(t); x < n;
               x += static_cast<std::int64_t>(cores())) {
            e.checksum += w2_function(x);
            ++e.records;
          }
          return e;
        });
      });
    } else {
      return 2;
    }
    return 0;
  }
  if (workload == "W3" || workload == "W3-GZIP") {
    const bool gzip = workload == "W3-GZIP";
    const fs::path dir = data / "w3";
    if (system == "ingest") {
      const std::string pattern = (dir / (gzip ? "train-*.gz" : "train-*-of-00016")).string();
      timed_epochs(system, epochs, [&] {
        return drain_w3(ingest::bench::w3::pipeline_at(
            pattern, gzip ? ingest::Compression::gzip : ingest::Compression::none, {}));
      });
      return 0;
    }
    const std::vector<std::string> records = read_records(shards(dir, "-of-00016"));
    const auto expected_epoch = [&] {
      Epoch expected;
      ingest::ParsedExample parsed;
      for (const auto& r : records) {
        ingest::parse_example(r, ingest::bench::w3::w3_spec(), parsed);
        expected.checksum += parsed.at(1).values.data<std::int64_t>()[0];
        ++expected.records;
      }
      return expected;
    };
    if (gzip && system == "limit") {
      const Epoch expected = expected_epoch();
      const auto files = shards(dir, ".gz");
      timed_epochs(system, epochs, [&] { return w3_inflate_every_core(files, expected); });
    } else if (!gzip && system == "limit-read") {
      const Epoch expected = expected_epoch();
      const auto files = shards(dir, "-of-00016");
      std::vector<std::vector<char>> buffers = w3_read_buffers(files);
      timed_epochs(system, epochs, [&] { return w3_read_every_core(files, buffers, expected); });
    } else if (!gzip && system == "limit") {
      std::vector<W3Buffers> buffers = w3_buffers();
      timed_epochs(system, epochs, [&] { return w3_shaped_loop(records, buffers); });
    } else if (!gzip && system == "limit-function") {
      timed_epochs(system, epochs, [&] { return w3_function_every_core(records); });
    } else {
      return 2;
    }
    return 0;
  }
  if (workload == "W5" && system == "ingest") {
    // W4 with a memory cache after the decode; the cache is shared by every
    // iterator of the dataset, so epoch 2 reads it.
    const auto files = shards(data / "w4", "-of-00008");
    const auto ds = ingest::from_vector(files)
                        .interleave([](const std::string& path) { return ingest::tfrecord(path); },
                                    {.cycle_length = 4, .parallelism = ingest::autotune})
                        .map(ParseDecode{}, {.parallelism = ingest::autotune})
                        .cache()
                        .random_map(Augment{}, {.seed = 7, .parallelism = ingest::autotune})
                        .batch(64)
                        .prefetch(ingest::autotune);
    timed_epochs(system, epochs, [&] { return drain_w3(ds); });
    return 0;
  }
  if (workload.starts_with("W4") || workload == "W5") {
    const bool large = workload.starts_with("W4L");  // W5's limit is W4's
    const bool rrc = workload.ends_with("-RRC");
    const auto files = shards(data / (large ? "w4l" : "w4"), "-of-00008");
    if (system == "ingest") {
      timed_epochs(system, epochs, [&] {
        return rrc ? w4_pipeline<RandomResizedCrop>(files) : w4_pipeline<DecodeAugment>(files);
      });
    } else if (system == "limit") {
      const Jpegs jpegs = read_jpegs(files);
      timed_epochs(system, epochs, [&] { return decode_every_core(jpegs); });
    } else {
      return 2;
    }
    return 0;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "gen") {
    const fs::path dir = fs::path(args[1]) / args[2];
    const std::int64_t n = std::stoll(args[3]);
    fs::create_directories(dir);
    if (args[2] == "w3") {
      generate_w3(dir, n);
    } else if (args[2] == "w4" || args[2] == "w4l") {
      generate_images(dir, n, args[2] == "w4l");
    } else if (args[2] == "w1" || args[2] == "w2") {
      std::ofstream(dir / "n") << n << "\n";
    } else {
      std::fprintf(stderr, "unknown data set %s\n", args[2].c_str());
      return 2;
    }
    return 0;
  }
  if ((args.size() == 4 || args.size() == 5) && args[0] == "run") {
    const int epochs = args.size() == 5 ? std::stoi(args[4]) : 1;
    const int rc = run(args[1], args[2], args[3], epochs);
    if (rc == 2) std::fprintf(stderr, "no %s for %s\n", args[1].c_str(), args[2].c_str());
    return rc;
  }
  std::fprintf(stderr,
               "usage: ingest_compare gen <data-dir> <w1|w2|w3|w4|w4l> <n>\n"
               "       ingest_compare run <ingest|limit|limit-function> <workload> <data-dir> "
               "[epochs]\n");
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ingest_compare: %s\n", e.what());
  return 1;
}
