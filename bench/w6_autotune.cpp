// W6, autotune (../shared/bench/WORKLOADS.md), on W3's pipeline until the
// image pipeline exists: list_files -> parallel interleave(tfrecord) ->
// decode + a CPU-heavy step of ~50 us per element -> shuffle(10,000) ->
// batch(256) -> prefetch. The same pipeline with every knob set to
// ingest::autotune, against the best of a grid of hand-set values (map
// parallelism 1-4, interleave parallelism 1/2/4, prefetch 1/2/4/8), all
// measured in this run; and the autotuned run's peak resident memory (the
// kernel's high-water mark, reset before the run) against its RAM budget.
// Then a rematch: the grid's fastest point and the autotuned pipeline run
// alternately, five times each, and their medians are compared (the best of
// 48 single runs alone is biased upward by run-to-run noise).
//
// W6/chained (issue 11): range -> map(light, ~4 us) -> map(heavy, ~40 us) ->
// batch(64) -> prefetch, every knob autotuned, against the best point of a grid
// (light map 1-2 x heavy map 1-4 x prefetch 1/2/4) and a rematch, on 20,000
// elements (2,000 with --smoke).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <ingest/ingest.hpp>

#include "support/bench.hpp"
#include "support/w3_data.hpp"

using namespace ingest::bench::w3;

