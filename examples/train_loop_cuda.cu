// A training loop fed by the device loader. A host pipeline builds batches
// of 32x32x3 float images and int64 labels straight in pinned memory;
// cuda::DeviceLoader copies each to the GPU on its own stream; a toy step
// (SGD on a linear classifier) runs on the training stream, which waits
// for each copy on the GPU, never on the host. Prints the loss per epoch
// and how much of the copying the steps hid (OverlapTimer). Without a GPU
// it says so and exits 0.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <tuple>

#include <ingest/cuda/device_loader.hpp>
#include <ingest/cuda/overlap.hpp>
#include <ingest/ingest.hpp>

namespace {

constexpr int pixels = 32 * 32 * 3;
constexpr int classes = 10;
constexpr std::int64_t batch_size = 256;
constexpr std::int64_t examples = 64 * batch_size;
constexpr int epochs = 3;
constexpr float learning_rate = 0.02f;

// A learnable image: a pattern of its class plus deterministic noise.
std::tuple<ingest::Tensor, std::int64_t> make_example(std::int64_t i) {
  const std::int64_t label = (i * 7) % classes;
  ingest::Tensor image(ingest::DType::float32, ingest::Shape{pixels});
  float* x = image.data<float>();
  std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  for (int j = 0; j < pixels; ++j) {
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    const float noise = static_cast<float>(h >> 40) / static_cast<float>(1 << 24) - 0.5f;
    x[j] = 0.5f * std::sin(0.01f * static_cast<float>(j * (label + 1))) + 0.2f * noise;
  }
  return {std::move(image), label};
}

// Logits of each example (one block per example, one warp per class) and
// its cross-entropy loss, added to *loss.
__global__ void forward(const float* images, const std::int64_t* labels, const float* weights,
                        float* logits, float* loss) {
  __shared__ float z[classes];
  const int s = blockIdx.x, c = threadIdx.x / 32, lane = threadIdx.x % 32;
  float dot = 0;
  for (int j = lane; j < pixels; j += 32) dot += weights[c * pixels + j] * images[s * pixels + j];
  for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_down_sync(0xffffffffu, dot, offset);
  if (lane == 0) z[c] = logits[s * classes + c] = dot;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = z[0], sum = 0;
    for (int k = 1; k < classes; ++k) m = fmaxf(m, z[k]);
    for (int k = 0; k < classes; ++k) sum += expf(z[k] - m);
    atomicAdd(loss, m + logf(sum) - z[labels[s]]);
  }
}

// One SGD step: weight (c, j) moves against the gradient of the mean loss.
__global__ void backward(const float* images, const std::int64_t* labels, const float* logits,
                         int rows, float* weights) {
  const int c = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= pixels) return;
  float grad = 0;
  for (int s = 0; s < rows; ++s) {
    const float* z = logits + s * classes;
    float m = z[0], sum = 0;
    for (int k = 1; k < classes; ++k) m = fmaxf(m, z[k]);
    for (int k = 0; k < classes; ++k) sum += expf(z[k] - m);
    const float p = expf(z[c] - m) / sum - (labels[s] == c ? 1.0f : 0.0f);
    grad += p * images[s * pixels + j];
  }
  weights[c * pixels + j] -= learning_rate * grad / static_cast<float>(rows);
}

void check_launch() { ingest::cuda::check(cudaGetLastError(), "kernel launch"); }

int run() {
  using namespace ingest;
  auto pipeline = range(examples)
                      .map(make_example, {.parallelism = autotune})
                      .batch(batch_size)
                      .prefetch(2)
                      .repeat(epochs);
  // iterator() throws Unavailable where there is no GPU.
  auto batches = cuda::DeviceLoader(pipeline, {.depth = 2, .timing = true}).iterator();

  cudaStream_t stream = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  float *weights = nullptr, *logits = nullptr, *loss = nullptr;
  cuda::check(cudaMalloc(&weights, sizeof(float) * classes * pixels), "cudaMalloc");
  cuda::check(cudaMalloc(&logits, sizeof(float) * classes * batch_size), "cudaMalloc");
  cuda::check(cudaMalloc(&loss, sizeof(float) * epochs), "cudaMalloc");
  cuda::check(cudaMemsetAsync(weights, 0, sizeof(float) * classes * pixels, stream), "cudaMemset");
  cuda::check(cudaMemsetAsync(loss, 0, sizeof(float) * epochs, stream), "cudaMemset");

  cuda::OverlapTimer timer(stream);
  std::int64_t steps = 0;
  while (auto batch = batches.next()) {
    batch->wait(stream);  // the training stream waits for the copy; the host does not
    timer.begin_step(*batch);
    const auto* images = batch->data<float>(0);
    const auto* labels = batch->data<std::int64_t>(1);
    const int rows = static_cast<int>(batch->shape(0)[0]);
    const int epoch = static_cast<int>(steps / (examples / batch_size));
    forward<<<rows, 32 * classes, 0, stream>>>(images, labels, weights, logits, loss + epoch);
    check_launch();
    backward<<<dim3((pixels + 255) / 256, classes), 256, 0, stream>>>(images, labels, logits, rows,
                                                                      weights);
    check_launch();
    timer.end_step();
    ++steps;
  }  // each batch goes back to the loader's pool once the stream is past its step

  const cuda::OverlapReport r = timer.report();
  float losses[epochs];
  cuda::check(cudaMemcpy(losses, loss, sizeof losses, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaDeviceProp device{};
  cuda::check(cudaGetDeviceProperties(&device, 0), "cudaGetDeviceProperties");
  std::printf("trained %lld steps of %lld examples on %s\n", static_cast<long long>(steps),
              static_cast<long long>(batch_size), device.name);
  for (int e = 0; e < epochs; ++e) {
    std::printf("epoch %d: mean loss %.4f\n", e + 1, losses[e] / static_cast<float>(examples));
  }
  std::printf(
      "copy/compute overlap: copies %.2f ms, steps %.2f ms, both at once %.2f ms: %.0f%% of the "
      "copy time hidden behind steps, %.0f%% of the step time overlapped\n",
      r.copy_ms, r.compute_ms, r.overlap_ms, 100 * r.copy_hidden(), 100 * r.compute_overlap());
  for (void* p :
       {static_cast<void*>(weights), static_cast<void*>(logits), static_cast<void*>(loss)}) {
    cuda::check(cudaFree(p), "cudaFree");
  }
  cuda::check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return losses[epochs - 1] < losses[0] ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const ingest::Unavailable& e) {
    std::printf("%s\nThis example needs a CUDA GPU; nothing to train on here.\n",
                e.message().c_str());
    return 0;
  }
}
