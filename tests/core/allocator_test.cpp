#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <ingest/core/allocator.hpp>
#include <ingest/core/tensor.hpp>

using namespace ingest;

namespace {
// Counts calls so tests can see when the pool goes upstream.
struct CountingAllocator final : Allocator {
  void* allocate(std::size_t bytes) override {
    ++allocations;
    live += bytes;
    return host_allocator().allocate(bytes);
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    ++deallocations;
    live -= bytes;
    host_allocator().deallocate(p, bytes);
  }
  int allocations = 0, deallocations = 0;
  std::size_t live = 0;
};
}  // namespace

TEST_CASE("size classes cover every request with bounded waste", "[core][allocator]") {
  using P = PoolAllocator;
  CHECK(P::class_bytes(P::size_class(1)) == 64);
  CHECK(P::class_bytes(P::size_class(64)) == 64);
  CHECK(P::class_bytes(P::size_class(65)) == 80);
  CHECK(P::class_bytes(P::size_class(128)) == 128);
  CHECK(P::class_bytes(P::size_class(129)) == 160);
  for (std::size_t bytes :
       {1ul, 63ul, 100ul, 1000ul, 4097ul, 1ul << 20, (1ul << 20) + 1, 3ul << 25}) {
    const std::size_t c = P::class_bytes(P::size_class(bytes));
    CHECK(c >= bytes);
    CHECK(c <= bytes + bytes / 4 + 64);
  }
  CHECK(P::size_class((std::size_t{1} << 30) + 1) == P::num_classes);  // too big to pool
}

TEST_CASE("a pool reuses freed blocks instead of going upstream", "[core][allocator]") {
  CountingAllocator upstream;
  {
    PoolAllocator pool(upstream);
    void* a = pool.allocate(1000);
    pool.deallocate(a, 1000);
    void* b = pool.allocate(1000);
    CHECK(a == b);
    CHECK(upstream.allocations == 1);
    void* c = pool.allocate(900);  // same class (1024)
    CHECK(upstream.allocations == 2);
    pool.deallocate(b, 1000);
    pool.deallocate(c, 900);
    CHECK(pool.stats().bytes_cached == 2048);
  }
  CHECK(upstream.deallocations == 2);  // the destructor returned the cache
  CHECK(upstream.live == 0);
}

TEST_CASE("a pool's cache is bounded", "[core][allocator]") {
  CountingAllocator upstream;
  PoolAllocator pool(upstream, {.max_cached_bytes = 4096});
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool.allocate(1024));
  for (void* p : blocks) pool.deallocate(p, 1024);
  CHECK(pool.stats().bytes_cached == 4096);
  CHECK(upstream.deallocations == 4);
  pool.trim();
  CHECK(pool.stats().bytes_cached == 0);
  CHECK(upstream.live == 0);
}

TEST_CASE("huge requests bypass the pool", "[core][allocator]") {
  CountingAllocator upstream;
  PoolAllocator pool(upstream);
  const std::size_t huge = (std::size_t{1} << 30) + 64;
  void* p = pool.allocate(huge);
  pool.deallocate(p, huge);
  CHECK(pool.stats().bytes_cached == 0);
  CHECK(upstream.live == 0);
}

TEST_CASE("steady-state tensor allocation does not go upstream", "[core][allocator]") {
  auto& pool = static_cast<PoolAllocator&>(default_allocator());
  auto step = [] {
    Tensor t(DType::float32, Shape{256, 3});
    Tensor u(DType::int64, Shape{256});
  };
  step();  // warm up both size classes
  const auto before = pool.stats().upstream_allocations;
  for (int i = 0; i < 10000; ++i) step();
  CHECK(pool.stats().upstream_allocations == before);
}

TEST_CASE("blocks freed on another thread come back through the shared lists",
          "[core][allocator][concurrency]") {
  auto& pool = static_cast<PoolAllocator&>(default_allocator());
  // A producer allocates, a consumer frees: the steady state still reuses.
  auto round = [] {
    std::vector<Tensor> made;
    std::thread producer([&] {
      for (int i = 0; i < 2000; ++i) made.emplace_back(DType::uint8, Shape{3000});
    });
    producer.join();
    std::thread consumer([&] { made.clear(); });
    consumer.join();
  };
  round();
  round();
  const auto before = pool.stats().upstream_allocations;
  round();
  // Magazines may hold a few blocks per thread; the bulk is reused.
  CHECK(pool.stats().upstream_allocations - before < 100);
}

