#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using Pair = std::pair<std::int64_t, std::int64_t>;
using Pairs = std::vector<Pair>;

namespace {

/// acceptance_probs_with_mixing on vectors: {a, m}.
std::pair<std::vector<double>, double> probs(const std::vector<double>& initial,
                                             const std::vector<double>& target) {
  std::vector<double> a(target.size());
  const double m = detail::acceptance_probs_with_mixing(initial, target, a);
  return {a, m};
}

/// The share of each class among the outputs.
std::vector<double> class_shares(const Pairs& out, std::size_t classes) {
  std::vector<double> share(classes, 0.0);
  for (const auto& [c, x] : out) share[static_cast<std::size_t>(c)] += 1;
  for (double& s : share) s /= static_cast<double>(out.size());
  return share;
}

/// 20,000 elements, classes 0, 1, 2 in the proportions 0.7, 0.2, 0.1.
std::int64_t skewed_class(std::int64_t x) {
  const std::int64_t r = x % 10;
  return r < 7 ? 0 : r < 9 ? 1 : 2;
}

}  // namespace

TEST_CASE("rejection_resample's acceptance probabilities follow tf's formula",
          "[stages][rejection_resample]") {
  // r = t / p = [1.8, 0.2]: m = 0.2, a = (r - 0.2) / 1.6 = [1, 0].
  auto [a, m] = probs({0.5, 0.5}, {0.9, 0.1});
  CHECK(m == Approx(0.2));
  CHECK(a[0] == Approx(1.0));
  CHECK(a[1] == Approx(0.0).margin(1e-12));
  CHECK(detail::proportion_rejected(std::vector<double>{0.5, 0.5}, a) == Approx(0.5));

  // Mixing: r = [0.4, 1, 2.5], m = 0.4, M = 2.5, a = [0, 0.6 / 2.1, 1].
  const std::vector<double> p{0.5, 0.3, 0.2};
  const std::vector<double> t{0.2, 0.3, 0.5};
  std::tie(a, m) = probs(p, t);
  CHECK(m == Approx(0.4));
  CHECK(a[0] == Approx(0.0).margin(1e-12));
  CHECK(a[1] == Approx(2.0 / 7.0));
  CHECK(a[2] == Approx(1.0));
  // Drawing the input with probability m and the accepted elements otherwise
  // gives the target: m p_i + (1 - m) p_i a_i / sum_j p_j a_j = t_i.
  double accepted = 0;
  for (std::size_t i = 0; i < 3; ++i) accepted += p[i] * a[i];
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(m * p[i] + (1 - m) * p[i] * a[i] / accepted == Approx(t[i]));
  }

  // A class the target leaves out: r = [2, 0], no mixing (m = 0), a = [1, 0].
  std::tie(a, m) = probs({0.5, 0.5}, {1.0, 0.0});
  CHECK(m == 0.0);
  CHECK(a == std::vector<double>{1.0, 0.0});
  // The target is the input's distribution: all ratios 1, only the input (m = 1).
  std::tie(a, m) = probs({0.25, 0.75}, {0.25, 0.75});
  CHECK(m == 1.0);
  CHECK(a == std::vector<double>{1.0, 1.0});
  // A class absent from both: its ratio is 0 (tf adds a tiny to p), so m = 0.
  std::tie(a, m) = probs({0.5, 0.5, 0.0}, {0.5, 0.5, 0.0});
  CHECK(m == 0.0);
  CHECK(a == std::vector<double>{1.0, 1.0, 0.0});
  // An estimate after 20 + 12 elements over the smoothing counts 10 + 10:
  // p = [30, 22] / 52, t = [0.5, 0.5]: r = [26 / 30, 26 / 22], m = 26 / 30, a = [0, 1].
  std::tie(a, m) = probs({30.0 / 52, 22.0 / 52}, {0.5, 0.5});
  CHECK(m == Approx(26.0 / 30));
  CHECK(a[0] == Approx(0.0).margin(1e-12));
  CHECK(a[1] == Approx(1.0));
}

