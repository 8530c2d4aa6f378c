// W2, parallel map efficiency (../shared/bench/WORKLOADS.md):
// range(N) -> map(f, parallelism P) -> batch(256) -> prefetch, with f a
// CPU-bound pure function of about 20 us. Reference: the bare function on
// one thread; efficiency = throughput(P = cores) / (cores x bare).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include <ingest/ingest.hpp>

#include "support/bench.hpp"

namespace {

constexpr std::int64_t rounds = 10'000;  // ~20 us on a current x86 core

struct Work {
  std::int64_t operator()(std::int64_t x) const {
    auto h = static_cast<std::uint64_t>(x);
    for (std::int64_t k = 0; k < rounds; ++k) {
      h = h * 6364136223846793005ULL + 1442695040888963407ULL;
      h ^= h >> 33;
    }
    return static_cast<std::int64_t>(h);
  }
};

void bare_one_thread(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  for (auto _ : state) {
    std::int64_t total = 0;
    for (std::int64_t x = 0; x < n; ++x) total += Work{}(x);
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void ingest_parallel(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::int64_t p = state.range(1);
  const auto ds = ingest::range(n)
                      .map(Work{}, {.parallelism = p})
                      .batch(256)
                      .prefetch(2)
                      .with_options({.threads = static_cast<std::size_t>(p)});
  for (auto _ : state) {
    std::int64_t total = 0;
    for (const ingest::Tensor& b : ds) {
      for (std::int64_t v : b.values<std::int64_t>()) total += v;
    }
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

}  // namespace

void ingest::bench::register_benchmarks(const Config& config) {
  const std::int64_t n = config.smoke ? 2'000 : 200'000;
  const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  // Measure the function once, to print its cost on this machine.
  const auto start = std::chrono::steady_clock::now();
  std::int64_t sink = 0;
  for (std::int64_t x = 0; x < 200; ++x) sink += Work{}(x);
  benchmark::DoNotOptimize(sink);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      200;
  char line[128];
  std::snprintf(line, sizeof line, "W2 function: %.1f us per call (K = %lld), %lld cores", us,
                static_cast<long long>(rounds), static_cast<long long>(cores));
  note(line);

  const std::string bare = "W2/bare_one_thread/";
  benchmark::RegisterBenchmark("W2/bare_one_thread", bare_one_thread)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  for (std::int64_t p = 1; p <= cores; p *= 2) {
    benchmark::RegisterBenchmark(("W2/ingest_P" + std::to_string(p)).c_str(), ingest_parallel)
        ->Args({n, p})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(1);
    if (p * 2 > cores && p != cores) {
      benchmark::RegisterBenchmark(("W2/ingest_P" + std::to_string(cores)).c_str(), ingest_parallel)
          ->Args({n, cores})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(1);
    }
  }
  // Speed-up over one thread, and efficiency against cores x one thread.
  set_reference("W2/ingest_P", bare, 1.0, "speed-up");
  set_reference("W2/ingest_P" + std::to_string(cores) + "/", bare, static_cast<double>(cores),
                "efficiency");
}
