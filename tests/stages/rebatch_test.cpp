#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

namespace {
/// The int64 rows of each batch of one pass.
template <class D>
std::vector<V> rows_of(const D& ds) {
  std::vector<V> out;
  for (const Tensor& t : collect(ds)) out.push_back(values_of(t));
  return out;
}
}  // namespace

TEST_CASE("rebatch splits and merges batches along the first dimension", "[stages][rebatch]") {
  // Input batches [0 1 2 3] [4 5 6 7] [8 9].
  CHECK(rows_of(range(10).batch(4).rebatch(3)) ==
        std::vector<V>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}});
  CHECK(rows_of(range(10).batch(4).rebatch(3, {.drop_remainder = true})) ==
        std::vector<V>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
  // Merging small batches: [0 1] [2 3] [4 5] [6] into fives.
  CHECK(rows_of(range(7).batch(2).rebatch(5)) == std::vector<V>{{0, 1, 2, 3, 4}, {5, 6}});
  CHECK(rows_of(range(7).batch(2).rebatch(5, {.drop_remainder = true})) ==
        std::vector<V>{{0, 1, 2, 3, 4}});
  // Sizes that divide evenly: no remainder either way.
  CHECK(rows_of(range(6).batch(3).rebatch(2, {.drop_remainder = true})) ==
        std::vector<V>{{0, 1}, {2, 3}, {4, 5}});
  // The same size: the input batches themselves.
  CHECK(rows_of(range(5).batch(2).rebatch(2)) == std::vector<V>{{0, 1}, {2, 3}, {4}});
  // The same as unbatch().batch(n), and a second pass gives the same.
  auto ds = range(23).batch(5).rebatch(7);
  std::vector<V> expected;
  for (const Tensor& t : range(23).batch(5).unbatch().batch(7)) expected.push_back(values_of(t));
  CHECK(rows_of(ds) == expected);
  CHECK(rows_of(ds) == expected);
}

TEST_CASE("rebatch cycles a list of sizes", "[stages][rebatch]") {
  // Input batches [0 1 2] [3 4 5] [6 7 8] [9]; sizes 1, 2, 3, 1, 2, 3.
  CHECK(rows_of(range(10).batch(3).rebatch({1, 2, 3})) ==
        std::vector<V>{{0}, {1, 2}, {3, 4, 5}, {6}, {7, 8}, {9}});
  CHECK(rows_of(range(10).batch(3).rebatch({1, 2, 3}, {.drop_remainder = true})) ==
        std::vector<V>{{0}, {1, 2}, {3, 4, 5}, {6}, {7, 8}});
  // One size in a list is that size.
  CHECK(rows_of(range(5).batch(5).rebatch(std::vector<std::int64_t>{2})) ==
        std::vector<V>{{0, 1}, {2, 3}, {4}});
}

TEST_CASE("rebatch gives an empty batch for a size of 0 in the list, as tf.data",
          "[stages][rebatch]") {
  // tf.data: a 0 yields an empty batch without reading; the pass ends when a
  // batch of size > 0 finds the input exhausted.
  const auto out = collect(range(4).batch(4).rebatch({0, 2}));
  REQUIRE(out.size() == 5);
  for (std::size_t i : {0, 2, 4}) {
    CHECK(out[i].shape() == Shape{0});
    CHECK(out[i].dtype() == DType::int64);
  }
  CHECK(values_of(out[1]) == V{0, 1});
  CHECK(values_of(out[3]) == V{2, 3});
  // Rows of shape [2] keep their shape in an empty batch.
  const auto pairs = collect(range(2)
                                 .map([](std::int64_t x) {
                                   return Tensor::from_values<float>({float(x), float(-x)});
                                 })
                                 .batch(2)
                                 .rebatch({1, 0}));
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[1].shape() == Shape{0, 2});
  CHECK(pairs[2] == Tensor::from_values<float>({1, -1}, Shape{1, 2}));
  // A whole input batch handed on still leaves its shape for the empty batch.
  const auto whole = collect(range(2)
                                 .map([](std::int64_t x) {
                                   return Tensor::from_values<float>({float(x), float(-x)});
                                 })
                                 .batch(2)
                                 .rebatch({2, 0}));
  REQUIRE(whole.size() == 2);
  CHECK(whole[0] == Tensor::from_values<float>({0, 0, 1, -1}, Shape{2, 2}));
  CHECK(whole[1].shape() == Shape{0, 2});
  CHECK(whole[1].dtype() == DType::float32);
  // Vectors: an empty vector.
  const auto words = collect(from_vector<std::string>({"a", "b"}).batch(2).rebatch({0, 1}));
  CHECK(words == std::vector<std::vector<std::string>>{{}, {"a"}, {}, {"b"}, {}});
}

