#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::int64_t>;

namespace {
V sorted(V v) {
  std::sort(v.begin(), v.end());
  return v;
}

// An element whose serializer counts its calls.
struct Counted {
  std::int64_t value = 0;
  friend bool operator==(const Counted&, const Counted&) = default;
};
std::atomic<std::int64_t> counted_writes{0};
}  // namespace

template <>
struct ingest::serializer<Counted> {
  static void write(ByteWriter& w, const Counted& c) {
    counted_writes.fetch_add(1);
    serializer<std::int64_t>::write(w, c.value);
  }
  static Counted read(ByteReader& r) { return {serializer<std::int64_t>::read(r)}; }
  static std::string signature() { return "counted"; }
};

TEST_CASE("shuffle is a permutation of its input", "[stages][shuffle]") {
  for (std::int64_t buffer : {1, 2, 10, 1000, 5000}) {
    auto got = collect(range(1000).shuffle(buffer, {.seed = 3}));
    CHECK(sorted(got) == iota(0, 1000));
  }
  CHECK(collect(range(1000).shuffle(1, {.seed = 3})) == iota(0, 1000));  // buffer 1: no change
  CHECK(collect(range(0).shuffle(10)).empty());
  CHECK(collect(range(1).shuffle(10)) == V{0});
  CHECK_THROWS_AS(range(3).shuffle(0), InvalidArgument);
}

TEST_CASE("a seed fixes the order, and passes reshuffle from it", "[stages][shuffle]") {
  auto a = range(100).shuffle(50, {.seed = 42});
  auto b = range(100).shuffle(50, {.seed = 42});
  const V first_a = collect(a);
  CHECK(first_a != iota(0, 100));
  CHECK(first_a == collect(b));  // same seed, same first pass
  const V second_a = collect(a);
  CHECK(second_a != first_a);     // a new order for the next pass
  CHECK(second_a == collect(b));  // ... the same one for the same seed
  CHECK(collect(range(100).shuffle(50, {.seed = 43})) != first_a);

  auto fixed = range(100).shuffle(50, {.seed = 42, .reshuffle_each_iteration = false});
  CHECK(collect(fixed) == collect(fixed));
  // Without a seed, each dataset draws its own.
  CHECK(collect(range(100).shuffle(100)) != collect(range(100).shuffle(100)));
  // Repeat epochs reshuffle.
  auto epochs = collect(range(20).shuffle(20, {.seed = 1}).repeat(2));
  CHECK(V(epochs.begin(), epochs.begin() + 20) != V(epochs.begin() + 20, epochs.end()));
  CHECK(sorted(V(epochs.begin() + 20, epochs.end())) == iota(0, 20));
}

TEST_CASE("the same seed gives the same order whatever the upstream parallelism",
          "[stages][shuffle][concurrency]") {
  auto pipeline = [](std::int64_t p) {
    return range(2000)
        .map([](std::int64_t x) { return x * 7 % 2000; }, {.parallelism = p})
        .shuffle(300, {.seed = 9});
  };
  const V reference = collect(pipeline(1));
  for (std::int64_t p : {2, 4, 8}) CHECK(collect(pipeline(p)) == reference);
}

TEST_CASE("a full buffer gives each element an equal chance at each position",
          "[stages][shuffle]") {
  std::array<int, 5> first{};
  auto ds = range(5).shuffle(5, {.seed = 11});
  for (int pass = 0; pass < 5000; ++pass) ++first[static_cast<std::size_t>(collect(ds)[0])];
  for (int c : first) CHECK(std::abs(c - 1000) < 150);
}

TEST_CASE("shuffle fills its buffer before the first output", "[stages][shuffle]") {
  int pulled = 0;
  auto ds = range(100).map([&pulled](std::int64_t x) {
    ++pulled;
    return x;
  });
  auto it = ds.shuffle(30, {.seed = 1}).iterator();
  it.next();
  CHECK(pulled == 31);  // 30 to fill, one to refill the emptied slot
  it.next();
  CHECK(pulled == 32);
}

