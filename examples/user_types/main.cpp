// A user struct from end to end: examples built in another translation unit
// (an AnyDataset<shop::Example>), batched into a struct of tensors by the
// user's batch_traits, handed to HostLoader field by field by the user's
// loader_fields, and measured in stats() by the user's element_size.
#include <cstdint>
#include <cstdio>

#include <ingest/ingest.hpp>
#include <ingest/loader.hpp>

#include "sample.hpp"

int main() {
  ingest::AnyDataset<shop::Example> data;  // empty until assigned
  data = shop::examples(1000);

  auto loader = ingest::HostLoader(data.shuffle(256, {.seed = 3}).batch(32), {.depth = 2});
  auto it = loader.iterator();
  std::int64_t batches = 0, rows = 0, label_sum = 0;
  double weighted = 0;
  while (auto batch = it.next()) {
    batch->wait();
    const auto features = batch->field(0);  // float32 [n, 8]
    const auto labels = batch->field(1).values<std::int64_t>();
    const auto weights = batch->field(2).values<float>();
    for (std::size_t r = 0; r < labels.size(); ++r) {
      label_sum += labels[r];
      weighted += weights[r] * features.data<float>()[r * 8];
    }
    rows += static_cast<std::int64_t>(labels.size());
    ++batches;
  }
  std::printf("%lld examples in %lld batches, label sum %lld, weighted feature sum %.1f\n",
              static_cast<long long>(rows), static_cast<long long>(batches),
              static_cast<long long>(label_sum), weighted);
  std::printf("%s", it.stats().to_string().c_str());
}
