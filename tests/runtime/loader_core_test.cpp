// The loaders' buffer pool (runtime/loader_core.hpp's SlabPool) on a fake
// backend whose events are flags: fit, preference for passed fences,
// fences travelling with a buffer, trimming, and waiting at destruction.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include <ingest/runtime/loader_core.hpp>

using namespace ingest;
using ingest::detail::Slab;
using ingest::detail::SlabPool;

namespace {

struct FakeBackend {
  using Event = std::shared_ptr<bool>;  // *event: passed
  static bool passed(const Event& e) { return !e || *e; }
  static void wait_for(const Event& e) noexcept {
    if (e && !*e) {
      ++waits;
      *e = true;
    }
  }
  static inline int waits = 0;
};

// Host memory, counting calls.
class CountingAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    ++allocations;
    return host_allocator().allocate(bytes);
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    ++deallocations;
    host_allocator().deallocate(p, bytes);
  }
  int allocations = 0, deallocations = 0;
};

FakeBackend::Event pending() { return std::make_shared<bool>(false); }

Slab<FakeBackend> with_fence(Slab<FakeBackend> s, FakeBackend::Event e) {
  s.fences.push_back(std::move(e));
  return s;
}

}  // namespace

TEST_CASE("slab pool reuses the best-fitting released buffer", "[runtime][loader]") {
  CountingAllocator upstream;
  {
    SlabPool<FakeBackend> pool(upstream, 8);
    auto a = pool.acquire(1000);
    CHECK(a.capacity >= 1000);
    CHECK(reinterpret_cast<std::uintptr_t>(a.data) % ingest::detail::loader_field_alignment == 0);
    CHECK(a.block_bytes == PoolAllocator::class_bytes(PoolAllocator::size_class(
                               1000 + ingest::detail::loader_field_alignment - tensor_alignment)));
    auto b = pool.acquire(100'000);
    CHECK(upstream.allocations == 2);
    std::byte* small = a.data;
    std::byte* large = b.data;
    pool.release(std::move(a));
    pool.release(std::move(b));
    auto c = pool.acquire(500);  // both fit: the smaller one
    CHECK(c.data == small);
    auto d = pool.acquire(2000);  // only the large one fits
    CHECK(d.data == large);
    auto e = pool.acquire(10);  // none free: a new one
    CHECK(upstream.allocations == 3);
    CHECK(pool.created() == 3);
    pool.release(std::move(c));
    pool.release(std::move(d));
    pool.release(std::move(e));
  }
  CHECK(upstream.deallocations == 3);
}

TEST_CASE("slab pool prefers passed fences and hands fences on", "[runtime][loader]") {
  CountingAllocator upstream;
  SlabPool<FakeBackend> pool(upstream, 8);
  auto a = pool.acquire(64);
  auto b = pool.acquire(4096);
  std::byte* fenced = a.data;
  std::byte* clear = b.data;
  auto fence = pending();
  pool.release(with_fence(std::move(a), fence));
  pool.release(std::move(b));
  // The smaller one fits best, but its consumer is still running.
  auto c = pool.acquire(64);
  CHECK(c.data == clear);
  CHECK(c.fences.empty());
  // Now the fenced one is all there is: it comes with its fence, for the
  // engine to wait on before writing.
  auto d = pool.acquire(64);
  CHECK(d.data == fenced);
  REQUIRE(d.fences.size() == 1);
  CHECK(d.fences[0] == fence);
  CHECK(upstream.allocations == 2);
  pool.release(std::move(c));
  pool.release(std::move(d));
}

TEST_CASE("slab pool gives surplus buffers back only once their fences passed",
          "[runtime][loader]") {
  CountingAllocator upstream;
  FakeBackend::waits = 0;
  {
    SlabPool<FakeBackend> pool(upstream, 1);
    std::vector<Slab<FakeBackend>> slabs;
    for (int i = 0; i < 4; ++i) slabs.push_back(pool.acquire(256));
    auto fence = pending();
    pool.release(with_fence(std::move(slabs[0]), fence));
    for (int i = 1; i < 4; ++i) pool.release(std::move(slabs[i]));
    // Acquiring takes one; of the three left, two passed ones go back
    // upstream (the limit is one idle buffer); the fenced one stays.
    auto kept = pool.acquire(256);
    CHECK(kept.fences.empty());
    CHECK(upstream.deallocations == 2);
    CHECK(FakeBackend::waits == 0);  // trimming never waits
    pool.release(std::move(kept));
  }
  // Destruction waits for the remaining fence, then frees everything.
  CHECK(FakeBackend::waits == 1);
  CHECK(upstream.deallocations == 4);
}
