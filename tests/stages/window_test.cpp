#include <catch2/catch.hpp>

#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;
using W = std::vector<V>;

TEST_CASE("window: shift defaults to the size", "[stages][window]") {
  CHECK(collect(range(7).window(3)) == W{{0, 1, 2}, {3, 4, 5}, {6}});
  CHECK(collect(range(7).window(3, {.drop_remainder = true})) == W{{0, 1, 2}, {3, 4, 5}});
  CHECK(collect(range(6).window(3)) == W{{0, 1, 2}, {3, 4, 5}});
  CHECK(collect(range(6).window(3, {.drop_remainder = true})) == W{{0, 1, 2}, {3, 4, 5}});
  CHECK(collect(range(3).window(1)) == W{{0}, {1}, {2}});
}

TEST_CASE("window: empty input, one element, a size above the input's length", "[stages][window]") {
  CHECK(collect(range(0).window(3)).empty());
  CHECK(collect(range(0).window(3, {.drop_remainder = true})).empty());
  CHECK(collect(range(1).window(3)) == W{{0}});
  CHECK(collect(range(1).window(3, {.drop_remainder = true})).empty());
  CHECK(collect(range(1).window(1, {.drop_remainder = true})) == W{{0}});
  CHECK(collect(range(2).window(5, {.shift = 1})) == W{{0, 1}, {1}});
  CHECK(collect(range(2).window(5, {.shift = 1, .drop_remainder = true})).empty());
}

TEST_CASE("window: overlapping windows (shift < size), as tf.data", "[stages][window]") {
  // tf: range(7).window(3, shift=2) -> [0,1,2] [2,3,4] [4,5,6] [6].
  CHECK(collect(range(7).window(3, {.shift = 2})) == W{{0, 1, 2}, {2, 3, 4}, {4, 5, 6}, {6}});
  CHECK(collect(range(7).window(3, {.shift = 2, .drop_remainder = true})) ==
        W{{0, 1, 2}, {2, 3, 4}, {4, 5, 6}});
  CHECK(collect(range(6).window(3, {.shift = 2})) == W{{0, 1, 2}, {2, 3, 4}, {4, 5}});
  CHECK(collect(range(6).window(3, {.shift = 2, .drop_remainder = true})) ==
        W{{0, 1, 2}, {2, 3, 4}});
  CHECK(collect(range(4).window(3, {.shift = 1})) == W{{0, 1, 2}, {1, 2, 3}, {2, 3}, {3}});
  // Copied elements stay intact in every window that holds them.
  CHECK(collect(from_vector<std::string>({"a", "b", "c", "d"}).window(3, {.shift = 1})) ==
        std::vector<std::vector<std::string>>{{"a", "b", "c"}, {"b", "c", "d"}, {"c", "d"}, {"d"}});
}

TEST_CASE("window: gaps between windows (shift > size)", "[stages][window]") {
  CHECK(collect(range(7).window(2, {.shift = 3})) == W{{0, 1}, {3, 4}, {6}});
  CHECK(collect(range(7).window(2, {.shift = 3, .drop_remainder = true})) == W{{0, 1}, {3, 4}});
  CHECK(collect(range(8).window(2, {.shift = 3})) == W{{0, 1}, {3, 4}, {6, 7}});
  CHECK(collect(range(8).window(2, {.shift = 3, .drop_remainder = true})) ==
        W{{0, 1}, {3, 4}, {6, 7}});
  CHECK(collect(range(6).window(2, {.shift = 3})) == W{{0, 1}, {3, 4}});
  CHECK(collect(range(5).window(2, {.shift = 3})) == W{{0, 1}, {3, 4}});
  CHECK(collect(range(4).window(2, {.shift = 3})) == W{{0, 1}, {3}});
  CHECK(collect(range(4).window(2, {.shift = 3, .drop_remainder = true})) == W{{0, 1}});
}

TEST_CASE("window: strides", "[stages][window]") {
  // tf: range(7).window(3, shift=1, stride=2, drop_remainder=True).
  CHECK(collect(range(7).window(3, {.shift = 1, .stride = 2, .drop_remainder = true})) ==
        W{{0, 2, 4}, {1, 3, 5}, {2, 4, 6}});
  CHECK(collect(range(7).window(3, {.shift = 1, .stride = 2})) ==
        W{{0, 2, 4}, {1, 3, 5}, {2, 4, 6}, {3, 5}, {4, 6}, {5}, {6}});
  // A window spans (size - 1) * stride + 1 = 7 input elements.
  CHECK(collect(range(10).window(3, {.shift = 2, .stride = 3})) ==
        W{{0, 3, 6}, {2, 5, 8}, {4, 7}, {6, 9}, {8}});
  CHECK(collect(range(10).window(3, {.shift = 2, .stride = 3, .drop_remainder = true})) ==
        W{{0, 3, 6}, {2, 5, 8}});
  // Stride with the default shift (= size), and a stride past the input.
  CHECK(collect(range(8).window(2, {.stride = 3})) == W{{0, 3}, {2, 5}, {4, 7}, {6}});
  CHECK(collect(range(3).window(2, {.stride = 5})) == W{{0}, {2}});
  CHECK(collect(range(3).window(2, {.stride = 5, .drop_remainder = true})).empty());
}

