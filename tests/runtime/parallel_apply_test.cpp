// The engine of parallel map and map-and-batch on its own: units of chunks
// taken in launch order (deterministic) or as they finish, units of several
// chunks, a consumer that runs chunks itself, the knob set-up, and
// destruction with chunks pending or running.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/runtime/parallel_apply.hpp>

using namespace ingest;
using namespace ingest::detail;

namespace {

struct ChunkWork {
  std::vector<std::int64_t> in, out;
};

// Squares a chunk's inputs. The input `slow` takes 20 ms, or with
// `until_cancelled` lasts until the engine is being destroyed; `computed`
// counts the squares made.
struct SquareChunk {
  std::int64_t slow = -1;
  bool until_cancelled = false;
  std::atomic<int>* computed = nullptr;
  std::size_t operator()(ChunkWork& w, const std::atomic<bool>& cancelled) const {
    w.out.clear();
    for (std::int64_t x : w.in) {
      if (cancelled.load()) break;
      if (x == slow && until_cancelled) {
        while (!cancelled.load()) std::this_thread::yield();
      } else if (x == slow) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      w.out.push_back(x * x);
      if (computed) ++*computed;
    }
    return w.out.size();
  }
};

using Engine = ParallelApply<ChunkWork, SquareChunk>;

// Loads `values` into a free slot and submits it.
std::size_t submit(Engine& e, std::vector<std::int64_t> values) {
  const std::size_t slot = e.find_idle();
  REQUIRE(slot != Engine::none);
  e.work(slot).in = std::move(values);
  e.submit(slot);
  return slot;
}

}  // namespace

TEST_CASE("parallel_apply: units come back in launch order when deterministic",
          "[runtime][parallel_apply][concurrency]") {
  auto runtime = std::make_shared<Runtime>(2);
  Engine e(8, 64, SquareChunk{.slow = 1}, 2, true, runtime, nullptr);
  std::vector<std::size_t> inflight;
  for (std::int64_t k = 0; k < 4; ++k) inflight.push_back(submit(e, {k, k + 10}));
  std::vector<std::int64_t> seen;
  while (!inflight.empty()) {
    const std::size_t k =
        e.take_ready(inflight.size(), [&](std::size_t i) { return std::span(&inflight[i], 1); });
    CHECK(k == 0);  // the oldest, although the first is the slowest
    for (std::int64_t v : e.work(inflight[k]).out) seen.push_back(v);
    e.release(inflight[k]);
    inflight.erase(inflight.begin());
  }
  CHECK(seen == std::vector<std::int64_t>{0, 100, 1, 121, 4, 144, 9, 169});
}

TEST_CASE("parallel_apply: units come back as they finish when not deterministic",
          "[runtime][parallel_apply][concurrency]") {
  auto runtime = std::make_shared<Runtime>(2);
  Engine e(8, 64, SquareChunk{.slow = 0}, 2, false, runtime, nullptr);
  std::vector<std::size_t> inflight{submit(e, {0}), submit(e, {2})};
  const std::size_t k =
      e.take_ready(inflight.size(), [&](std::size_t i) { return std::span(&inflight[i], 1); });
  CHECK(e.work(inflight[k]).out.size() == 1);
  std::size_t other = 1 - k;
  e.release(inflight[k]);
  const std::size_t last =
      e.take_ready(1, [&](std::size_t) { return std::span(&inflight[other], 1); });
  CHECK(last == 0);
  e.release(inflight[other]);
}

TEST_CASE("parallel_apply: a unit of several chunks is ready when all are",
          "[runtime][parallel_apply][concurrency]") {
  // One pool thread and parallelism 1: the consumer runs chunks itself.
  auto runtime = std::make_shared<Runtime>(1);
  Engine e(8, 64, SquareChunk{}, 1, true, runtime, nullptr);
  std::vector<std::size_t> batch{submit(e, {1, 2}), submit(e, {3}), submit(e, {4, 5, 6})};
  const std::size_t k =
      e.take_ready(1, [&](std::size_t) { return std::span<const std::size_t>(batch); });
  CHECK(k == 0);
  std::vector<std::int64_t> seen;
  for (std::size_t s : batch) {
    CHECK(e.done(s));
    for (std::int64_t v : e.work(s).out) seen.push_back(v);
    e.release(s);
  }
  CHECK(seen == std::vector<std::int64_t>{1, 4, 9, 16, 25, 36});
}

TEST_CASE("parallel_apply: a launch loads one unit before the first result, then runs ahead",
          "[runtime][parallel_apply][concurrency]") {
  // Before any result is handed out, one loaded unit is enough (the first
  // result's latency is a start's or a restore's); from then on, loading
  // stops only once the unit needed next is ready.
  auto runtime = std::make_shared<Runtime>(2);
  Engine e(8, 64, SquareChunk{.slow = 3}, 2, true, runtime, nullptr);
  std::vector<std::size_t> inflight{submit(e, {3})};  // 20 ms
  CHECK(e.loaded_enough(std::span(&inflight[0], 1)));
  CHECK(e.take_ready(1, [&](std::size_t) { return std::span(&inflight[0], 1); }) == 0);
  CHECK(e.work(inflight[0]).out == std::vector<std::int64_t>{9});
  e.release(inflight[0]);
  inflight = {submit(e, {3})};
  CHECK_FALSE(e.loaded_enough(std::span(&inflight[0], 1)));  // still running its 20 ms
  CHECK(e.take_ready(1, [&](std::size_t) { return std::span(&inflight[0], 1); }) == 0);
  CHECK(e.loaded_enough(std::span(&inflight[0], 1)));  // done
  e.release(inflight[0]);
}

TEST_CASE("parallel_apply: the knob is set up once and re-read by replan",
          "[runtime][parallel_apply]") {
  auto runtime = std::make_shared<Runtime>(2);
  Model model;
  StageNode* node = model.node<ParallelMapNode>(nullptr, "parallel_map");
  IteratorContext ctx;
  ctx.runtime = runtime;
  ctx.node = node;
  CHECK(configure_parallelism(ctx, autotune) == 2);  // the runtime's threads to start
  CHECK(node->parallelism.tunable());
  CHECK(node->parallelism.max() == 3);  // threads + 1
  Engine e(8, 64, SquareChunk{}, 2, true, runtime, node);
  node->parallelism.value = 3;
  e.replan();
  CHECK(e.parallelism() == 3);
  IteratorContext fixed;
  fixed.runtime = runtime;
  CHECK(configure_parallelism(fixed, 5) == 5);
  CHECK_THROWS_WITH(check_knob_option("map", "parallelism", 0),
                    Catch::Contains("map: parallelism must be >= 1 or ingest::autotune; got 0"));
  CHECK_NOTHROW(check_knob_option("map", "parallelism", autotune));
}

TEST_CASE("parallel_apply: destroyed with chunks pending and running",
          "[runtime][parallel_apply][concurrency]") {
  // One pool thread, parallelism 1: chunk 7 runs until the destructor
  // cancels, so chunks 8 and 9 can start only if a chunk starts after it.
  auto runtime = std::make_shared<Runtime>(1);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> computed{0};
    {
      Engine e(16, 64, SquareChunk{.slow = 7, .until_cancelled = true, .computed = &computed}, 1,
               true, runtime, nullptr);
      for (std::int64_t k = 0; k < 10; ++k) submit(e, {k});
    }  // waits for the running chunk
    CHECK(computed.load() <= 8);
  }
}
