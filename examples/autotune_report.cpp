// An autotuned pipeline: every knob set to ingest::autotune, then the stats
// table (where the time goes, the knobs the autotuner chose, the
// bottleneck) and a Chrome trace (open it in https://ui.perfetto.dev or
// chrome://tracing). Set INGEST_AUTOTUNE_LOG=1 to see every decision. The
// table shows the pipeline as it runs: the parallel map moved after the
// shuffle (which then holds the map's inputs) and fused with the batch.
//   ./build/examples/autotune_report [trace.json]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>

#include <ingest/ingest.hpp>

namespace {
// A decode-like step: ~40 us of work per element.
ingest::Tensor decode(std::int64_t seed) {
  ingest::Tensor image(ingest::DType::float32, ingest::Shape{16, 16, 3});
  auto v = image.values<float>();
  auto h = static_cast<std::uint64_t>(seed);
  for (int round = 0; round < 20; ++round) {
    for (float& x : v) {
      h = h * 6364136223846793005ULL + 1442695040888963407ULL;
      x = static_cast<float>(h >> 40) / 16777216.0f;
    }
  }
  return image;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string trace =
      argc > 1 ? argv[1]
               : (std::filesystem::temp_directory_path() / "ingest_autotune_trace.json").string();
  const auto pipeline =
      ingest::range(20)
          .interleave(
              [](std::int64_t shard) { return ingest::range(shard * 1000, shard * 1000 + 1000); },
              {.cycle_length = 4, .parallelism = ingest::autotune})
          .map(
              [](std::int64_t i) {
                return std::pair{decode(i), i % 10};
              },
              {.parallelism = ingest::autotune})
          .shuffle(2048, {.seed = 1})
          .batch(64)
          .prefetch(ingest::autotune)
          .with_options({.trace_path = trace});

  const auto start = std::chrono::steady_clock::now();
  std::int64_t images = 0;
  {
    auto it = pipeline.iterator();
    while (auto batch = it.next()) images += batch->first.dim(0);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%lld images in %.2f s (%.0f images/s)\n\n", static_cast<long long>(images),
                seconds, static_cast<double>(images) / seconds);
    std::cout << it.stats() << "\n";
  }  // destroying the iterator writes the trace
  std::printf("trace written to %s (%lld bytes)\n", trace.c_str(),
              static_cast<long long>(std::filesystem::file_size(trace)));
  return 0;
}
