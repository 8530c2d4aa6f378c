#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;
using S = std::vector<std::string>;

TEST_CASE("choose_from_datasets: tf.data's docstring example", "[stages][choose_from_datasets]") {
  // datasets = [from_tensors("foo").repeat(), ..."bar"..., ..."baz"...]
  // choice_dataset = range(3).repeat(3)
  std::vector datasets{from_vector<std::string>({"foo"}).repeat(),
                       from_vector<std::string>({"bar"}).repeat(),
                       from_vector<std::string>({"baz"}).repeat()};
  auto ds = choose_from_datasets(datasets, range(3).repeat(3));
  CHECK(collect(ds) == S{"foo", "bar", "baz", "foo", "bar", "baz", "foo", "bar", "baz"});
  CHECK(ds.cardinality() == 9);
}

TEST_CASE("choose_from_datasets takes each input's elements in order",
          "[stages][choose_from_datasets]") {
  auto ds = choose_from_datasets(std::vector{range(0, 5), range(10, 15)},
                                 from_vector<std::int64_t>({1, 1, 0, 1, 0, 0}));
  CHECK(collect(ds) == V{10, 11, 0, 12, 1, 2});
  // Any integer type chooses; no choices, no elements.
  CHECK(collect(choose_from_datasets(std::vector{range(3), range(10, 13)},
                                     from_vector<int>({1, 0}))) == V{10, 0});
  CHECK(collect(choose_from_datasets(std::vector{range(3)}, range(0))).empty());
  CHECK(collect(choose_from_datasets(std::vector{range(3)}, from_vector<unsigned>({0}))) == V{0});
}

TEST_CASE("choose_from_datasets ends at an exhausted input by default, or skips it",
          "[stages][choose_from_datasets]") {
  auto choices = from_vector<std::int64_t>({0, 0, 0, 1, 0, 1});
  auto inputs = std::vector{range(2), range(10, 13)};
  // tf's default, stop_on_empty_dataset=True: the third 0 ends the pass.
  CHECK(collect(choose_from_datasets(inputs, choices)) == V{0, 1});
  // False: the choice is skipped.
  CHECK(collect(choose_from_datasets(inputs, choices, {.stop_on_empty_dataset = false})) ==
        V{0, 1, 10, 11});
  // Endless choices end once every input is exhausted.
  auto endless = choose_from_datasets(inputs, from_vector<std::int64_t>({0, 1}).repeat(),
                                      {.stop_on_empty_dataset = false});
  CHECK(collect(endless) == V{0, 10, 1, 11, 12});
  // An empty input chosen first.
  CHECK(collect(choose_from_datasets(std::vector{range(0), range(3)},
                                     from_vector<std::int64_t>({0, 1})))
            .empty());
  CHECK(collect(choose_from_datasets(std::vector{range(0), range(3)},
                                     from_vector<std::int64_t>({0, 1, 0, 1}),
                                     {.stop_on_empty_dataset = false})) == V{0, 1});
}

TEST_CASE("a choice out of range is an error at its position", "[stages][choose_from_datasets]") {
  auto ds = choose_from_datasets(std::vector{range(3), range(10, 13)},
                                 from_vector<std::int64_t>({0, 2, -1, 1}));
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 4);
  CHECK(out[0].value == 0);
  CHECK(out[1].error ==
        "InvalidArgument: choose_from_datasets: index 2 is out of range for 2 datasets (valid: 0 "
        "to 1) [stage 'choose_from_datasets', element 1]");
  CHECK(out[2].error.find("index -1 is out of range for 2 datasets") != std::string::npos);
  CHECK(out[2].error.find("element 2]") != std::string::npos);
  CHECK(out[3].value == 10);
  // An unsigned index past int64's range.
  auto huge = choose_from_datasets(std::vector{range(3)}, from_vector<std::uint64_t>({~0ULL}));
  const auto h = collect_outcomes(huge);
  REQUIRE(h.size() == 1);
  CHECK(h[0].error.find("is out of range for 1 datasets (valid: 0 to 0)") != std::string::npos);
}

