#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include <ingest/core/padding.hpp>

using namespace ingest;

namespace {
template <class T>
auto build(std::vector<T>& elems, const PaddedBatchOptions& options = {}) {
  return padded_batch_traits<T>::build(
      elems.size(), [&](std::size_t i) -> T& { return elems[i]; }, options, 0, default_allocator());
}
}  // namespace

TEST_CASE("tensors pad every dimension to the longest", "[core][padding]") {
  std::vector<Tensor> elems{Tensor::from_values<int>({1, 2, 3, 4}, Shape{2, 2}),
                            Tensor::from_values<int>({5, 6, 7}, Shape{1, 3})};
  Tensor t = build(elems);
  CHECK(t == Tensor::from_values<int>({1, 2, 0, 3, 4, 0,  //
                                       5, 6, 7, 0, 0, 0},
                                      Shape{2, 2, 3}));
}

TEST_CASE("padded shapes and padding values", "[core][padding]") {
  std::vector<Tensor> elems{Tensor::from_values<float>({1, 2}), Tensor::from_values<float>({3})};
  Tensor t = build(elems, {.padded_shapes = {Shape{4}}, .padding_values = {-1.0}});
  CHECK(t == Tensor::from_values<float>({1, 2, -1, -1, 3, -1, -1, -1}, Shape{2, 4}));
  // -1 in a padded shape: the longest in the batch.
  std::vector<Tensor> grid{Tensor::zeros(DType::uint8, Shape{1, 2}),
                           Tensor::zeros(DType::uint8, Shape{2, 1})};
  CHECK(build(grid, {.padded_shapes = {Shape{-1, 5}}}).shape() == Shape{2, 2, 5});
}

TEST_CASE("padding errors name the component", "[core][padding]") {
  std::vector<Tensor> elems{Tensor::from_values<int>({1, 2, 3})};
  CHECK_THROWS_WITH(build(elems, {.padded_shapes = {Shape{2}}}),
                    Catch::Contains("component 0") && Catch::Contains("larger than"));
  CHECK_THROWS_WITH(build(elems, {.padded_shapes = {Shape{2, 2}}}), Catch::Contains("rank"));
  std::vector<Tensor> mixed{Tensor::from_values<int>({1}), Tensor::from_values<float>({1})};
  CHECK_THROWS_WITH(build(mixed), Catch::Contains("equal dtype and rank"));
}

TEST_CASE("vectors pad their length and scalars stack", "[core][padding]") {
  std::vector<std::vector<std::int64_t>> seqs{{1, 2, 3}, {}, {4}};
  CHECK(build(seqs) == Tensor::from_values<std::int64_t>({1, 2, 3, 0, 0, 0, 4, 0, 0}, Shape{3, 3}));
  std::vector<double> scalars{1.5, 2.5};
  CHECK(build(scalars) == Tensor::from_values<double>({1.5, 2.5}));
}

TEST_CASE("tuples pad component by component", "[core][padding]") {
  using E = std::tuple<std::vector<int>, std::pair<Tensor, std::int64_t>>;
  STATIC_REQUIRE(padded_batch_traits<E>::components == 3);
  std::vector<E> elems;
  elems.emplace_back(std::vector<int>{1}, std::pair{Tensor::from_values<float>({1, 2}), 7});
  elems.emplace_back(std::vector<int>{2, 3}, std::pair{Tensor::from_values<float>({3}), 8});
  auto [seq, rest] =
      build(elems, {.padded_shapes = {Shape{3}, Shape{-1}}, .padding_values = {9, 0.5}});
  CHECK(seq == Tensor::from_values<int>({1, 9, 9, 2, 3, 9}, Shape{2, 3}));
  CHECK(rest.first == Tensor::from_values<float>({1, 2, 3, 0.5}, Shape{2, 2}));
  CHECK(rest.second == Tensor::from_values<std::int64_t>({7, 8}));
}

TEST_CASE("scalar tensors and zero-length elements", "[core][padding]") {
  std::vector<Tensor> scalars{Tensor::scalar(1.0f), Tensor::scalar(2.0f)};
  CHECK(build(scalars) == Tensor::from_values<float>({1, 2}));
  std::vector<Tensor> empties{Tensor(DType::int32, Shape{0}), Tensor(DType::int32, Shape{0})};
  CHECK(build(empties).shape() == Shape{2, 0});
}

