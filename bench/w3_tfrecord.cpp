// W3, TFRecord ETL (../shared/bench/WORKLOADS.md): 16 shards of serialized
// tf.Examples (`image`: 3,072 random bytes, `label`: int64 in 0..9), plain
// and GZIP, generated here in a temporary directory removed at exit. Each
// part of the read path is held against its limit, measured in this run:
//   W3/read/*      TFRecord framing + CRC  vs reading the same files from page cache
//                  with read() into a page-aligned buffer
//   W3/crc32c/*    CRC-32C throughput (GB/s) of the hardware and portable paths
//                  (streamed: with prefetching, as the mapped reader checks records)
//   W3/gzip/*      GZIP TFRecord reading   vs bare zlib inflate of the same files
//                  (and, where ingest was built with ISA-L, the engine it then
//                  uses: bare ISA-L inflate, isal_inflate)
//   W3/parse/*     ingest's Example parser vs protobuf's generated parser, on a
//                  cache-sized window of the records (in a pipeline a record
//                  is parsed right after it was read, while it is in cache)
//   W3/pipeline/*  tfrecord -> parse -> uint8[32,32,3] -> float32 -> batch(256)
//   W3/pipeline/parallel_autotuned*  the full W3 pipeline: list_files ->
//                  parallel interleave(tfrecord, cycle 4) -> decode -> shuffle(10,000)
//                  -> batch(256) -> prefetch, every knob autotuned
//   W3/users/*     the full W3 pipeline as users write it (issue 11): the map
//                  function the README teaches (a fresh ParsedExample, a new
//                  float32 Tensor per image), every knob autotuned, against the
//                  same function alone in a plain loop over the records in memory
//                  x the cores; GZIP against bare inflate x the cores. Beside
//                  them, library-free plain loops of the same shape on every
//                  core (the function alone; with a shuffle buffer and the
//                  copy into batches): what the machine allows this pipeline
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/ingest.hpp>

#include "example.pb.h"
#include "support/bench.hpp"
#include "support/w3_data.hpp"