TEST_CASE("rebatch of tensors with rows of any shape", "[stages][rebatch]") {
  auto ds = range(5)
                .map([](std::int64_t x) {
                  return Tensor::from_values<float>({float(x), float(-x)});
                })
                .batch(3)
                .rebatch(2);
  const auto out = collect(ds);
  REQUIRE(out.size() == 3);
  CHECK(out[0] == Tensor::from_values<float>({0, 0, 1, -1}, Shape{2, 2}));
  CHECK(out[1] == Tensor::from_values<float>({2, -2, 3, -3}, Shape{2, 2}));  // across two inputs
  CHECK(out[2] == Tensor::from_values<float>({4, -4}, Shape{1, 2}));
}

TEST_CASE("rebatch's rows from one input batch are views of it, from several a copy",
          "[stages][rebatch]") {
  const auto split = collect(range(8).batch(8).rebatch(3));
  REQUIRE(split.size() == 3);
  CHECK(split[0].shares_storage_with(split[1]));
  CHECK(split[1].shares_storage_with(split[2]));
  CHECK(values_of(split[2]) == V{6, 7});
  const auto merged = collect(range(4).batch(2).rebatch(3));
  REQUIRE(merged.size() == 2);
  CHECK(!merged[0].shares_storage_with(merged[1]));
  CHECK(values_of(merged[0]) == V{0, 1, 2});
  CHECK(values_of(merged[1]) == V{3});
}

TEST_CASE("rebatch of tuples and pairs cuts every field alike", "[stages][rebatch]") {
  auto tuples = range(5)
                    .map([](std::int64_t x) {
                      return std::tuple<std::int64_t, std::string>{
                          x, std::string(1, static_cast<char>('a' + x))};
                    })
                    .batch(2)
                    .rebatch(3);
  const auto out = collect(tuples);
  REQUIRE(out.size() == 2);
  CHECK(values_of(std::get<0>(out[0])) == V{0, 1, 2});
  CHECK(std::get<1>(out[0]) == std::vector<std::string>{"a", "b", "c"});
  CHECK(values_of(std::get<0>(out[1])) == V{3, 4});
  CHECK(std::get<1>(out[1]) == std::vector<std::string>{"d", "e"});
  // Pairs of tensors, and a list of sizes.
  auto pairs = range(4)
                   .map([](std::int64_t x) {
                     return std::pair<std::int64_t, Tensor>{x, Tensor::from_values<int>({int(x)})};
                   })
                   .batch(4)
                   .rebatch({1, 3});
  const auto p = collect(pairs);
  REQUIRE(p.size() == 2);
  CHECK(values_of(p[0].first) == V{0});
  CHECK(p[1].second == Tensor::from_values<int>({1, 2, 3}, Shape{3, 1}));
}

TEST_CASE("rebatch of vectors moves the elements", "[stages][rebatch]") {
  auto ds = from_vector<std::string>({"a", "b", "c", "d", "e"}).batch(2).rebatch(3);
  CHECK(collect(ds) == std::vector<std::vector<std::string>>{{"a", "b", "c"}, {"d", "e"}});
  // Empty input batches are skipped.
  auto with_empty = from_vector(std::vector<std::vector<int>>{{1, 2}, {}, {}, {3}, {}}).rebatch(2);
  CHECK(collect(with_empty) == std::vector<std::vector<int>>{{1, 2}, {3}});
}

TEST_CASE("rebatch of an empty input and of one element", "[stages][rebatch]") {
  CHECK(collect(range(0).batch(2).rebatch(3)).empty());
  CHECK(collect(range(0).batch(2).rebatch({0, 3})).empty());  // no batch to take the shape from
  CHECK(collect(from_vector(std::vector<std::vector<int>>{{}, {}}).rebatch(2)).empty());
  CHECK(rows_of(range(1).batch(1).rebatch(3)) == std::vector<V>{{0}});
  CHECK(collect(range(1).batch(1).rebatch(3, {.drop_remainder = true})).empty());
  CHECK(rows_of(range(1).batch(4).rebatch(1)) == std::vector<V>{{0}});
}

TEST_CASE("rebatch checks its sizes", "[stages][rebatch]") {
  auto ds = range(4).batch(2);
  auto message = [&](auto make) {
    try {
      make();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { ds.rebatch(0); }).find("rebatch: batch_size must be > 0; got 0") !=
        std::string::npos);
  CHECK(message([&] { ds.rebatch(-3); }).find("got -3") != std::string::npos);
  CHECK(message([&] { ds.rebatch(std::vector<std::int64_t>{}); }).find("batch_sizes is empty") !=
        std::string::npos);
  CHECK(message([&] {
          ds.rebatch({2, -1});
        }).find("batch_sizes[1] must be >= 0; got -1") != std::string::npos);
  CHECK(message([&] { ds.rebatch({0, 0}); }).find("all 0") != std::string::npos);
}