TEST_CASE("errors from the choices and the inputs surface in place",
          "[stages][choose_from_datasets]") {
  auto choices = from_vector<std::int64_t>({0, 1, 0, 5, 1}).map([](std::int64_t c) {
    if (c == 1) throw Boom("choice");
    return c;
  });
  const auto out =
      collect_outcomes(choose_from_datasets(std::vector{range(3), range(10, 13)}, choices));
  REQUIRE(out.size() == 5);
  CHECK(out[0].value == 0);
  CHECK(out[1].error == "FunctionError: choice [stage 'map', element 1]");
  CHECK(out[2].value == 1);
  CHECK(out[3].error.find("index 5 is out of range") != std::string::npos);
  CHECK(out[3].error.find("element 3]") != std::string::npos);  // failed choices count
  CHECK(out[4].error == "FunctionError: choice [stage 'map', element 4]");
  // An input's error; that input stays open.
  auto failing = range(3).map([](std::int64_t x) -> std::int64_t {
    if (x == 0) throw Boom("input");
    return x;
  });
  const auto in = collect_outcomes(choose_from_datasets(std::tuple{failing, range(10, 13)},
                                                        from_vector<std::int64_t>({0, 1, 0})));
  REQUIRE(in.size() == 3);
  CHECK(in[0].error == "FunctionError: input [stage 'map', element 0]");
  CHECK(in[1].value == 10);
  CHECK(in[2].value == 1);
}

TEST_CASE("choose_from_datasets over datasets of different types",
          "[stages][choose_from_datasets]") {
  auto ds = choose_from_datasets(std::tuple{range(3), from_vector<std::int64_t>({10, 11}),
                                            range(20, 22).map([](std::int64_t x) { return x; })},
                                 from_vector<std::int64_t>({2, 1, 0, 2, 1, 0}));
  CHECK(collect(ds) == V{20, 10, 0, 21, 11, 1});
  std::vector<AnyDataset<std::int64_t>> erased{range(2).erase(),
                                               range(5, 6).map([](auto x) { return x; }).erase()};
  CHECK(collect(choose_from_datasets(erased, from_vector<std::int64_t>({1, 0}))) == V{5, 0});
}

TEST_CASE("choose_from_datasets checks its arguments", "[stages][choose_from_datasets]") {
  try {
    choose_from_datasets(std::vector<decltype(range(1))>{}, range(1));
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()) ==
          "InvalidArgument: choose_from_datasets: datasets is empty; give at least one dataset "
          "[stage 'choose_from_datasets']");
  }
}

TEST_CASE("choose_from_datasets' cardinality", "[stages][choose_from_datasets]") {
  auto inf = [] { return range(1).repeat(); };
  // Every input endless: the choices'.
  CHECK(choose_from_datasets(std::vector{inf(), inf()}, range(7)).cardinality() == 7);
  CHECK(choose_from_datasets(std::vector{inf(), inf()}, range(2).repeat()).cardinality() ==
        infinite_cardinality);
  CHECK(choose_from_datasets(std::vector{inf()}, range(2).filter([](auto) {
          return true;
        })).cardinality() == unknown_cardinality);
  // A finite input may end the pass early: unknown (tf.data says infinite
  // whenever any input is).
  CHECK(choose_from_datasets(std::tuple{range(3), inf()}, range(7)).cardinality() ==
        unknown_cardinality);
  CHECK(choose_from_datasets(std::tuple{range(3), inf()}, range(0)).cardinality() == 0);
}

TEST_CASE("destroying a choose_from_datasets iterator mid-stream is clean",
          "[stages][choose_from_datasets]") {
  auto ds = choose_from_datasets(std::vector{range(3), range(10, 13)},
                                 from_vector<std::int64_t>({1, 0, 1}));
  {
    auto it = ds.iterator();
    CHECK(it.next() == 10);
  }
  CHECK(collect(ds) == V{10, 0, 11});
}

TEST_CASE("choose_from_datasets unwinds between skipped choices once its consumer is gone",
          "[stages][choose_from_datasets]") {
  // Input 0 is empty and every choice names it: without a consumer to stop
  // it, the skipping would run forever.
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  source.request_stop();
  int chosen = 0;
  auto choices = from_vector<std::int64_t>({0}).repeat().map([&chosen](std::int64_t c) {
    ++chosen;
    return c;
  });
  auto ds = choose_from_datasets(std::vector{range(0), range(5)}, choices,
                                 {.stop_on_empty_dataset = false});
  CHECK_THROWS_AS(ds.make_iterator(ctx).next(), detail::Cancelled);
  CHECK(chosen == 1);
}

TEST_CASE("choose_from_datasets' inputs and choices appear in stats apart",
          "[stages][choose_from_datasets]") {
  auto ds =
      choose_from_datasets(std::vector{range(3), range(4)}, from_vector<std::int64_t>({0, 1, 1}));
  auto it = ds.iterator();
  while (it.next()) {
  }
  const PipelineStats s = it.stats();
  const auto has = [&](const std::string& name) {
    return std::any_of(s.stages.begin(), s.stages.end(),
                       [&](const StageStats& st) { return st.name == name; });
  };
  CHECK(has("choose_from_datasets"));
  CHECK(has("range [0]"));
  CHECK(has("range [1]"));
  CHECK(has("from_vector (choices)"));
}
