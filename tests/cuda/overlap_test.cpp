// OverlapTimer's interval arithmetic (plain C++, runs anywhere) and the
// timer on a device.
#include <catch2/catch.hpp>

#include <vector>

#include <ingest/cuda/overlap.hpp>

#include "support/cuda_testing.hpp"

using namespace ingest;
using cuda::detail::Interval;

TEST_CASE("interval unions and overlaps", "[cuda][overlap]") {
  using I = std::vector<Interval>;
  CHECK(cuda::detail::union_length({}) == 0);
  CHECK(cuda::detail::union_length(I{{0, 2}, {1, 3}, {5, 6}}) == 4);
  CHECK(cuda::detail::union_length(I{{5, 6}, {0, 1}, {0.5, 0.75}}) == 2);
  CHECK(cuda::detail::union_length(I{{3, 3}, {4, 2}}) == 0);  // empty ones
  const auto merged = cuda::detail::merge_intervals(I{{4, 5}, {0, 1}, {1, 2}});
  REQUIRE(merged.size() == 2);
  CHECK(merged[0].begin == 0);
  CHECK(merged[0].end == 2);
  // Copies of 1 ms every 2 ms against steps of 1.5 ms every 2 ms.
  I copies, steps;
  for (int k = 0; k < 10; ++k) {
    copies.push_back({2.0 * k + 1.0, 2.0 * k + 2.0});
    steps.push_back({2.0 * k + 0.5, 2.0 * k + 2.0});
  }
  CHECK(cuda::detail::overlap_length(copies, steps) == Approx(10.0));
  CHECK(cuda::detail::overlap_length(steps, copies) == Approx(10.0));
  CHECK(cuda::detail::overlap_length(I{{0, 1}}, I{{1, 2}}) == 0);
  CHECK(cuda::detail::overlap_length(I{{0, 10}}, I{{1, 2}, {3, 4}, {9, 12}}) == Approx(3.0));
}

TEST_CASE("overlap report ratios", "[cuda][overlap]") {
  cuda::OverlapReport r;
  CHECK(r.compute_overlap() == 0);
  CHECK(r.copy_hidden() == 0);
  r.copy_ms = 2;
  r.compute_ms = 8;
  r.overlap_ms = 1.5;
  CHECK(r.compute_overlap() == Approx(0.1875));
  CHECK(r.copy_hidden() == Approx(0.75));
}

TEST_CASE("without a device, OverlapTimer reports Unavailable", "[cuda][overlap]") {
  if (cuda::device_count() > 0) {
    std::cout << "SKIPPED: a CUDA device is present; the no-device path cannot be tested"
              << std::endl;
    return;
  }
  CHECK_THROWS_AS(cuda::OverlapTimer(nullptr), Unavailable);
}
