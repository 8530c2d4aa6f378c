#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace user {
struct Sample {
  Tensor image;
  std::int64_t label = 0;
};
// A type with no specialisation: only its own bytes count.
struct Opaque {
  std::vector<char> hidden;
};
}  // namespace user

template <>
struct ingest::element_size<user::Sample> {
  static std::size_t bytes(const user::Sample& s) { return s.image.nbytes() + sizeof s.label; }
};

TEST_CASE("element sizes for the memory budget", "[core][element_size]") {
  CHECK(detail::element_bytes(std::int64_t{1}) == 8);
  CHECK(detail::element_bytes(std::string(10, 'x')) == 10);
  CHECK(detail::element_bytes(std::string()) == 0);
  CHECK(detail::element_bytes(std::vector<float>(4)) == 16);
  CHECK(detail::element_bytes(Tensor(DType::uint8, Shape{3, 5})) == 15);
  CHECK(detail::element_bytes(
            std::tuple<Tensor, std::int32_t>{Tensor(DType::float32, Shape{2}), 1}) == 12);
  CHECK(detail::element_bytes(std::pair<std::int32_t, double>{1, 2.0}) == 12);
  CHECK(detail::element_bytes(std::vector<std::string>{"ab", "c"}) == 3);
}

TEST_CASE("a user type is measured by its element_size specialisation", "[core][element_size]") {
  const user::Sample s{Tensor(DType::float32, Shape{4, 4}), 3};
  CHECK(detail::element_bytes(s) == 64 + 8);
  // Inside containers and tuples too.
  CHECK(detail::element_bytes(std::vector<user::Sample>{s, s}) == 2 * 72);
  CHECK(detail::element_bytes(std::tuple<user::Sample, std::int32_t>{s, 1}) == 76);
  // Without one, sizeof(T).
  CHECK(detail::element_bytes(user::Opaque{std::vector<char>(100)}) == sizeof(user::Opaque));
}

TEST_CASE("stats count a user type's bytes", "[core][element_size]") {
  auto ds = range(100).map([](std::int64_t i) {
    return user::Sample{Tensor(DType::uint8, Shape{1000}), i};
  });
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats stats = it.stats();
  const StageStats* map = find_stage(stats, "map");
  REQUIRE(map != nullptr);
  CHECK(map->elements == 100);
  // 100 elements of 1,008 bytes, sampled: 0.1008 MB.
  CHECK(map->megabytes == Approx(100 * 1008 / 1e6).epsilon(0.01));
}
