#include <catch2/catch.hpp>

#include <array>
#include <set>

#include <ingest/core/random.hpp>

using namespace ingest;

TEST_CASE("a seed always gives the same sequence", "[core][random]") {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next();
    CHECK(x == b.next());
    differs |= x != c.next();
  }
  CHECK(differs);
  // Pinned values: a change of algorithm would change every seeded shuffle.
  Rng pinned(1);
  CHECK(pinned.next() == Rng(1).next());
  CHECK(mix64(0) == 0xe220a8397b1dcdafULL);
}

TEST_CASE("uniform stays in range and is roughly uniform", "[core][random]") {
  Rng rng(7);
  std::array<int, 10> counts{};
  for (int i = 0; i < 100000; ++i) {
    const auto v = rng.uniform(10);
    REQUIRE(v < 10);
    ++counts[v];
  }
  for (int c : counts) CHECK(std::abs(c - 10000) < 500);  // ~5 sigma
  CHECK(rng.uniform(1) == 0);
  const double u = rng.uniform01();
  CHECK(u >= 0.0);
  CHECK(u < 1.0);
}

TEST_CASE("derived seeds differ per stream", "[core][random]") {
  std::set<std::uint64_t> seeds;
  for (std::uint64_t epoch = 0; epoch < 1000; ++epoch) seeds.insert(derive_seed(5, epoch));
  CHECK(seeds.size() == 1000);
  CHECK(derive_seed(5, 3) == derive_seed(5, 3));
  CHECK(random_seed() != random_seed());
}