TEST_CASE("memory of an exiting thread's cache is returned", "[core][allocator][concurrency]") {
  auto& pool = static_cast<PoolAllocator&>(default_allocator());
  std::thread([] {
    for (int i = 0; i < 100; ++i) Tensor t(DType::float64, Shape{1000});
  }).join();
  CHECK(pool.stats().bytes_cached >= 8000);
}

TEST_CASE("a record string given back serves the next take of its size on the thread",
          "[core][allocator]") {
  auto& recycler = detail::StringRecycler::instance();
  std::string s = recycler.take(3000);
  CHECK(s.empty());
  CHECK(s.capacity() >= 3000);
  s.assign(3000, 'x');
  const char* buffer = s.data();
  recycler.give(s);
  CHECK(s.empty());  // its buffer moved into the magazine
  CHECK(recycler.cached_here(3000) == 1);
  // A record a little larger still fits: take() reserved its class's capacity.
  const std::string t = recycler.take(3050);
  CHECK(t.data() == buffer);
  CHECK(t.empty());
  CHECK(recycler.cached_here(3000) == 0);
}

TEST_CASE("strings outside the recycler's sizes are left alone", "[core][allocator]") {
  auto& recycler = detail::StringRecycler::instance();
  std::string small(100, 's');
  recycler.give(small);
  CHECK(small == std::string(100, 's'));
  std::string huge(detail::StringRecycler::max_bytes + 1, 'h');
  recycler.give(huge);
  CHECK(huge.size() == detail::StringRecycler::max_bytes + 1);
  CHECK(recycler.take(10).capacity() >= 10);
  CHECK(recycler.take(detail::StringRecycler::max_bytes + 1).capacity() >
        detail::StringRecycler::max_bytes);
}

TEST_CASE("record strings given back on one thread are taken on another",
          "[core][allocator][concurrency]") {
  auto& recycler = detail::StringRecycler::instance();
  constexpr std::size_t bytes = 20'000;  // a class no other test uses
  std::vector<const char*> given;
  const auto before = recycler.stats();
  // A map's worker: every string it is done with goes to its magazine, eight at
  // a time into the shared lists once the magazine is full, the rest at exit.
  std::thread([&] {
    std::vector<std::string> records(32);
    for (std::string& s : records) {
      s = recycler.take(bytes);
      s.assign(bytes, 'r');
      given.push_back(s.data());
    }
    for (std::string& s : records) recycler.give(s);
  }).join();
  CHECK(recycler.stats().spilled - before.spilled == 32);
  // The reader's thread takes them back instead of allocating.
  int reused = 0;
  std::vector<std::string> taken;
  for (int i = 0; i < 8; ++i) {
    taken.push_back(recycler.take(bytes));
    reused += std::find(given.begin(), given.end(), taken.back().data()) != given.end();
  }
  CHECK(reused == 8);
  CHECK(recycler.stats().refilled - before.refilled >= 8);
}

TEST_CASE("the recycler's shared lists are bounded", "[core][allocator][concurrency]") {
  auto& recycler = detail::StringRecycler::instance();
  const std::size_t start = recycler.stats().bytes_cached;
  // 96 MiB of the largest class given back on a thread that then exits: the
  // shared lists keep at most max_cached_bytes, and free the rest.
  std::thread([&] {
    std::vector<std::string> many(384);
    for (std::string& s : many) s = recycler.take(detail::StringRecycler::max_bytes);
    for (std::string& s : many) recycler.give(s);
  }).join();
  CHECK(recycler.stats().bytes_cached <= detail::StringRecycler::max_cached_bytes);
  CHECK(recycler.stats().bytes_cached >= detail::StringRecycler::max_cached_bytes / 2);
  for (int i = 0; i < 384; ++i) recycler.take(detail::StringRecycler::max_bytes);  // frees them
  CHECK(recycler.stats().bytes_cached <= start);
}
