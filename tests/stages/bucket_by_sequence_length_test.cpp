#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;
using V32 = std::vector<std::int32_t>;

namespace {
// The elements of tf.data's docstring examples.
const std::vector<V> kElements = {
    {0}, {1, 2, 3, 4}, {5, 6, 7}, {7, 8, 9, 10, 11}, {13, 14, 15, 16, 19, 20}, {21, 22}};
auto length = [](const auto& v) { return static_cast<std::int64_t>(v.size()); };
auto identity = [](std::int64_t x) { return x; };

std::vector<V32> narrow(const std::vector<V>& in) {
  std::vector<V32> out;
  for (const V& v : in) out.emplace_back(v.begin(), v.end());
  return out;
}
Tensor i64(std::initializer_list<std::int64_t> values, Shape shape) {
  return Tensor::from_values<std::int64_t>(values, shape);
}
Tensor i32(std::initializer_list<std::int32_t> values, Shape shape) {
  return Tensor::from_values<std::int32_t>(values, shape);
}
}  // namespace

TEST_CASE("bucket_by_sequence_length: tf.data's example, boundaries 3 and 5, batch sizes 2",
          "[stages][bucket_by_sequence_length]") {
  auto ds = from_vector(kElements).bucket_by_sequence_length(length, {3, 5}, {2, 2, 2});
  const auto out = collect(ds);
  REQUIRE(out.size() == 3);
  CHECK(out[0] == i64({1, 2, 3, 4, 5, 6, 7, 0}, Shape{2, 4}));
  CHECK(out[1] == i64({7, 8, 9, 10, 11, 0, 13, 14, 15, 16, 19, 20}, Shape{2, 6}));
  CHECK(out[2] == i64({0, 0, 21, 22}, Shape{2, 2}));  // bucket 0, flushed at the end
}

TEST_CASE("bucket_by_sequence_length: tf.data's pad_to_bucket_boundary examples",
          "[stages][bucket_by_sequence_length]") {
  auto ds = from_vector(narrow(kElements));
  auto out = collect(ds.bucket_by_sequence_length(
      length, {4, 7}, {2, 2, 2}, {.padding_values = {-1}, .pad_to_bucket_boundary = true}));
  REQUIRE(out.size() == 4);
  CHECK(out[0] == i32({0, -1, -1, 5, 6, 7}, Shape{2, 3}));
  CHECK(out[1] == i32({1, 2, 3, 4, -1, -1, 7, 8, 9, 10, 11, -1}, Shape{2, 6}));
  CHECK(out[2] == i32({21, 22, -1}, Shape{1, 3}));
  CHECK(out[3] == i32({13, 14, 15, 16, 19, 20}, Shape{1, 6}));
  // With drop_remainder the two partial buckets go.
  auto dropped = collect(ds.bucket_by_sequence_length(
      length, {4, 7}, {2, 2, 2},
      {.padding_values = {-1}, .pad_to_bucket_boundary = true, .drop_remainder = true}));
  REQUIRE(dropped.size() == 2);
  CHECK(dropped[0] == out[0]);
  CHECK(dropped[1] == out[1]);
}

TEST_CASE(
    "bucket_by_sequence_length's rule: bucket i holds lengths from boundary i-1 up to boundary i",
    "[stages][bucket_by_sequence_length]") {
  // Scalars whose length is their value; batches of 10 so that all flush at
  // the end, in bucket order. A length equal to a boundary goes above it;
  // negative lengths go to bucket 0, large ones to the last.
  auto ds = from_vector<std::int64_t>({5, -1, 3, 2, 4, 100, 0, 6})
                .bucket_by_sequence_length(identity, {3, 5}, {10, 10, 10});
  const auto out = collect(ds);
  REQUIRE(out.size() == 3);
  CHECK(values_of(out[0]) == V{-1, 2, 0});
  CHECK(values_of(out[1]) == V{3, 4});
  CHECK(values_of(out[2]) == V{5, 100, 6});
  // Each bucket its own batch size; full batches go out as they fill.
  auto sized = from_vector<std::int64_t>({0, 7, 1, 8, 2, 9, 3})
                   .bucket_by_sequence_length(identity, {5}, {3, 2});
  const auto s = collect(sized);
  REQUIRE(s.size() == 4);
  CHECK(values_of(s[0]) == V{7, 8});
  CHECK(values_of(s[1]) == V{0, 1, 2});
  CHECK(values_of(s[2]) == V{3});  // the partial buckets, bucket 0 first
  CHECK(values_of(s[3]) == V{9});
  // No boundaries: one bucket, batch() with a padding.
  auto one = collect(from_vector(kElements).bucket_by_sequence_length(length, {}, {4}));
  REQUIRE(one.size() == 2);
  CHECK(one[0].shape() == Shape{4, 5});
  CHECK(one[1] == i64({13, 14, 15, 16, 19, 20, 21, 22, 0, 0, 0, 0}, Shape{2, 6}));
}

