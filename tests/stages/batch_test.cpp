#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("batch stacks scalars and keeps the remainder", "[stages][batch]") {
  auto batches = collect(range(10).batch(4));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].shape() == Shape{4});
  CHECK(values_of(batches[0]) == V{0, 1, 2, 3});
  CHECK(values_of(batches[2]) == V{8, 9});
}

TEST_CASE("drop_remainder drops a short last batch", "[stages][batch]") {
  CHECK(collect(range(10).batch(4, {.drop_remainder = true})).size() == 2);
  CHECK(collect(range(8).batch(4, {.drop_remainder = true})).size() == 2);
  CHECK(collect(range(3).batch(4, {.drop_remainder = true})).empty());
}

TEST_CASE("batch edge cases", "[stages][batch]") {
  CHECK(collect(range(0).batch(4)).empty());
  auto one = collect(range(1).batch(4));
  REQUIRE(one.size() == 1);
  CHECK(one[0].shape() == Shape{1});
  CHECK(collect(range(5).batch(1)).size() == 5);
  CHECK_THROWS_AS(range(5).batch(0), InvalidArgument);
  CHECK_THROWS_AS(range(5).batch(-1), InvalidArgument);
}

TEST_CASE("batch of tensors adds a leading dimension", "[stages][batch]") {
  auto ds = range(5).map([](std::int64_t x) {
    return Tensor::from_values<float>({float(x), float(-x)});
  });
  auto batches = collect(ds.batch(2));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0] == Tensor::from_values<float>({0, 0, 1, -1}, Shape{2, 2}));
  CHECK(batches[2].shape() == Shape{1, 2});
}

TEST_CASE("batch of strings is a vector and tuples stack per field", "[stages][batch]") {
  auto words = collect(from_vector<std::string>({"a", "b", "c"}).batch(2));
  CHECK(words == std::vector<std::vector<std::string>>{{"a", "b"}, {"c"}});
  auto pairs = range(4).map([](std::int64_t x) {
    return std::tuple<std::int64_t, std::string>{x, "s"};
  });
  auto tb = collect(pairs.batch(4));
  REQUIRE(tb.size() == 1);
  CHECK(values_of(std::get<0>(tb[0])) == V{0, 1, 2, 3});
  CHECK(std::get<1>(tb[0]).size() == 4);
}

TEST_CASE("unequal shapes fail the batch with the element index", "[stages][batch]") {
  auto ds = range(4).map(
      [](std::int64_t x) { return Tensor::zeros(DType::float32, Shape{x < 3 ? 2 : 3}); });
  auto out = collect_outcomes(ds.batch(2));
  REQUIRE(out.size() == 2);
  CHECK(out[0].value);
  CHECK(out[1].error.find("stage 'batch', element 3") != std::string::npos);
  CHECK(out[1].error.find("float32[3] after float32[2]") != std::string::npos);
}

TEST_CASE("a failed element fails its whole batch and the next batch starts in place",
          "[stages][batch]") {
  auto ds = range(10).map([](std::int64_t x) -> std::int64_t {
    if (x == 5) throw Boom("five");
    return x;
  });
  auto out = collect_outcomes(ds.batch(4));
  REQUIRE(out.size() == 3);
  CHECK(values_of(*out[0].value) == V{0, 1, 2, 3});
  CHECK(out[1].error == "FunctionError: five [stage 'map', element 5]");
  CHECK(values_of(*out[2].value) == V{8, 9});
  // Through the generic (non-bulk) path as well.
  auto slow =
      range(10).filter([](std::int64_t) { return true; }).map([](std::int64_t x) -> std::int64_t {
        if (x == 9) throw Boom("nine");
        return x;
      });
  auto out2 = collect_outcomes(slow.batch(4));
  REQUIRE(out2.size() == 3);
  CHECK_FALSE(out2[2].value);  // the remainder batch {8, 9} fails
}

TEST_CASE("batch buffers come from the context's allocator pool", "[stages][batch]") {
  auto& pool = static_cast<PoolAllocator&>(default_allocator());
  auto ds = range(256 * 40).batch(256);
  collect(ds);  // warm up
  const auto before = pool.stats().upstream_allocations;
  std::int64_t sum = 0;
  for (const Tensor& b : ds) sum += b.values<std::int64_t>()[0];
  CHECK(sum > 0);
  CHECK(pool.stats().upstream_allocations == before);
}

TEST_CASE("a batch size far above the input's length allocates by what arrives",
          "[stages][batch]") {
  // batch(20'000'000) of strings reserved 763 MiB over 10 elements.
  auto strings = range(10).map([](std::int64_t x) { return std::to_string(x); });
  auto out = collect(strings.batch(20'000'000));
  REQUIRE(out.size() == 1);
  CHECK(out[0].size() == 10);
  CHECK(out[0].capacity() < 1000);
  // Unknown cardinality (filter): the gathering buffer grows with the input.
  auto filtered = strings.filter([](const std::string&) { return true; });
  CHECK(collect(filtered.batch(std::int64_t{1} << 40)).at(0).size() == 10);
  CHECK(collect(filtered.batch(1 << 30, {.drop_remainder = true})).empty());
  // Scalars stack into a Tensor of the input's length when it is known.
  auto scalars = collect(range(10).batch(std::int64_t{1} << 40));
  REQUIRE(scalars.size() == 1);
  CHECK(values_of(scalars[0]) == iota(0, 10));
  CHECK(collect(range(10).batch(std::int64_t{1} << 40, {.drop_remainder = true})).empty());
  CHECK(range(10).batch(100).cardinality() == 1);
}

TEST_CASE(
    "an impossible batch_size is InvalidArgument from batch, not std::bad_alloc (issue 10 "
    "item 4)",
    "[stages][batch]") {
  constexpr std::int64_t huge = std::int64_t{1} << 40;
  auto is_refusal = [](const std::string& error) {
    return error.find("InvalidArgument: batch_size 1099511627776 x ") == 0 &&
           error.find("stage 'batch'") != std::string::npos;
  };
  // Infinite input, bulk path (the buffer is sized by the batch size): was std::bad_alloc.
  auto scalars = collect_outcomes(range(10).repeat().batch(huge), 1);
  REQUIRE(scalars.size() == 1);
  CHECK(is_refusal(scalars[0].error));
  // Gathered path: refused at the first element, which shows the element size.
  auto tensors = collect_outcomes(
      range(10)
          .repeat()
          .map([](std::int64_t) { return Tensor::zeros(DType::float32, Shape{4}); })
          .batch(huge),
      1);
  REQUIRE(tensors.size() == 1);
  CHECK(is_refusal(tensors[0].error));
  // Sizes that fit are unaffected, and a known short input still allocates by what arrives.
  CHECK(collect(range(10).repeat().take(6).batch(huge / 8)).at(0).shape() == Shape{6});
  CHECK_THROWS_AS(range(3).batch(0), InvalidArgument);
}
