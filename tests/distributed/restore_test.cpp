#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>

#include "support/files.hpp"
#include "support/records.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using distributed::World;

namespace {

constexpr std::int64_t n = 500;
bool kept(std::int64_t x) { return x % 7 != 3; }

// The pipeline of the job, as every rank builds it: a global shuffle dealt
// to the ranks, a filter, a parallel map, batches and a prefetch.
auto job(Remainder policy, std::uint64_t seed = 9) {
  return [policy, seed](const World& w) {
    return range(n)
        .global_shuffle({.seed = seed})
        .shard(w, {.remainder = policy})
        .filter([](std::int64_t x) { return kept(x); })
        .map([](std::int64_t x) { return x; }, {.parallelism = 2})
        .batch(4)
        .prefetch(2);
  };
}

void take(auto& it, std::size_t batches, std::map<std::int64_t, int>& seen) {
  for (std::size_t b = 0; b < batches; ++b) {
    auto x = it.next();
    if (!x) return;
    for (const std::int64_t v : x->template values<std::int64_t>()) ++seen[v];
  }
}

}  // namespace

TEST_CASE("a job resized from 4 ranks to 3 to 2 delivers every element exactly once",
          "[distributed][restore]") {
  std::mt19937_64 rng(43);
  for (const Remainder policy : {Remainder::uneven, Remainder::drop}) {
    for (int trial = 0; trial < 4; ++trial) {
      INFO("policy " << static_cast<int>(policy) << ", trial " << trial);
      const auto make = job(policy);
      std::map<std::int64_t, int> seen;
      // 4 ranks, each stopped after its own number of batches.
      std::vector<IteratorState> states;
      for (int r = 0; r < 4; ++r) {
        auto it = make(World{.rank = r, .world_size = 4}).iterator();
        take(it, rng() % 30, seen);
        states.push_back(it.save());
      }
      // 3 ranks resume the pass, and stop again.
      std::vector<IteratorState> states3;
      for (int r = 0; r < 3; ++r) {
        auto resumed = distributed::restore(make, states, World{.rank = r, .world_size = 3});
        take(resumed.iterator, rng() % 20, seen);
        states3.push_back(resumed.iterator.save());
      }
      // 2 ranks finish it.
      for (int r = 0; r < 2; ++r) {
        auto resumed = distributed::restore(make, states3, World{.rank = r, .world_size = 2});
        take(resumed.iterator, 1000, seen);
      }
      std::int64_t expected = 0, lost = 0;
      for (std::int64_t x = 0; x < n; ++x) {
        if (!kept(x)) {
          CHECK(seen.count(x) == 0);
          continue;
        }
        ++expected;
        if (seen.count(x) == 0) {
          ++lost;
        } else {
          CHECK(seen[x] == 1);
        }
      }
      if (policy == Remainder::uneven) {
        CHECK(lost == 0);
      } else {
        CHECK(lost <= 1);  // drop: fewer than the last world's size
      }
      CHECK(expected > 0);
    }
  }
}

TEST_CASE("after the resumed pass, the next passes are dealt to the new world",
          "[distributed][restore]") {
  const auto make = job(Remainder::uneven);
  std::map<std::int64_t, int> pass0, pass1;
  std::vector<IteratorState> states;
  for (int r = 0; r < 4; ++r) {
    auto it = make(World{.rank = r, .world_size = 4}).iterator();
    take(it, 5 + static_cast<std::size_t>(r), pass0);
    states.push_back(it.save());
  }
  for (int r = 0; r < 3; ++r) {
    auto resumed = distributed::restore(make, states, World{.rank = r, .world_size = 3});
    take(resumed.iterator, 100000, pass0);
    auto next_pass = resumed.dataset.iterator();
    take(next_pass, 100000, pass1);
  }
  std::int64_t expected = 0;
  for (std::int64_t x = 0; x < n; ++x) expected += kept(x);
  CHECK(static_cast<std::int64_t>(pass0.size()) == expected);
  CHECK(static_cast<std::int64_t>(pass1.size()) == expected);
  for (auto [x, c] : pass0) CHECK(c == 1);
  for (auto [x, c] : pass1) CHECK(c == 1);
}

TEST_CASE("an old rank's restore reads no further than the rank had consumed",
          "[distributed][restore]") {
  // A map costly enough that its stage hands elements to the pool (not
  // inline): an old rank's restore replays the prefetch's input through it,
  // and a read ahead of the rank's position there would count as consumed.
  const auto slow = [](std::int64_t x) {
    volatile std::uint64_t h = static_cast<std::uint64_t>(x);
    for (int i = 0; i < 20000; ++i) h = h * 6364136223846793005u + 1442695040888963407u;
    return x + static_cast<std::int64_t>(h & 0);
  };
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    const auto make = [&](const World& w) {
      return range(n)
          .global_shuffle({.seed = seed})
          .shard(w, {.remainder = Remainder::uneven})
          .map(slow, {.parallelism = 2})
          .batch(4)
          .prefetch(2);
    };
    std::map<std::int64_t, int> seen;
    std::vector<IteratorState> states;
    for (int r = 0; r < 4; ++r) {
      auto it = make(World{.rank = r, .world_size = 4}).iterator();
      take(it, seed + 2 * static_cast<std::size_t>(r), seen);
      states.push_back(it.save());
    }
    for (int r = 0; r < 3; ++r) {
      auto resumed = distributed::restore(make, states, World{.rank = r, .world_size = 3});
      take(resumed.iterator, 100000, seen);
    }
    CHECK(static_cast<std::int64_t>(seen.size()) == n);
    for (auto [x, c] : seen) CHECK(c == 1);
  }
}

