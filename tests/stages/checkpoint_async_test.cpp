// Checkpoints through the stages that run ahead of the consumer (issue 13):
// prefetch, parallel map, map-and-batch and the host loader. Save at every
// position, restore into a freshly built dataset (also with another buffer
// size or parallelism), and compare with the uninterrupted pass; with
// .deterministic = false, nothing is lost and nothing delivered twice.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/loader.hpp>

#include "support/checkpoint.hpp"
#include "support/files.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace std::chrono_literals;

namespace {

// Slow enough to be handed to the pool (and to finish out of order).
std::int64_t slow_square(std::int64_t x) {
  std::this_thread::sleep_for(std::chrono::microseconds(x % 3 == 0 ? 300 : 50));
  return x * x;
}

std::int64_t fails_at_seven(std::int64_t x) {
  if (x == 7) throw Boom("seven");
  return x + 100;
}

std::vector<std::int64_t> batch_values(const Tensor& t) {
  const auto v = t.values<std::int64_t>();
  return {v.begin(), v.end()};
}

}  // namespace

TEST_CASE("checkpoint: prefetch of any size over range -> map -> batch",
          "[stages][checkpoint][concurrency]") {
  for (const std::int64_t size : {std::int64_t{0}, std::int64_t{1}, std::int64_t{4}, autotune}) {
    INFO("prefetch(" << size << ")");
    check_restore_everywhere([size] {
      return range(29).map([](std::int64_t x) { return 3 * x; }).batch(4).prefetch(size);
    });
  }
  // The buffer size is not part of the state: 4 restores into 0, 0 into 4.
  check_restore_everywhere([] { return range(40).batch(3).prefetch(4); },
                           [] { return range(40).batch(3).prefetch(0); });
  check_restore_everywhere([] { return range(40).batch(3).prefetch(0); },
                           [] { return range(40).batch(3).prefetch(autotune); });
}

TEST_CASE("checkpoint: prefetch far into a long input stays small and replays little",
          "[stages][checkpoint][concurrency]") {
  const auto make = [] {
    return range(20000).map([](std::int64_t x) { return x ^ 5; }).prefetch(8);
  };
  auto it = make().iterator();
  for (int i = 0; i < 12345; ++i) REQUIRE(it.next());
  const IteratorState state = it.save();
  CHECK(state.size() < 256);
  auto restored = make().iterator(state);
  for (std::int64_t i = 12345; i < 20000; ++i) {
    const auto x = restored.next();
    REQUIRE(x);
    REQUIRE(*x == (i ^ 5));
  }
  CHECK_FALSE(restored.next());
}

TEST_CASE("checkpoint: large states under a prefetch, saved and restored as it runs",
          "[stages][checkpoint][concurrency]") {
  // A shuffle buffer of 128 strings of 1 KiB: a 130 KiB state, which the
  // prefetch's puller anchors (recycling the storage of anchors it drops)
  // while the consumer's saves read theirs. Before the pipeline's first
  // save its anchors decline the full buffer (StateWriter::speculative), so
  // the first state may hold an anchor of the empty one, replayed from the
  // start.
  const auto make = [] {
    return range(1200)
        .map([](std::int64_t x) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
          return std::string(1024, static_cast<char>('a' + x % 26)) + std::to_string(x);
        })
        .shuffle(128, {.seed = 3})
        .prefetch(4);
  };
  const std::vector<std::string> all = collect(make());
  REQUIRE(all.size() == 1200);
  std::optional<decltype(make().iterator())> it;
  it.emplace(make().iterator());
  std::vector<std::string> got;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i % 97 == 40) {
      const IteratorState state = it->save();
      // Until the input's last 128 elements the buffer is full.
      if (i > 40 && i < 1000) CHECK(state.size() > 128 * 1024);
      it.emplace(make().iterator(state));
    }
    auto x = it->next();
    REQUIRE(x);
    got.push_back(std::move(*x));
  }
  CHECK_FALSE(it->next());
  CHECK(got == all);
}

