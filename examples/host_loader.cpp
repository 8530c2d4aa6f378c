// CPU-only training with HostLoader: the same loader as cuda::DeviceLoader,
// copying each batch into a pooled buffer on a background thread while the
// "training step" (here: a least-squares fit by gradient descent) runs on
// the main thread. HostBatch::wait() before reading a batch; dropping it
// returns the buffer to the loader.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <tuple>

#include <ingest/ingest.hpp>
#include <ingest/loader.hpp>

int main() {
  // y = 3 x - 2, x in [0, 1).
  auto data = ingest::range(4096)
                  .map([](std::int64_t i) {
                    const float x = static_cast<float>(i % 1000) / 1000.0f;
                    return std::make_tuple(x, 3.0f * x - 2.0f);
                  })
                  .shuffle(1024, {.seed = 7})
                  .batch(64)
                  .prefetch(2)
                  .repeat(30);
  float w = 0, b = 0;
  std::int64_t steps = 0;
  for (const ingest::HostBatch& batch : ingest::HostLoader(data, {.depth = 2})) {
    batch.wait();
    const auto xs = batch.field(0).values<float>();
    const auto ys = batch.field(1).values<float>();
    float gw = 0, gb = 0;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      const float err = w * xs[k] + b - ys[k];
      gw += err * xs[k];
      gb += err;
    }
    w -= 0.5f * gw / static_cast<float>(xs.size());
    b -= 0.5f * gb / static_cast<float>(xs.size());
    ++steps;
  }
  std::printf("%lld steps: w = %.2f, b = %.2f\n", static_cast<long long>(steps), w, b);
  return std::abs(w - 3) < 0.05f && std::abs(b + 2) < 0.05f ? 0 : 1;
}
