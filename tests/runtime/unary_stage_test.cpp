// The one-input stage shell: the README's example stage, defined here with
// nothing but its own logic, gets the input registered and probed (stats),
// the member functions of every dataset, and iterates like any stage.
#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/runtime/unary_stage.hpp>

#include "support/testing.hpp"

using namespace ingest;
using ingest::testing::collect;

namespace {

template <class InputIt>
class EveryOtherIterator {
 public:
  using value_type = typename InputIt::value_type;
  explicit EveryOtherIterator(InputIt input) : input_(std::move(input)) {}
  std::optional<value_type> next() {
    std::optional<value_type> x = input_.next();
    if (x) input_.next();  // drop the one after it
    return x;
  }

 private:
  InputIt input_;
};

template <class Input>
class EveryOtherDataset
    : public detail::UnaryStage<EveryOtherDataset<Input>, Input, typename Input::element_type> {
 public:
  static constexpr std::string_view stage_name = "every_other";
  explicit EveryOtherDataset(Input input) : EveryOtherDataset::UnaryStage(std::move(input)) {}
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return EveryOtherIterator<It>(std::move(input));
  }
  std::int64_t cardinality() const {
    return detail::map_cardinality(this->input_cardinality(),
                                   [](std::int64_t n) { return (n + 1) / 2; });
  }
};

}  // namespace

TEST_CASE("a stage on the one-input shell holds only its own logic", "[runtime][unary_stage]") {
  const EveryOtherDataset every_other(range(7));
  CHECK(collect(every_other) == std::vector<std::int64_t>{0, 2, 4, 6});
  CHECK(every_other.cardinality() == 4);
  CHECK(collect(EveryOtherDataset(range(0))).empty());
  CHECK(collect(EveryOtherDataset(range(1))) == std::vector<std::int64_t>{0});
  // The dataset's member functions chain on it, and it on others.
  CHECK(collect(every_other.map([](std::int64_t x) { return 10 * x; }).take(3)) ==
        std::vector<std::int64_t>{0, 20, 40});
  CHECK(collect(EveryOtherDataset(range(10).filter([](std::int64_t x) { return x % 3 != 0; }))) ==
        std::vector<std::int64_t>{1, 4, 7});
  CHECK(collect(every_other.input()).size() == 7);
}

TEST_CASE("the shell registers the input in the model", "[runtime][unary_stage]") {
  auto it = EveryOtherDataset(range(100)).iterator();
  std::int64_t n = 0;
  while (it.next()) ++n;
  CHECK(n == 50);
  const PipelineStats stats = it.stats();
  REQUIRE(stats.stages.size() == 2);
  CHECK(stats.stages[0].name == "every_other");
  CHECK(stats.stages[0].elements == 50);
  CHECK(stats.stages[1].name == "range");
  CHECK(stats.stages[1].depth == 1);
  CHECK(stats.stages[1].elements == 100);
}

TEST_CASE("an error from the input passes through the shell at its position",
          "[runtime][unary_stage]") {
  auto ds = EveryOtherDataset(range(6).map([](std::int64_t x) {
    if (x == 2) throw std::runtime_error("two");
    return x;
  }));
  auto it = ds.iterator();
  CHECK(it.next() == 0);
  CHECK_THROWS_AS(it.next(), FunctionError);  // element 2
  CHECK(it.next() == 3);                      // the failed element took the place of one returned
  CHECK(it.next() == 5);
  CHECK_FALSE(it.next().has_value());
}
