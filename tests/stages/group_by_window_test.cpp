#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;
using VV = std::vector<V>;

namespace {
// reduce_func: the window as one element.
auto window_as_dataset = [](std::int64_t, V&& window) {
  return from_vector(VV{std::move(window)});
};
// reduce_func: the key, then the window's elements.
auto key_then_elements = [](std::int64_t key, V&& window) {
  window.insert(window.begin(), 100 + key);
  return from_vector(std::move(window));
};
auto parity = [](std::int64_t x) { return x % 2; };
}  // namespace

TEST_CASE("group_by_window: tf.data's example, key x % 2, window 5, over range(10)",
          "[stages][group_by_window]") {
  auto ds = range(10).group_by_window(
      parity, [](std::int64_t, V&& w) { return from_vector(std::move(w)).batch(5); }, 5);
  const auto out = collect(ds);
  REQUIRE(out.size() == 2);
  CHECK(values_of(out[0]) == V{0, 2, 4, 6, 8});
  CHECK(values_of(out[1]) == V{1, 3, 5, 7, 9});
}

TEST_CASE("group_by_window: windows of 3, the partial ones flushed at the end",
          "[stages][group_by_window]") {
  CHECK(collect(range(10).group_by_window(parity, window_as_dataset, 3)) ==
        VV{{0, 2, 4}, {1, 3, 5}, {6, 8}, {7, 9}});
  // The reduced datasets' elements come out flattened, in order.
  CHECK(collect(range(10).group_by_window(parity, key_then_elements, 3)) ==
        V{100, 0, 2, 4, 101, 1, 3, 5, 100, 6, 8, 101, 7, 9});
  // Window 1: every element is its own window, in input order.
  CHECK(collect(range(4).group_by_window(parity, window_as_dataset, 1)) == VV{{0}, {1}, {2}, {3}});
  // A window size no key reaches: everything is flushed at the end.
  CHECK(collect(range(5).group_by_window(parity, window_as_dataset, 100)) == VV{{0, 2, 4}, {1, 3}});
}

TEST_CASE("group_by_window flushes the partial windows in ascending key order, as tf's std::map",
          "[stages][group_by_window]") {
  // Keys first seen in the order 5, -2, 3, 0: flushed -2, 0, 3, 5.
  auto ds = from_vector<std::int64_t>({5, -2, 3, 5, 0, -2})
                .group_by_window([](std::int64_t x) { return x; }, window_as_dataset, 10);
  CHECK(collect(ds) == VV{{-2, -2}, {0}, {3}, {5, 5}});
  // A full window goes out as soon as it fills, before keys seen earlier.
  auto full_first = from_vector<std::int64_t>({5, 3, 3, 5})
                        .group_by_window([](std::int64_t x) { return x; }, window_as_dataset, 2);
  CHECK(collect(full_first) == VV{{3, 3}, {5, 5}});
}

TEST_CASE("group_by_window with a window_size_func, asked once per key",
          "[stages][group_by_window]") {
  int calls = 0;
  auto ds = range(12).group_by_window(parity, window_as_dataset, [&calls](std::int64_t key) {
    ++calls;
    return key == 0 ? 2 : 4;
  });
  CHECK(collect(ds) == VV{{0, 2}, {4, 6}, {1, 3, 5, 7}, {8, 10}, {9, 11}});
  CHECK(calls == 2);
  calls = 0;
  CHECK(collect(ds).size() == 5);  // each pass asks again
  CHECK(calls == 2);
}

TEST_CASE("group_by_window on empty and one-element inputs", "[stages][group_by_window]") {
  CHECK(collect(range(0).group_by_window(parity, window_as_dataset, 3)).empty());
  CHECK(collect(range(1).group_by_window(parity, window_as_dataset, 3)) == VV{{0}});
  CHECK(collect(range(1).group_by_window(parity, window_as_dataset, 1)) == VV{{0}});
  // reduce_func may return an empty dataset: nothing comes out for that window.
  auto empty_even = range(6).group_by_window(
      parity, [](std::int64_t key, V&& w) { return from_vector(key == 0 ? V{} : std::move(w)); },
      2);
  CHECK(collect(empty_even) == V{1, 3, 5});
}

TEST_CASE("group_by_window moves move-only elements into the windows",
          "[stages][group_by_window]") {
  auto ds =
      range(7)
          .map([](std::int64_t x) { return std::make_unique<std::int64_t>(x); })
          .group_by_window([](const std::unique_ptr<std::int64_t>& p) { return *p % 3; },
                           [](std::int64_t key, std::vector<std::unique_ptr<std::int64_t>>&& w) {
                             V out{key};
                             for (auto& p : w) out.push_back(*p);
                             return from_vector(VV{std::move(out)});
                           },
                           2);
  CHECK(collect(ds) == VV{{0, 0, 3}, {1, 1, 4}, {2, 2, 5}, {0, 6}});
}

TEST_CASE("group_by_window's cardinality is unknown, infinite after an infinite input",
          "[stages][group_by_window]") {
  CHECK(range(10).group_by_window(parity, window_as_dataset, 3).cardinality() ==
        unknown_cardinality);
  CHECK(range(0).group_by_window(parity, window_as_dataset, 3).cardinality() ==
        unknown_cardinality);
  CHECK(range(10).repeat().group_by_window(parity, window_as_dataset, 3).cardinality() ==
        infinite_cardinality);
}