TEST_CASE("window's cardinality follows tf.data's", "[stages][window]") {
  CHECK(range(7).window(3).cardinality() == 3);
  CHECK(range(7).window(3, {.drop_remainder = true}).cardinality() == 2);
  CHECK(range(6).window(3, {.drop_remainder = true}).cardinality() == 2);
  CHECK(range(7).window(3, {.shift = 2}).cardinality() == 4);
  CHECK(range(7).window(3, {.shift = 2, .drop_remainder = true}).cardinality() == 3);
  CHECK(range(7).window(2, {.shift = 3, .drop_remainder = true}).cardinality() == 2);
  CHECK(range(8).window(2, {.shift = 3, .drop_remainder = true}).cardinality() == 3);
  CHECK(range(7).window(3, {.shift = 1, .stride = 2}).cardinality() == 7);
  CHECK(range(7).window(3, {.shift = 1, .stride = 2, .drop_remainder = true}).cardinality() == 3);
  CHECK(range(10).window(3, {.shift = 2, .stride = 3, .drop_remainder = true}).cardinality() == 2);
  CHECK(range(0).window(3).cardinality() == 0);
  CHECK(range(1).window(3, {.drop_remainder = true}).cardinality() == 0);
  CHECK(range(3).repeat().window(2).cardinality() == infinite_cardinality);
  CHECK(range(3).repeat().window(2, {.drop_remainder = true}).cardinality() ==
        infinite_cardinality);
  CHECK(range(3).filter([](std::int64_t) { return true; }).window(2).cardinality() ==
        unknown_cardinality);
  // The cardinality is what a pass produces, for every combination above.
  for (std::int64_t n : {0, 1, 5, 7, 10}) {
    for (std::int64_t size : {1, 2, 3}) {
      for (std::int64_t shift : {1, 2, 4}) {
        for (std::int64_t stride : {1, 2, 3}) {
          for (bool drop : {false, true}) {
            auto ds =
                range(n).window(size, {.shift = shift, .stride = stride, .drop_remainder = drop});
            CHECK(ds.cardinality() == static_cast<std::int64_t>(collect(ds).size()));
          }
        }
      }
    }
  }
}