TEST_CASE("rejection_resample reaches the target distribution, with and without initial_dist",
          "[stages][rejection_resample]") {
  const std::vector<double> target{0.2, 0.3, 0.5};
  auto input = range(20000);
  for (const bool known : {true, false}) {
    INFO("initial_dist given: " << known);
    RejectionResampleOptions options{.seed = 7};
    if (known) options.initial_dist = std::vector<double>{0.7, 0.2, 0.1};
    const Pairs out = collect(input.rejection_resample(skewed_class, target, options));
    // r = [2/7, 1.5, 5]: about 20,000 / (5 - 2/7) = 4,242 outputs.
    CHECK(out.size() > 3500);
    CHECK(out.size() < 5000);
    for (const auto& [c, x] : out) REQUIRE(c == skewed_class(x));
    const auto share = class_shares(out, 3);
    for (std::size_t i = 0; i < 3; ++i) CHECK(share[i] == Approx(target[i]).margin(0.03));
  }
  // tf's testExhaustion: range(10000), classes x % 2, [0.5, 0.5] -> [0.9, 0.1].
  const Pairs out = collect(range(10000).rejection_resample(
      [](std::int64_t x) { return x % 2; }, {0.9, 0.1}, {.initial_dist = {{0.5, 0.5}}, .seed = 3}));
  const auto share = class_shares(out, 2);
  CHECK(share[0] == Approx(0.9).margin(0.015));
  CHECK(share[1] == Approx(0.1).margin(0.015));
}

TEST_CASE("rejection_resample normalises weights", "[stages][rejection_resample]") {
  auto cls = [](std::int64_t x) { return x % 2; };
  auto ds = range(2000);
  CHECK(collect(ds.rejection_resample(cls, {9, 1}, {.initial_dist = {{1, 1}}, .seed = 5})) ==
        collect(ds.rejection_resample(cls, {0.9, 0.1}, {.initial_dist = {{0.5, 0.5}}, .seed = 5})));
}

TEST_CASE("rejection_resample mixes the input with the accepted elements, as tf.data",
          "[stages][rejection_resample]") {
  // m = 0.2: about a fifth of the outputs come from the input itself, so
  // class 1 (accepted with probability 0) still appears, and class-0
  // elements can appear twice (once from each pass).
  const Pairs out =
      collect(range(1000).rejection_resample([](std::int64_t x) { return x % 2; }, {0.9, 0.1},
                                             {.initial_dist = {{0.5, 0.5}}, .seed = 11}));
  std::set<std::int64_t> seen;
  bool twice = false;
  for (const auto& [c, x] : out) twice |= !seen.insert(x).second;
  CHECK(twice);
  const auto ones =
      std::count_if(out.begin(), out.end(), [](const Pair& p) { return p.first == 1; });
  CHECK(ones > 0);
  // Class-1 elements come only from the input pass, in order, each once.
  std::int64_t last = -1;
  for (const auto& [c, x] : out) {
    if (c != 1) continue;
    CHECK(x > last);
    last = x;
  }
}

TEST_CASE("rejection_resample without mixing: only the input, or only the filter",
          "[stages][rejection_resample]") {
  auto cls = [](std::int64_t x) { return x % 2; };
  // The target equals the input's distribution (after normalising): m = 1,
  // every element passes with its class, nothing is drawn.
  CHECK(collect(range(5).rejection_resample(cls, {0.6, 0.4}, {.initial_dist = {{3, 2}}})) ==
        Pairs{{0, 0}, {1, 1}, {0, 2}, {1, 3}, {0, 4}});
  // A class the target leaves out: m = 0, a = [1, 0], the filter alone.
  const Pairs evens{{0, 0}, {0, 2}, {0, 4}, {0, 6}, {0, 8}};
  CHECK(collect(range(10).rejection_resample(cls, {1, 0}, {.initial_dist = {{0.5, 0.5}}})) ==
        evens);
  // Estimated, the same: r_1 = 0 in every block, so m = 0 and a = [1, 0].
  CHECK(collect(range(10).rejection_resample(cls, {1, 0})) == evens);
}

