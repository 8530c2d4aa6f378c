// Linked into the CUDA test executables: when a test run ends, the pools'
// cached blocks go back to CUDA (cuda::release_cached_memory), so that
// `compute-sanitizer --leak-check full` reports only memory that really was
// never freed, not the blocks the process-wide pools keep for reuse.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <ingest/cuda/allocator.hpp>

namespace {

struct ReleaseCudaPools : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunEnded(const Catch::TestRunStats& stats) override {
    ingest::cuda::release_cached_memory();
    TestEventListenerBase::testRunEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(ReleaseCudaPools)