namespace {

using namespace ingest::bench::w3;

void count(benchmark::State& state, std::uint64_t bytes) {
  state.SetItemsProcessed(state.iterations() * data().num_records);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

// --- reading ---------------------------------------------------------------

// A page-aligned buffer for the references: read() into a destination that is
// not 32-byte aligned runs about 5x slower on AMD Zen 3 (the kernel's copy),
// and a std::vector of 256 KiB comes from glibc's mmap at page + 16 bytes, so
// an unaligned reference would flatter everything held against it.
struct AlignedBytes {
  explicit AlignedBytes(std::size_t n)
      : bytes(static_cast<char*>(std::aligned_alloc(4096, n)), &std::free), count(n) {}
  char* data() const noexcept { return bytes.get(); }
  std::size_t size() const noexcept { return count; }
  std::unique_ptr<char, void (*)(void*)> bytes;
  std::size_t count;
};

void page_cache_read(benchmark::State& state) {
  AlignedBytes buffer(ingest::default_buffer_size);
  for (auto _ : state) {
    std::uint64_t total = 0;
    for (const auto& path : data().plain) {
      const int fd = ::open(path.c_str(), O_RDONLY);
      for (::ssize_t got; (got = ::read(fd, buffer.data(), buffer.size())) > 0;) {
        total += static_cast<std::uint64_t>(got);
        benchmark::DoNotOptimize(buffer.data());
      }
      ::close(fd);
    }
    benchmark::DoNotOptimize(total);
  }
  count(state, data().plain_bytes);
}

// Every record of the plain (or gzip) shards through ingest::tfrecord.
void tfrecord_dataset(benchmark::State& state, bool gzip, ingest::TFRecordOptions options) {
  options.compression = gzip ? ingest::Compression::gzip : ingest::Compression::none;
  const auto ds = ingest::tfrecord(gzip ? data().gzip : data().plain, options);
  for (auto _ : state) {
    std::size_t bytes = 0;
    auto it = ds.iterator();
    while (auto r = it.next()) bytes += r->size();
    benchmark::DoNotOptimize(bytes);
  }
  count(state, gzip ? data().gzip_bytes : data().plain_bytes);
}

// Records as views into the mapped file (no copy). With `background`, the
// pages ahead of the reader are populated on the default runtime's pool, as
// ingest::tfrecord does; without, the reader takes every page fault itself.
void tfrecord_views(benchmark::State& state, bool background) {
  ingest::detail::BackgroundExecutor executor;
  if (background) {
    executor = [](std::function<void()> job) { ingest::default_runtime()->post(std::move(job)); };
  }
  for (auto _ : state) {
    std::size_t bytes = 0;
    for (const auto& path : data().plain) {
      ingest::TFRecordReader reader(path, {}, executor);
      while (auto v = reader.read_view()) bytes += v->size();
    }
    benchmark::DoNotOptimize(bytes);
  }
  count(state, data().plain_bytes);
}

// --- CRC-32C -----------------------------------------------------------------

template <std::uint32_t (*Crc)(std::uint32_t, const void*, std::size_t)>
void crc_over_records(benchmark::State& state) {
  std::uint64_t bytes = 0;
  for (const auto& r : data().records) bytes += r.size();
  for (auto _ : state) {
    std::uint32_t acc = 0;
    for (const auto& r : data().records) acc ^= Crc(0, r.data(), r.size());
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(state.iterations() * data().num_records);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

template <std::uint32_t (*Crc)(std::uint32_t, const void*, std::size_t)>
void crc_in_cache(benchmark::State& state) {
  // One reader window (256 KiB) of the same bytes, cache-resident.
  std::string window;
  for (const auto& r : data().records) {
    if (window.size() >= ingest::default_buffer_size) break;
    window += r;
  }
  window.resize(ingest::default_buffer_size);
  for (auto _ : state) benchmark::DoNotOptimize(Crc(0, window.data(), window.size()));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(window.size()));
}

// --- GZIP --------------------------------------------------------------------

void bare_inflate(benchmark::State& state) {
  AlignedBytes in(ingest::default_buffer_size), out(ingest::default_buffer_size);
  for (auto _ : state) {
    std::uint64_t produced = 0;
    for (const auto& path : data().gzip) {
      const int fd = ::open(path.c_str(), O_RDONLY);
      z_stream zs{};
      inflateInit2(&zs, MAX_WBITS + 16);
      int rc = Z_OK;
      while (rc != Z_STREAM_END) {
        if (zs.avail_in == 0) {
          const ::ssize_t got = ::read(fd, in.data(), in.size());
          if (got <= 0) break;
          zs.next_in = reinterpret_cast<Bytef*>(in.data());
          zs.avail_in = static_cast<uInt>(got);
        }
        zs.next_out = reinterpret_cast<Bytef*>(out.data());
        zs.avail_out = static_cast<uInt>(out.size());
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) break;
        produced += out.size() - zs.avail_out;
        benchmark::DoNotOptimize(out.data());
      }
      inflateEnd(&zs);
      ::close(fd);
    }
    benchmark::DoNotOptimize(produced);
  }
  count(state, data().gzip_bytes);
}

#if defined(INGEST_HAVE_ISAL)
// The same with ISA-L's igzip inflate (gzip wrapper parsed, CRC-32 checked),
// the engine ingest uses where it was built with ISA-L.
void bare_isal_inflate(benchmark::State& state) {
  AlignedBytes in(ingest::default_buffer_size), out(ingest::default_buffer_size);
  auto st = std::make_unique<inflate_state>();
  for (auto _ : state) {
    std::uint64_t produced = 0;
    for (const auto& path : data().gzip) {
      const int fd = ::open(path.c_str(), O_RDONLY);
      isal_inflate_init(st.get());
      st->crc_flag = ISAL_GZIP;
      while (st->block_state != ISAL_BLOCK_FINISH) {
        if (st->avail_in == 0) {
          const ::ssize_t got = ::read(fd, in.data(), in.size());
          if (got <= 0) break;
          st->next_in = reinterpret_cast<std::uint8_t*>(in.data());
          st->avail_in = static_cast<std::uint32_t>(got);
        }
        st->next_out = reinterpret_cast<std::uint8_t*>(out.data());
        st->avail_out = static_cast<std::uint32_t>(out.size());
        if (isal_inflate(st.get()) != ISAL_DECOMP_OK) break;
        produced += out.size() - st->avail_out;
        benchmark::DoNotOptimize(out.data());
      }
      ::close(fd);
    }
    benchmark::DoNotOptimize(produced);
  }
  count(state, data().gzip_bytes);
}
#endif

// --- parsing -----------------------------------------------------------------

// The first 4,096 records (about 12 MiB): what the parse benchmarks parse.
std::span<const std::string> parse_window() {
  const auto& all = data().records;
  return std::span(all).first(std::min<std::size_t>(all.size(), 4096));
}

void count_parsed(benchmark::State& state) {
  std::uint64_t bytes = 0;
  for (const auto& r : parse_window()) bytes += r.size();
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(parse_window().size()));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

void protobuf_parse(benchmark::State& state) {
  ingest_test::tf::Example ex;
  for (auto _ : state) {
    std::int64_t sum = 0;
    for (const auto& r : parse_window()) {
      if (!ex.ParseFromString(r)) state.SkipWithError("protobuf could not parse a record");
      const auto& features = ex.features().feature();
      const std::string& image = features.at("image").bytes_list().value(0);
      sum += features.at("label").int64_list().value(0) + static_cast<unsigned char>(image[7]);
    }
    benchmark::DoNotOptimize(sum);
  }
  count_parsed(state);
}

void ingest_parse(benchmark::State& state) {
  ingest::ParsedExample parsed;
  for (auto _ : state) {
    std::int64_t sum = 0;
    for (const auto& r : parse_window()) {
      ingest::parse_example(r, w3_spec(), parsed);
      const std::string_view image = parsed.at(0).bytes[0];
      sum += parsed.at(1).values.data<std::int64_t>()[0] + static_cast<unsigned char>(image[7]);
    }
    benchmark::DoNotOptimize(sum);
  }
  count_parsed(state);
}

void ingest_parse_batch(benchmark::State& state) {
  const auto records = parse_window();
  for (auto _ : state) {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < records.size(); i += batch_size) {
      const std::size_t n = std::min<std::size_t>(batch_size, records.size() - i);
      const ingest::ParsedExample b = ingest::parse_example_batch(records.subspan(i, n), w3_spec());
      sum += b.at(1).values.data<std::int64_t>()[n - 1] +
             static_cast<unsigned char>(b.at(0).bytes[n - 1][7]);
    }
    benchmark::DoNotOptimize(sum);
  }
  count_parsed(state);
}

// --- the pipeline ------------------------------------------------------------

auto w3_sequential_pipeline(const std::vector<std::string>& shards, ingest::Compression c) {
  return ingest::tfrecord(shards, {.compression = c}).map(Decode{}).batch(batch_size);
}

template <class Pipeline>
void consume(benchmark::State& state, const Pipeline& ds, bool gzip) {
  for (auto _ : state) {
    double sum = 0;
    std::int64_t labels = 0;
    for (const auto& [images, batch_labels] : ds) {
      sum += images.template data<float>()[0];
      labels += batch_labels.template data<std::int64_t>()[0];
    }
    benchmark::DoNotOptimize(sum);
    benchmark::DoNotOptimize(labels);
  }
  count(state, gzip ? data().gzip_bytes : data().plain_bytes);
}

void sequential(benchmark::State& state, bool gzip) {
  consume(state,
          w3_sequential_pipeline(gzip ? data().gzip : data().plain,
                                 gzip ? ingest::Compression::gzip : ingest::Compression::none),
          gzip);
}

// The full W3 pipeline, every knob autotuned.
void parallel_pipeline(benchmark::State& state, bool gzip) {
  consume(state, ingest::bench::w3::pipeline(gzip, Knobs{}), gzip);
}

// --- as users write it --------------------------------------------------------

// The map function as the README teaches it: parse_example returning a fresh
// ParsedExample, decode_raw, a new float32 Tensor per image.
struct UserDecode {
  std::pair<ingest::Tensor, std::int64_t> operator()(const std::string& record) const {
    const ingest::ParsedExample ex = ingest::parse_example(record, w3_spec());
    const ingest::Tensor pixels =
        ingest::decode_raw(ex.bytes("image")[0], ingest::DType::uint8, {32, 32, 3});
    ingest::Tensor image(ingest::DType::float32, ingest::Shape{32, 32, 3});
    const std::uint8_t* in = pixels.data<std::uint8_t>();
    float* out = image.data<float>();
    for (std::size_t i = 0; i < image_bytes; ++i)
      out[i] = (static_cast<float>(in[i]) - 127.5f) / 127.5f;
    return {std::move(image), ex.tensor("label").item<std::int64_t>()};
  }
};

// The user's function alone, in a plain loop over every record in memory:
// the rate one core reaches without any pipeline.
void user_function_alone(benchmark::State& state) {
  for (auto _ : state) {
    double sum = 0;
    for (const auto& r : data().records) {
      const auto [image, label] = UserDecode{}(r);
      sum += image.data<float>()[0] + static_cast<double>(label);
    }
    benchmark::DoNotOptimize(sum);
  }
  count(state, data().plain_bytes);
}

// Runs body(t, cores) on one thread per core, each over its share of the
// records (t, t + cores, ...) and returning a sum the optimiser must keep.
template <class Body>
void on_every_core(benchmark::State& state, const Body& body) {
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  for (auto _ : state) {
    std::vector<double> sums(cores);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < cores; ++t) {
      threads.emplace_back([&, t] { sums[t] = body(t, cores); });
    }
    for (auto& th : threads) th.join();
    benchmark::DoNotOptimize(sums.data());
  }
  count(state, data().plain_bytes);
}

