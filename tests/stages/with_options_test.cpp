#include <catch2/catch.hpp>

#include <mutex>
#include <set>
#include <thread>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("with_options threads gives the pipeline its own pool",
          "[stages][with_options][concurrency]") {
  std::mutex mu;
  std::set<std::thread::id> ids;
  auto ds = range(2000)
                .map(
                    [&](std::int64_t x) {
                      std::lock_guard lock(mu);
                      ids.insert(std::this_thread::get_id());
                      return x;
                    },
                    {.parallelism = 8})
                .with_options({.threads = 2});
  CHECK(collect(ds) == iota(0, 2000));
  ids.erase(std::this_thread::get_id());  // the consumer may help
  CHECK(ids.size() <= 2);
  CHECK_THROWS_AS(range(3).with_options({.threads = 0}), InvalidArgument);
}

TEST_CASE("with_options shares a given runtime", "[stages][with_options][concurrency]") {
  auto rt = std::make_shared<Runtime>(1);
  auto ds = range(100).map([](std::int64_t x) { return x + 1; }, {.parallelism = 4}).prefetch(2);
  auto a = ds.with_options({.runtime = rt});
  auto b = ds.with_options({.runtime = rt});
  auto ia = a.iterator();
  auto ib = b.iterator();
  std::int64_t sa = 0, sb = 0;
  while (auto x = ia.next()) sa += *x;
  while (auto x = ib.next()) sb += *x;
  CHECK(sa == 5050);
  CHECK(sb == 5050);
}

TEST_CASE("options apply only to the stages before with_options", "[stages][with_options]") {
  // Deterministic order is the default and survives an explicit true.
  auto ds = range(300)
                .map([](std::int64_t x) { return x; }, {.parallelism = 3})
                .with_options({.deterministic = true});
  CHECK(collect(ds) == iota(0, 300));
}
