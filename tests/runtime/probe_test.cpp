#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {
const StageStats* row(const PipelineStats& s, const std::string& name) {
  return find_stage(s, name);
}
}  // namespace

TEST_CASE("every stage counts the elements it produced", "[runtime][probe]") {
  auto ds = range(1000)
                .filter([](std::int64_t x) { return x % 2 == 0; })
                .map([](std::int64_t x) { return x; })
                .batch(10);
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  REQUIRE(row(s, "batch"));
  CHECK(row(s, "batch")->elements == 50);
  CHECK(row(s, "map")->elements == 500);
  CHECK(row(s, "filter")->elements == 500);
  CHECK(row(s, "range")->elements == 1000);
  CHECK(row(s, "map")->depth == 1);
  CHECK(row(s, "range")->depth == 3);
}

TEST_CASE("bulk paths count too", "[runtime][probe]") {
  auto ds = range(1000).map([](std::int64_t x) { return 2 * x; }).batch(100);
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  CHECK(row(s, "batch")->elements == 10);
  CHECK(row(s, "map")->elements == 1000);
  CHECK(row(s, "range")->elements == 1000);
}

TEST_CASE("the stages of datasets opened by an interleave share nodes", "[runtime][probe]") {
  auto ds = range(5).interleave([](std::int64_t x) { return range(x); }, {.cycle_length = 2});
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  CHECK(row(s, "interleave")->elements == 10);
  CHECK(row(s, "range")->elements == 5);                // the input
  CHECK(row(s, "range (each input)")->elements == 10);  // 0+1+2+3+4, one node for all five
}
