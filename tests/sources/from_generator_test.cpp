#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {
auto counter(int n) {
  return [n] {
    return [i = 0, n]() mutable -> std::optional<int> {
      if (i == n) return std::nullopt;
      return i++;
    };
  };
}
}  // namespace

TEST_CASE("from_generator calls make anew for every pass", "[sources][from_generator]") {
  int makes = 0;
  auto ds = from_generator([&makes, inner = counter(3)] {
    ++makes;
    return inner();
  });
  CHECK(collect(ds) == std::vector<int>{0, 1, 2});
  CHECK(collect(ds) == std::vector<int>{0, 1, 2});
  CHECK(makes == 2);
  CHECK(collect(ds.repeat(3)).size() == 9);
}

TEST_CASE("from_generator edge cases", "[sources][from_generator]") {
  CHECK(collect(from_generator(counter(0))).empty());
  CHECK(collect(from_generator(counter(1))) == std::vector<int>{0});
  // The generator is not called again after it ended.
  int calls = 0;
  auto ds = from_generator([&calls] {
    return [&calls]() -> std::optional<int> {
      ++calls;
      return std::nullopt;
    };
  });
  auto it = ds.iterator();
  CHECK_FALSE(it.next());
  CHECK_FALSE(it.next());
  CHECK(calls == 1);
}

TEST_CASE("from_generator yields move-only elements", "[sources][from_generator]") {
  auto ds = from_generator([] {
    return [i = 0]() mutable -> std::optional<std::unique_ptr<int>> {
      if (i == 2) return std::nullopt;
      return std::make_unique<int>(i++);
    };
  });
  auto it = ds.iterator();
  CHECK(**it.next() == 0);
  CHECK(**it.next() == 1);
  CHECK_FALSE(it.next());
}

TEST_CASE("an exception from the generator surfaces with its element index",
          "[sources][from_generator]") {
  auto ds = from_generator([] {
    return [i = 0]() mutable -> std::optional<std::string> {
      const int k = i++;
      if (k == 1) throw Boom("bad record");
      if (k == 3) return std::nullopt;
      return std::to_string(k);
    };
  });
  auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 3);
  CHECK(out[0].value == "0");
  CHECK(out[1].error == "FunctionError: bad record [stage 'from_generator', element 1]");
  CHECK(out[2].value == "2");
}

TEST_CASE("an exception from make surfaces when iteration starts", "[sources][from_generator]") {
  auto ds = from_generator([]() -> decltype(counter(1)()) { throw Boom("cannot open"); });
  CHECK_THROWS_WITH(ds.iterator(),
                    Catch::Contains("cannot open") && Catch::Contains("from_generator"));
}
