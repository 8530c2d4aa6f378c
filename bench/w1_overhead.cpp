// W1, per-element overhead (../shared/bench/WORKLOADS.md):
// range(N) -> map(x -> 2x+1) -> batch(256, drop_remainder), the consumer sums
// every batch. Reference: a hand-written loop that writes each batch of 256
// values into a reused buffer and sums it, compiled with the same flags.
#include <cstdint>
#include <vector>

#include <ingest/ingest.hpp>

#include "support/bench.hpp"

namespace {

constexpr std::int64_t batch_size = 256;

std::int64_t sum_batch(const ingest::Tensor& b) {
  std::int64_t s = 0;
  for (std::int64_t v : b.values<std::int64_t>()) s += v;
  return s;
}

void plain_loop(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  std::vector<std::int64_t> buffer(batch_size);
  for (auto _ : state) {
    std::int64_t total = 0;
    for (std::int64_t base = 0; base + batch_size <= n; base += batch_size) {
      std::int64_t* buf = buffer.data();
      benchmark::DoNotOptimize(buf);
      for (std::int64_t i = 0; i < batch_size; ++i) buf[i] = 2 * (base + i) + 1;
      benchmark::ClobberMemory();
      std::int64_t s = 0;
      for (std::int64_t i = 0; i < batch_size; ++i) s += buf[i];
      total += s;
    }
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(state.iterations() * (n / batch_size) * batch_size);
}

auto pipeline(std::int64_t n) {
  return ingest::range(n)
      .map([](std::int64_t x) { return 2 * x + 1; })
      .batch(batch_size, {.drop_remainder = true});
}

void ingest_static(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto ds = pipeline(n);
  for (auto _ : state) {
    std::int64_t total = 0;
    auto it = ds.iterator();
    while (auto b = it.next()) total += sum_batch(*b);
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(state.iterations() * (n / batch_size) * batch_size);
}

// Erased at the element boundary: batch pulls through AnyIterator's bulk fill.
void ingest_erased(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ingest::AnyDataset<std::int64_t> elements =
      ingest::range(n).map([](std::int64_t x) { return 2 * x + 1; });
  const auto ds = elements.batch(batch_size, {.drop_remainder = true});
  for (auto _ : state) {
    std::int64_t total = 0;
    auto it = ds.iterator();
    while (auto b = it.next()) total += sum_batch(*b);
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(state.iterations() * (n / batch_size) * batch_size);
}

// Erased whole pipeline, the consumer pulling one element per virtual next().
void ingest_erased_per_element(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ingest::AnyDataset<std::int64_t> elements =
      ingest::range(n).map([](std::int64_t x) { return 2 * x + 1; });
  for (auto _ : state) {
    std::int64_t total = 0;
    auto it = elements.iterator();
    while (auto x = it.next()) total += *x;
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(state.iterations() * n);
}

}  // namespace

void ingest::bench::register_benchmarks(const Config& config) {
  const std::int64_t n = config.smoke ? 100'000 : 10'000'000;
  benchmark::RegisterBenchmark("W1/plain_loop", plain_loop)->Arg(n)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("W1/ingest_static", ingest_static)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("W1/ingest_erased_before_batch", ingest_erased)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("W1/ingest_erased_per_element_next", ingest_erased_per_element)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond);
  set_reference("W1/", "W1/plain_loop/" + std::to_string(n));
}
