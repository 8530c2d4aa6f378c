#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("unbatch undoes batch", "[stages][unbatch]") {
  std::vector<std::int64_t> flat;
  for (const Tensor& t : range(7).batch(3).unbatch()) flat.push_back(t.item<std::int64_t>());
  CHECK(flat == iota(0, 7));
  auto words = collect(from_vector<std::string>({"a", "b", "c"}).batch(2).unbatch());
  CHECK(words == std::vector<std::string>{"a", "b", "c"});
  CHECK(collect(range(0).batch(2).unbatch()).empty());
}

TEST_CASE("unbatch rows are views of the batch", "[stages][unbatch]") {
  auto rows = collect(range(4)
                          .map([](std::int64_t x) {
                            return Tensor::from_values<std::int64_t>({x, x});
                          })
                          .batch(4)
                          .unbatch());
  REQUIRE(rows.size() == 4);
  CHECK(rows[1].shares_storage_with(rows[2]));
  CHECK(rows[3] == Tensor::from_values<std::int64_t>({3, 3}));
}

TEST_CASE("unbatch of tuples and of empty batches", "[stages][unbatch]") {
  auto ds = from_vector(std::vector<std::vector<int>>{{1, 2}, {}, {3}}).unbatch();
  CHECK(collect(ds) == std::vector<int>{1, 2, 3});
  auto tuples = range(3).map([](std::int64_t x) {
    return std::tuple<std::int64_t, std::string>{x, "v"};
  });
  auto out = collect(tuples.batch(2).unbatch());
  REQUIRE(out.size() == 3);
  CHECK(std::get<0>(out[2]).item<std::int64_t>() == 2);
  CHECK(std::get<1>(out[2]) == "v");
}

TEST_CASE("unbatch of a scalar is an error naming the stage", "[stages][unbatch]") {
  auto ds = from_vector(std::vector<Tensor>{Tensor::scalar(1), Tensor::from_values<int>({2, 3})})
                .unbatch();
  auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 3);
  CHECK(out[0].error.find("stage 'unbatch'") != std::string::npos);
  CHECK(out[1].value->item<int>() == 2);
}
