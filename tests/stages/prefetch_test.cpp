#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace std::chrono_literals;
using V = std::vector<std::int64_t>;

TEST_CASE("prefetch yields its input unchanged", "[stages][prefetch][concurrency]") {
  for (std::int64_t n : {1, 2, 16}) CHECK(collect(range(1000).prefetch(n)) == iota(0, 1000));
  CHECK(collect(range(0).prefetch(2)).empty());
  CHECK(collect(range(1).prefetch(2)) == V{0});
  CHECK(collect(range(100).prefetch(autotune)) == iota(0, 100));
  CHECK_THROWS_AS(range(3).prefetch(-2), InvalidArgument);
  // Re-iterating gives the same elements.
  auto ds = range(50).batch(7).prefetch(2);
  CHECK(collect(ds).size() == 8);
  CHECK(collect(ds).size() == 8);
}

TEST_CASE("prefetch delivers errors at their position", "[stages][prefetch][concurrency]") {
  auto ds = range(6)
                .map([](std::int64_t x) -> std::int64_t {
                  if (x == 3) throw Boom("three");
                  return x;
                })
                .prefetch(2);
  auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 6);
  CHECK(out[2].value == 2);
  CHECK(out[3].error == "FunctionError: three [stage 'map', element 3]");
  CHECK(out[4].value == 4);
}