TEST_CASE("checkpoint: deterministic parallel map at any parallelism",
          "[stages][checkpoint][concurrency]") {
  for (const std::int64_t p : {std::int64_t{1}, std::int64_t{2}, std::int64_t{4}, autotune}) {
    INFO("parallelism " << p);
    // Pooled (a slow function) and inline (a cheap one over a fusing source).
    check_restore_everywhere(
        [p] { return range(23).map(slow_square, {.parallelism = p, .deterministic = true}); });
    check_restore_everywhere([p] {
      return range(300).map([](std::int64_t x) { return x - 1; },
                            {.parallelism = p, .deterministic = true});
    });
  }
}

TEST_CASE("checkpoint: a state restores into another parallelism",
          "[stages][checkpoint][concurrency]") {
  const auto with = [](std::int64_t p) {
    return [p] { return range(31).map(slow_square, {.parallelism = p, .deterministic = true}); };
  };
  check_restore_everywhere(with(4), with(1));
  check_restore_everywhere(with(1), with(autotune));
  check_restore_everywhere(with(autotune), with(2));
  const auto batched = [](std::int64_t p) {
    return [p] {
      return range(26).map(slow_square, {.parallelism = p, .deterministic = true}).batch(4);
    };
  };
  check_restore_everywhere(batched(4), batched(1));
  check_restore_everywhere(batched(1), batched(autotune));
}

TEST_CASE("checkpoint: non-deterministic parallel map delivers every element once",
          "[stages][checkpoint][concurrency]") {
  const auto key = [](std::int64_t x) { return x; };
  for (const std::int64_t p : {std::int64_t{1}, std::int64_t{2}, std::int64_t{4}, autotune}) {
    INFO("parallelism " << p);
    const auto make = [p] {
      return range(40).map(slow_square, {.parallelism = p, .deterministic = false});
    };
    check_restore_unordered(make, make, key);
  }
  // Into another parallelism, and into deterministic mode.
  check_restore_unordered(
      [] { return range(40).map(slow_square, {.parallelism = 4, .deterministic = false}); },
      [] { return range(40).map(slow_square, {.parallelism = 1, .deterministic = true}); }, key);
  // With an element's error.
  const auto failing = [] {
    return range(30)
        .map(fails_at_seven, {.parallelism = 1})
        .map(slow_square, {.parallelism = 3, .deterministic = false});
  };
  check_restore_unordered(failing, failing, key);
}

TEST_CASE("checkpoint: non-deterministic results delivered past a slow one",
          "[stages][checkpoint][concurrency]") {
  // Element 10 takes long on a pool thread (the function is on the pool by
  // then; the consumer, if it runs the chunk itself, is not slowed): the
  // consumer gets later ones first, so the state holds delivered positions
  // above the first pending one. Tried a few times: the pool may be slow
  // to start.
  const auto make = [](std::int64_t p, std::thread::id consumer) {
    return range(24).map(
        [consumer](std::int64_t x) {
          const bool slow = x == 10 && std::this_thread::get_id() != consumer;
          std::this_thread::sleep_for(slow ? 150ms : 200us);
          return x;
        },
        {.parallelism = p, .deterministic = false});
  };
  const std::thread::id me = std::this_thread::get_id();
  bool gap = false;
  for (int attempt = 0; attempt < 8 && !gap; ++attempt) {
    auto it = make(4, me).iterator();
    std::vector<std::int64_t> seen;
    for (int i = 0; i < 16; ++i) seen.push_back(*it.next());
    gap = std::find(seen.begin(), seen.end(), 10) == seen.end();
    const IteratorState state = it.save();
    for (const std::int64_t p : {std::int64_t{1}, std::int64_t{4}}) {
      auto restored = make(p, me).iterator(state);
      auto all = seen;
      while (auto x = restored.next()) all.push_back(*x);
      std::sort(all.begin(), all.end());
      CHECK(all == iota(0, 24));
    }
    // Saved again right after the restore, and after a few elements: the
    // results the first restore drops stay dropped.
    for (const int steps : {0, 2, 5}) {
      auto restored = make(4, me).iterator(state);
      auto all = seen;
      for (int i = 0; i < steps; ++i) all.push_back(*restored.next());
      auto again = make(2, me).iterator(restored.save());
      while (auto x = again.next()) all.push_back(*x);
      std::sort(all.begin(), all.end());
      CHECK(all == iota(0, 24));
    }
    // The saved iterator goes on with the same rest.
    while (auto x = it.next()) seen.push_back(*x);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == iota(0, 24));
  }
  if (!gap) WARN("element 10 never came late: the out-of-order state was not exercised");

  // The same with whole batches: the batch of element 40 may come late.
  const auto batched = [](std::int64_t p) {
    return range(64)
        .map(
            [](std::int64_t x) {
              std::this_thread::sleep_for(x == 40 ? 150ms : 200us);
              return x;
            },
            {.parallelism = p, .deterministic = false})
        .batch(4);
  };
  auto b = batched(4).iterator();
  std::vector<std::int64_t> got;
  for (int i = 0; i < 12; ++i) {
    const auto v = batch_values(*b.next());
    got.insert(got.end(), v.begin(), v.end());
  }
  // (Whether batch 40 came late depends on whether the consumer ran its
  // chunk itself; either way nothing may be lost or repeated.)
  auto restored = batched(2).iterator(b.save());
  while (auto v = restored.next()) {
    const auto values = batch_values(*v);
    got.insert(got.end(), values.begin(), values.end());
  }
  std::sort(got.begin(), got.end());
  CHECK(got == iota(0, 64));
}

