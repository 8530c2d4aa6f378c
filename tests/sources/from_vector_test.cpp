#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("from_vector yields the elements in order, every pass", "[sources][from_vector]") {
  auto ds = from_vector<std::string>({"a", "bb", "ccc"});
  CHECK(collect(ds) == std::vector<std::string>{"a", "bb", "ccc"});
  CHECK(collect(ds) == std::vector<std::string>{"a", "bb", "ccc"});
  CHECK(collect(from_vector(std::vector<int>{})).empty());
  CHECK(collect(from_vector(std::vector<int>{42})) == std::vector<int>{42});
}

TEST_CASE("from_vector supports bulk fill", "[sources][from_vector]") {
  std::vector<double> v(50);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) / 2;
  CHECK(collect_bulk(from_vector(v), 8) == v);
}

TEST_CASE("from_vector of tensors shares the tensors' storage", "[sources][from_vector]") {
  Tensor t = Tensor::from_values<int>({1, 2});
  auto ds = from_vector(std::vector<Tensor>{t});
  auto out = collect(ds);
  REQUIRE(out.size() == 1);
  CHECK(out[0].shares_storage_with(t));
}
