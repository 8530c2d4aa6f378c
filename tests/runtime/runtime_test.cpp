#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include <ingest/runtime/runtime.hpp>

using namespace ingest;
using namespace std::chrono_literals;

TEST_CASE("a runtime runs posted tasks on its compute threads", "[runtime][concurrency]") {
  Runtime rt(3);
  CHECK(rt.threads() == 3);
  std::atomic<int> done{0};
  std::mutex mu;
  std::set<std::thread::id> ids;
  for (int i = 0; i < 300; ++i) {
    rt.post([&] {
      {
        std::lock_guard lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      done.fetch_add(1);
    });
  }
  while (done.load() < 300) std::this_thread::yield();
  CHECK(ids.size() <= 3);
  CHECK(ids.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("Runtime(0) uses the hardware thread count", "[runtime]") {
  Runtime rt(0);
  CHECK(rt.threads() == std::max(1u, std::thread::hardware_concurrency()));
  CHECK(default_runtime()->threads() == rt.threads());
  CHECK(default_runtime() == default_runtime());
}

TEST_CASE("spawned jobs may block and run concurrently, on reused threads",
          "[runtime][concurrency]") {
  Runtime rt(1);
  // Two jobs that wait for each other can only finish if both run at once.
  std::promise<void> a_ready, b_ready;
  auto a_seen = a_ready.get_future().share();
  auto b_seen = b_ready.get_future().share();
  std::atomic<int> finished{0};
  rt.spawn([&] {
    a_ready.set_value();
    b_seen.wait();
    finished.fetch_add(1);
  });
  rt.spawn([&] {
    b_ready.set_value();
    a_seen.wait();
    finished.fetch_add(1);
  });
  while (finished.load() < 2) std::this_thread::sleep_for(1ms);
  CHECK(rt.driver_threads() == 2);
  // Idle threads are reused for later jobs.
  std::this_thread::sleep_for(20ms);
  std::atomic<bool> ran{false};
  rt.spawn([&] { ran = true; });
  while (!ran.load()) std::this_thread::sleep_for(1ms);
  CHECK(rt.driver_threads() == 2);
}

TEST_CASE("destroying a runtime waits for queued tasks", "[runtime][concurrency]") {
  std::atomic<int> done{0};
  {
    Runtime rt(2);
    for (int i = 0; i < 50; ++i) {
      rt.post([&] {
        std::this_thread::sleep_for(100us);
        done.fetch_add(1);
      });
    }
  }
  CHECK(done.load() == 50);
}