TEST_CASE("bucket_by_sequence_length flushes the partial buckets in ascending bucket order",
          "[stages][bucket_by_sequence_length]") {
  auto out = collect(
      from_vector<std::int64_t>({9, 1, 5}).bucket_by_sequence_length(identity, {2, 6}, {2, 2, 2}));
  REQUIRE(out.size() == 3);
  CHECK(values_of(out[0]) == V{1});
  CHECK(values_of(out[1]) == V{5});
  CHECK(values_of(out[2]) == V{9});
  auto kept = collect(
      from_vector<std::int64_t>({9, 1, 5, 8})
          .bucket_by_sequence_length(identity, {2, 6}, {2, 2, 2}, {.drop_remainder = true}));
  REQUIRE(kept.size() == 1);
  CHECK(values_of(kept[0]) == V{9, 8});
}

TEST_CASE("bucket_by_sequence_length with padded shapes, tuples and tensors",
          "[stages][bucket_by_sequence_length]") {
  auto shaped = collect(from_vector(kElements).bucket_by_sequence_length(
      length, {3}, {2, 2}, {.padded_shapes = {Shape{6}}, .padding_values = {9}}));
  REQUIRE(shaped.size() == 3);
  CHECK(shaped[0] == i64({1, 2, 3, 4, 9, 9, 5, 6, 7, 9, 9, 9}, Shape{2, 6}));
  CHECK(shaped[2] == i64({0, 9, 9, 9, 9, 9, 21, 22, 9, 9, 9, 9}, Shape{2, 6}));
  // A (tokens, label) pair: the tokens pad to the bucket boundary - 1, the labels stack.
  auto pairs = from_vector(narrow(kElements)).map([](V32 v) {
    const auto label = static_cast<std::int64_t>(v.size());
    return std::pair{std::move(v), label};
  });
  auto p =
      collect(pairs.bucket_by_sequence_length([](const auto& e) { return e.first.size(); }, {4, 8},
                                              {3, 3, 3}, {.pad_to_bucket_boundary = true}));
  REQUIRE(p.size() == 2);
  CHECK(p[0].first ==
        i32({1, 2, 3, 4, 0, 0, 0, 7, 8, 9, 10, 11, 0, 0, 13, 14, 15, 16, 19, 20, 0}, Shape{3, 7}));
  CHECK(values_of(p[0].second) == V{4, 5, 6});
  CHECK(p[1].first == i32({0, 0, 0, 5, 6, 7, 21, 22, 0}, Shape{3, 3}));
  // Tensors [length, 2]: pad_to_bucket_boundary fills only the -1 of the padded shape.
  auto tensors = range(1, 6).map([](std::int64_t n) {
    return Tensor::zeros(DType::float32, Shape{n, 2});
  });
  auto t = collect(tensors.bucket_by_sequence_length(
      [](const Tensor& x) { return x.shape()[0]; }, {3, 10}, {2, 3, 1},
      {.padded_shapes = {Shape{-1, 2}}, .pad_to_bucket_boundary = true}));
  REQUIRE(t.size() == 2);
  CHECK(t[0].shape() == Shape{2, 2, 2});
  CHECK(t[1].shape() == Shape{3, 9, 2});
}

TEST_CASE("bucket_by_sequence_length with no_padding batches as batch() does",
          "[stages][bucket_by_sequence_length]") {
  // Tensors of equal shape per bucket stack unpadded.
  auto tensors = from_vector<std::int64_t>({1, 3, 1, 3}).map([](std::int64_t n) {
    return Tensor::from_values<std::int64_t>(
        std::vector<std::int64_t>(static_cast<std::size_t>(n), n), Shape{n});
  });
  auto lengths = [](const Tensor& x) { return x.shape()[0]; };
  auto out = collect(tensors.bucket_by_sequence_length(lengths, {2}, {2, 2}, {.no_padding = true}));
  REQUIRE(out.size() == 2);
  CHECK(out[0] == i64({1, 1}, Shape{2, 1}));
  CHECK(out[1] == i64({3, 3, 3, 3, 3, 3}, Shape{2, 3}));
  // Unequal shapes in a bucket fail that batch, as batch() does.
  auto unequal =
      collect_outcomes(tensors.bucket_by_sequence_length(lengths, {}, {2}, {.no_padding = true}));
  REQUIRE(unequal.size() == 2);
  CHECK(unequal[0].error.find("InvalidArgument: batch: elements must have equal dtype and shape") ==
        0);
  CHECK(unequal[0].error.find("[stage 'bucket_by_sequence_length', element 0]") !=
        std::string::npos);
  // Elements padded_batch cannot pad batch into vectors, as batch() does; no
  // padding arguments are needed (and pad_to_bucket_boundary is ignored, as tf).
  auto words = from_vector<std::string>({"a", "bb", "ccc", "d", "ee", "f"});
  auto w = collect(words.bucket_by_sequence_length(
      length, {2}, {2, 3}, {.pad_to_bucket_boundary = true, .no_padding = true}));
  using S = std::vector<std::string>;
  CHECK(w == std::vector<S>{{"a", "d"}, {"bb", "ccc", "ee"}, {"f"}});
}