// The function alone on every core at once (nothing shared): how far the
// cores scale it on this machine, which the reference (one core's rate x the
// cores) assumes to be perfect.
void user_function_every_core(benchmark::State& state) {
  on_every_core(state, [&records = data().records](std::size_t t, std::size_t cores) {
    double sum = 0;
    for (std::size_t i = t; i < records.size(); i += cores) {
      const auto [image, label] = UserDecode{}(records[i]);
      sum += image.data<float>()[0] + static_cast<double>(label);
    }
    return sum;
  });
}

// What the pipeline's shape costs without any library: on every core, a plain
// loop over its share of the records in memory runs the user's function, keeps
// the result in its share of a 10,000-element shuffle buffer (swapping with a
// random slot, as shuffle does) and copies each element leaving the buffer
// into a [256, 32, 32, 3] batch. Unlike the function alone, whose fresh Tensor
// is written and dropped in cache, each image now lives in a 120 MB buffer
// (out of cache) and is copied again into its batch: the memory traffic any
// implementation of this pipeline pays, with no reading, threads or queues.
// The argument is the buffer's size: 10,000 as in the pipeline, and 256, whose
// elements stay in cache, to show what the buffer's size alone costs.
void users_plain_loop_shuffle_batch(benchmark::State& state) {
  const auto total_buffer = static_cast<std::size_t>(state.range(0));
  on_every_core(state, [&records = data().records, total_buffer](std::size_t t, std::size_t cores) {
    const std::size_t buffer_size = std::max<std::size_t>(1, total_buffer / cores);
    std::mt19937_64 rng(7 + t);
    std::vector<std::pair<ingest::Tensor, std::int64_t>> buffer;
    buffer.reserve(buffer_size);
    ingest::Tensor images(ingest::DType::float32, ingest::Shape{batch_size, 32, 32, 3});
    std::vector<std::int64_t> labels(batch_size);
    std::int64_t filled = 0;
    double sum = 0;
    auto emit = [&](std::pair<ingest::Tensor, std::int64_t>& e) {
      std::memcpy(images.data<float>() + filled * image_bytes, e.first.data<float>(),
                  image_bytes * sizeof(float));
      labels[static_cast<std::size_t>(filled)] = e.second;
      if (++filled == batch_size) {
        sum += images.data<float>()[0] + static_cast<double>(labels[0]);
        filled = 0;
      }
    };
    for (std::size_t i = t; i < records.size(); i += cores) {
      auto element = UserDecode{}(records[i]);
      if (buffer.size() < buffer_size) {
        buffer.push_back(std::move(element));
        continue;
      }
      auto& slot = buffer[rng() % buffer_size];
      emit(slot);
      slot = std::move(element);
    }
    for (auto& e : buffer) emit(e);
    return sum;
  });
}