TEST_CASE("rejection_resample on an empty input and on one element",
          "[stages][rejection_resample]") {
  auto cls = [](std::int64_t x) { return x % 2; };
  for (const bool known : {true, false}) {
    INFO("initial_dist given: " << known);
    RejectionResampleOptions mixed{.seed = 1};
    RejectionResampleOptions filter_only{.seed = 1};
    if (known) {
      mixed.initial_dist = std::vector<double>{0.5, 0.5};
      filter_only.initial_dist = std::vector<double>{0.5, 0.5};
    }
    CHECK(collect(range(0).rejection_resample(cls, {0.9, 0.1}, mixed)).empty());
    CHECK(collect(range(0).rejection_resample(cls, {1, 0}, filter_only)).empty());
    CHECK(collect(range(1).rejection_resample(cls, {1, 0}, filter_only)) == Pairs{{0, 0}});
    // Class 1 is never accepted; the lone element may come from the input
    // pass (then the filter pass ends the dataset) or not at all.
    const Pairs one = collect(range(1, 2).rejection_resample(cls, {0.9, 0.1}, mixed));
    CHECK(one.size() <= 1);
    if (!one.empty()) CHECK(one[0] == Pair{1, 1});
  }
  CHECK(collect(range(0).rejection_resample(cls, {0.5, 0.5}, {.initial_dist = {{1, 1}}})).empty());
}

TEST_CASE("rejection_resample: the same seed gives the same output, every epoch new draws",
          "[stages][rejection_resample]") {
  auto cls = [](std::int64_t x) { return skewed_class(x); };
  for (const bool known : {true, false}) {
    INFO("initial_dist given: " << known);
    RejectionResampleOptions options{.seed = 42};
    if (known) options.initial_dist = std::vector<double>{0.7, 0.2, 0.1};
    auto ds = range(3000).rejection_resample(cls, {0.2, 0.3, 0.5}, options);
    const Pairs first = collect(ds);
    CHECK(collect(ds) == first);  // every iterator of the dataset
    CHECK(collect(range(3000).rejection_resample(cls, {0.2, 0.3, 0.5}, options)) == first);
    options.seed = 43;
    CHECK(collect(range(3000).rejection_resample(cls, {0.2, 0.3, 0.5}, options)) != first);
    // The epochs of a repeat draw differently; the first is the same pass.
    const Pairs both = collect(ds.repeat(2));
    REQUIRE(both.size() > first.size());
    CHECK(Pairs(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(first.size())) == first);
    CHECK(Pairs(both.begin() + static_cast<std::ptrdiff_t>(first.size()), both.end()) != first);
  }
  // Without a seed, one is drawn when the dataset is built: its iterators agree.
  auto unseeded = range(500).rejection_resample(cls, {0.2, 0.3, 0.5});
  CHECK(collect(unseeded) == collect(unseeded));
}

TEST_CASE("an error from class_func fails that element in either pass",
          "[stages][rejection_resample]") {
  auto cls = [](std::int64_t x) -> std::int64_t {
    if (x == 3 || x == 6) throw Boom("no class");
    return x % 2;
  };
  // Only the input pass (m = 1).
  auto out = collect_outcomes(range(5).rejection_resample(cls, {1, 1}, {.initial_dist = {{1, 1}}}));
  REQUIRE(out.size() == 5);
  CHECK(out[2].value == Pair{0, 2});
  CHECK(out[3].error == "FunctionError: no class [stage 'rejection_resample', element 3]");
  CHECK(out[4].value == Pair{0, 4});
  // Only the filter (m = 0): the failed element surfaces before its class is known.
  for (const bool known : {true, false}) {
    INFO("initial_dist given: " << known);
    RejectionResampleOptions options;
    if (known) options.initial_dist = std::vector<double>{1, 1};
    out = collect_outcomes(range(10).rejection_resample(cls, {1, 0}, options));
    REQUIRE(out.size() == 6);
    CHECK(out[0].value == Pair{0, 0});
    CHECK(out[1].value == Pair{0, 2});
    CHECK(out[2].error == "FunctionError: no class [stage 'rejection_resample', element 3]");
    CHECK(out[3].value == Pair{0, 4});
    CHECK(out[4].error == "FunctionError: no class [stage 'rejection_resample', element 6]");
    CHECK(out[5].value == Pair{0, 8});
  }
}