TEST_CASE("bucket_by_sequence_length on empty and one-element inputs",
          "[stages][bucket_by_sequence_length]") {
  CHECK(collect(from_vector(std::vector<V>{}).bucket_by_sequence_length(length, {3}, {2, 2}))
            .empty());
  auto one =
      collect(from_vector(std::vector<V>{{4, 5}}).bucket_by_sequence_length(length, {3}, {2, 2}));
  REQUIRE(one.size() == 1);
  CHECK(one[0] == i64({4, 5}, Shape{1, 2}));
  CHECK(collect(from_vector(std::vector<V>{{4, 5}})
                    .bucket_by_sequence_length(length, {3}, {2, 2}, {.drop_remainder = true}))
            .empty());
}

TEST_CASE("bucket_by_sequence_length's cardinality is unknown, infinite after an infinite input",
          "[stages][bucket_by_sequence_length]") {
  CHECK(range(4).bucket_by_sequence_length(identity, {2}, {2, 2}).cardinality() ==
        unknown_cardinality);
  CHECK(range(4).repeat().bucket_by_sequence_length(identity, {2}, {2, 2}).cardinality() ==
        infinite_cardinality);
}

TEST_CASE("bucket_by_sequence_length rejects bad arguments",
          "[stages][bucket_by_sequence_length]") {
  auto ds = from_vector(kElements);
  CHECK_THROWS_WITH(ds.bucket_by_sequence_length(length, {3, 5}, {2, 2}),
                    "InvalidArgument: bucket_by_sequence_length: bucket_batch_sizes must have one "
                    "entry more than bucket_boundaries; got 2 batch sizes [2, 2] and 2 boundaries "
                    "[3, 5] [stage 'bucket_by_sequence_length']");
  CHECK_THROWS_WITH(ds.bucket_by_sequence_length(length, {3}, {2, 0}),
                    Catch::Contains("bucket_batch_sizes[1] must be > 0; got 0"));
  CHECK_THROWS_WITH(ds.bucket_by_sequence_length(length, {5, 3}, {2, 2, 2}),
                    Catch::Contains("bucket_boundaries must increase strictly; got [5, 3]"));
  CHECK_THROWS_WITH(ds.bucket_by_sequence_length(length, {3, 3}, {2, 2, 2}),
                    Catch::Contains("must increase strictly"));
  CHECK_THROWS_WITH(ds.bucket_by_sequence_length(length, {}, {2}, {.pad_to_bucket_boundary = true}),
                    Catch::Contains("pad_to_bucket_boundary needs at least one bucket boundary"));
  CHECK_THROWS_WITH(
      ds.bucket_by_sequence_length(length, {0, 3}, {2, 2, 2}, {.pad_to_bucket_boundary = true}),
      Catch::Contains("bucket_boundaries[0] must be >= 1"));
  CHECK_THROWS_WITH(
      ds.bucket_by_sequence_length(length, {3}, {2, 2}, {.padded_shapes = {Shape{4}, Shape{4}}}),
      "InvalidArgument: bucket_by_sequence_length: 2 padded shapes and 0 padding values given "
      "for an element of 1 component(s) [stage 'bucket_by_sequence_length']");
  // Element types the chosen batching cannot handle.
  auto words = from_vector<std::string>({"a"});
  CHECK_THROWS_WITH(words.bucket_by_sequence_length(length, {2}, {2, 2}),
                    Catch::Contains("padded_batch cannot pad this element type"));
  CHECK_THROWS_WITH(ds.bucket_by_sequence_length(length, {2}, {2, 2}, {.no_padding = true}),
                    Catch::Contains("no_padding: batch() stacks this element type"));
  CHECK_NOTHROW(ds.bucket_by_sequence_length(length, {3, 5}, {1, 2, 3}));
}

