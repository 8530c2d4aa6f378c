// W7, device loading (../shared/bench/WORKLOADS.md): W3's batches (256
// images of 32x32x3 float32, 3 MiB, and 256 int64 labels) from pinned host
// memory to the GPU. Each measurement is held against its limit, measured
// in this run:
//   W7/memcpy         bare cudaMemcpyAsync of the same bytes from pinned memory (the limit)
//   W7/loader         the same batches through cuda::DeviceLoader: GB/s vs the limit
//   W7/step           a fixed-work step kernel (~1 ms) per batch, nothing loaded
//   W7/loader_step    the loader feeding that step: throughput vs step alone, and
//                     the overlap (OverlapTimer) as counters: step_overlap, the
//                     share of step time during which a copy ran, and
//                     copy_hidden, the share of copy time hidden behind steps
//   W7/loader_step_untimed  the same without timing events or OverlapTimer
//   W7/manual_step    what a CUDA programmer writes by hand: two device buffers,
//                     a copy stream and the step's stream ordered by events,
//                     no host blocking; the loader_step cases are also given
//                     as ratios of it (the best overlap this GPU allows)
// The batches are made once, in pinned memory, and cycled, so the host
// pipeline costs nothing here. Without a CUDA device it prints
// "no CUDA device: ..." and exits 0.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <ingest/cuda/device_loader.hpp>
#include <ingest/cuda/overlap.hpp>
#include <ingest/ingest.hpp>

#include "support/bench.hpp"

namespace {

using Batch = std::tuple<ingest::Tensor, ingest::Tensor>;
constexpr std::int64_t batch_size = 256;
constexpr std::int64_t image_floats = 32 * 32 * 3;
constexpr std::uint64_t step_ns = 1'000'000;

// A few W3-sized batches in pinned memory, cycled by every benchmark.
const std::vector<Batch>& pinned_batches() {
  static const std::vector<Batch> batches = [] {
    std::vector<Batch> out;
    for (int k = 0; k < 4; ++k) {
      ingest::Tensor images(ingest::DType::float32, {batch_size, 32, 32, 3},
                            ingest::cuda::pinned_pool());
      ingest::Tensor labels(ingest::DType::int64, {batch_size}, ingest::cuda::pinned_pool());
      for (std::int64_t i = 0; i < batch_size * image_floats; ++i) {
        images.data<float>()[i] = static_cast<float>((i * 31 + k) % 255) / 127.5f - 1.0f;
      }
      for (std::int64_t i = 0; i < batch_size; ++i) labels.data<std::int64_t>()[i] = (i + k) % 10;
      out.emplace_back(std::move(images), std::move(labels));
    }
    return out;
  }();
  return batches;
}

std::int64_t batch_bytes() {
  const Batch& b = pinned_batches()[0];
  return static_cast<std::int64_t>(std::get<0>(b).nbytes() + std::get<1>(b).nbytes());
}

// The batches, endlessly.
auto batch_source() { return ingest::from_vector(pinned_batches()).repeat(); }

// The training step: a fixed amount of work, `cycles` SM clock cycles of one
// thread (about 1 ms at the GPU's peak clock; see step_cycles()): like a
// real step, fixed work rather than a fixed wait.
__global__ void step_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

long long step_cycles() {
  static const long long cycles = [] {
    int khz = 0;
    ingest::cuda::check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0),
                        "cudaDeviceGetAttribute");
    return static_cast<long long>(khz) * static_cast<long long>(step_ns / 1'000'000);
  }();
  return cycles;
}

