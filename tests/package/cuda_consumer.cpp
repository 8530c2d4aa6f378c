// Built against ingest::cuda (the optional package component): loads two
// batches to the GPU, or reports that there is none.
#include <iostream>

#include <ingest/cuda/device_loader.hpp>
#include <ingest/ingest.hpp>

int main() {
  const int devices = ingest::cuda::device_count();
  try {
    int batches = 0;
    for (auto& batch : ingest::cuda::DeviceLoader(ingest::range(10).batch(5))) {
      batch.synchronize();
      ++batches;
    }
    std::cout << "cuda consumer loaded " << batches << " batches\n";
    return batches == 2 ? 0 : 1;
  } catch (const ingest::Unavailable& e) {
    std::cout << "cuda consumer: " << e.what() << "\n";
    return devices == 0 ? 0 : 1;
  }
}