TEST_CASE("prefetch runs the producer ahead of the consumer", "[stages][prefetch][concurrency]") {
  std::atomic<int> produced{0};
  auto ds = counted_range(100, produced).prefetch(5);
  auto it = ds.iterator();
  CHECK(it.next() == 0);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (produced.load() < 5 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(produced.load() >= 5);  // ran ahead without being asked: a full buffer
  std::this_thread::sleep_for(20ms);
  CHECK(produced.load() <= 6);  // but no further than the buffer allows
}

TEST_CASE("destroying a prefetch iterator mid-stream is prompt",
          "[stages][prefetch][concurrency]") {
  std::atomic<int> produced{0};
  auto ds = counted_range(1'000'000, produced, 1ms).prefetch(4);
  const auto start = std::chrono::steady_clock::now();
  {
    auto it = ds.iterator();
    CHECK(it.next() == 0);
  }
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  const int after = produced.load();
  std::this_thread::sleep_for(20ms);
  CHECK(produced.load() == after);
  // Never iterated: nothing runs at all.
  { auto it = ds.iterator(); }
}

TEST_CASE("nested async stages complete on a one-thread runtime",
          "[stages][prefetch][concurrency]") {
  // prefetch( interleave( parallel maps ) ) with parallel fetchers, all on one pool thread.
  auto inner = [](std::int64_t file) {
    return range(file * 100, file * 100 + 100)
        .map([](std::int64_t x) { return x + 1; }, {.parallelism = 4});
  };
  auto ds = range(8)
                .interleave(inner, {.cycle_length = 3, .block_length = 5, .parallelism = 3})
                .map([](std::int64_t x) { return x * 2; }, {.parallelism = 2})
                .batch(16)
                .prefetch(2)
                .with_options({.threads = 1});
  std::int64_t count = 0, sum = 0;
  for (const Tensor& b : ds) {
    count += b.num_elements();
    for (auto v : b.values<std::int64_t>()) sum += v;
  }
  CHECK(count == 800);
  CHECK(sum == 2 * (800 * 799 / 2 + 800));
}

TEST_CASE("prefetch(0) buffers nothing: the consumer pulls directly (tf.data)",
          "[stages][prefetch][concurrency]") {
  std::atomic<int> produced{0};
  auto ds = counted_range(100, produced).prefetch(0);
  auto it = ds.iterator();
  CHECK(*it.next() == 0);
  std::this_thread::sleep_for(20ms);
  CHECK(produced.load() == 1);  // nothing ran ahead
  for (std::int64_t k = 1; k < 100; ++k) CHECK(*it.next() == k);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(it.next());
  CHECK(collect(range(5).prefetch(0).repeat(2)).size() == 10);
  CHECK(collect(range(0).prefetch(0)).empty());
}

TEST_CASE("a prefetch buffer grows with what arrives, up to its size",
          "[stages][prefetch][concurrency]") {
  // prefetch(10'000'000) reserved 230 MiB over 10 elements; 2^40 threw bad_alloc.
  for (std::int64_t n : {std::int64_t{10'000'000}, std::int64_t{1} << 40}) {
    CHECK(collect(range(10).prefetch(n)) == iota(0, 10));
  }
  // The ring grows while the consumer lags, across several sizes, in order.
  std::atomic<int> produced{0};
  auto ds = counted_range(5000, produced).prefetch(1000);
  auto it = ds.iterator();
  CHECK(*it.next() == 0);
  while (produced.load() < 1000) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(10ms);
  CHECK(produced.load() <= 1001);  // the buffer holds 1000, the producer stops
  for (std::int64_t k = 1; k < 5000; ++k) REQUIRE(*it.next() == k);
  CHECK_FALSE(it.next());
  // Destroyed while grown rings hold elements.
  {
    auto it2 = range(100000).prefetch(100000).iterator();
    CHECK(*it2.next() == 0);
    std::this_thread::sleep_for(5ms);
  }
}

namespace {
// Counts calls of a map function that takes `pause` per element.
struct Slow {
  std::atomic<int>* calls;
  std::chrono::microseconds pause;
  std::int64_t operator()(std::int64_t x) const {
    calls->fetch_add(1);
    std::this_thread::sleep_for(pause);
    return x;
  }
};

// Takes one element of `ds`, then destroys the iterator while the producer
// is building the next one; returns the user calls made after destruction
// began.
template <class D>
int calls_after_destruction(const D& ds, std::atomic<int>& calls) {
  auto it = ds.iterator();
  REQUIRE(it.next().has_value());
  std::this_thread::sleep_for(5ms);  // the producer is inside the next batch
  int before = 0;
  {
    auto doomed = std::move(it);
    before = calls.load();
  }
  return calls.load() - before;
}
}  // namespace

TEST_CASE("destroying a prefetch stops the batch being built before it",
          "[stages][prefetch][concurrency]") {
  // The pipeline: map -> filter -> batch(400) -> prefetch(1). Without
  // cancellation the producer finishes the 400-element batch in hand.
  std::atomic<int> calls{0};
  auto ds = range(100'000)
                .map(Slow{&calls, 200us})
                .filter([](std::int64_t x) { return x % 10 != 3; })
                .batch(400)
                .prefetch(1);
  // At most the element in hand and one that passed the check as it was set.
  CHECK(calls_after_destruction(ds, calls) <= 2);
}

TEST_CASE("destroying a prefetch stops a map-and-batch before it",
          "[stages][prefetch][concurrency]") {
  std::atomic<int> calls{0};
  auto pooled = range(100'000)
                    .map(Slow{&calls, 200us}, {.parallelism = 2})
                    .batch(400)
                    .prefetch(1)
                    .with_options({.threads = 2});
  // One element per pool thread and the consumer's, and one check's race each.
  CHECK(calls_after_destruction(pooled, calls) <= 6);

  // A function cheap at first (the stage runs it inline, fused with the
  // source's fill loop), then slow: the fused path stops between pieces. The
  // pacer measures one piece in 8 while pieces are large, so it needs up to 8
  // batches to shrink its pieces after the jump in cost: read 12 slow ones.
  std::atomic<int> fused_calls{0};
  auto fused = range(1'000'000)
                   .map(
                       [&](std::int64_t x) {
                         fused_calls.fetch_add(1, std::memory_order_relaxed);
                         if (x >= 10'000) std::this_thread::sleep_for(50us);
                         return x;
                       },
                       {.parallelism = 2})
                   .batch(500)
                   .prefetch(1)
                   .with_options({.threads = 2});
  auto it = fused.iterator();
  for (int i = 0; i < 32; ++i) REQUIRE(it.next().has_value());  // 12 batches into the slow part
  int before = 0;
  {
    auto doomed = std::move(it);
    before = fused_calls.load();
  }
  CHECK(fused_calls.load() - before <= 2 * 64 + 6);
}

TEST_CASE("a stopped token unwinds every batch-filling stage between elements",
          "[stages][prefetch]") {
  // Each stage's own check, driven directly: the consumer is gone before the fill.
  CancellationSource source;
  IteratorContext ctx;
  ctx.cancellation = source.token();
  source.request_stop();
  std::atomic<int> calls{0};
  auto counted = range(1000).map([&](std::int64_t x) {
    calls.fetch_add(1);
    return x;
  });
  CHECK_THROWS_AS(counted.batch(100).make_iterator(ctx).next(), detail::Cancelled);
  CHECK_THROWS_AS(counted.padded_batch(100).make_iterator(ctx).next(), detail::Cancelled);
  CHECK_THROWS_AS(counted.shuffle(100, {.seed = 1}).make_iterator(ctx).next(), detail::Cancelled);
  CHECK_THROWS_AS(counted.skip(100).make_iterator(ctx).next(), detail::Cancelled);
  CHECK_THROWS_AS(counted.map([](std::int64_t x) { return x; }, {.parallelism = 2})
                      .batch(100)
                      .make_iterator(ctx)
                      .next(),
                  detail::Cancelled);
  CHECK(calls.load() == 0);
  // filter checks after a rejected element: one call, then it stops.
  CHECK_THROWS_AS(counted.filter([](std::int64_t) { return false; }).make_iterator(ctx).next(),
                  detail::Cancelled);
  CHECK(calls.load() == 1);
  // Neither ignore_errors nor a failed-batch capture swallows it.
  CHECK_THROWS_AS(counted.batch(100).ignore_errors().make_iterator(ctx).next(), detail::Cancelled);
  // A parent's stop reaches a child source's tokens; a default token never stops.
  CancellationSource child(source.token());
  CHECK(child.stop_requested());
  CHECK_FALSE(CancellationToken{}.stop_requested());
  CancellationSource moved;
  CancellationSource taken = std::move(moved);
  moved.request_stop();  // a moved-from source stops nothing
  CHECK_FALSE(taken.stop_requested());
}