class Stream {
 public:
  Stream() {
    ingest::cuda::check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~Stream() { (void)cudaStreamDestroy(s_); }
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// Google Benchmark stops its clock when the loop ends, so work still queued
// on the GPU would go unmeasured: with up to ~1,000 launches queued, 10,000
// steps of 1 ms measured 0.90 ms each. The last iteration waits for it.
void drain_at_end(const benchmark::State& state, std::int64_t& done, cudaStream_t stream) {
  if (++done == static_cast<std::int64_t>(state.max_iterations)) {
    ingest::cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
}

void finish(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * batch_bytes());
}

void BM_W7_memcpy(benchmark::State& state) {
  Stream stream;
  ingest::Tensor device[2] = {
      ingest::Tensor(ingest::DType::uint8, {batch_bytes()}, ingest::cuda::device_pool()),
      ingest::Tensor(ingest::DType::uint8, {batch_bytes()}, ingest::cuda::device_pool())};
  std::size_t k = 0;
  std::int64_t done = 0;
  for (auto _ : state) {
    const auto& [images, labels] = pinned_batches()[k % pinned_batches().size()];
    auto* dst = static_cast<std::byte*>(device[k % 2].raw_data());
    ingest::cuda::check(
        cudaMemcpyAsync(dst, images.raw_data(), images.nbytes(), cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync");
    ingest::cuda::check(cudaMemcpyAsync(dst + images.nbytes(), labels.raw_data(), labels.nbytes(),
                                        cudaMemcpyHostToDevice, stream),
                        "cudaMemcpyAsync");
    ++k;
    drain_at_end(state, done, stream);
  }
  finish(state);
}

void BM_W7_loader(benchmark::State& state) {
  Stream stream;
  auto it = ingest::cuda::DeviceLoader(batch_source(), {.depth = state.range(0)}).iterator();
  std::int64_t done = 0;
  for (auto _ : state) {
    auto batch = it.next();
    batch->wait(stream);
    benchmark::DoNotOptimize(batch->data(0));
    drain_at_end(state, done, stream);
  }
  finish(state);
}

void BM_W7_step(benchmark::State& state) {
  Stream stream;
  std::int64_t done = 0;
  for (auto _ : state) {
    step_kernel<<<1, 1, 0, stream>>>(step_cycles());
    drain_at_end(state, done, stream);
  }
  finish(state);
}

// The loader feeding the step; with `Timed`, copy and step times are
// recorded (events) for the overlap counters.
template <bool Timed>
void BM_W7_loader_step(benchmark::State& state) {
  Stream stream;
  std::optional<ingest::cuda::OverlapTimer> timer;
  if constexpr (Timed) timer.emplace(stream);
  {
    auto it = ingest::cuda::DeviceLoader(batch_source(), {.depth = state.range(0), .timing = Timed})
                  .iterator();
    std::int64_t done = 0;
    for (auto _ : state) {
      auto batch = it.next();
      batch->wait(stream);
      if constexpr (Timed) timer->begin_step(*batch);
      step_kernel<<<1, 1, 0, stream>>>(step_cycles());
      if constexpr (Timed) timer->end_step();
      drain_at_end(state, done, stream);
    }
  }
  if constexpr (Timed) {
    const ingest::cuda::OverlapReport r = timer->report();
    state.counters["step_overlap"] = r.compute_overlap();
    state.counters["copy_hidden"] = r.copy_hidden();
  }
  finish(state);
}

// Double buffering by hand: batch k is copied into buffer k % 2 on the copy
// stream once step k - 2 (its buffer's last reader) has run; step k waits
// for that copy. The host never waits.
void BM_W7_manual_step(benchmark::State& state) {
  Stream copy_stream, stream;
  ingest::Tensor device[2] = {
      ingest::Tensor(ingest::DType::uint8, {batch_bytes()}, ingest::cuda::device_pool()),
      ingest::Tensor(ingest::DType::uint8, {batch_bytes()}, ingest::cuda::device_pool())};
  cudaEvent_t copied[2], stepped[2];
  for (int i = 0; i < 2; ++i) {
    ingest::cuda::check(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming),
                        "cudaEventCreate");
    ingest::cuda::check(cudaEventCreateWithFlags(&stepped[i], cudaEventDisableTiming),
                        "cudaEventCreate");
  }
  std::size_t k = 0;
  std::int64_t done = 0;
  for (auto _ : state) {
    const std::size_t b = k % 2;
    const auto& [images, labels] = pinned_batches()[k % pinned_batches().size()];
    auto* dst = static_cast<std::byte*>(device[b].raw_data());
    if (k >= 2) {
      ingest::cuda::check(cudaStreamWaitEvent(copy_stream, stepped[b], 0), "cudaStreamWaitEvent");
    }
    ingest::cuda::check(cudaMemcpyAsync(dst, images.raw_data(), images.nbytes(),
                                        cudaMemcpyHostToDevice, copy_stream),
                        "cudaMemcpyAsync");
    ingest::cuda::check(cudaMemcpyAsync(dst + images.nbytes(), labels.raw_data(), labels.nbytes(),
                                        cudaMemcpyHostToDevice, copy_stream),
                        "cudaMemcpyAsync");
    ingest::cuda::check(cudaEventRecord(copied[b], copy_stream), "cudaEventRecord");
    ingest::cuda::check(cudaStreamWaitEvent(stream, copied[b], 0), "cudaStreamWaitEvent");
    step_kernel<<<1, 1, 0, stream>>>(step_cycles());
    ingest::cuda::check(cudaEventRecord(stepped[b], stream), "cudaEventRecord");
    ++k;
    drain_at_end(state, done, stream);
  }
  for (int i = 0; i < 2; ++i) {
    (void)cudaEventDestroy(copied[i]);
    (void)cudaEventDestroy(stepped[i]);
  }
  finish(state);
}

}  // namespace

namespace ingest::bench {

void register_benchmarks(const Config& config) {
  try {
    cuda::require_device(0);
  } catch (const Unavailable& e) {
    std::printf("%s\nW7 needs a CUDA GPU: nothing measured.\n", e.message().c_str());
    std::exit(0);  // before Google Benchmark complains that no benchmark is registered
  }
  cudaDeviceProp device{};
  cuda::check(cudaGetDeviceProperties(&device, 0), "cudaGetDeviceProperties");
  note(std::string("W7 on ") + device.name + ", batches of " + std::to_string(batch_bytes()) +
       " bytes, steps of " + std::to_string(step_cycles()) + " SM cycles");
  const int repetitions = config.smoke ? 1 : 3;
  benchmark::RegisterBenchmark("W7/memcpy", BM_W7_memcpy)->UseRealTime()->Repetitions(repetitions);
  for (std::int64_t depth : {1, 2, 4}) {
    benchmark::RegisterBenchmark("W7/loader", BM_W7_loader)
        ->Arg(depth)
        ->UseRealTime()
        ->Repetitions(repetitions);
  }
  benchmark::RegisterBenchmark("W7/step", BM_W7_step)->UseRealTime()->Repetitions(repetitions);
  benchmark::RegisterBenchmark("W7/manual_step", BM_W7_manual_step)
      ->UseRealTime()
      ->Repetitions(repetitions);
  for (std::int64_t depth : {1, 2, 4}) {
    benchmark::RegisterBenchmark("W7/loader_step", BM_W7_loader_step<true>)
        ->Arg(depth)
        ->UseRealTime()
        ->Repetitions(repetitions);
  }
  benchmark::RegisterBenchmark("W7/loader_step_untimed", BM_W7_loader_step<false>)
      ->Arg(2)
      ->UseRealTime()
      ->Repetitions(repetitions);
  set_reference("W7/loader/", "W7/memcpy");
  set_reference("W7/loader_step", "W7/step");
  set_reference("W7/manual_step", "W7/step");
  set_reference("W7/loader_step", "W7/manual_step", 1.0, "x manual");
}

}  // namespace ingest::bench
