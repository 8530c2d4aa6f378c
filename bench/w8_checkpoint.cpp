// W8, checkpoint cost (../shared/bench/WORKLOADS.md): W3's pipeline, with
// and without its shuffle(10,000) buffer, on W3's generated shards.
//   W8/save/*           save() on a running pipeline (between two batches),
//                       each iteration one save (the state's size in the
//                       state_bytes counter)
//   W8/restore/*        Dataset::iterator(state) of a state saved a quarter
//                       and three quarters into the epoch, until its first
//                       batch; the state is the second save of the run (as a
//                       job saving every N steps: the first save, after one
//                       batch, makes the stages keep what later saves need),
//                       or with first_save the run's first (the inputs the
//                       restore pulled again: the replayed_inputs counter);
//                       /checkpointing: with_options({.checkpointing =
//                       true}), which keeps that from the start
//   W8/first_save/*     the run's first save() (after one batch, then a
//                       quarter or three quarters of the epoch): over the
//                       shuffle buffer its state is compacted (a replica
//                       restores it and saves again: the `compacted` counter)
//   W8/read_1_percent   the reference: a fresh W3 pipeline (no shuffle)
//                       reading 1% of the records, start included
// Items are saves, restores and 1%-reads, so each ratio says how many times
// faster a save or a restore is than reading 1% of the data (the issue's
// bound for a restore: under 1x means slower). The notes give the states'
// sizes against tf.data's for the same pipeline: it stores the shuffle
// buffer's elements, as ingest does for shuffle (10,000 float32[32,32,3]
// images = 120 MiB + labels); without a shuffle ingest stores positions only.
//   W8/*/indexed_global_shuffle  W3 read by position (indexed_tfrecord with
//                       global_shuffle instead of the shuffle buffer): its
//                       state is positions only, whatever the order
//   W8cost/*            what being saved costs the running pipeline: W3 with
//                       shuffle(10,000), one epoch per iteration, items
//                       records; checkpointing keeps what saves need from
//                       the start; the reference (never_saved) is the same
//                       pipeline without
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <ingest/ingest.hpp>

#include "support/bench.hpp"
#include "support/w3_data.hpp"

