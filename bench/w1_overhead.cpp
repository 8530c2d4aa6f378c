// W1, per-element overhead (../shared/bench/WORKLOADS.md):
// range(N) -> map(x -> 2x+1) -> batch(256, drop_remainder), the consumer sums
// every batch. Reference: a hand-written loop that writes each batch of 256
// values into a reused buffer and sums it, compiled with the same flags.
// Built twice: bench_w1_overhead (the build type's flags) and
// bench_w1_overhead_native (-O3 -march=native).
#include <cstdint>
#include <type_traits>
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

// Pulls every element of `ds` for each benchmark iteration, summing it
// (a batch through sum_batch), and reports `items` elements per pass.
template <class Dataset>
void drain(benchmark::State& state, const Dataset& ds, std::int64_t items) {
  for (auto _ : state) {
    std::int64_t total = 0;
    auto it = ds.iterator();
    while (auto x = it.next()) {
      if constexpr (std::is_same_v<std::decay_t<decltype(*x)>, std::int64_t>) {
        total += *x;
      } else {
        total += sum_batch(*x);
      }
    }
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed(state.iterations() * items);
}

auto pipeline(std::int64_t n) {
  return ingest::range(n)
      .map([](std::int64_t x) { return 2 * x + 1; })
      .batch(batch_size, {.drop_remainder = true});
}

void ingest_static(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto ds = pipeline(n);
  drain(state, ds, n / batch_size * batch_size);
}

// The full W1 pipeline, with prefetch(2): batches cross to the consumer's thread.
void ingest_prefetch(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto ds = pipeline(n).prefetch(2);
  drain(state, ds, n / batch_size * batch_size);
}

// A trivial function through the sequential map and through the parallel
// map (map-and-batch), batched, and pulled element by element.
template <bool parallel, bool batched>
void trivial_map(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  auto inc = [](std::int64_t x) { return x + 1; };
  auto mapped = [&] {
    if constexpr (parallel) {
      return ingest::range(n).map(inc, {.parallelism = ingest::autotune});
    } else {
      return ingest::range(n).map(inc);
    }
  }();
  if constexpr (batched) {
    drain(state, mapped.batch(batch_size), n);
  } else {
    drain(state, mapped, n);
  }
}

// The cost of one hand-off between threads: elements (or W1 batches) through
// prefetch with a consumer that does nothing else. Reported per item.
void handoff(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::int64_t buffer = state.range(1);
  const auto ds = ingest::range(n).prefetch(buffer);
  drain(state, ds, n);
}

// Erased at the element boundary: batch pulls through AnyIterator's bulk fill.
void ingest_erased(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ingest::AnyDataset<std::int64_t> elements =
      ingest::range(n).map([](std::int64_t x) { return 2 * x + 1; });
  const auto ds = elements.batch(batch_size, {.drop_remainder = true});
  drain(state, ds, n / batch_size * batch_size);
}

// Erased whole pipeline, the consumer pulling one element per virtual next().
void ingest_erased_per_element(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ingest::AnyDataset<std::int64_t> elements =
      ingest::range(n).map([](std::int64_t x) { return 2 * x + 1; });
  drain(state, elements, n);
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
  benchmark::RegisterBenchmark("W1/ingest_prefetch2", ingest_prefetch)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  set_reference("W1/", "W1/plain_loop/");

  // Thread hand-off cost (items/s; 1e9 / rate = ns per hand-off).
  for (std::int64_t buffer : {2, 64}) {
    benchmark::RegisterBenchmark(
        ("handoff/prefetch_elements_buffer" + std::to_string(buffer)).c_str(), handoff)
        ->Args({n / 10, buffer})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }

  // Parallel map of x -> x+1 against the sequential map (target: >= 0.8).
  benchmark::RegisterBenchmark("trivial_map_batched/sequential", trivial_map<false, true>)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("trivial_map_batched/parallel", trivial_map<true, true>)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("trivial_map_elements/sequential", trivial_map<false, false>)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("trivial_map_elements/parallel", trivial_map<true, false>)
      ->Arg(n)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  set_reference("trivial_map_batched/", "trivial_map_batched/sequential/");
  set_reference("trivial_map_elements/", "trivial_map_elements/sequential/");
}
