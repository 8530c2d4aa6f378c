#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

namespace {
struct Key {
  std::int64_t value;
  bool operator==(const Key&) const = default;
};
}  // namespace

template <>
struct std::hash<Key> {
  std::size_t operator()(const Key& k) const {
    if (k.value < 0) throw ingest::testing::Boom("negative");
    return std::hash<std::int64_t>{}(k.value);
  }
};

TEST_CASE("unique drops elements seen before, keeping the first", "[stages][unique]") {
  CHECK(collect(from_vector<std::int64_t>({1, 2, 1, 3, 2, 2, 4, 1})).size() == 8);
  CHECK(collect(from_vector<std::int64_t>({1, 2, 1, 3, 2, 2, 4, 1}).unique()) == V{1, 2, 3, 4});
  CHECK(collect(range(0).unique()).empty());
  CHECK(collect(range(1).unique()) == V{0});
  CHECK(collect(range(5).unique()) == iota(0, 5));
  CHECK(collect(from_vector<std::int64_t>({7, 7, 7}).unique()) == V{7});
  CHECK(collect(from_vector<std::string>({"b", "a", "b", "", "a", ""}).unique()) ==
        std::vector<std::string>{"b", "a", ""});
}

TEST_CASE("each unique pass starts with nothing seen", "[stages][unique]") {
  auto ds = range(3).repeat(2).unique();
  CHECK(collect(ds) == V{0, 1, 2});
  CHECK(collect(ds) == V{0, 1, 2});
  // Inside a repeat, every epoch is a new pass of the unique stage.
  CHECK(collect(from_vector<std::int64_t>({1, 1, 2}).unique().repeat(2)) == V{1, 2, 1, 2});
}

TEST_CASE("unique's cardinality is unknown, as tf.data's", "[stages][unique]") {
  CHECK(range(4).unique().cardinality() == unknown_cardinality);
  CHECK(range(0).unique().cardinality() == unknown_cardinality);
  CHECK(range(4).repeat().unique().cardinality() == unknown_cardinality);
}

TEST_CASE("an input error passes through unique in place", "[stages][unique]") {
  auto input = from_vector<std::int64_t>({1, 1, 9, 2, 1}).map([](std::int64_t x) -> std::int64_t {
    if (x == 9) throw Boom("nine");
    return x;
  });
  const auto out = collect_outcomes(input.unique());
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == 1);
  CHECK(out[1].error == "FunctionError: nine [stage 'map', element 2]");
  CHECK(out[2].value == 2);
}

TEST_CASE("an error from the element's hash fails that element only", "[stages][unique]") {
  auto ds = from_vector<Key>({{1}, {-1}, {1}, {2}});
  const auto out = collect_outcomes(ds.unique());
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == Key{1});
  CHECK(out[1].error == "FunctionError: negative [stage 'unique', element 1]");
  CHECK(out[2].value == Key{2});
}

TEST_CASE("destroying a unique iterator mid-stream is clean", "[stages][unique]") {
  auto ds = from_vector<std::string>({"a", "a", "b", "c"}).unique();
  {
    auto it = ds.iterator();
    CHECK(it.next() == "a");
    CHECK(it.next() == "b");
  }
  CHECK(collect(ds).size() == 3);
}

TEST_CASE("unique composes with map and take", "[stages][unique]") {
  auto ds = range(1000).map([](std::int64_t x) { return x % 7; }).unique().take(5);
  CHECK(collect(ds) == V{0, 1, 2, 3, 4});
  // After a flat_map of overlapping ranges.
  auto flat = range(4).flat_map([](std::int64_t n) { return range(n); }).unique();
  CHECK(collect(flat) == V{0, 1, 2});
}

TEST_CASE("unique unwinds between repeated elements once its consumer is gone",
          "[stages][unique]") {
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  int pulled = 0;
  auto ds = range(1000).map([&pulled](std::int64_t) {
    ++pulled;
    return std::int64_t{7};
  });
  auto it = ds.unique().make_iterator(ctx);
  CHECK(it.next() == 7);
  source.request_stop();
  CHECK_THROWS_AS(it.next(), detail::Cancelled);
  CHECK(pulled == 2);
}
