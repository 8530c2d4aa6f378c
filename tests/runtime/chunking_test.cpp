#include <catch2/catch.hpp>

#include <ingest/runtime/chunking.hpp>

using namespace ingest::detail;

TEST_CASE("chunks start at one element until the cost is measured", "[runtime][chunking]") {
  ChunkPlanner p(1024);
  CHECK_FALSE(p.known());
  CHECK(p.chunk_size() == 1);
  CHECK_FALSE(p.prefer_inline(false));
  p.update();  // nothing recorded yet
  CHECK_FALSE(p.known());
}

TEST_CASE("chunk size follows the measured cost", "[runtime][chunking]") {
  ChunkPlanner expensive(1024);
  expensive.record(10, 10 * 20'000);  // 20 us per call
  expensive.update();
  CHECK(expensive.ns_per_element() == Approx(20'000));
  CHECK(expensive.chunk_size() == 2);
  CHECK_FALSE(expensive.prefer_inline(false));

  ChunkPlanner medium(1024);
  medium.record(1000, 1000 * 500);  // 0.5 us per call
  medium.update();
  CHECK(medium.chunk_size() == 100);
  CHECK_FALSE(medium.prefer_inline(false));

  ChunkPlanner trivial(1024);
  trivial.record(100000, 100000 * 2);  // 2 ns per call
  trivial.update();
  CHECK(trivial.chunk_size() == 1024);
  CHECK(trivial.prefer_inline(false));
}

TEST_CASE("inline mode has hysteresis and the estimate adapts", "[runtime][chunking]") {
  ChunkPlanner p(1000);
  p.record(1000, 1000 * 25);  // 25 ns: a 1000-element chunk takes 25 us
  p.update();
  CHECK_FALSE(p.prefer_inline(false));  // above 20 us: worth handing over
  CHECK(p.prefer_inline(true));         // but not worth leaving inline mode
  for (int i = 0; i < 20; ++i) {
    p.record(1000, 1000 * 5000);  // the function became slow
    p.update();
  }
  CHECK(p.ns_per_element() == Approx(5000).epsilon(0.01));
  CHECK_FALSE(p.prefer_inline(true));
}

TEST_CASE("the inline sampler measures a run of calls every period", "[runtime][chunking]") {
  ChunkPlanner p(1024);
  InlineSampler s;
  int recorded = 0;
  for (std::int64_t i = 0; i < 3 * InlineSampler::period; ++i) {
    if (s.before()) recorded += s.after(p);
  }
  CHECK(recorded == 3);
  p.update();
  CHECK(p.known());
}

TEST_CASE("a clock-dominated first chunk does not hide a trivial function", "[runtime][chunking]") {
  // The first chunk has one element, whose measured time is mostly the
  // clock's (~50 ns in a VM); the next chunks show ~1 ns per call.
  ChunkPlanner p(1024);
  p.record(1, 50);
  p.update();
  CHECK_FALSE(p.prefer_inline(false));  // 50 ns x 1024 = 51 us: not yet
  p.record(1000, 1000);
  p.update();
  CHECK(p.ns_per_element() == Approx(1050.0 / 1001));
  CHECK(p.prefer_inline(false));  // inline after one real chunk
}
