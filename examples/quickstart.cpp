// Quickstart: a small pipeline of the kind a training loop consumes.
// Build with the project (examples are built by default) and run:
//   ./build/examples/quickstart
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>

#include <ingest/ingest.hpp>

int main() {
  // 1. Describe the pipeline: nothing runs yet. Each element is a
  //    (features, label) pair; features are a small float tensor.
  constexpr std::int64_t num_examples = 1'000'000;
  auto examples =
      ingest::range(num_examples)
          .map([](std::int64_t i) {
            ingest::Tensor features(ingest::DType::float32, ingest::Shape{4});
            float* f = features.data<float>();
            for (int k = 0; k < 4; ++k) f[k] = static_cast<float>((i * (k + 1)) % 17) / 17.0f;
            return std::pair{std::move(features), i % 10};  // label in 0..9
          })
          .filter([](const auto& example) { return example.second != 9; })  // drop a class
          .batch(256, {.drop_remainder = true});

  // 2. Iterate it like a training loop would, for two epochs.
  for (int epoch = 1; epoch <= 2; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    std::int64_t batches = 0, labels_sum = 0;
    double feature_sum = 0;
    for (const auto& [features, labels] :
         examples) {  // features: float32[256, 4], labels: int64[256]
      ++batches;
      for (float f : features.values<float>()) feature_sum += f;
      for (std::int64_t l : labels.values<std::int64_t>()) labels_sum += l;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "epoch %d: %lld batches of 256 (features float32[256, 4], labels int64[256]), "
        "label sum %lld, feature sum %.1f\n",
        epoch, static_cast<long long>(batches), static_cast<long long>(labels_sum), feature_sum);
    std::printf("         %.3f s, %.1f M examples/s\n", seconds,
                static_cast<double>(batches * 256) / seconds / 1e6);
  }

  // 3. Errors carry their position: a failing element fails its batch, and
  //    ignore_errors() drops and counts failures instead.
  auto flaky = ingest::range(10).map([](std::int64_t x) -> std::int64_t {
    if (x == 3) throw std::runtime_error("cannot decode element");
    return x;
  });
  try {
    for (auto x : flaky) (void)x;
  } catch (const ingest::Error& e) {
    std::printf("error surfaced: %s\n", e.what());
  }
  auto tolerant = flaky.ignore_errors();
  std::int64_t kept = 0;
  for (auto x : tolerant) kept += (x >= 0);
  std::printf("ignore_errors kept %lld elements and dropped %lld\n", static_cast<long long>(kept),
              static_cast<long long>(tolerant.ignored_errors()));
  return 0;
}