TEST_CASE("checkpoint: map_and_batch with a remainder or dropping it",
          "[stages][checkpoint][concurrency]") {
  for (const std::int64_t p : {std::int64_t{1}, std::int64_t{2}, std::int64_t{4}, autotune}) {
    for (const bool drop : {false, true}) {
      INFO("parallelism " << p << ", drop_remainder " << drop);
      check_restore_everywhere([p, drop] {
        return range(27)
            .map(slow_square, {.parallelism = p, .deterministic = true})
            .batch(4, {.drop_remainder = drop});
      });
      // Cheap: inline, fused with range's fill.
      check_restore_everywhere([p, drop] {
        return range(27)
            .map([](std::int64_t x) { return x + 1; }, {.parallelism = p})
            .batch(5, {.drop_remainder = drop});
      });
    }
  }
  // Non-deterministic: whole batches, each once.
  const auto make = [] {
    return range(45).map(slow_square, {.parallelism = 4, .deterministic = false}).batch(4);
  };
  check_restore_unordered(make, make, batch_values);
}

TEST_CASE("checkpoint: element errors before and after the save point",
          "[stages][checkpoint][concurrency]") {
  // Every k: the error at 7 is before the save for k > 7, after it otherwise.
  check_restore_everywhere([] { return range(15).map(fails_at_seven).prefetch(3); });
  check_restore_everywhere(
      [] { return range(15).map(fails_at_seven, {.parallelism = 2, .deterministic = true}); });
  check_restore_everywhere([] {
    return range(15).map(fails_at_seven).map(slow_square, {.parallelism = 3}).prefetch(2);
  });
  check_restore_everywhere([] {
    return range(19).map(fails_at_seven, {.parallelism = 2, .deterministic = true}).batch(3);
  });
}