TEST_CASE("rebatch's cardinality is unknown, as tf.data's", "[stages][rebatch]") {
  CHECK(range(10).batch(2).rebatch(5).cardinality() == unknown_cardinality);
  CHECK(range(0).batch(2).rebatch(5).cardinality() == unknown_cardinality);
  CHECK(range(2).batch(2).repeat().rebatch({1, 2}).cardinality() == unknown_cardinality);
}

TEST_CASE("an input error fails the batch being built, as tf.data", "[stages][rebatch]") {
  // Input batches [0 1], an error (the batch holding element 2), [4 5]:
  // the rows gathered before the error are dropped with it, and the next
  // batch starts with the next input batch.
  auto input = range(6)
                   .map([](std::int64_t x) -> std::int64_t {
                     if (x == 2) throw Boom("two");
                     return x;
                   })
                   .batch(2);
  const auto out = collect_outcomes(input.rebatch(3));
  REQUIRE(out.size() == 2);
  CHECK(out[0].error == "FunctionError: two [stage 'map', element 2]");
  CHECK(values_of(*out[1].value) == V{4, 5});
  // A size is not used up by a failed batch.
  const auto sized = collect_outcomes(input.rebatch({2, 1}));
  REQUIRE(sized.size() == 4);
  CHECK(values_of(*sized[0].value) == V{0, 1});
  CHECK(!sized[1].error.empty());
  CHECK(values_of(*sized[2].value) == V{4});  // the size 1 after the failed 2
  CHECK(values_of(*sized[3].value) == V{5});
}

TEST_CASE("an input batch rebatch cannot cut is an error at its position", "[stages][rebatch]") {
  auto ds = from_vector(std::vector<Tensor>{Tensor::from_values<int>({1, 2}), Tensor::scalar(3),
                                            Tensor::from_values<int>({4})})
                .rebatch(2);
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 3);
  CHECK(*out[0].value == Tensor::from_values<int>({1, 2}));
  CHECK(out[1].error.find("InvalidArgument: a scalar tensor has no batch dimension") == 0);
  CHECK(out[1].error.find("[stage 'rebatch', element 1]") != std::string::npos);
  CHECK(*out[2].value == Tensor::from_values<int>({4}));
  // Rows of another shape or dtype cannot join a batch.
  auto mixed = from_vector(std::vector<Tensor>{tensor<int>({1, 2}, Shape{1, 2}),
                                               tensor<int>({3}, Shape{1, 1})})
                   .rebatch(2);
  const auto m = collect_outcomes(mixed);
  REQUIRE(m.size() == 1);
  CHECK(m[0].error.find("cannot join a batch of rows of int32[2]") != std::string::npos);
  CHECK(m[0].error.find("stage 'rebatch'") != std::string::npos);
  // Tuple fields of different lengths.
  using P = std::tuple<std::vector<int>, std::vector<int>>;
  auto ragged = from_vector(std::vector<P>{P{{1, 2}, {3}}, P{{4}, {5}}}).rebatch(1);
  const auto r = collect_outcomes(ragged);
  REQUIRE(r.size() == 2);
  CHECK(r[0].error.find("different numbers of rows (field 0 has 2, field 1 has 1)") !=
        std::string::npos);
  CHECK(r[1].value == P{{4}, {5}});
}

TEST_CASE("destroying a rebatch iterator mid-stream is clean", "[stages][rebatch]") {
  auto ds = from_vector<std::string>({"a", "b", "c", "d", "e"}).batch(3).rebatch(2);
  {
    auto it = ds.iterator();
    CHECK(it.next() == std::vector<std::string>{"a", "b"});
    CHECK(it.next() == std::vector<std::string>{"c", "d"});  // "d" from the second input batch
  }
  CHECK(collect(ds).size() == 3);
}

TEST_CASE("rebatch unwinds between empty input batches once its consumer is gone",
          "[stages][rebatch]") {
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  source.request_stop();
  int read = 0;
  auto ds = range(1000)
                .map([&read](std::int64_t) {
                  ++read;
                  return std::vector<int>{};
                })
                .rebatch(2);
  CHECK_THROWS_AS(ds.make_iterator(ctx).next(), detail::Cancelled);
  CHECK(read <= 1);
}