TEST_CASE("window rejects sizes, shifts and strides below 1", "[stages][window]") {
  auto message = [](auto make) -> std::string {
    try {
      make();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(message([] { return range(3).window(0); }).find("window: size must be > 0; got 0") !=
        std::string::npos);
  CHECK(message([] { return range(3).window(-2); }).find("window: size must be > 0; got -2") !=
        std::string::npos);
  CHECK(message([] {
          return range(3).window(2, {.shift = 0});
        }).find("window: shift must be > 0; got 0") != std::string::npos);
  CHECK(message([] {
          return range(3).window(2, {.shift = -1});
        }).find("window: shift must be > 0; got -1") != std::string::npos);
  CHECK(message([] {
          return range(3).window(2, {.stride = 0});
        }).find("window: stride must be > 0; got 0") != std::string::npos);
  CHECK(message([] {
          return range(3).window(2, {.stride = -5});
        }).find("window: stride must be > 0; got -5") != std::string::npos);
}

TEST_CASE("window: a span beyond int64 saturates instead of overflowing", "[stages][window]") {
  const std::int64_t huge = std::int64_t{1} << 62;
  CHECK(collect(range(3).window(huge, {.shift = 1, .stride = 4})) == W{{0}, {1}, {2}});
  CHECK(collect(range(3).window(huge, {.stride = 4, .drop_remainder = true})).empty());
  CHECK(range(3).window(huge, {.stride = 4, .drop_remainder = true}).cardinality() == 0);
  CHECK(range(3).window(huge, {.stride = 4}).cardinality() == 1);
}

TEST_CASE("a window holding a failed element fails as a whole", "[stages][window]") {
  auto input = range(7).map([](std::int64_t x) -> std::int64_t {
    if (x == 3) throw Boom("three");
    return x;
  });
  const auto out = collect_outcomes(input.window(3, {.shift = 2}));
  REQUIRE(out.size() == 4);
  CHECK(out[0].value == V{0, 1, 2});
  CHECK(out[1].error == "FunctionError: three [stage 'map', element 3]");
  CHECK(out[2].value == V{4, 5, 6});
  CHECK(out[3].value == V{6});
  // Every window that holds it fails.
  auto overlap = collect_outcomes(input.window(3, {.shift = 1}));
  REQUIRE(overlap.size() == 7);
  CHECK(overlap[0].value == V{0, 1, 2});
  CHECK_FALSE(overlap[1].value);
  CHECK_FALSE(overlap[2].value);
  CHECK_FALSE(overlap[3].value);
  CHECK(overlap[4].value == V{4, 5, 6});
  // Without drop_remainder the short last window fails too; with it, it is not produced.
  auto last = range(4).map([](std::int64_t x) -> std::int64_t {
    if (x == 3) throw Boom("three");
    return x;
  });
  const auto short_last = collect_outcomes(last.window(3));
  REQUIRE(short_last.size() == 2);
  CHECK(short_last[0].value == V{0, 1, 2});
  CHECK_FALSE(short_last[1].value);
  CHECK(collect_outcomes(last.window(3, {.drop_remainder = true})).size() == 1);
}

TEST_CASE("window ignores errors of elements no window holds, as tf.data", "[stages][window]") {
  auto fails_at = [](std::int64_t bad) {
    return range(7).map([bad](std::int64_t x) -> std::int64_t {
      if (x == bad) throw Boom("bad");
      return x;
    });
  };
  // Between the strided elements of a window.
  CHECK(collect(fails_at(1).window(2, {.shift = 2, .stride = 2})) ==
        W{{0, 2}, {2, 4}, {4, 6}, {6}});
  // Skipped by a shift larger than the window.
  CHECK(collect(fails_at(2).window(2, {.shift = 3})) == W{{0, 1}, {3, 4}, {6}});
}

TEST_CASE("window reads the elements a shift skips only when the next window is asked for",
          "[stages][window]") {
  int pulled = 0;
  auto ds = range(100).map([&pulled](std::int64_t x) {
    ++pulled;
    return x;
  });
  auto it = ds.window(2, {.shift = 10}).iterator();
  CHECK(it.next() == V{0, 1});
  CHECK(pulled == 2);
  CHECK(it.next() == V{10, 11});
  CHECK(pulled == 12);
  CHECK(collect(ds.window(3).take(1)) == W{{0, 1, 2}});
}

TEST_CASE("window moves move-only elements, and refuses to overlap them", "[stages][window]") {
  auto pointers = from_generator([] {
    return [i = 0]() mutable -> std::optional<std::unique_ptr<int>> {
      if (i == 5) return std::nullopt;
      return std::make_unique<int>(i++);
    };
  });
  const auto windows = collect(pointers.window(2));
  REQUIRE(windows.size() == 3);
  CHECK(*windows[1][0] == 2);
  CHECK(*windows[1][1] == 3);
  CHECK(*windows[2][0] == 4);
  CHECK(collect(pointers.window(2, {.shift = 3, .stride = 2})).size() == 2);
  CHECK_THROWS_AS(pointers.window(2, {.shift = 1}), InvalidArgument);
  CHECK_THROWS_AS(pointers.window(2, {.shift = 2, .stride = 2}), InvalidArgument);
}

TEST_CASE("destroying a window iterator mid-stream is clean", "[stages][window]") {
  auto ds = from_vector<std::string>({"a", "b", "c", "d", "e"}).window(3, {.shift = 1});
  {
    auto it = ds.iterator();
    CHECK(it.next() == std::vector<std::string>{"a", "b", "c"});
  }
  CHECK(collect(ds).size() == 5);
}

TEST_CASE("window composes: then map, then a stacked batch per window", "[stages][window]") {
  auto sums = range(7).window(3, {.shift = 2}).map([](const V& w) {
    return std::accumulate(w.begin(), w.end(), std::int64_t{0});
  });
  CHECK(collect(sums) == V{3, 9, 15, 6});
  // tf's ds.window(3).flat_map(lambda w: w.batch(3)): each window as one Tensor.
  auto stacked = range(7).window(3, {.shift = 2}).flat_map([](V w) {
    return from_vector(std::move(w)).batch(3);
  });
  const auto tensors = collect(stacked);
  REQUIRE(tensors.size() == 4);
  CHECK(values_of(tensors[1]) == V{2, 3, 4});
  CHECK(tensors[3].shape() == Shape{1});
  // Or stacked directly with batch_traits, as batch() does.
  auto direct = range(6).window(3).map([](V w) {
    batch_traits<std::int64_t>::builder b(BatchSpec{w.size(), &default_allocator()});
    for (std::size_t i = 0; i < w.size(); ++i) b.set(i, w[i]);
    return std::move(b).finish(w.size());
  });
  const auto direct_tensors = collect(direct);
  REQUIRE(direct_tensors.size() == 2);
  CHECK(values_of(direct_tensors[1]) == V{3, 4, 5});
  // An infinite input, windows taken from it.
  CHECK(collect(range(3).repeat().window(2).take(3)) == W{{0, 1}, {2, 0}, {1, 2}});
}

TEST_CASE("window unwinds between input elements once its consumer is gone", "[stages][window]") {
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  int pulled = 0;
  auto ds = range(1000).map([&pulled](std::int64_t x) {
    ++pulled;
    return x;
  });
  // Filling a window, and skipping the elements between two windows.
  auto filling = ds.window(100).make_iterator(ctx);
  auto skipping = ds.window(1, {.shift = 100}).make_iterator(ctx);
  CHECK(skipping.next() == V{0});
  CHECK(pulled == 1);
  source.request_stop();
  CHECK_THROWS_AS(filling.next(), detail::Cancelled);
  CHECK_THROWS_AS(skipping.next(), detail::Cancelled);
  CHECK(pulled == 1);
}