TEST_CASE("checkpoint: a restore starts from the anchor its state names, kept as read",
          "[stages][checkpoint][concurrency]") {
  // A stage that runs ahead takes the anchor its state names as its first
  // one, sharing the state's bytes: on the way to the first element it saves
  // nothing (a shuffle buffer below would be serialized again), and a save
  // before anything else gives the state back. Under a prefetch, a parallel
  // map and a map-and-batch, each over a 200-string shuffle buffer kept
  // from the start (so that anchors lie close behind every position).
  const auto strings = [] {
    return range(1000)
        .map([](std::int64_t x) {
          return std::string(static_cast<std::size_t>(100 + x % 50),
                             static_cast<char>('a' + x % 26)) +
                 std::to_string(x);
        })
        .shuffle(200, {.seed = 9});
  };
  const auto check = [](auto make, std::vector<std::size_t> positions) {
    const auto all = collect(make());
    for (const std::size_t k : positions) {
      INFO("saved after " << k << " of " << all.size());
      auto it = make().iterator();
      for (std::size_t i = 0; i < k; ++i) REQUIRE(it.next());
      const IteratorState state = it.save();
      auto restored = make().iterator(state);
      CHECK(restored.save() == state);
      std::vector<typename decltype(all)::value_type> got(
          all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
      while (auto x = restored.next()) got.push_back(std::move(*x));
      CHECK(got == all);
    }
  };
  const auto length = [](const std::string& s) { return static_cast<std::int64_t>(s.size()); };
  check([&] { return strings().prefetch(4).with_options({.checkpointing = true}); },
        {0, 1, 199, 200, 517, 999, 1000});
  check(
      [&] {
        return strings().map(length, {.parallelism = 2}).with_options({.checkpointing = true});
      },
      {0, 1, 333, 800, 1000});
  check(
      [&] {
        return strings()
            .map(length, {.parallelism = 2})
            .batch(16)
            .map(batch_values)
            .with_options({.checkpointing = true});
      },
      {0, 1, 20, 37, 62, 63});
}

TEST_CASE("checkpoint: chains of async stages", "[stages][checkpoint][concurrency]") {
  const auto chain = [](std::int64_t p, std::int64_t buffer) {
    return [p, buffer] {
      return range(37)
          .map(slow_square, {.parallelism = p, .deterministic = true})
          .prefetch(buffer)
          .batch(3)
          .prefetch(1);
    };
  };
  check_restore_everywhere(chain(2, 2));
  check_restore_everywhere(chain(4, 4), chain(1, autotune));
}

TEST_CASE("checkpoint: saving while the producer waits on a full buffer",
          "[stages][checkpoint][concurrency]") {
  const auto make = [] { return range(500).map([](std::int64_t x) { return 2 * x; }).prefetch(3); };
  auto it = make().iterator();
  REQUIRE(*it.next() == 0);
  std::this_thread::sleep_for(20ms);  // the producer fills the buffer and waits
  const IteratorState state = it.save();
  auto restored = make().iterator(state);
  for (std::int64_t i = 1; i < 500; ++i) {
    REQUIRE(*restored.next() == 2 * i);
    REQUIRE(*it.next() == 2 * i);
  }
  CHECK_FALSE(restored.next());
  CHECK_FALSE(it.next());
}

TEST_CASE("checkpoint: a restored iterator destroyed mid-stream",
          "[stages][checkpoint][concurrency]") {
  const auto make = [] {
    return range(1000).map(slow_square, {.parallelism = 4}).prefetch(4).batch(2).prefetch(2);
  };
  auto it = make().iterator();
  for (int i = 0; i < 5; ++i) REQUIRE(it.next());
  const IteratorState state = it.save();
  for (int taken : {0, 1, 3}) {
    auto restored = make().iterator(state);
    for (int i = 0; i < taken; ++i) REQUIRE(restored.next());
  }  // each destroyed with work in flight: no hang, no crash
}

TEST_CASE("checkpoint: a stage before an async one that cannot be saved",
          "[stages][checkpoint][concurrency]") {
  const auto check = [](auto ds) {
    auto it = ds.iterator();
    for (int i = 0; i < 20; ++i) REQUIRE(it.next());
    try {
      (void)it.save();
      FAIL("save() did not throw");
    } catch (const Unimplemented& e) {
      CHECK_THAT(e.what(), Catch::Contains("stage 'from_generator' cannot be saved"));
    }
    // Iteration goes on.
    CHECK(it.next());
  };
  // A generator without save/restore hooks cannot be saved.
  const auto no_hooks = [] {
    return from_generator([] {
      return [i = std::int64_t{0}]() mutable -> std::optional<std::int64_t> {
        if (i == 100) return std::nullopt;
        return i++;
      };
    });
  };
  check(no_hooks().prefetch(4));
  check(no_hooks().map(slow_square, {.parallelism = 2}));
  check(no_hooks().map(slow_square, {.parallelism = 2}).batch(3));
  check(no_hooks().prefetch(0));
  // Before any element too.
  auto fresh = no_hooks().prefetch(2).iterator();
  CHECK_THROWS_AS(fresh.save(), Unimplemented);
}

TEST_CASE("checkpoint: async stages' parameters are part of the fingerprint",
          "[stages][checkpoint][concurrency]") {
  auto it = range(20).map(slow_square, {.parallelism = 2}).batch(4).iterator();
  REQUIRE(it.next());
  const IteratorState state = it.save();
  CHECK_THROWS_AS(range(20).map(slow_square, {.parallelism = 2}).batch(5).iterator(state),
                  InvalidArgument);
  CHECK_THROWS_AS(range(20)
                      .map(slow_square, {.parallelism = 2})
                      .batch(4, {.drop_remainder = true})
                      .iterator(state),
                  InvalidArgument);
  // The prefetch's input is part of its fingerprint.
  auto p = range(20).prefetch(2).iterator();
  REQUIRE(p.next());
  CHECK_THROWS_AS(range(21).take(20).prefetch(2).iterator(p.save()), InvalidArgument);
}

TEST_CASE("checkpoint: the host loader's state is its input's",
          "[stages][checkpoint][concurrency]") {
  const auto make = [](std::int64_t depth) {
    return HostLoader(range(50).map([](std::int64_t x) { return x * 7; }).batch(4),
                      {.depth = depth});
  };
  const auto values = [](auto& it) {
    std::vector<std::vector<std::int64_t>> out;
    while (auto b = it.next()) {
      b->wait();
      out.push_back(batch_values(b->field()));
    }
    return out;
  };
  auto reference = make(2).iterator();
  const auto full = values(reference);
  REQUIRE(full.size() == 13);
  for (std::size_t k = 0; k <= full.size(); ++k) {
    INFO("saved after " << k);
    auto it = make(3).iterator();
    for (std::size_t i = 0; i < k; ++i) REQUIRE(it.next());
    const IteratorState state = it.save();
    auto restored = make(k % 2 ? 1 : autotune).iterator(IteratorState::from_bytes(state.bytes()));
    CHECK(values(restored) ==
          std::vector(full.begin() + static_cast<std::ptrdiff_t>(k), full.end()));
  }
}

TEST_CASE("checkpoint: positions as stored, and states that do not fit together",
          "[stages][checkpoint][concurrency]") {
  // Pulled 17; 10 and 12..13 not delivered: low 10, high 12 (what ends at
  // 17 is pending anyway), one range.
  StateWriter w;
  const StateWriter none;
  detail::write_position(w, 4, none, 17, {{12, 17}, {10, 11}});
  struct Idle {
    void restore(StateReader&) {}
  } idle;
  StateReader r(w.bytes());
  const detail::Replay replay = detail::read_position(r, idle, "parallel_map");
  r.finish();
  CHECK(replay.anchor == 4);
  CHECK(replay.low == 10);
  CHECK(replay.high == 12);
  REQUIRE(replay.pending.size() == 1);
  CHECK_FALSE(replay.delivered(10));
  CHECK(replay.delivered(11));
  CHECK_THROWS_AS(replay.expect_in_order("prefetch"), DataLossError);
  // Saved again after this restore: before pulling anything, position 10
  // is still due and 11 not; with 10..16 pulled and in flight, the same.
  std::vector<detail::PositionRange> nothing;
  std::int64_t pulled = 10;
  replay.adjust(nothing, pulled);
  CHECK(pulled == 12);
  REQUIRE(nothing.size() == 1);
  CHECK((nothing[0].begin == 10 && nothing[0].end == 11));
  std::vector<detail::PositionRange> in_flight{{10, 17}};
  pulled = 17;
  replay.adjust(in_flight, pulled);
  CHECK(pulled == 17);
  REQUIRE(in_flight.size() == 2);
  CHECK((in_flight[0].begin == 10 && in_flight[0].end == 11));
  CHECK((in_flight[1].begin == 12 && in_flight[1].end == 17));
  // In order: one range up to the pulled position is no range at all.
  StateWriter in_order;
  detail::write_position(in_order, 0, none, 9, {{6, 9}});
  StateReader r2(in_order.bytes());
  const detail::Replay plain = detail::read_position(r2, idle, "prefetch");
  CHECK(plain.low == 6);
  CHECK(plain.high == 6);
  CHECK(plain.pending.empty());
  // An anchor after the consumer's position is DataLossError.
  StateWriter bad;
  bad.write_i64(8);
  bad.write_nested(none);
  bad.write_i64(3);
  bad.write_i64(3);
  bad.write_u64(0);
  StateReader r3(bad.bytes());
  CHECK_THROWS_AS(detail::read_position(r3, idle, "prefetch"), DataLossError);
}

TEST_CASE("checkpoint: interleave, sequential and parallel, deterministic or not",
          "[stages][checkpoint][interleave]") {
  TempDir dir;
  std::vector<std::string> paths;
  for (int f = 0; f < 5; ++f) {
    paths.push_back(dir / ("f" + std::to_string(f) + ".txt"));
    std::string lines;
    for (int i = 0; i < 3 + 4 * f; ++i) lines += std::to_string(f * 100 + i) + "\n";
    write_file(paths.back(), lines);
  }
  const auto make = [&](std::int64_t parallelism, std::int64_t cycle, std::int64_t block) {
    return from_vector(paths).repeat(2).interleave(
        [](const std::string& p) { return text_lines(p); },
        {.cycle_length = cycle, .block_length = block, .parallelism = parallelism});
  };
  for (const std::int64_t parallelism : {std::int64_t{1}, std::int64_t{2}, std::int64_t{4}}) {
    INFO("parallelism " << parallelism);
    check_restore_everywhere([&] { return make(parallelism, 3, 2); });
    // Into another parallelism, both ways.
    check_restore_everywhere([&] { return make(parallelism, 2, 1); },
                             [&] { return make(parallelism == 1 ? 4 : 1, 2, 1); });
  }
  // Non-deterministic: what follows a restore is the rest, each element once.
  const auto unordered = [&] {
    return from_vector(paths).interleave(
        [](const std::string& p) { return text_lines(p); },
        {.cycle_length = 3, .parallelism = 3, .deterministic = false});
  };
  check_restore_unordered(unordered, unordered, [](const std::string& s) { return s; });
  // Another cycle or block length is another pipeline.
  const auto state = make(2, 3, 2).iterator().save();
  CHECK_THROWS_AS(make(2, 3, 1).iterator(state), InvalidArgument);
  CHECK_THROWS_AS(make(2, 2, 2).iterator(state), InvalidArgument);
}

namespace {
// Saves an iterator of `make()` after `k` steps and checks that an iterator
// of `make_restored()` restored from the state yields the uninterrupted tail.
template <class Make, class MakeRestored>
void check_restore_at(Make make, MakeRestored make_restored, std::size_t k) {
  auto reference = make().iterator();
  const auto full = drain_steps(reference);
  k = std::min(k, full.size());
  auto it = make().iterator();
  for (std::size_t i = 0; i < k; ++i) REQUIRE(next_step(it).has_value());
  const IteratorState state = IteratorState::from_bytes(it.save().bytes());
  auto restored = make_restored().iterator(state);
  const auto tail = drain_steps(restored);
  CHECK(tail == std::vector(full.begin() + static_cast<std::ptrdiff_t>(k), full.end()));
}
}  // namespace

TEST_CASE("checkpoint: random pipelines saved at random points resume exactly",
          "[stages][checkpoint][concurrency]") {
  // Random shapes, parameters, parallelism (1, 2, autotune; restored into
  // another one) and save points, seeded.
  std::mt19937_64 rng(20261127);
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  const std::int64_t knobs[] = {1, 2, autotune};
  for (int trial = 0; trial < 36; ++trial) {
    const std::int64_t n = pick(1, 150), batch = pick(1, 7), buffer = pick(1, 24);
    const std::int64_t par = knobs[pick(0, 2)], par_restored = knobs[pick(0, 2)];
    const auto seed = static_cast<std::uint64_t>(pick(0, 1000));
    const auto k = static_cast<std::size_t>(pick(0, n));
    INFO("trial " << trial << ": n " << n << ", batch " << batch << ", buffer " << buffer
                  << ", parallelism " << par << " then " << par_restored << ", saved after " << k);
    switch (trial % 4) {
      case 0: {  // map -> filter -> shuffle -> batch -> prefetch
        const auto make = [&](std::int64_t p) {
          return [=] {
            return range(n)
                .map([](std::int64_t x) { return x * x % 97; }, {.parallelism = p})
                .filter([](std::int64_t x) { return x % 3 != 0; })
                .shuffle(buffer, {.seed = seed})
                .batch(batch)
                .prefetch(p == 1 ? 0 : p);
          };
        };
        check_restore_at(make(par), make(par_restored), k);
        break;
      }
      case 1: {  // repeat -> interleave of ranges -> map_and_batch -> unbatch
        const auto make = [&](std::int64_t p) {
          return [=] {
            return range(1 + n % 5)
                .repeat(2)
                .interleave([n](std::int64_t x) { return range(x * 1000, x * 1000 + n % 13 + 1); },
                            {.cycle_length = 3, .block_length = 2, .parallelism = p})
                .map([](std::int64_t x) { return x + 1; }, {.parallelism = p})
                .batch(batch)
                .unbatch();
          };
        };
        check_restore_at(make(par), make(par_restored), k);
        break;
      }
      case 2: {  // random_map -> window -> take -> prefetch
        const auto make = [&](std::int64_t p) {
          return [=] {
            return range(n)
                .random_map(
                    [](std::int64_t x, Rng& r) {
                      return x * 100 + static_cast<std::int64_t>(r.uniform(100));
                    },
                    {.seed = seed, .parallelism = p})
                .window(static_cast<std::int64_t>(batch), {.shift = 2})
                .take(n / 2 + 1)
                .prefetch(p == 1 ? 1 : 4);
          };
        };
        check_restore_at(make(par), make(par_restored), k);
        break;
      }
      default: {  // zip of a shuffled and a parallel-mapped input -> enumerate -> skip
        const auto make = [&](std::int64_t p) {
          return [=] {
            return zip(range(n).shuffle(buffer, {.seed = seed}),
                       range(n).map([](std::int64_t x) { return -x; }, {.parallelism = p}))
                .enumerate()
                .skip(batch);
          };
        };
        check_restore_at(make(par), make(par_restored), k);
        break;
      }
    }
  }
}

namespace {

// range -> strings (counted in *pulls, when given) -> shuffle(600) ->
// parallel map -> batch -> prefetch -> repeat(2); `cached` puts a cache
// between the strings and the shuffle. Each pipeline counts into its own
// counter: an earlier iterator's producer goes on reading ahead beside it.
auto shuffled_pipeline(std::int64_t parallelism, bool cached = false,
                       std::atomic<std::int64_t>* pulls = nullptr) {
  AnyDataset<std::string> strings = range(10000).map([pulls](std::int64_t x) {
    if (pulls) pulls->fetch_add(1, std::memory_order_relaxed);
    return std::to_string(x * 7919 % 10007);
  });
  if (cached) strings = strings.cache();
  return strings.shuffle(600, {.seed = 11})
      .map(
          [](const std::string& s) {
            return std::stoll(s) * 10 + static_cast<std::int64_t>(s.size());
          },
          {.parallelism = parallelism})
      .batch(8)
      .prefetch(2)
      .repeat(2);
}

template <class It>
std::vector<std::vector<std::int64_t>> drain_batches(It& it, std::size_t limit = SIZE_MAX) {
  std::vector<std::vector<std::int64_t>> out;
  while (out.size() < limit) {
    auto b = it.next();
    if (!b) break;
    out.push_back(batch_values(*b));
  }
  return out;
}

}  // namespace

TEST_CASE("checkpoint: the first save over a filled shuffle buffer restores without replaying",
          "[stages][checkpoint][concurrency]") {
  // Until the pipeline's first save the shuffle declines the parallel
  // map's anchors (its buffer is not kept serialized yet), so the state
  // written at that save names the anchor of the pass's start: a restore
  // would pull the 5,600 inputs before the position again. save() restores
  // such a state into a replica and returns the replica's, anchored at the
  // position; the live pipeline goes on untouched (its reshuffle of the
  // second pass included).
  for (const std::int64_t p : {std::int64_t{1}, std::int64_t{2}, autotune}) {
    INFO("parallelism " << p);
    auto reference = shuffled_pipeline(p).iterator();
    const auto all = drain_batches(reference);
    REQUIRE(all.size() == 2500);
    const std::size_t k = 700;  // batches: 5,600 inputs into the first pass
    const auto tail = std::vector(all.begin() + k, all.end());

    for (const bool compact : {true, false}) {
      INFO((compact ? "compacted" : "as written (compaction off)"));
      // Compacted: every state, whatever its replay (-1). The replay
      // depends on where the anchors fell: at parallelism 1 it is split
      // between the prefetch's batches and the inline map's inputs below
      // its anchor (3,598 in all in one run), and autotuned under load it
      // was 714, under the 1,024 this test once used, so that state was
      // written as it was and the checks below failed.
      const CompactAfter threshold(compact ? -1 : std::numeric_limits<std::int64_t>::max());
      auto it = shuffled_pipeline(p).iterator();
      REQUIRE(drain_batches(it, k).size() == k);
      const IteratorState state = it.save();
      CHECK(it.stats().compacted_checkpoints == (compact ? 1 : 0));

      // The live iterator's prefetch may still be producing its next batch,
      // so only the restored pipeline's own reads are counted.
      std::atomic<std::int64_t> restored_pulls{0};
      auto restored = shuffled_pipeline(p, false, &restored_pulls).iterator(state);
      const PipelineStats restore = restored.stats();
      // What the restore itself pulled, before any producer starts.
      const std::int64_t pulled = restored_pulls.load();
      CHECK(restore.restored);
      if (compact) {
        // The buffer comes from the state, every anchor is at the
        // position: nothing is pulled to be discarded.
        CHECK(restore.restore_replayed_inputs == 0);
        CHECK(pulled == 0);
      } else {
        // At least the 700 batches, or the 5,600 inputs below them, in
        // whatever split the anchors left.
        CHECK(restore.restore_replayed_inputs >= 700);
        CHECK(pulled >= 5600);
      }
      const auto first = restored.next();
      REQUIRE(first);
      auto got = drain_batches(restored);
      got.insert(got.begin(), batch_values(*first));
      CHECK(got == tail);
      CHECK(drain_batches(it) == tail);
    }
  }
}

TEST_CASE("checkpoint: a state the replica cannot compact (a cache below) is kept as written",
          "[stages][checkpoint][concurrency]") {
  auto reference = shuffled_pipeline(2, /*cached=*/true).iterator();
  const auto all = drain_batches(reference);
  REQUIRE(all.size() == 2500);
  for (const std::size_t k : {std::size_t{700}, std::size_t{1400}}) {
    INFO("saved after " << k << " batches");
    auto it = shuffled_pipeline(2, true).iterator();
    REQUIRE(drain_batches(it, k).size() == k);
    const IteratorState state = it.save();
    CHECK(it.stats().compacted_checkpoints == 0);  // refused: the replica would read the cache
    auto restored = shuffled_pipeline(2, true).iterator(state);
    const auto tail = std::vector(all.begin() + static_cast<std::ptrdiff_t>(k), all.end());
    CHECK(drain_batches(restored) == tail);
    CHECK(drain_batches(it) == tail);
  }
}