TEST_CASE("estimating, a block of failed elements leaves the estimate as it was",
          "[stages][rejection_resample]") {
  // The first block (32 elements) and 8 more fail: none is counted, and the
  // pass goes on with the elements after them.
  auto cls = [](std::int64_t x) -> std::int64_t {
    if (x < 40) throw Boom("early");
    return x % 2;
  };
  const auto out = collect_outcomes(range(50).rejection_resample(cls, {1, 0}));
  REQUIRE(out.size() == 45);
  for (std::size_t i = 0; i < 40; ++i) {
    CHECK(out[i].error ==
          "FunctionError: early [stage 'rejection_resample', element " + std::to_string(i) + "]");
  }
  CHECK(out[40].value == Pair{0, 40});
  CHECK(out[44].value == Pair{0, 48});
}

TEST_CASE("an input error surfaces in place and the pass continues",
          "[stages][rejection_resample]") {
  auto input = range(10).map([](std::int64_t x) -> std::int64_t {
    if (x == 4) throw Boom("input");
    return x;
  });
  auto cls = [](std::int64_t x) { return x % 2; };
  const std::string error = "FunctionError: input [stage 'map', element 4]";
  for (const bool known : {true, false}) {
    INFO("initial_dist given: " << known);
    RejectionResampleOptions options;
    if (known) options.initial_dist = std::vector<double>{1, 1};
    const auto out = collect_outcomes(input.rejection_resample(cls, {1, 0}, options));
    REQUIRE(out.size() == 5);
    CHECK(out[1].value == Pair{0, 2});
    CHECK(out[2].error == error);
    CHECK(out[3].value == Pair{0, 6});
    CHECK(out[4].value == Pair{0, 8});
  }
  // Through the input pass.
  const auto out =
      collect_outcomes(input.rejection_resample(cls, {1, 1}, {.initial_dist = {{1, 1}}}));
  REQUIRE(out.size() == 10);
  CHECK(out[4].error == error);
  CHECK(out[5].value == Pair{1, 5});
}

TEST_CASE("a class outside 0 to num_classes - 1 fails its element",
          "[stages][rejection_resample]") {
  auto cls = [](std::int64_t x) -> std::int64_t { return x == 2 ? 5 : x == 3 ? -1 : 0; };
  const std::string five =
      "InvalidArgument: rejection_resample: class_func returned class 5, outside [0, 3) "
      "(num_classes 3, the size of target_dist) [stage 'rejection_resample', element 2]";
  const std::string minus_one =
      "InvalidArgument: rejection_resample: class_func returned class -1, outside [0, 3) "
      "(num_classes 3, the size of target_dist) [stage 'rejection_resample', element 3]";
  // The input pass only (m = 1), then the filter only, given and estimated.
  auto out =
      collect_outcomes(range(5).rejection_resample(cls, {1, 1, 1}, {.initial_dist = {{1, 1, 1}}}));
  REQUIRE(out.size() == 5);
  CHECK(out[2].error == five);
  CHECK(out[3].error == minus_one);
  CHECK(out[4].value == Pair{0, 4});
  for (const bool known : {true, false}) {
    INFO("initial_dist given: " << known);
    RejectionResampleOptions options;
    if (known) options.initial_dist = std::vector<double>{1, 1, 1};
    out = collect_outcomes(range(5).rejection_resample(cls, {1, 0, 0}, options));
    REQUIRE(out.size() == 5);
    CHECK(out[0].value == Pair{0, 0});
    CHECK(out[2].error == five);
    CHECK(out[3].error == minus_one);
    CHECK(out[4].value == Pair{0, 4});
  }
}