TEST_CASE("bucket_by_sequence_length's errors: the input's, element_length_func's, the padding's",
          "[stages][bucket_by_sequence_length]") {
  // An input error surfaces in place; the buckets carry on.
  auto input = from_vector(kElements).map([](V v) {
    if (v.size() == 3) throw Boom("three");
    return v;
  });
  const auto a = collect_outcomes(input.bucket_by_sequence_length(length, {3, 5}, {2, 2, 2}));
  REQUIRE(a.size() == 4);
  CHECK(a[0].error == "FunctionError: three [stage 'map', element 2]");
  CHECK(a[1].value == i64({7, 8, 9, 10, 11, 0, 13, 14, 15, 16, 19, 20}, Shape{2, 6}));
  CHECK(a[2].value == i64({0, 0, 21, 22}, Shape{2, 2}));
  CHECK(a[3].value == i64({1, 2, 3, 4}, Shape{1, 4}));
  // element_length_func's error fails the element, named by its index.
  const auto b = collect_outcomes(from_vector(kElements).bucket_by_sequence_length(
      [](const V& v) -> std::int64_t {
        if (v.size() == 5) throw Boom("no length");
        return static_cast<std::int64_t>(v.size());
      },
      {3, 5}, {2, 2, 2}));
  REQUIRE(b.size() == 4);
  CHECK(b[0].value == i64({1, 2, 3, 4, 5, 6, 7, 0}, Shape{2, 4}));
  CHECK(b[1].error == "FunctionError: no length [stage 'bucket_by_sequence_length', element 3]");
  CHECK(b[2].value == i64({0, 0, 21, 22}, Shape{2, 2}));
  CHECK(b[3].value == i64({13, 14, 15, 16, 19, 20}, Shape{1, 6}));
  // With pad_to_bucket_boundary, a length not below the last boundary fails its element.
  const auto c = collect_outcomes(from_vector(kElements).bucket_by_sequence_length(
      length, {2, 6}, {2, 2, 2}, {.pad_to_bucket_boundary = true}));
  REQUIRE(c.size() == 4);
  CHECK(c[0].value == i64({1, 2, 3, 4, 0, 5, 6, 7, 0, 0}, Shape{2, 5}));
  CHECK(c[1].error ==
        "InvalidArgument: bucket_by_sequence_length: with pad_to_bucket_boundary, lengths must "
        "be < the last bucket boundary 6; got 6 [stage 'bucket_by_sequence_length', element 4]");
  CHECK(c[2].value == i64({7, 8, 9, 10, 11, 21, 22, 0, 0, 0}, Shape{2, 5}));
  CHECK(c[3].value == i64({0}, Shape{1, 1}));
  // A batch that cannot be padded fails as a whole, named by its first element.
  const auto d = collect_outcomes(from_vector(kElements).bucket_by_sequence_length(
      length, {5}, {2, 2}, {.padded_shapes = {Shape{3}}}));
  REQUIRE(d.size() == 3);
  CHECK(d[0].error.find("DataLossError: padded_batch: component 0: element 1 of the batch has "
                        "size 4") == 0);
  CHECK(d[0].error.find("[stage 'bucket_by_sequence_length', element 0]") != std::string::npos);
  CHECK(d[1].error.find("[stage 'bucket_by_sequence_length', element 3]") != std::string::npos);
  CHECK(d[2].value == i64({5, 6, 7, 21, 22, 0}, Shape{2, 3}));
}

TEST_CASE("destroying a bucket_by_sequence_length iterator mid-stream is clean",
          "[stages][bucket_by_sequence_length]") {
  auto ds = range(1000).bucket_by_sequence_length([](std::int64_t x) { return x % 7; }, {2, 5},
                                                  {3, 4, 5});
  {
    auto it = ds.iterator();
    CHECK(it.next());
    CHECK(it.next());
  }
  std::int64_t total = 0;
  for (const Tensor& t : ds) total += t.shape()[0];
  CHECK(total == 1000);
}

TEST_CASE("bucket_by_sequence_length unwinds while it buffers once its consumer is gone",
          "[stages][bucket_by_sequence_length]") {
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  int pulled = 0;
  // Elements 0 and 1 fill bucket 0; all later ones go to bucket 1, whose batch is huge.
  // The consumer goes away while bucket 1 buffers.
  auto ds = range(100000).map([&pulled, &source](std::int64_t x) {
    if (++pulled == 500) source.request_stop();
    return x;
  });
  auto it = ds.bucket_by_sequence_length(identity, {2}, {2, 1000000}).make_iterator(ctx);
  auto first = it.next();
  REQUIRE(first);
  CHECK(values_of(*first) == V{0, 1});
  CHECK_THROWS_AS(it.next(), detail::Cancelled);
  CHECK(pulled == 500);
}
