// The pipeline, compiled in its own translation unit and returned erased:
// callers depend on the element type only, not on the stages.
#include <cstdint>

#include "sample.hpp"

namespace shop {

ingest::AnyDataset<Example> examples(std::int64_t count) {
  return ingest::range(count).map(
      [](std::int64_t i) {
        ingest::Tensor features(ingest::DType::float32, ingest::Shape{8});
        float* f = features.data<float>();
        for (int k = 0; k < 8; ++k) f[k] = static_cast<float>((i + k) % 10);
        return Example{std::move(features), i % 3, i % 2 == 0 ? 1.0f : 0.5f};
      },
      {.parallelism = 2, .name = "make_example"});
}

}  // namespace shop