TEST_CASE("a padded shape smaller than an element is data loss, as in tf.data (issue 10 item 11)",
          "[core][padding]") {
  std::vector<Tensor> elems{Tensor::zeros(DType::int32, Shape{2, 1}),
                            Tensor::zeros(DType::int32, Shape{1, 3})};
  CHECK_THROWS_AS(build(elems, {.padded_shapes = {Shape{2, 2}}}), DataLossError);
  // Names the element (its position in the batch) and the dimension.
  CHECK_THROWS_WITH(build(elems, {.padded_shapes = {Shape{2, 2}}}),
                    Catch::Contains("element 1 of the batch") &&
                        Catch::Contains("size 3 in dimension 1") && Catch::Contains("[2, 2]"));
}

TEST_CASE("scalars refuse a padded shape of another rank, as in tf.data (issue 10 item 11)",
          "[core][padding]") {
  std::vector<std::int64_t> scalars{1, 2};
  // Was: silently ignored.
  CHECK_THROWS_WITH(build(scalars, {.padded_shapes = {Shape{1}}}), Catch::Contains("component 0") &&
                                                                       Catch::Contains("rank 1") &&
                                                                       Catch::Contains("scalars"));
  CHECK(build(scalars, {.padded_shapes = {Shape{}}}) == Tensor::from_values<std::int64_t>({1, 2}));
}

TEST_CASE("padded shapes too large to allocate are refused before allocating (issue 10 item 1)",
          "[core][padding]") {
  std::vector<Tensor> elems{Tensor::zeros(DType::float32, Shape{1}),
                            Tensor::zeros(DType::float32, Shape{2})};
  // Was: out-of-bounds writes in copy_padded (munmap_chunk(): invalid pointer).
  CHECK_THROWS_WITH(build(elems, {.padded_shapes = {Shape{std::int64_t{1} << 62}}}),
                    Catch::Contains("padded batch") && Catch::Contains("4611686018427387904"));
  // Was: a signed overflow in Shape::num_elements.
  std::vector<Tensor> grid{Tensor::zeros(DType::uint8, Shape{1, 1})};
  CHECK_THROWS_AS(
      build(grid, {.padded_shapes = {Shape{std::int64_t{1} << 32, std::int64_t{1} << 32}}}),
      InvalidArgument);
  // Was: std::bad_alloc.
  CHECK_THROWS_AS(build(elems, {.padded_shapes = {Shape{std::int64_t{1} << 40}}}), InvalidArgument);
}

TEST_CASE("padding values must be representable in the dtype (issue 10 siblings)",
          "[core][padding]") {
  std::vector<Tensor> bytes{Tensor::zeros(DType::uint8, Shape{1}),
                            Tensor::zeros(DType::uint8, Shape{2})};
  // Was: undefined behaviour (a double out of the integer's range converted).
  CHECK_THROWS_WITH(build(bytes, {.padding_values = {300}}),
                    Catch::Contains("padding value") && Catch::Contains("uint8"));
  CHECK_THROWS_AS(build(bytes, {.padding_values = {-1}}), InvalidArgument);
  CHECK_THROWS_AS(build(bytes, {.padding_values = {std::nan("")}}), InvalidArgument);
  CHECK_THROWS_AS(build(bytes, {.padding_values = {1.5}}), InvalidArgument);
  CHECK(build(bytes, {.padding_values = {255}}) ==
        Tensor::from_values<std::uint8_t>({0, 255, 0, 0}, Shape{2, 2}));
  std::vector<Tensor> longs{Tensor::zeros(DType::int64, Shape{1}),
                            Tensor::zeros(DType::int64, Shape{2})};
  CHECK_THROWS_AS(build(longs, {.padding_values = {9.3e18}}), InvalidArgument);
  CHECK(build(longs, {.padding_values = {-9.223372036854775808e18}}).shape() == Shape{2, 2});
  std::vector<Tensor> floats{Tensor::zeros(DType::float32, Shape{1}),
                             Tensor::zeros(DType::float32, Shape{2})};
  CHECK_THROWS_AS(build(floats, {.padding_values = {1e300}}), InvalidArgument);
  CHECK(build(floats, {.padding_values = {-INFINITY}}).shape() == Shape{2, 2});
}