TEST_CASE("an input error surfaces and loses no other element", "[stages][shuffle]") {
  auto ds = range(50)
                .map([](std::int64_t x) -> std::int64_t {
                  if (x == 10 || x == 40) throw Boom("bad");
                  return x;
                })
                .shuffle(8, {.seed = 2});
  auto out = collect_outcomes(ds);
  V values;
  int errors = 0;
  for (auto& o : out) {
    if (o.value) {
      values.push_back(*o.value);
    } else {
      ++errors;
    }
  }
  CHECK(errors == 2);
  V want = iota(0, 50);
  want.erase(std::remove_if(want.begin(), want.end(), [](auto x) { return x == 10 || x == 40; }),
             want.end());
  CHECK(sorted(values) == want);
}

TEST_CASE("shuffle moves elements instead of copying them", "[stages][shuffle]") {
  auto ds = range(20)
                .map([](std::int64_t x) { return std::make_unique<std::int64_t>(x); })
                .shuffle(8, {.seed = 4});
  std::int64_t sum = 0;
  for (auto& p : ds) sum += *p;
  CHECK(sum == 190);
}

TEST_CASE("after a parallel map, shuffle buffers the map's inputs and maps after it",
          "[stages][shuffle][concurrency]") {
  const auto f = [](std::int64_t x) { return x * 7 % 2000; };
  using F = std::decay_t<decltype(f)>;
  // A sequential map is not moved: its outputs fill the buffer, the reference
  // order. Each dataset is made anew: passes over one dataset reshuffle.
  const auto reference = [&] { return range(2000).map(f).shuffle(300, {.seed = 9}); };
  static_assert(std::is_same_v<decltype(reference()), ShuffleDataset<MapDataset<RangeDataset, F>>>);
  for (std::int64_t p : {std::int64_t{1}, std::int64_t{2}, autotune}) {
    const auto moved = [&] {
      return range(2000).map(f, {.parallelism = p}).shuffle(300, {.seed = 9});
    };
    static_assert(
        std::is_same_v<decltype(moved()), ParallelMapDataset<ShuffleDataset<RangeDataset>, F>>);
    CHECK(collect(moved()) == collect(reference()));
    // Later passes and repeat epochs reshuffle exactly as the reference does.
    CHECK(collect(moved().repeat(3)) == collect(reference().repeat(3)));
    // ... and a batch after it fuses with the map.
    const auto batched = moved().batch(64);
    static_assert(std::is_same_v<std::decay_t<decltype(batched)>,
                                 MapAndBatchDataset<ShuffleDataset<RangeDataset>, F>>);
    V flat;
    for (const Tensor& b : batched) {
      const V part = values_of(b);
      flat.insert(flat.end(), part.begin(), part.end());
    }
    CHECK(flat == collect(reference()));
  }
}

TEST_CASE("after a parallel map, a failing element surfaces at its shuffled position",
          "[stages][shuffle][concurrency]") {
  std::atomic<int> calls{0};
  const auto ds = range(50)
                      .map(
                          [&calls](std::int64_t x) -> std::int64_t {
                            ++calls;
                            if (x == 10) throw Boom("bad");
                            return x;
                          },
                          {.parallelism = 2})
                      .shuffle(8, {.seed = 2});
  const V order = collect(range(50).shuffle(8, {.seed = 2}));  // the inputs' shuffled order
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == order.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (order[i] == 10) {
      CHECK_FALSE(out[i].value);
    } else {
      REQUIRE(out[i].value);
      CHECK(*out[i].value == order[i]);
    }
  }
  CHECK(calls == 50);  // once per element
}

