#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <ingest/runtime/chunk_runner.hpp>

using namespace ingest;
using namespace ingest::detail;
using namespace std::chrono_literals;

namespace {
struct Work {
  int input = 0;
  int output = 0;
};
struct Square {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::chrono::microseconds delay{0};
  void operator()(Work& w, const std::atomic<bool>&) const {
    if (delay.count()) std::this_thread::sleep_for(delay);
    w.output = w.input * w.input;
    calls->fetch_add(1);
  }
};
using Runner = ChunkRunner<Work, Square>;

// Submits `n` works through `slots` slots and collects their outputs in order.
std::vector<int> run_all(Runner& r, int n, std::size_t parallelism) {
  std::vector<int> out;
  std::vector<std::size_t> inflight;
  int next = 0;
  while (static_cast<int>(out.size()) < n) {
    std::size_t slot;
    while (next < n && (slot = r.find_idle()) != Runner::none) {
      r.work(slot).input = next++;
      r.submit(slot, parallelism);
      inflight.push_back(slot);
    }
    const std::size_t head = inflight.front();
    while (r.state(head) != Runner::done) {
      if (!r.help(head) && !r.help_oldest()) {
        r.wait_until([&] { return r.state(head) == Runner::done || r.can_help(); });
      }
    }
    out.push_back(r.work(head).output);
    r.release(head);
    inflight.erase(inflight.begin());
  }
  return out;
}
}  // namespace

TEST_CASE("the runner computes every chunk once, in any pool size",
          "[runtime][chunk_runner][concurrency]") {
  for (std::size_t threads : {1, 2, 4}) {
    Runtime rt(threads);
    Square sq;
    auto r = std::make_shared<Runner>(5, sq, &rt);
    auto out = run_all(*r, 200, threads);
    REQUIRE(out.size() == 200);
    for (int i = 0; i < 200; ++i) CHECK(out[static_cast<std::size_t>(i)] == i * i);
    CHECK(sq.calls->load() == 200);
    r->cancel_and_join();
  }
}

TEST_CASE("a helping consumer finishes the work even if the pool never runs it",
          "[runtime][chunk_runner][concurrency]") {
  // Declared before the runtime, so it outlives the pool thread that reads it.
  std::atomic<bool> release{false};
  Runtime rt(1);
  // Block the only pool thread until the consumer is done.
  rt.post([&] {
    while (!release.load()) std::this_thread::sleep_for(1ms);
  });
  Square sq;
  auto r = std::make_shared<Runner>(3, sq, &rt);
  auto out = run_all(*r, 20, 1);
  CHECK(out.back() == 19 * 19);
  release = true;
  r->cancel_and_join();
}

TEST_CASE("cancel_and_join drops pending chunks and waits for running ones",
          "[runtime][chunk_runner][concurrency]") {
  Runtime rt(2);
  Square sq;
  sq.delay = 20ms;
  auto r = std::make_shared<Runner>(8, sq, &rt);
  for (std::size_t s = 0; s < 8; ++s) {
    r->work(s).input = static_cast<int>(s);
    r->submit(s, 2);
  }
  std::this_thread::sleep_for(5ms);  // let the pool start two
  const auto start = std::chrono::steady_clock::now();
  r->cancel_and_join();
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  for (std::size_t s = 0; s < 8; ++s) CHECK(r->state(s) != Runner::running);
  CHECK(sq.calls->load() < 8);
}
