#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

TEST_CASE("map applies the function in order", "[stages][map]") {
  CHECK(collect(range(5).map([](std::int64_t x) { return 2 * x + 1; })) == V{1, 3, 5, 7, 9});
  CHECK(collect(range(0).map([](std::int64_t x) { return x; })).empty());
  CHECK(collect(range(1).map([](std::int64_t x) { return x - 1; })) == V{-1});
  // Changing the type.
  auto strings =
      range(3).map([](std::int64_t x) { return std::string(static_cast<std::size_t>(x), 'a'); });
  CHECK(collect(strings) == std::vector<std::string>{"", "a", "aa"});
}

TEST_CASE("map takes elements by value, rvalue or const reference", "[stages][map]") {
  auto ds = from_vector<std::string>({"x", "y"});
  CHECK(collect(ds.map([](const std::string& s) { return s + "!"; })) ==
        std::vector<std::string>{"x!", "y!"});
  CHECK(collect(ds.map([](std::string&& s) { return std::move(s) + "?"; })) ==
        std::vector<std::string>{"x?", "y?"});
  // Move-only elements move through.
  auto ptrs = from_generator([] {
    return [i = 0]() mutable -> std::optional<std::unique_ptr<int>> {
      if (i == 3) return std::nullopt;
      return std::make_unique<int>(i++);
    };
  });
  auto sum = ptrs.map([](std::unique_ptr<int> p) { return *p * 10; });
  CHECK(collect(sum) == std::vector<int>{0, 10, 20});
}

TEST_CASE("an exception from f surfaces at its element and iteration continues", "[stages][map]") {
  auto ds = range(6).map([](std::int64_t x) -> std::int64_t {
    if (x == 2 || x == 3) throw Boom("bad " + std::to_string(x));
    return x;
  });
  auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 6);
  CHECK(out[1].value == 1);
  CHECK(out[2].error == "FunctionError: bad 2 [stage 'map', element 2]");
  CHECK(out[3].error == "FunctionError: bad 3 [stage 'map', element 3]");
  CHECK(out[5].value == 5);
}

TEST_CASE("map bulk fill equals next, including errors mid-chunk", "[stages][map]") {
  auto f = [](std::int64_t x) -> std::int64_t {
    if (x % 37 == 36) throw Boom("x");
    return x * x;
  };
  // Drain through fill + next and through next alone: same elements, same error positions.
  auto bulk = range(200).map(f);
  auto it = bulk.iterator();
  std::vector<std::int64_t> got;
  std::vector<std::int64_t> errors;
  std::vector<std::int64_t> buf(50);
  std::int64_t position = 0;
  for (;;) {
    const std::size_t n = it.fill(buf);
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    position += static_cast<std::int64_t>(n);
    if (n == buf.size()) continue;
    try {
      auto x = it.next();
      if (!x) break;
      got.push_back(*x);
    } catch (const FunctionError& e) {
      CHECK(e.context().element == position);
      errors.push_back(position);
    }
    ++position;
  }
  V expected;
  for (std::int64_t x = 0; x < 200; ++x) {
    if (x % 37 != 36) expected.push_back(x * x);
  }
  CHECK(got == expected);
  CHECK(errors == V{36, 73, 110, 147, 184});
}

TEST_CASE("map changing the type in bulk", "[stages][map]") {
  auto ds = range(100).map([](std::int64_t x) { return static_cast<double>(x) / 4; });
  CHECK(collect_bulk(ds, 9) == collect(ds));
}

TEST_CASE("destroying a map iterator mid-stream is clean", "[stages][map]") {
  auto ds = from_vector<std::string>({"a", "b", "c"}).map([](std::string s) { return s + s; });
  {
    auto it = ds.iterator();
    CHECK(it.next() == "aa");
  }
  CHECK(collect(ds).size() == 3);
}

TEST_CASE("map gives each string it is done with back for the next record", "[stages][map]") {
  // A record read by value and only looked at by f: its buffer goes to the
  // calling thread's magazine (detail::StringRecycler), where the reader's
  // next take() finds it.
  auto& recycler = detail::StringRecycler::instance();
  const std::size_t before = recycler.cached_here(4096);
  auto it = from_vector(std::vector<std::string>(3, std::string(4096, 'r')))
                .map([](const std::string& s) { return s.size(); })
                .iterator();
  while (auto n = it.next()) CHECK(*n == 4096);
  CHECK(recycler.cached_here(4096) == before + 3);
  // A function that takes the string keeps it: nothing comes back.
  auto kept =
      from_vector(std::vector<std::string>(3, std::string(4096, 'k'))).map([](std::string s) {
        return s;
      });
  CHECK(collect(kept) == std::vector<std::string>(3, std::string(4096, 'k')));
  CHECK(recycler.cached_here(4096) == before + 3);
}