namespace {

// About 50 us of integer work per element (the W2 function's loop, longer).
struct Heavy {
  std::int64_t rounds;
  std::pair<ingest::Tensor, std::int64_t> operator()(
      std::pair<ingest::Tensor, std::int64_t> e) const {
    auto h = static_cast<std::uint64_t>(e.second);
    for (std::int64_t k = 0; k < rounds; ++k) {
      h = h * 6364136223846793005ULL + 1442695040888963407ULL;
      h ^= h >> 33;
    }
    e.second += static_cast<std::int64_t>(h & 1);  // keep the work
    return e;
  }
};

Heavy& heavy() {
  static Heavy h{25'000};
  return h;
}

// One pass over the data with the given knobs; records per second.
double run(Knobs knobs) {
  const auto ds = pipeline(false, knobs, heavy()).with_options({});
  const auto start = std::chrono::steady_clock::now();
  std::int64_t records = 0;
  for (const auto& [images, labels] : ds) records += labels.dim(0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(records) / s;
}

// The kernel's peak resident set of this process, in bytes; reset_peak()
// starts a new measurement (Linux: writing 5 to clear_refs).
std::int64_t peak_rss() {
  std::ifstream status("/proc/self/status");
  std::string key;
  std::int64_t kb = 0;
  std::string unit;
  while (status >> key) {
    if (key == "VmHWM:") {
      status >> kb >> unit;
      return kb * 1024;
    }
    std::getline(status, unit);
  }
  return 0;
}
bool reset_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  return static_cast<bool>(clear);
}

std::string knobs_name(const Knobs& k) {
  return "map" + std::to_string(k.map_parallelism) + "_interleave" +
         std::to_string(k.interleave_parallelism) + "_prefetch" + std::to_string(k.prefetch);
}

// The fastest grid point so far of a workload with knobs K, for its rematch.
template <class K>
struct Best {
  double rate = 0;
  K knobs{};
};

// One pass with knobs `k` (`run(k)` returns items per second, `items` per
// pass); a grid point may become the best.
template <class K, class Run>
void measure(benchmark::State& state, Run run, K k, std::int64_t items, Best<K>* best) {
  double rate = 0;
  for (auto _ : state) rate = run(k);
  state.counters["items_per_pass_per_second"] = rate;
  state.SetItemsProcessed(state.iterations() * items);
  if (best && rate > best->rate) *best = {rate, k};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The best of many single runs is biased upward by the run-to-run noise (a
// few percent here): the grid's winner is re-run against the autotuned
// pipeline (knobs K{}), alternately, `rounds` times each; their medians.
template <class K, class Run>
std::pair<double, double> rematch_medians(benchmark::State& state, int rounds, Run run, K best) {
  std::vector<double> tuned, hand;
  for (auto _ : state) {
    for (int r = 0; r < rounds; ++r) {
      tuned.push_back(run(K{}));
      hand.push_back(run(best));
    }
  }
  return {median(tuned), median(hand)};
}

Best<Knobs>& best_grid() {
  static Best<Knobs> b;
  return b;
}

void one(benchmark::State& state, Knobs knobs, bool grid) {
  measure(state, run, knobs, data().num_records, grid ? &best_grid() : nullptr);
}

void rematch(benchmark::State& state, int rounds) {
  const Knobs best = best_grid().knobs;
  const auto [t, h] = rematch_medians(state, rounds, run, best);
  state.counters["autotuned_per_second"] = t;
  state.counters["best_grid_per_second"] = h;
  char line[240];
  std::snprintf(line, sizeof line,
                "W6 rematch (%d rounds, medians): autotuned %.0f records/s vs best grid point %s "
                "%.0f records/s: %.3f x",
                rounds, t, knobs_name(best).c_str(), h, t / h);
  ingest::bench::note(line);
}

// --- chained maps ---------------------------------------------------------------

// Integer work of a calibrated duration on an element.
struct Spin {
  std::int64_t rounds;
  std::int64_t operator()(std::int64_t x) const {
    auto h = static_cast<std::uint64_t>(x);
    for (std::int64_t k = 0; k < rounds; ++k) {
      h = h * 6364136223846793005ULL + 1442695040888963407ULL;
      h ^= h >> 33;
    }
    return x + static_cast<std::int64_t>(h & 1);
  }
};

struct Chained {
  Spin light{2'000}, heavy{20'000};
  std::int64_t elements = 20'000;
};
Chained& chained() {
  static Chained c;
  return c;
}

struct ChainKnobs {
  std::int64_t light = ingest::autotune, heavy = ingest::autotune, prefetch = ingest::autotune;
};

std::string chain_name(const ChainKnobs& k) {
  return "light" + std::to_string(k.light) + "_heavy" + std::to_string(k.heavy) + "_prefetch" +
         std::to_string(k.prefetch);
}

// One pass of the chained pipeline; elements per second.
double run_chained(ChainKnobs k) {
  const Chained& c = chained();
  const auto ds = ingest::range(c.elements)
                      .map(c.light, {.parallelism = k.light})
                      .map(c.heavy, {.parallelism = k.heavy})
                      .batch(64)
                      .prefetch(k.prefetch)
                      .with_options({});
  const auto start = std::chrono::steady_clock::now();
  std::int64_t batches = 0;
  for (const auto& b : ds) {
    benchmark::DoNotOptimize(b);
    ++batches;
  }
  benchmark::DoNotOptimize(batches);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(c.elements) / s;
}

Best<ChainKnobs>& best_chain() {
  static Best<ChainKnobs> b;
  return b;
}

void one_chained(benchmark::State& state, ChainKnobs k, bool grid) {
  measure(state, run_chained, k, chained().elements, grid ? &best_chain() : nullptr);
}

void rematch_chained(benchmark::State& state, int rounds) {
  const ChainKnobs best = best_chain().knobs;
  const auto [t, h] = rematch_medians(state, rounds, run_chained, best);
  char line[240];
  std::snprintf(line, sizeof line,
                "W6 chained rematch (%d rounds, %lld elements, medians): autotuned %.0f/s vs best "
                "grid point %s %.0f/s: %.3f x",
                rounds, static_cast<long long>(chained().elements), t, chain_name(best).c_str(), h,
                t / h);
  ingest::bench::note(line);
}

// Rounds of Spin that take `us` microseconds here.
std::int64_t calibrate(double us) {
  Spin probe{100'000};
  std::int64_t sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) sink += probe(i);
  benchmark::DoNotOptimize(sink);
  const double took =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      20;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(100'000 * us / took));
}

void register_chained(const ingest::bench::Config& config) {
  Chained& c = chained();
  c.light.rounds = calibrate(4);
  c.heavy.rounds = calibrate(40);
  c.elements = config.smoke ? 2'000 : 20'000;
  run_chained(ChainKnobs{1, 2, 2});  // warm-up, unmeasured
  benchmark::RegisterBenchmark("W6/chained/autotuned", one_chained, ChainKnobs{}, false)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  for (std::int64_t light : {1, 2}) {
    for (std::int64_t heavy : {1, 2, 3, 4}) {
      for (std::int64_t prefetch : {1, 2, 4}) {
        const ChainKnobs k{light, heavy, prefetch};
        benchmark::RegisterBenchmark(("W6/chained/grid/" + chain_name(k)).c_str(), one_chained, k,
                                     true)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->Iterations(1);
      }
    }
  }
  benchmark::RegisterBenchmark("W6/chained/rematch", rematch_chained, config.smoke ? 1 : 5)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  ingest::bench::compare_with_best("W6/chained/autotuned", "W6/chained/grid/");
}

}  // namespace

void ingest::bench::register_benchmarks(const Config& config) {
  const std::int64_t n = config.smoke ? 2'000 : 100'000;
  generate(n, false);
  // Calibrate the heavy step to ~50 us on this machine.
  {
    const auto start = std::chrono::steady_clock::now();
    Heavy probe{25'000};
    std::int64_t sink = 0;
    for (int i = 0; i < 40; ++i) sink += probe({ingest::Tensor(), i}).second;
    benchmark::DoNotOptimize(sink);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        40;
    heavy().rounds = static_cast<std::int64_t>(25'000 * 50.0 / us);
    char line[160];
    std::snprintf(line, sizeof line,
                  "W6: %lld records; heavy step calibrated to %lld rounds (~50 us)",
                  static_cast<long long>(n), static_cast<long long>(heavy().rounds));
    note(line);
  }

  // One unmeasured pass first: the first pass in a process also pays for the
  // page cache, the pool's first allocations and its threads' creation,
  // which would otherwise fall on whichever configuration runs first.
  run(Knobs{2, 2, 2});

  // The autotuned run first, alone, for its memory high-water mark.
  benchmark::RegisterBenchmark("W6/autotuned",
                               [](benchmark::State& state) {
                                 const bool reset = reset_peak();
                                 const std::int64_t before = peak_rss();
                                 one(state, Knobs{}, false);
                                 const std::int64_t peak = peak_rss();
                                 const std::int64_t budget = ingest::detail::default_ram_budget();
                                 char line[200];
                                 std::snprintf(line, sizeof line,
                                               "W6 autotuned: peak RSS %.1f MiB (%s; %.1f MiB "
                                               "before the run), RAM budget %.1f MiB: %s",
                                               static_cast<double>(peak) / (1 << 20),
                                               reset ? "high-water mark reset" : "process peak",
                                               static_cast<double>(before) / (1 << 20),
                                               static_cast<double>(budget) / (1 << 20),
                                               peak <= budget ? "within" : "OVER");
                                 note(line);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);

  for (std::int64_t map : {1, 2, 3, 4}) {
    for (std::int64_t interleave : {1, 2, 4}) {
      for (std::int64_t prefetch : {1, 2, 4, 8}) {
        const Knobs k{map, interleave, prefetch};
        benchmark::RegisterBenchmark(("W6/grid/" + knobs_name(k)).c_str(), one, k, true)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->Iterations(1);
      }
    }
  }
  // Each grid point against the autotuned run (> 1: the grid point was faster),
  // and the autotuned run against the best grid point (the W6 figure).
  // Registered last, so it runs after the grid has found its best point.
  benchmark::RegisterBenchmark("W6/rematch", rematch, config.smoke ? 1 : 5)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  set_reference("W6/grid/", "W6/autotuned", 1.0, "x autotuned");
  compare_with_best("W6/autotuned", "W6/grid/");

  register_chained(config);
}
