// The W3 data set and pipeline (../shared/bench/WORKLOADS.md), shared by the
// W3 and W6 benchmarks: 16 TFRecord shards of tf.Examples (`image`: 3,072
// random bytes, `label`: int64 in 0..9), plain and GZIP, generated in a
// temporary directory removed at exit; the decode step; the full pipeline.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ingest/ingest.hpp>

namespace ingest::bench::w3 {

inline constexpr std::size_t image_bytes = 32 * 32 * 3;
inline constexpr std::size_t num_shards = 16;
inline constexpr std::int64_t batch_size = 256;

// The generated data set; removed when the process exits.
struct W3Data {
  std::filesystem::path dir;
  std::vector<std::string> plain, gzip;  // shard paths
  std::vector<std::string> records;      // every payload, in memory, for the parse benchmarks
  std::uint64_t plain_bytes = 0, gzip_bytes = 0;
  std::int64_t num_records = 0;

  ~W3Data() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

inline W3Data& data() {
  static W3Data d;
  return d;
}

/// Writes W3's shards of n records into `dir`, plain and GZIP
/// (`train-XXXXX-of-00016` and `.gz`, seed 3: the same bytes every time),
/// appends their paths to `plain` and `gzip`, and hands each serialized
/// record to `on_record`. scripts/compare.sh's data comes from here too.
template <class OnRecord>
void write_shards(const std::filesystem::path& dir, std::int64_t n, std::vector<std::string>& plain,
                  std::vector<std::string>& gzip, OnRecord&& on_record) {
  std::mt19937_64 rng(3);
  std::string image(image_bytes, '\0');
  ingest::ExampleBuilder builder;
  std::string record;
  for (std::size_t s = 0; s < num_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "train-%05zu-of-%05zu", s, num_shards);
    plain.push_back((dir / name).string());
    gzip.push_back((dir / (std::string(name) + ".gz")).string());
    ingest::TFRecordWriter plain_out(plain.back());
    ingest::TFRecordWriter gz_out(gzip.back(), {.compression = ingest::Compression::gzip});
    const std::int64_t begin = n * static_cast<std::int64_t>(s) / num_shards;
    const std::int64_t end = n * static_cast<std::int64_t>(s + 1) / num_shards;
    for (std::int64_t i = begin; i < end; ++i) {
      for (std::size_t k = 0; k < image_bytes; k += 8) {
        const std::uint64_t r = rng();
        std::memcpy(image.data() + k, &r, 8);
      }
      builder.clear();
      builder.add_bytes("image", {image})
          .add_int64s("label", {static_cast<std::int64_t>(rng() % 10)});
      builder.serialize_to(record);
      plain_out.write(record);
      gz_out.write(record);
      on_record(record);
    }
    plain_out.close();
    gz_out.close();
  }
}

/// Writes the data set (n records) into a temporary directory; keeps every
/// payload in memory too if asked (for benchmarks that parse records without
/// reading them).
inline void generate(std::int64_t n, bool keep_records) {
  W3Data& d = data();
  std::string pattern = (std::filesystem::temp_directory_path() / "ingest-w3-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  d.dir = pattern;
  d.num_records = n;
  write_shards(d.dir, n, d.plain, d.gzip, [&](const std::string& record) {
    if (keep_records) d.records.push_back(record);
  });
  for (const std::string& p : d.plain) d.plain_bytes += std::filesystem::file_size(p);
  for (const std::string& p : d.gzip) d.gzip_bytes += std::filesystem::file_size(p);
}

inline const ingest::ExampleSpec& w3_spec() {
  static const ingest::ExampleSpec spec{
      {"image", ingest::FixedLenFeature{.dtype = ingest::FeatureType::bytes}},
      {"label", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
  };
  return spec;
}

/// One record to (image float32[32, 32, 3] in [-1, 1], label); callable from
/// several threads at once (each reuses its own parse buffers).
struct Decode {
  std::pair<ingest::Tensor, std::int64_t> operator()(const std::string& record) const {
    thread_local ingest::ParsedExample parsed;
    ingest::parse_example(record, w3_spec(), parsed);
    const ingest::Tensor pixels =
        ingest::decode_raw(parsed.at(0).bytes[0], ingest::DType::uint8, ingest::Shape{32, 32, 3});
    ingest::Tensor image(ingest::DType::float32, ingest::Shape{32, 32, 3});
    const std::uint8_t* in = pixels.data<std::uint8_t>();
    float* out = image.data<float>();
    for (std::size_t i = 0; i < image_bytes; ++i)
      out[i] = (static_cast<float>(in[i]) - 127.5f) / 127.5f;
    return {std::move(image), parsed.at(1).values.data<std::int64_t>()[0]};
  }
};

/// The knobs of the full pipeline (ingest::autotune or a number).
struct Knobs {
  std::int64_t map_parallelism = ingest::autotune;
  std::int64_t interleave_parallelism = ingest::autotune;
  std::int64_t prefetch = ingest::autotune;
  std::int64_t cycle_length = 4;  ///< files the interleave reads at once
};

/// Decode, then `extra` (a CPU-heavy step for W6; the identity for W3).
template <class Extra>
struct DecodeThen {
  Extra extra;
  std::pair<ingest::Tensor, std::int64_t> operator()(const std::string& record) const {
    return extra(Decode{}(record));
  }
};
struct Identity {
  template <class T>
  T operator()(T x) const {
    return x;
  }
};

/// W3 on the shards matching `pattern` (local or a URL): list the files ->
/// parallel interleave (cycle 4) of tfrecord readers -> decode ->
/// shuffle(10,000) -> batch(256) -> prefetch.
template <class Extra = Identity>
auto pipeline_at(const std::string& pattern, ingest::Compression compression, Knobs knobs,
                 Extra extra = {}) {
  return ingest::list_files(pattern)
      .interleave(
          [compression](std::string path) {
            return ingest::tfrecord(path, {.compression = compression});
          },
          {.cycle_length = knobs.cycle_length, .parallelism = knobs.interleave_parallelism})
      .map(DecodeThen<Extra>{extra}, {.parallelism = knobs.map_parallelism})
      .shuffle(10'000, {.seed = 7})
      .batch(batch_size)
      .prefetch(knobs.prefetch);
}

/// W3 on the generated shards, plain or GZIP.
template <class Extra = Identity>
auto pipeline(bool gzip, Knobs knobs, Extra extra = {}) {
  const std::string pattern = (data().dir / (gzip ? "train-*.gz" : "train-*-of-00016")).string();
  return pipeline_at(pattern, gzip ? ingest::Compression::gzip : ingest::Compression::none, knobs,
                     extra);
}

}  // namespace ingest::bench::w3