TEST_CASE("rejection_resample rejects bad distributions", "[stages][rejection_resample]") {
  auto cls = [](std::int64_t x) { return x % 2; };
  auto ds = range(10);
  auto message = [&](std::vector<double> target, RejectionResampleOptions options = {}) {
    try {
      (void)ds.rejection_resample(cls, std::move(target), std::move(options));
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string where = " [stage 'rejection_resample']";
  CHECK(message({}) ==
        "InvalidArgument: rejection_resample: target_dist is empty; it needs one weight per "
        "class" +
            where);
  CHECK(message({0.5, -0.5}) ==
        "InvalidArgument: rejection_resample: target_dist must hold finite weights >= 0; got "
        "-0.5 for class 1" +
            where);
  CHECK(message({NAN, 1}) ==
        "InvalidArgument: rejection_resample: target_dist must hold finite weights >= 0; got "
        "nan for class 0" +
            where);
  CHECK(message({1, INFINITY}) ==
        "InvalidArgument: rejection_resample: target_dist must hold finite weights >= 0; got "
        "inf for class 1" +
            where);
  CHECK(message({0, 0}) ==
        "InvalidArgument: rejection_resample: target_dist must have a positive sum; every "
        "weight is 0" +
            where);
  CHECK(message({1e308, 1e308}) ==
        "InvalidArgument: rejection_resample: target_dist must have a finite sum; it "
        "overflows" +
            where);
  CHECK(message({0.5, 0.5}, {.initial_dist = {{1, 1, 1}}}) ==
        "InvalidArgument: rejection_resample: initial_dist has 3 classes but target_dist has 2" +
            where);
  CHECK(message({0.5, 0.5}, {.initial_dist = {{1, -1}}}) ==
        "InvalidArgument: rejection_resample: initial_dist must hold finite weights >= 0; got -1 "
        "for class 1" +
            where);
  CHECK(message({0.5, 0.5}, {.initial_dist = {{0, 0}}}) ==
        "InvalidArgument: rejection_resample: initial_dist must have a positive sum; every "
        "weight is 0" +
            where);
  CHECK(message({0.5, 0.5}, {.initial_dist = {{1, 0}}}) ==
        "InvalidArgument: rejection_resample: class 1 has initial_dist 0 but target_dist 0.5 "
        "(normalised): no element of it can be drawn to reach the target" +
            where);
  // A class absent from both is fine.
  CHECK(message({1, 0}, {.initial_dist = {{1, 0}}}) == "no error");
  CHECK(message({0.5, 0.5}) == "no error");
}

TEST_CASE("rejection_resample's cardinality is unknown, as tf.data's",
          "[stages][rejection_resample]") {
  auto cls = [](std::int64_t x) { return x % 2; };
  CHECK(range(10).rejection_resample(cls, {0.5, 0.5}).cardinality() == unknown_cardinality);
  CHECK(range(0).rejection_resample(cls, {0.5, 0.5}).cardinality() == unknown_cardinality);
  CHECK(range(10)
            .repeat()
            .rejection_resample(cls, {1, 1}, {.initial_dist = {{1, 1}}})
            .cardinality() == unknown_cardinality);
  static_assert(std::is_same_v<decltype(range(1).rejection_resample(cls, {1}))::element_type,
                               std::pair<std::int64_t, std::int64_t>>);
}

TEST_CASE("rejection_resample moves elements: move-only types work",
          "[stages][rejection_resample]") {
  auto ds = range(200).map([](std::int64_t x) { return std::make_unique<std::int64_t>(x); });
  auto cls = [](const std::unique_ptr<std::int64_t>& p) { return *p % 2; };
  for (const bool known : {true, false}) {
    RejectionResampleOptions options{.seed = 2};
    if (known) options.initial_dist = std::vector<double>{1, 1};
    auto it = ds.rejection_resample(cls, {0.8, 0.2}, options).iterator();
    int n = 0;
    while (auto x = it.next()) {
      CHECK(x->first == *x->second % 2);
      ++n;
    }
    CHECK(n > 50);
  }
}

TEST_CASE("destroying a rejection_resample iterator mid-stream is clean",
          "[stages][rejection_resample]") {
  auto cls = [](const std::string& s) { return static_cast<std::int64_t>(s.size() % 2); };
  std::vector<std::string> words;
  for (int i = 0; i < 300; ++i) words.push_back(std::string(static_cast<std::size_t>(i % 5), 'x'));
  for (const bool known : {true, false}) {
    RejectionResampleOptions options{.seed = 9};
    if (known) options.initial_dist = std::vector<double>{3, 2};
    auto ds = from_vector(words).rejection_resample(cls, {0.3, 0.7}, options);
    {
      auto it = ds.iterator();
      CHECK(it.next().has_value());
      CHECK(it.next().has_value());
    }
    CHECK(collect(ds).size() > 10);
  }
}

TEST_CASE("rejection_resample unwinds between rejected elements once its consumer is gone",
          "[stages][rejection_resample]") {
  for (const bool known : {true, false}) {
    INFO("initial_dist given: " << known);
    CancellationSource source;
    IteratorContext ctx;
    ctx.cancellation = source.token();
    int pulled = 0;
    // Element 0 is class 0, every other class 1, which the target rejects.
    auto ds = range(1000).map([&pulled](std::int64_t x) {
      ++pulled;
      return x;
    });
    RejectionResampleOptions options;
    if (known) options.initial_dist = std::vector<double>{0.5, 0.5};
    auto it =
        ds.rejection_resample([](std::int64_t x) { return std::int64_t{x > 0}; }, {1, 0}, options)
            .make_iterator(ctx);
    CHECK(it.next() == Pair{0, 0});
    source.request_stop();
    CHECK_THROWS_AS(it.next(), detail::Cancelled);
    // Given: one element read past the output; estimating: the first block of 32.
    CHECK(pulled == (known ? 2 : 32));
  }
}

TEST_CASE(
    "rejection_resample's two passes appear in stats under it, and a high rejection is logged once",
    "[stages][rejection_resample]") {
  std::vector<std::string> lines;
  set_log_sink([&lines](std::string_view line) { lines.emplace_back(line); });
  auto ds = range(100).rejection_resample([](std::int64_t x) { return x % 2; }, {0.9, 0.1},
                                          {.initial_dist = {{0.5, 0.5}}, .seed = 1});
  auto it = ds.iterator();
  while (it.next()) {
  }
  (void)collect(ds);
  set_log_sink({});
  const PipelineStats s = it.stats();
  const auto has = [&](const std::string& name) {
    return std::any_of(s.stages.begin(), s.stages.end(),
                       [&](const StageStats& st) { return st.name == name; });
  };
  CHECK(has("rejection_resample"));
  CHECK(has("range (original)"));
  CHECK(has("range (filtered)"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "rejection_resample: the sampler rejects 50% of the elements it reads (class "
        "distribution [0.5, 0.5], acceptance probabilities [1, 0]); logged once");
}

TEST_CASE("rejection_resample over an AnyDataset is copied and chained",
          "[stages][rejection_resample]") {
  // Copying the stage made clang check whether its base converts to the
  // AnyDataset input, which did not compile while the base was UnaryStage.
  const AnyDataset<std::int64_t> input = range(200);
  const auto resampled = input.rejection_resample([](const std::int64_t& x) { return x % 2; },
                                                  {0.5, 0.5}, {.seed = 3});
  const auto copy = resampled;  // NOLINT(performance-unnecessary-copy-initialization)
  const auto values = collect(copy.map([](Pair p) { return p.second * 2 + p.first; }));
  REQUIRE(!values.empty());
  for (const std::int64_t v : values) CHECK(v / 2 % 2 == v % 2);  // the class is the element's
  CHECK(values == collect(resampled.map([](Pair p) { return p.second * 2 + p.first; })));
}
