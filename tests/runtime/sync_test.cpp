#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include <ingest/runtime/sync.hpp>

using namespace ingest::detail;

TEST_CASE("a notifier wakes a waiter whatever the interleaving", "[runtime][sync][concurrency]") {
  // Ping-pong: each side waits for the other's counter, spinning or sleeping.
  for (int spins : {0, 10, Notifier::default_spins}) {
    Notifier to_a, to_b;
    std::atomic<int> a{0}, b{0};
    constexpr int rounds = 5000;
    std::thread other([&] {
      for (int i = 1; i <= rounds; ++i) {
        to_b.wait_until([&] { return a.load(std::memory_order_acquire) >= i; }, spins);
        b.store(i, std::memory_order_release);
        to_a.notify();
      }
    });
    for (int i = 1; i <= rounds; ++i) {
      a.store(i, std::memory_order_release);
      to_b.notify();
      to_a.wait_until([&] { return b.load(std::memory_order_acquire) >= i; }, spins);
    }
    other.join();
    CHECK(b.load() == rounds);
  }
}

TEST_CASE("wait_until returns at once when the condition holds", "[runtime][sync]") {
  Notifier n;
  int checks = 0;
  n.wait_until([&] {
    ++checks;
    return true;
  });
  CHECK(checks == 1);
}