TEST_CASE("group_by_window rejects a window size <= 0", "[stages][group_by_window]") {
  CHECK_THROWS_WITH(range(3).group_by_window(parity, window_as_dataset, 0),
                    "InvalidArgument: group_by_window: window_size must be > 0; got 0 [stage "
                    "'group_by_window']");
  CHECK_THROWS_AS(range(3).group_by_window(parity, window_as_dataset, -4), InvalidArgument);
  // From window_size_func: the element that brought the key fails, and so does
  // every later one of that key (its size is asked again).
  auto ds = range(5).group_by_window(parity, window_as_dataset,
                                     [](std::int64_t key) { return key == 1 ? 0 : 2; });
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 4);
  CHECK(out[0].error ==
        "InvalidArgument: group_by_window: the window size of key 1 must be > 0; "
        "window_size_func returned 0 [stage 'group_by_window', element 1]");
  CHECK(out[1].value == V{0, 2});
  CHECK(out[2].error.find("element 3]") != std::string::npos);
  CHECK(out[3].value == V{4});
}

TEST_CASE("an input error surfaces in place through group_by_window", "[stages][group_by_window]") {
  auto input = range(10).map([](std::int64_t x) {
    if (x == 4) throw Boom("four");
    return x;
  });
  const auto out = collect_outcomes(input.group_by_window(parity, window_as_dataset, 3));
  REQUIRE(out.size() == 5);
  CHECK(out[0].error == "FunctionError: four [stage 'map', element 4]");
  CHECK(out[1].value == V{1, 3, 5});
  CHECK(out[2].value == V{0, 2, 6});
  CHECK(out[3].value == V{8});
  CHECK(out[4].value == V{7, 9});
}

TEST_CASE("errors from key_func, window_size_func and reduce_func name the stage",
          "[stages][group_by_window]") {
  auto key_fails = range(6).group_by_window(
      [](std::int64_t x) -> std::int64_t {
        if (x == 2) throw Boom("no key");
        return x % 2;
      },
      window_as_dataset, 2);
  const auto a = collect_outcomes(key_fails);
  REQUIRE(a.size() == 4);
  CHECK(a[0].error == "FunctionError: no key [stage 'group_by_window', element 2]");
  CHECK(a[1].value == V{1, 3});
  CHECK(a[2].value == V{0, 4});  // element 2 was dropped
  CHECK(a[3].value == V{5});

  auto size_fails =
      range(4).group_by_window(parity, window_as_dataset, [](std::int64_t key) -> std::int64_t {
        if (key == 0) throw Boom("no size");
        return 2;
      });
  const auto b = collect_outcomes(size_fails);
  REQUIRE(b.size() == 3);
  CHECK(b[0].error == "FunctionError: no size [stage 'group_by_window', element 0]");
  CHECK(b[1].error == "FunctionError: no size [stage 'group_by_window', element 2]");
  CHECK(b[2].value == V{1, 3});

  // reduce_func's error names the window's first element; the window is dropped.
  auto reduce_fails = range(7).group_by_window(
      parity,
      [](std::int64_t key, V&& w) {
        if (key == 1 && w.front() == 1) throw Boom("no reduce");
        return from_vector(VV{std::move(w)});
      },
      2);
  const auto c = collect_outcomes(reduce_fails);
  REQUIRE(c.size() == 4);
  CHECK(c[0].value == V{0, 2});
  CHECK(c[1].error == "FunctionError: no reduce [stage 'group_by_window', element 1]");
  CHECK(c[2].value == V{4, 6});
  CHECK(c[3].value == V{5});

  // An error inside a reduced dataset surfaces where it occurs; the rest follows.
  auto inner_fails = range(4).group_by_window(
      parity,
      [](std::int64_t, V&& w) {
        return from_vector(std::move(w)).map([](std::int64_t x) {
          if (x == 2) throw Boom("inner");
          return x;
        });
      },
      2);
  const auto d = collect_outcomes(inner_fails);
  REQUIRE(d.size() == 4);
  CHECK(d[0].value == 0);
  CHECK(d[1].error == "FunctionError: inner [stage 'map', element 1]");
  CHECK(d[2].value == 1);
  CHECK(d[3].value == 3);
}

TEST_CASE("destroying a group_by_window iterator mid-stream is clean",
          "[stages][group_by_window]") {
  auto ds = range(100).group_by_window(parity, key_then_elements, 3);
  {
    auto it = ds.iterator();
    CHECK(it.next() == 100);
    CHECK(it.next() == 0);
  }
  {
    auto it = ds.iterator();
    for (int i = 0; i < 10; ++i) CHECK(it.next());
  }
  CHECK(collect(ds).size() == 100 + 34);  // 17 windows per key
}

TEST_CASE("group_by_window unwinds while it buffers once its consumer is gone",
          "[stages][group_by_window]") {
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  int pulled = 0;
  // Elements 0 and 1 fill key 0's window; every later element has a key of
  // its own and waits; the consumer goes away while they pile up.
  auto ds = range(100000).map([&pulled, &source](std::int64_t x) {
    if (++pulled == 500) source.request_stop();
    return x;
  });
  auto it = ds.group_by_window([](std::int64_t x) { return x < 2 ? 0 : x; }, window_as_dataset, 2)
                .make_iterator(ctx);
  CHECK(it.next() == V{0, 1});
  CHECK_THROWS_AS(it.next(), detail::Cancelled);
  CHECK(pulled == 500);
}

TEST_CASE("group_by_window composes with erase, repeat and take", "[stages][group_by_window]") {
  auto ds = range(6).group_by_window(parity, window_as_dataset, 2).erase();
  CHECK(collect(ds) == VV{{0, 2}, {1, 3}, {4}, {5}});
  // Each pass starts with no groups.
  CHECK(collect(range(3).group_by_window(parity, window_as_dataset, 2).repeat(2)) ==
        VV{{0, 2}, {1}, {0, 2}, {1}});
  CHECK(collect(range(1000).repeat().group_by_window(parity, window_as_dataset, 2).take(3)) ==
        VV{{0, 2}, {1, 3}, {4, 6}});
}