TEST_CASE("a restored buffer is read as drawn, saved as it is, and restores again",
          "[stages][shuffle][checkpoint]") {
  // Strings of many sizes (an empty one too), over two reshuffled passes.
  const auto make = [] {
    return range(0, 300)
        .map([](std::int64_t x) {
          return std::string(static_cast<std::size_t>(x % 41), 'a') + std::to_string(x);
        })
        .shuffle(64, {.seed = 3})
        .repeat(2);
  };
  auto reference = make().iterator();
  std::vector<std::string> full;
  while (auto x = reference.next()) full.push_back(*x);
  REQUIRE(full.size() == 600);
  for (const std::size_t k : {0, 1, 63, 64, 65, 200, 299, 300, 301, 599, 600}) {
    INFO("saved after " << k);
    auto it = make().iterator();
    for (std::size_t i = 0; i < k; ++i) REQUIRE(it.next());
    const ingest::IteratorState state = it.save();
    // A restored iterator saved at once gives the same state: the buffer's
    // bytes are kept as they were read.
    auto restored = make().iterator(state);
    CHECK(restored.save() == state);
    // Hops: restore, 37 elements, save, restore again...: the elements are
    // the uninterrupted pass's.
    std::vector<std::string> got(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(k));
    ingest::IteratorState hop = state;
    for (;;) {
      auto next = make().iterator(hop);
      bool ended = false;
      for (int i = 0; i < 37; ++i) {
        auto x = next.next();
        if (!x) {
          ended = true;
          break;
        }
        got.push_back(*x);
      }
      if (ended) break;
      hop = next.save();
    }
    CHECK(got == full);
  }
}

TEST_CASE("with checkpointing, every save resumes exactly, the first one too",
          "[stages][shuffle][checkpoint]") {
  // .checkpointing keeps the buffer serialized from the start (the
  // prefetch's anchors save the shuffle from its first pull on); the
  // elements are those of the same pipeline without it.
  const auto plain = [] {
    return range(0, 400)
        .map([](std::int64_t x) { return std::string(static_cast<std::size_t>(x % 29), 'b'); })
        .shuffle(50, {.seed = 11})
        .repeat(2)
        .prefetch(3);
  };
  const auto make = [&] { return plain().with_options({.checkpointing = true}); };
  auto reference = plain().iterator();
  std::vector<std::string> full;
  while (auto x = reference.next()) full.push_back(*x);
  REQUIRE(full.size() == 800);
  for (const std::size_t k : {0, 1, 49, 50, 51, 399, 400, 401, 799, 800}) {
    INFO("saved after " << k);
    auto it = make().iterator();
    for (std::size_t i = 0; i < k; ++i) REQUIRE(it.next());
    const ingest::IteratorState state = it.save();
    auto restored = make().iterator(state);
    std::vector<std::string> got(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(k));
    while (auto x = restored.next()) got.push_back(*x);
    CHECK(got == full);
  }
}

TEST_CASE("a pipeline never saved never serializes its shuffle buffer",
          "[stages][shuffle][checkpoint]") {
  // The prefetch above it anchors its input in case a save comes; those
  // anchors decline the filled buffer until the pipeline's first save.
  const auto make = [] {
    return range(3000)
        .map([](std::int64_t x) { return Counted{x}; })
        .shuffle(500, {.seed = 5})
        .prefetch(2);
  };
  counted_writes = 0;
  const std::vector<Counted> all = collect(make());
  REQUIRE(all.size() == 3000);
  CHECK(counted_writes.load() == 0);
  // Told it will be saved, it keeps the buffer serialized from the start.
  CHECK(collect(make().with_options({.checkpointing = true})) == all);
  CHECK(counted_writes.load() >= 500);
  counted_writes = 0;
  // Saved once: from then on the buffer is kept serialized, and the
  // resumed pipeline gives the rest.
  auto it = make().iterator();
  std::vector<Counted> got;
  for (int i = 0; i < 1200; ++i) got.push_back(*it.next());
  const IteratorState state = it.save();
  auto resumed = make().iterator(state);
  while (auto x = resumed.next()) got.push_back(*x);
  CHECK(got == all);
  CHECK(counted_writes.load() > 0);
}