namespace {

using namespace ingest::bench::w3;
using Clock = std::chrono::steady_clock;

// W3's pipeline without its shuffle buffer.
auto without_shuffle() {
  const std::string pattern = (data().dir / "train-*-of-00016").string();
  return ingest::list_files(pattern)
      .interleave([](std::string path) { return ingest::tfrecord(path); },
                  {.cycle_length = 4, .parallelism = ingest::autotune})
      .map(Decode{}, {.parallelism = ingest::autotune})
      .batch(batch_size)
      .prefetch(ingest::autotune);
}

auto with_shuffle() { return pipeline(false, Knobs{}); }

// The same, told it will be saved: its stages keep what saves need from the start.
auto with_shuffle_checkpointing() { return with_shuffle().with_options({.checkpointing = true}); }

// W3 by position: the shards' index (built once, outside the timings), a
// global shuffle of all records, then W3's decode, batch and prefetch.
auto indexed() {
  static const ingest::TFRecordIndex index = ingest::build_tfrecord_index(data().plain);
  return ingest::indexed_tfrecord(index)
      .global_shuffle({.seed = 7})
      .map(Decode{}, {.parallelism = ingest::autotune})
      .batch(batch_size)
      .prefetch(ingest::autotune);
}

std::int64_t batches_in_data() {
  return std::max<std::int64_t>(data().num_records / batch_size, 1);
}

template <class Make>
void save(benchmark::State& state, Make make) {
  const auto ds = make();
  std::optional<decltype(ds.iterator())> it;
  std::int64_t bytes = 0, at = 0;
  const std::int64_t half = batches_in_data() / 2;
  for (auto _ : state) {
    if (!it || at == half) {  // saves at the first half's batches, pipeline running
      it.emplace(ds.iterator());
      it->next();
      at = 1;
    }
    const auto start = Clock::now();
    const ingest::IteratorState saved = it->save();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
    bytes = static_cast<std::int64_t>(saved.bytes().size());
    it->next();
    ++at;
  }
  state.counters["state_bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations());
}

template <class Make>
void restore(benchmark::State& state, Make make, int quarters, bool first_save) {
  // A state saved `quarters` quarters into the epoch: the run's first save,
  // or (as a job that saves periodically) one after an earlier save.
  const auto ds = make();
  auto it = ds.iterator();
  it.next();
  if (!first_save) benchmark::DoNotOptimize(it.save());
  for (std::int64_t i = 1; i < batches_in_data() * quarters / 4 + 1; ++i) it.next();
  const ingest::IteratorState saved = it.save();
  std::int64_t replayed = 0;
  for (auto _ : state) {
    const auto fresh = make();
    const auto start = Clock::now();
    auto resumed = fresh.iterator(saved);
    benchmark::DoNotOptimize(resumed.next());
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
    replayed = resumed.stats().restore_replayed_inputs;
  }
  state.counters["state_bytes"] = static_cast<double>(saved.bytes().size());
  // The inputs the restore pulled again to reach the position (stats()).
  state.counters["replayed_inputs"] = static_cast<double>(replayed);
  state.SetItemsProcessed(state.iterations());
}

template <class Make>
void first_save(benchmark::State& state, Make make, int quarters) {
  const auto ds = make();
  std::int64_t bytes = 0, compacted = 0;
  for (auto _ : state) {
    auto it = ds.iterator();
    for (std::int64_t i = 0; i < batches_in_data() * quarters / 4 + 1; ++i) it.next();
    const auto start = Clock::now();
    const ingest::IteratorState saved = it.save();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
    bytes = static_cast<std::int64_t>(saved.bytes().size());
    compacted += it.stats().compacted_checkpoints;
  }
  state.counters["state_bytes"] = static_cast<double>(bytes);
  state.counters["compacted"] = static_cast<double>(compacted);
  state.SetItemsProcessed(state.iterations());
}

template <class Make>
void epoch(benchmark::State& state, Make make) {
  const auto ds = make();
  for (auto _ : state) {
    auto it = ds.iterator();
    while (auto x = it.next()) benchmark::DoNotOptimize(*x);
  }
  state.SetItemsProcessed(state.iterations() * data().num_records);
}

void read_1_percent(benchmark::State& state) {
  // 1% of the records, in whole batches (at smoke size, one batch: more).
  const std::int64_t batches = std::max<std::int64_t>(data().num_records / 100 / batch_size, 1);
  for (auto _ : state) {
    const auto ds = without_shuffle();
    const auto start = Clock::now();
    auto it = ds.take(batches).iterator();
    while (auto x = it.next()) benchmark::DoNotOptimize(*x);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

void ingest::bench::register_benchmarks(const Config& config) {
  const std::int64_t n = config.smoke ? 2'000 : 100'000;
  generate(n, false);
  note("W8 data: W3's " + std::to_string(n) + " records in " + std::to_string(num_shards) +
       " shards");
  // Fixed iteration counts: each save iteration also reads a batch, which
  // its manual time leaves out, so a minimum time would read for minutes.
  const int saves = config.smoke ? 20 : 300, restores = config.smoke ? 3 : 20;
  auto timed = [](benchmark::internal::Benchmark* b) {
    b->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  timed(benchmark::RegisterBenchmark("W8/read_1_percent", read_1_percent)->Iterations(restores));
  timed(benchmark::RegisterBenchmark("W8/save/no_shuffle", save<decltype(&without_shuffle)>,
                                     &without_shuffle)
            ->Iterations(saves));
  timed(benchmark::RegisterBenchmark("W8/save/shuffle_10000", save<decltype(&with_shuffle)>,
                                     &with_shuffle)
            ->Iterations(restores));
  timed(benchmark::RegisterBenchmark("W8/save/indexed_global_shuffle", save<decltype(&indexed)>,
                                     &indexed)
            ->Iterations(saves));
  // Restores a quarter and three quarters into the epoch: a restore's time
  // should not grow with the position (it does where the anchors are rare).
  for (const int quarters : {1, 3}) {
    const std::string at = "/at_" + std::to_string(quarters * 25) + "_percent";
    timed(benchmark::RegisterBenchmark(("W8/restore/no_shuffle" + at).c_str(),
                                       restore<decltype(&without_shuffle)>, &without_shuffle,
                                       quarters, false)
              ->Iterations(restores));
    timed(benchmark::RegisterBenchmark(("W8/restore/shuffle_10000" + at).c_str(),
                                       restore<decltype(&with_shuffle)>, &with_shuffle, quarters,
                                       false)
              ->Iterations(restores));
    timed(benchmark::RegisterBenchmark(("W8/restore/shuffle_10000/first_save" + at).c_str(),
                                       restore<decltype(&with_shuffle)>, &with_shuffle, quarters,
                                       true)
              ->Iterations(restores));
    timed(benchmark::RegisterBenchmark(
              ("W8/restore/shuffle_10000/first_save/checkpointing" + at).c_str(),
              restore<decltype(&with_shuffle_checkpointing)>, &with_shuffle_checkpointing, quarters,
              true)
              ->Iterations(restores));
    timed(benchmark::RegisterBenchmark(("W8/restore/indexed_global_shuffle" + at).c_str(),
                                       restore<decltype(&indexed)>, &indexed, quarters, false)
              ->Iterations(restores));
    timed(benchmark::RegisterBenchmark(("W8/first_save/shuffle_10000" + at).c_str(),
                                       first_save<decltype(&with_shuffle)>, &with_shuffle, quarters)
              ->Iterations(config.smoke ? 2 : 5));
  }
  set_reference("W8/", "W8/read_1_percent");
  const int epochs = config.smoke ? 2 : 8;
  benchmark::RegisterBenchmark("W8cost/never_saved", epoch<decltype(&with_shuffle)>, &with_shuffle)
      ->Iterations(epochs)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("W8cost/checkpointing", epoch<decltype(&with_shuffle_checkpointing)>,
                               &with_shuffle_checkpointing)
      ->Iterations(epochs)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  set_reference("W8cost/", "W8cost/never_saved");
  // What tf.data stores for the shuffled pipeline: the buffer's elements.
  const std::int64_t buffered = std::min<std::int64_t>(10'000, n);
  note("tf.data's state for W3 with shuffle(10,000) holds its buffer: " + std::to_string(buffered) +
       " x (float32[32,32,3] + int64) = " + std::to_string(buffered * (image_bytes * 4 + 8) >> 20) +
       " MiB; compare the state_bytes counters");
}
