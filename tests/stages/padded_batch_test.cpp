#include <catch2/catch.hpp>

#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {
// Element x is the vector {1, ..., x}.
auto ragged(std::int64_t n) {
  return range(1, n + 1).map([](std::int64_t x) {
    std::vector<std::int32_t> v;
    for (std::int32_t i = 1; i <= x; ++i) v.push_back(i);
    return v;
  });
}
}  // namespace

TEST_CASE("padded_batch pads to the longest in each batch", "[stages][padded_batch]") {
  auto batches = collect(ragged(5).padded_batch(2));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0] == Tensor::from_values<std::int32_t>({1, 0, 1, 2}, Shape{2, 2}));
  CHECK(batches[1] == Tensor::from_values<std::int32_t>({1, 2, 3, 0, 1, 2, 3, 4}, Shape{2, 4}));
  CHECK(batches[2] == Tensor::from_values<std::int32_t>({1, 2, 3, 4, 5}, Shape{1, 5}));
}

TEST_CASE("padded_batch to given shapes with a pad value, dropping the remainder",
          "[stages][padded_batch]") {
  auto batches = collect(ragged(5).padded_batch(
      2, {.padded_shapes = {Shape{6}}, .padding_values = {-1}, .drop_remainder = true}));
  REQUIRE(batches.size() == 2);
  CHECK(batches[0] == Tensor::from_values<std::int32_t>(
                          {1, -1, -1, -1, -1, -1, 1, 2, -1, -1, -1, -1}, Shape{2, 6}));
}

