#include <stdexcept>
#include <string>

#include "gpu_step.hpp"

namespace demo::gpu {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Reads the batch (each thread sums a strided share; one atomic per warp),
// then holds the GPU until `cycles` have passed since the kernel started.
__global__ void train_step(const float* images, long long count, long long cycles, float* sink) {
  const long long start = clock64();
  float sum = 0;
  for (long long i = threadIdx.x; i < count; i += blockDim.x) sum += images[i];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(sink, sum);
  if (threadIdx.x == 0) {
    while (clock64() - start < cycles) {
    }
  }
}

}  // namespace

std::string device_name() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return {};
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {};
  return prop.name;
}

Trainer::Trainer(std::chrono::microseconds step, std::int64_t max_steps) {
  int khz = 0;
  check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "cudaDeviceGetAttribute");
  cycles_ = static_cast<long long>(khz) * step.count() / 1000;
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&origin_), "cudaEventCreate");
  begin_.resize(static_cast<std::size_t>(max_steps));
  end_.resize(static_cast<std::size_t>(max_steps));
  for (std::size_t i = 0; i < begin_.size(); ++i) {
    check(cudaEventCreate(&begin_[i]), "cudaEventCreate");
    check(cudaEventCreate(&end_[i]), "cudaEventCreate");
  }
  check(cudaMalloc(&sink_, sizeof(float)), "cudaMalloc");
}

Trainer::~Trainer() {
  (void)cudaStreamSynchronize(stream_);
  for (cudaEvent_t e : begin_) (void)cudaEventDestroy(e);
  for (cudaEvent_t e : end_) (void)cudaEventDestroy(e);
  (void)cudaEventDestroy(origin_);
  (void)cudaFree(sink_);
  (void)cudaStreamDestroy(stream_);
}

void Trainer::start(std::int64_t host_ns) {
  check(cudaEventRecord(origin_, stream_), "cudaEventRecord");
  check(cudaEventSynchronize(origin_), "cudaEventSynchronize");
  host_origin_ns_ = host_ns;
}

void Trainer::step(const float* images, std::int64_t count) {
  if (steps_ == begin_.size()) throw std::logic_error("demo: more GPU steps than planned");
  check(cudaEventRecord(begin_[steps_], stream_), "cudaEventRecord");
  train_step<<<1, 256, 0, stream_>>>(images, count, cycles_, sink_);
  check(cudaGetLastError(), "train_step launch");
  check(cudaEventRecord(end_[steps_], stream_), "cudaEventRecord");
  ++steps_;
}

std::vector<std::pair<std::int64_t, std::int64_t>> Trainer::finish() {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;
  for (std::size_t i = 0; i < steps_; ++i) {
    float from = 0, to = 0;
    check(cudaEventElapsedTime(&from, origin_, begin_[i]), "cudaEventElapsedTime");
    check(cudaEventElapsedTime(&to, origin_, end_[i]), "cudaEventElapsedTime");
    spans.emplace_back(host_origin_ns_ + static_cast<std::int64_t>(1e6 * from),
                       static_cast<std::int64_t>(1e6 * (to - from)));
  }
  return spans;
}

}  // namespace demo::gpu
