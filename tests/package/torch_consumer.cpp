// Built against ingest::torch (the optional package component): a batch of
// ingest Tensors becomes torch tensors on the same bytes, so that libtorch is
// found and linked as a user's project would.
#include <ingest/ingest.hpp>
#include <ingest/torch/tensor.hpp>

#include <cstdint>
#include <iostream>
#include <utility>

int main() {
  auto batches = ingest::range(8)
                     .map([](std::int64_t i) { return std::pair(i, static_cast<float>(i) / 2); })
                     .batch(4);
  auto it = batches.iterator();
  auto batch = it.next();
  const void* ids_bytes = batch->first.raw_data();
  auto [ids, values] = ingest::torch::to_tensor(std::move(*batch));
  std::cout << "torch consumer: ids " << ids.sum().item<std::int64_t>() << ", values "
            << values.sum().item<float>() << "\n";
  return ids.data_ptr() == ids_bytes && ids.sum().item<std::int64_t>() == 6 ? 0 : 1;
}