TEST_CASE("padded_batch of tensors and tuples", "[stages][padded_batch]") {
  auto ds = range(1, 4).map([](std::int64_t x) {
    return std::pair{Tensor::zeros(DType::float32, Shape{x, 2}), x};
  });
  auto batches = collect(ds.padded_batch(3));
  REQUIRE(batches.size() == 1);
  CHECK(batches[0].first.shape() == Shape{3, 3, 2});
  CHECK(values_of(batches[0].second) == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("padded_batch errors", "[stages][padded_batch]") {
  CHECK_THROWS_AS(ragged(3).padded_batch(0), InvalidArgument);
  auto too_long = collect_outcomes(ragged(4).padded_batch(2, {.padded_shapes = {Shape{3}}}));
  REQUIRE(too_long.size() == 2);
  CHECK(too_long[0].value);
  CHECK(too_long[1].error.find("DataLossError") != std::string::npos);
  CHECK(too_long[1].error.find("padded_batch") != std::string::npos);
  // Its context names the batch's first input element.
  CHECK(too_long[1].error.find("[stage 'padded_batch', element 2]") != std::string::npos);
  CHECK(collect(ragged(0).padded_batch(2)).empty());
  // An element error fails the batch, the next batch starts in place.
  auto failing = ragged(6).map([](std::vector<std::int32_t> v) {
    if (v.size() == 2) throw Boom("two");
    return v;
  });
  auto out = collect_outcomes(failing.padded_batch(3));
  REQUIRE(out.size() == 2);
  CHECK_FALSE(out[0].value);
  CHECK(out[1].value->shape() == Shape{3, 6});
}

TEST_CASE("padded_batch of a batch size far above the input's length", "[stages][padded_batch]") {
  auto t = range(3).map([](std::int64_t x) { return Tensor::zeros(DType::int64, Shape{x + 1}); });
  auto out = collect(t.padded_batch(std::int64_t{1} << 40));
  REQUIRE(out.size() == 1);
  CHECK(out[0].shape() == Shape{3, 3});
}

TEST_CASE(
    "padded_batch: impossible sizes are InvalidArgument naming the argument (issue 10 "
    "items 1, 4)",
    "[stages][padded_batch]") {
  constexpr std::int64_t p40 = std::int64_t{1} << 40, p62 = std::int64_t{1} << 62;
  // Refused when the dataset is built: was bad_alloc, surfacing as
  // "FunctionError: std::bad_alloc" though no user function ran, or
  // out-of-bounds writes for 2^62.
  CHECK_THROWS_WITH(ragged(3).padded_batch(2, {.padded_shapes = {Shape{p40}}}),
                    Catch::Contains("padded_shapes[0]") && Catch::Contains("batch_size 2"));
  CHECK_THROWS_AS(ragged(3).padded_batch(2, {.padded_shapes = {Shape{p62}}}), InvalidArgument);
  CHECK_THROWS_AS(ragged(3).padded_batch(
                      1, {.padded_shapes = {Shape{std::int64_t{1} << 32, std::int64_t{1} << 32}}}),
                  InvalidArgument);
  // Within one byte per value but not at the dtype's size: refused at the first batch.
  auto wide = collect_outcomes(ragged(3).padded_batch(1, {.padded_shapes = {Shape{p40 / 2}}}));
  REQUIRE(wide.size() == 3);
  CHECK(wide[0].error.find("InvalidArgument") == 0);
  CHECK(wide[0].error.find("stage 'padded_batch'") != std::string::npos);
}

TEST_CASE("padded_batch matches tf.data on padded shapes that do not fit (issue 10 item 11)",
          "[stages][padded_batch]") {
  // Scalars: a padded shape of rank 1 is an error (was silently ignored).
  auto scalars = collect_outcomes(range(4).padded_batch(2, {.padded_shapes = {Shape{1}}}));
  REQUIRE_FALSE(scalars.empty());
  CHECK(scalars[0].error.find("InvalidArgument") == 0);
  CHECK(scalars[0].error.find("rank") != std::string::npos);
  CHECK(collect(range(4).padded_batch(2, {.padded_shapes = {Shape{}}})).size() == 2);
  // Smaller than an element: DataLossError naming the element and dimension.
  auto small = collect_outcomes(ragged(4).padded_batch(4, {.padded_shapes = {Shape{2}}}));
  REQUIRE(small.size() == 1);
  CHECK(small[0].error.find("DataLossError") == 0);
  CHECK(small[0].error.find("element 2 of the batch") != std::string::npos);
  CHECK(small[0].error.find("dimension 0") != std::string::npos);
  // More padded shapes or values than the element has components.
  CHECK_THROWS_AS(range(4).padded_batch(2, {.padded_shapes = {Shape{}, Shape{}}}), InvalidArgument);
  CHECK_THROWS_AS(range(4).padded_batch(2, {.padding_values = {1, 2}}), InvalidArgument);
}

TEST_CASE("padded_batch with pad_unknown_dims_to pads the open dimensions to that size",
          "[stages][padded_batch]") {
  // What bucket_by_sequence_length's pad_to_bucket_boundary uses: every
  // dimension without a padded size (-1, or no padded shape) pads to it.
  auto batches = collect(ragged(3).padded_batch(2, {.pad_unknown_dims_to = 4}));
  REQUIRE(batches.size() == 2);
  CHECK(batches[0] == Tensor::from_values<std::int32_t>({1, 0, 0, 0, 1, 2, 0, 0}, Shape{2, 4}));
  CHECK(batches[1].shape() == Shape{1, 4});
  // A padded shape's own sizes win over it.
  auto tensors = range(1, 3).map([](std::int64_t x) {
    return Tensor::zeros(DType::float32, Shape{x, 2});
  });
  auto t =
      collect(tensors.padded_batch(2, {.padded_shapes = {Shape{-1, 3}}, .pad_unknown_dims_to = 5}));
  REQUIRE(t.size() == 1);
  CHECK(t[0].shape() == Shape{2, 5, 3});
  // An element larger than it fails the batch; a negative size is rejected.
  auto small = collect_outcomes(ragged(3).padded_batch(3, {.pad_unknown_dims_to = 2}));
  REQUIRE(small.size() == 1);
  CHECK(small[0].error.find("DataLossError: padded_batch: component 0: element 2 of the batch "
                            "has size 3 in dimension 0, larger than the size 2 it pads to") == 0);
  CHECK_THROWS_WITH(ragged(3).padded_batch(2, {.pad_unknown_dims_to = -1}),
                    "InvalidArgument: padded_batch: pad_unknown_dims_to must be >= 0; got -1 "
                    "[stage 'padded_batch']");
}