void users_pipeline(benchmark::State& state, bool gzip) {
  const auto compression = gzip ? ingest::Compression::gzip : ingest::Compression::none;
  const std::string pattern = (data().dir / (gzip ? "train-*.gz" : "train-*-of-00016")).string();
  const auto ds = ingest::list_files(pattern)
                      .interleave(
                          [compression](std::string path) {
                            return ingest::tfrecord(path, {.compression = compression});
                          },
                          {.cycle_length = 4, .parallelism = ingest::autotune})
                      .map(UserDecode{}, {.parallelism = ingest::autotune})
                      .shuffle(10'000, {.seed = 7})
                      .batch(batch_size)
                      .prefetch(ingest::autotune);
  consume(state, ds, gzip);
}

}  // namespace

void ingest::bench::register_benchmarks(const Config& config) {
  const std::int64_t n = config.smoke ? 2'000 : 100'000;
  generate(n, true);
  note("W3 data: " + std::to_string(n) + " records in " + std::to_string(num_shards) + " shards, " +
       std::to_string(data().plain_bytes >> 20) + " MiB plain, " +
       std::to_string(data().gzip_bytes >> 20) +
       " MiB gzip; hardware crc32c: " + (detail::crc32c_hardware_available() ? "yes" : "no"));
  auto ms = [](benchmark::internal::Benchmark* b) { b->Unit(benchmark::kMillisecond); };

  ms(benchmark::RegisterBenchmark("W3/read/page_cache", page_cache_read));
  ms(benchmark::RegisterBenchmark("W3/read/tfrecord", tfrecord_dataset, false,
                                  ingest::TFRecordOptions{})
         ->UseRealTime());
  ms(benchmark::RegisterBenchmark("W3/read/tfrecord_no_mmap", tfrecord_dataset, false,
                                  ingest::TFRecordOptions{.memory_map = false}));
  ms(benchmark::RegisterBenchmark("W3/read/tfrecord_no_crc", tfrecord_dataset, false,
                                  ingest::TFRecordOptions{.verify_crc = false}));
  ms(benchmark::RegisterBenchmark("W3/read/tfrecord_read_view", tfrecord_views, true)
         ->UseRealTime());
  ms(benchmark::RegisterBenchmark("W3/read/tfrecord_read_view_one_thread", tfrecord_views, false));
  set_reference("W3/read/", "W3/read/page_cache");

  ms(benchmark::RegisterBenchmark("W3/crc32c/portable_records",
                                  crc_over_records<detail::crc32c_portable>));
  ms(benchmark::RegisterBenchmark("W3/crc32c/dispatch_records", crc_over_records<crc32c_extend>));
  ms(benchmark::RegisterBenchmark("W3/crc32c/streamed_records",
                                  crc_over_records<detail::crc32c_extend_streamed>));
  benchmark::RegisterBenchmark("W3/crc32c/dispatch_256KiB_in_cache", crc_in_cache<crc32c_extend>);
  benchmark::RegisterBenchmark("W3/crc32c/portable_256KiB_in_cache",
                               crc_in_cache<detail::crc32c_portable>);

  ms(benchmark::RegisterBenchmark("W3/gzip/inflate", bare_inflate));
#if defined(INGEST_HAVE_ISAL)
  ms(benchmark::RegisterBenchmark("W3/gzip/isal_inflate", bare_isal_inflate));
#endif
  ms(benchmark::RegisterBenchmark("W3/gzip/tfrecord", tfrecord_dataset, true,
                                  ingest::TFRecordOptions{}));
  set_reference("W3/gzip/", "W3/gzip/inflate");

  ms(benchmark::RegisterBenchmark("W3/parse/protobuf", protobuf_parse));
  ms(benchmark::RegisterBenchmark("W3/parse/ingest", ingest_parse));
  ms(benchmark::RegisterBenchmark("W3/parse/ingest_batch", ingest_parse_batch));
  set_reference("W3/parse/", "W3/parse/protobuf");

  ms(benchmark::RegisterBenchmark("W3/pipeline/sequential", sequential, false));
  ms(benchmark::RegisterBenchmark("W3/pipeline/sequential_gzip", sequential, true));
  ms(benchmark::RegisterBenchmark("W3/pipeline/parallel_autotuned", parallel_pipeline, false)
         ->UseRealTime());
  ms(benchmark::RegisterBenchmark("W3/pipeline/parallel_autotuned_gzip", parallel_pipeline, true)
         ->UseRealTime());
  set_reference("W3/pipeline/", "W3/read/page_cache");

  // As users write it: against the function alone x the cores, and GZIP
  // against bare inflate x the cores (both in records/s).
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  ms(benchmark::RegisterBenchmark("W3/users/function_alone", user_function_alone));
  ms(benchmark::RegisterBenchmark("W3/users/function_alone_every_core", user_function_every_core)
         ->UseRealTime());
  ms(benchmark::RegisterBenchmark("W3/users/plain_loop_shuffle_batch",
                                  users_plain_loop_shuffle_batch)
         ->Arg(10'000)
         ->Arg(256)
         ->UseRealTime());
  ms(benchmark::RegisterBenchmark("W3/users/pipeline", users_pipeline, false)->UseRealTime());
  ms(benchmark::RegisterBenchmark("W3/users_gzip/pipeline", users_pipeline, true)->UseRealTime());
  set_reference("W3/users/", "W3/users/function_alone", cores, "x");
  set_reference("W3/users_gzip/", "W3/gzip/inflate", cores, "x");
}