TEST_CASE("a resize of an indexed TFRecord job reads each record once", "[distributed][restore]") {
  TempDir dir;
  std::vector<std::string> records;
  for (int i = 0; i < 90; ++i) records.push_back("record " + std::to_string(i));
  write_file(dir / "a",
             frame_records(std::vector<std::string>(records.begin(), records.begin() + 40)));
  write_file(dir / "b",
             frame_records(std::vector<std::string>(records.begin() + 40, records.end())));
  const auto index =
      std::make_shared<TFRecordIndex>(build_tfrecord_index(FileList({dir / "a", dir / "b"})));
  const auto make = [&](const World& w) {
    return indexed_tfrecord(*index)
        .global_shuffle({.seed = 1})
        .shard(w, {.remainder = Remainder::uneven})
        .prefetch(3);
  };
  std::map<std::string, int> seen;
  std::vector<IteratorState> states;
  for (int r = 0; r < 3; ++r) {
    auto it = make(World{.rank = r, .world_size = 3}).iterator();
    for (int i = 0; i < 4 * r + 1; ++i) ++seen[*it.next()];
    states.push_back(it.save());
    CHECK(states.back().size() < 400);  // the pass, the position, the stages' headers: no buffer
  }
  for (int r = 0; r < 5; ++r) {
    auto resumed = distributed::restore(make, states, World{.rank = r, .world_size = 5});
    while (auto x = resumed.iterator.next()) ++seen[*x];
  }
  CHECK(seen.size() == records.size());
  for (auto [x, c] : seen) CHECK(c == 1);
}

TEST_CASE("restore names what is wrong with the states", "[distributed][restore]") {
  const auto make = job(Remainder::drop);
  std::vector<IteratorState> states;
  for (int r = 0; r < 4; ++r) {
    const auto d = make(World{.rank = r, .world_size = 4});
    std::map<std::int64_t, int> seen;
    if (r == 3) {  // rank 3 reaches the second pass
      auto first = d.iterator();
      take(first, 1000, seen);
    }
    auto it = d.iterator();
    take(it, 3, seen);
    states.push_back(it.save());
  }
  const World w{.rank = 0, .world_size = 3};
  CHECK_THROWS_WITH(distributed::restore(make, std::vector<IteratorState>{}, w),
                    Catch::Contains("no states"));
  // A rank missing: three states are not a 3-rank world's.
  CHECK_THROWS_WITH(
      distributed::restore(make, std::vector<IteratorState>(states.begin(), states.begin() + 3),
                           World{.rank = 0, .world_size = 2}),
      Catch::Contains("does not restore as rank 0 of a 3-rank world"));
  // Out of order.
  std::vector<IteratorState> swapped{states[1], states[0], states[2], states[3]};
  CHECK_THROWS_WITH(distributed::restore(make, swapped, w), Catch::Contains("state 0 of 4"));
  // Another data set.
  CHECK_THROWS_WITH(distributed::restore(job(Remainder::drop, 10), states, w),
                    Catch::Contains("another dataset"));
  // Mixed passes.
  CHECK_THROWS_WITH(distributed::restore(make, states, w), Catch::Contains("different passes"));
  // A stream pipeline restores into a world of the same size only.
  const auto stream = [](const World& world) {
    return range(40).map([](std::int64_t x) { return x; }).shard(world);
  };
  std::vector<IteratorState> stream_states;
  for (int r = 0; r < 2; ++r) {
    auto it = stream(World{.rank = r, .world_size = 2}).iterator();
    it.next();
    stream_states.push_back(it.save());
  }
  CHECK_THROWS_WITH(distributed::restore(stream, stream_states, World{.rank = 0, .world_size = 3}),
                    Catch::Contains("reads a stream"));
  auto same = distributed::restore(stream, stream_states, World{.rank = 1, .world_size = 2});
  CHECK(*same.iterator.next() == 3);
  CHECK_THROWS_WITH(distributed::restore(stream, stream_states, World{.rank = 2, .world_size = 2}),
                    Catch::Contains("outside [0, 2)"));
  // A stage that keeps elements across a save cannot be dealt to a new world.
  const auto buffered = [](const World& world) {
    return range(40).global_shuffle({.seed = 1}).shard(world).shuffle(8);
  };
  std::vector<IteratorState> buffered_states;
  for (int r = 0; r < 2; ++r)
    buffered_states.push_back(buffered(World{.rank = r, .world_size = 2}).iterator().save());
  CHECK_THROWS_WITH(
      distributed::restore(buffered, buffered_states, World{.rank = 0, .world_size = 3}),
      Catch::Contains("stage 'shuffle'"));
}
