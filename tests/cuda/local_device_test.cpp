// cuda::local_device(): local_rank modulo the visible devices. Without a
// device it reports Unavailable with the reason; the rest is skipped.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

#include <ingest/cuda/local_device.hpp>

#include "support/cuda_testing.hpp"

using namespace ingest;
using distributed::World;

TEST_CASE("without a device, local_device reports Unavailable", "[cuda][local_device]") {
  if (cuda::device_count() > 0) {
    std::cout << "SKIPPED: this machine has a CUDA device" << std::endl;
    return;
  }
  try {
    (void)cuda::local_device(
        World{.rank = 1, .world_size = 2, .local_rank = 1, .local_world_size = 2});
    FAIL("local_device did not throw without a device");
  } catch (const Unavailable& e) {
    CHECK(e.message().rfind("no CUDA device: cudaGetDeviceCount", 0) == 0);
  }
}

TEST_CASE("local_device spreads a node's processes over its devices", "[cuda][local_device]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  const int n = cuda::device_count();
  for (int local_rank = 0; local_rank < 2 * n + 1; ++local_rank) {
    const World w{.rank = local_rank,
                  .world_size = 2 * n + 1,
                  .local_rank = local_rank,
                  .local_world_size = 2 * n + 1};
    CHECK(cuda::local_device(w) == local_rank % n);
  }
  // The default reads the launcher's variables (none here: device 0).
  if (std::getenv("RANK") == nullptr && std::getenv("OMPI_COMM_WORLD_RANK") == nullptr &&
      std::getenv("PMI_RANK") == nullptr && std::getenv("SLURM_STEP_NUM_TASKS") == nullptr) {
    CHECK(cuda::local_device() == 0);
  }
}
