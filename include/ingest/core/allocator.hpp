// Memory for Tensors: the Allocator hook, aligned host memory, and a reusing
// pool so that steady-state batching does not call malloc. The process-wide
// default pool keeps small per-thread caches ("magazines"), so a thread that
// allocates and a thread that frees exchange blocks in groups under one lock
// rather than one lock per block. Other allocators (pinned memory for the
// device loader) plug in as a PoolAllocator's upstream. Records' strings are
// reused the same way (detail::StringRecycler).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"

namespace ingest {

/// Every tensor buffer starts on this boundary (a cache line; enough for AVX-512).
inline constexpr std::size_t tensor_alignment = 64;

/// Where an allocator's memory lives.
enum class MemoryKind : std::uint8_t {
  host,    ///< ordinary pageable host memory
  pinned,  ///< page-locked host memory (cudaHostAlloc), DMA-able
  device,  ///< accelerator memory, not addressable from the host
};

/// The allocator hook. Implementations must be thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns `bytes` bytes aligned to tensor_alignment. Throws std::bad_alloc or an ingest::Error.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Returns memory from allocate(bytes) with the same `bytes`.
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  /// Where the memory from allocate() lives; host unless overridden.
  virtual MemoryKind memory_kind() const noexcept { return MemoryKind::host; }
  /// Whether the host can read and write the memory (not device memory).
  bool host_accessible() const noexcept { return memory_kind() != MemoryKind::device; }
};

/// Aligned operator new / delete.
class HostAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    return ::operator new (bytes == 0 ? 1 : bytes, std::align_val_t{tensor_alignment});
  }
  void deallocate(void* p, std::size_t) noexcept override {
    ::operator delete (p, std::align_val_t{tensor_alignment});
  }
};

/// The process-wide aligned host allocator (no pooling).
inline HostAllocator& host_allocator() {
  static HostAllocator allocator;
  return allocator;
}

/// Counters of a PoolAllocator.
struct PoolStats {
  std::size_t bytes_cached = 0;            ///< free bytes held for reuse (shared lists only)
  std::size_t bytes_from_upstream = 0;     ///< bytes currently obtained from upstream
  std::uint64_t upstream_allocations = 0;  ///< calls to upstream.allocate() so far
};

/// Caches freed blocks by size class (four classes per power of two, from 64 B
/// to 1 GiB; larger requests go straight upstream) and hands them out again.
/// Thread-safe; one mutex guards the shared free lists.
class PoolAllocator : public Allocator {
 public:
  /// A PoolAllocator's limits.
  struct Options {
    /// Free bytes kept for reuse; beyond this, freed blocks go back upstream.
    std::size_t max_cached_bytes = std::size_t{1} << 30;
  };

  /// Pools blocks from `upstream` with the default Options.
  explicit PoolAllocator(Allocator& upstream) : PoolAllocator(upstream, Options{}) {}
  /// Pools blocks from `upstream`, which must outlive the pool.
  PoolAllocator(Allocator& upstream, Options options) : upstream_(upstream), options_(options) {}
  PoolAllocator(const PoolAllocator&) = delete;
  PoolAllocator& operator=(const PoolAllocator&) = delete;
  ~PoolAllocator() override { trim(); }

  void* allocate(std::size_t bytes) override {
    const std::size_t cls = size_class(bytes);
    if (cls >= num_classes) return upstream_allocate(bytes);
    {
      std::lock_guard lock(mu_);
      auto& list = free_[cls];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        bytes_cached_ -= class_bytes(cls);
        return p;
      }
    }
    return upstream_allocate(class_bytes(cls));
  }

  void deallocate(void* p, std::size_t bytes) noexcept override {
    const std::size_t cls = size_class(bytes);
    if (cls >= num_classes) return upstream_deallocate(p, bytes);
    {
      std::lock_guard lock(mu_);
      if (bytes_cached_ + class_bytes(cls) <= options_.max_cached_bytes) {
        try {
          free_[cls].push_back(p);
          bytes_cached_ += class_bytes(cls);
          return;
        } catch (...) {  // no memory for the list: give the block back instead
        }
      }
    }
    upstream_deallocate(p, class_bytes(cls));
  }

  /// Where the memory lives: upstream's kind.
  MemoryKind memory_kind() const noexcept override { return upstream_.memory_kind(); }

  /// Returns every cached block to upstream.
  void trim() noexcept {
    std::array<std::vector<void*>, num_classes> lists;
    {
      std::lock_guard lock(mu_);
      lists.swap(free_);
      bytes_cached_ = 0;
    }
    for (std::size_t c = 0; c < num_classes; ++c) {
      for (void* p : lists[c]) upstream_deallocate(p, class_bytes(c));
    }
  }

  /// The pool's counters (a consistent snapshot).
  PoolStats stats() const {
    std::lock_guard lock(mu_);
    return {bytes_cached_, bytes_from_upstream_.load(std::memory_order_relaxed),
            upstream_allocations_.load(std::memory_order_relaxed)};
  }

  /// Size classes: 2^k * {1, 1.25, 1.5, 1.75} for k = 6..30, then 2^31.
  static constexpr std::size_t num_classes = (30 - 6) * 4 + 1;
  /// The size class of a `bytes`-byte request; num_classes for a request larger
  /// than 1 GiB (served by upstream directly).
  static constexpr std::size_t size_class(std::size_t bytes) noexcept {
    if (bytes <= 64) return 0;
    if (bytes > (std::size_t{1} << 30)) return num_classes;
    const std::size_t k = std::bit_width(bytes - 1) - 1;  // 2^k < bytes <= 2^(k+1)
    const std::size_t step = std::size_t{1} << (k - 2);
    const std::size_t j = (bytes - (std::size_t{1} << k) + step - 1) / step;  // 1..4
    return (k - 6) * 4 + j;
  }
  /// The block size of size class `cls`.
  static constexpr std::size_t class_bytes(std::size_t cls) noexcept {
    const std::size_t k = cls / 4 + 6;
    return (std::size_t{1} << k) + (cls % 4) * (std::size_t{1} << (k - 2));
  }

 protected:
  /// Moves up to `n` cached blocks of class `cls` into `out`; returns how many.
  std::size_t take_cached(std::size_t cls, void** out, std::size_t n) {
    std::lock_guard lock(mu_);
    auto& list = free_[cls];
    const std::size_t k = std::min(n, list.size());
    std::copy(list.end() - static_cast<std::ptrdiff_t>(k), list.end(), out);
    list.resize(list.size() - k);
    bytes_cached_ -= k * class_bytes(cls);
    return k;
  }
  /// Caches `n` blocks of class `cls` (or frees those beyond the budget).
  void give_cached(std::size_t cls, void* const* blocks, std::size_t n) noexcept {
    std::size_t kept = 0;
    {
      std::lock_guard lock(mu_);
      try {
        for (; kept < n && bytes_cached_ + class_bytes(cls) <= options_.max_cached_bytes; ++kept) {
          free_[cls].push_back(blocks[kept]);
          bytes_cached_ += class_bytes(cls);
        }
      } catch (...) {
      }
    }
    for (std::size_t i = kept; i < n; ++i) upstream_deallocate(blocks[i], class_bytes(cls));
  }
  /// Allocates `bytes` from upstream and counts them.
  void* upstream_allocate(std::size_t bytes) {
    void* p = upstream_.allocate(bytes);
    bytes_from_upstream_.fetch_add(bytes, std::memory_order_relaxed);
    upstream_allocations_.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  /// Returns a block to upstream and uncounts it.
  void upstream_deallocate(void* p, std::size_t bytes) noexcept {
    bytes_from_upstream_.fetch_sub(bytes, std::memory_order_relaxed);
    upstream_.deallocate(p, bytes);
  }

 private:
  Allocator& upstream_;
  Options options_;
  mutable std::mutex mu_;
  std::array<std::vector<void*>, num_classes> free_;
  std::size_t bytes_cached_ = 0;
  std::atomic<std::size_t> bytes_from_upstream_{0};
  std::atomic<std::uint64_t> upstream_allocations_{0};
};

namespace detail {

// The default pool: a PoolAllocator over host memory whose small classes
// (up to 1 MiB) go through per-thread magazines of up to 16 blocks. A thread
// refills or spills half a magazine at a time, so a producer thread and a
// consumer thread exchange blocks eight at a time. The instance is immortal
// (never destroyed), so exiting threads can always flush into it.
class CachingHostPool final : public PoolAllocator {
 public:
  static CachingHostPool& instance() {
    static CachingHostPool* pool = new CachingHostPool();  // immortal on purpose
    return *pool;
  }

  void* allocate(std::size_t bytes) override {
    const std::size_t cls = size_class(bytes);
    if (cls >= cached_classes) return PoolAllocator::allocate(bytes);
    Magazine& m = magazines().slot[cls];
    if (m.count == 0) m.count = static_cast<std::uint32_t>(take_cached(cls, m.blocks, refill));
    if (m.count != 0) return m.blocks[--m.count];
    return upstream_allocate(class_bytes(cls));
  }

  void deallocate(void* p, std::size_t bytes) noexcept override {
    const std::size_t cls = size_class(bytes);
    if (cls >= cached_classes) return PoolAllocator::deallocate(p, bytes);
    Magazine& m = magazines().slot[cls];
    if (m.count == capacity) {
      m.count -= refill;
      give_cached(cls, m.blocks + m.count, refill);
    }
    m.blocks[m.count++] = p;
  }

 private:
  static constexpr std::size_t cached_classes = size_class(std::size_t{1} << 20) + 1;
  static constexpr std::uint32_t capacity = 16;
  static constexpr std::uint32_t refill = capacity / 2;

  struct Magazine {
    void* blocks[capacity];
    std::uint32_t count = 0;
  };
  struct Magazines {
    std::array<Magazine, cached_classes> slot{};
    ~Magazines() {
      auto& pool = instance();
      for (std::size_t c = 0; c < cached_classes; ++c) {
        pool.give_cached(c, slot[c].blocks, slot[c].count);
      }
    }
  };
  static Magazines& magazines() {
    thread_local Magazines m;
    return m;
  }

  CachingHostPool() : PoolAllocator(host_allocator()) {}
};

}  // namespace detail

/// The process-wide pooled host allocator every Tensor uses unless told otherwise.
inline Allocator& default_allocator() { return detail::CachingHostPool::instance(); }

namespace detail {

// Reused heap buffers of std::string records (TFRecord payloads). A reader
// takes an empty string with room for its record; a stage that has finished
// with a record (a map, once its function returned) gives the string back.
// glibc serves blocks of a few KiB from the allocating thread's arena under a
// lock, so a reader thread that allocates and a map thread that frees met in
// that lock once a record each (W3: a tenth of the run). Like CachingHostPool:
// per-thread magazines by size class (256 B to 256 KiB), exchanged half at a
// time through shared lists that keep at most 64 MiB (counted at their
// classes' sizes); beyond, strings are freed. A string from take() has its
// class's capacity (up to 25% more than asked), so that it serves the next
// record of a similar size.
class StringRecycler {
 public:
  /// Capacities it keeps, and the most free bytes its shared lists hold.
  static constexpr std::size_t min_bytes = 256;
  static constexpr std::size_t max_bytes = std::size_t{256} << 10;
  static constexpr std::size_t max_cached_bytes = std::size_t{64} << 20;

  static StringRecycler& instance() {
    static StringRecycler* recycler = new StringRecycler();  // immortal, like CachingHostPool
    return *recycler;
  }

  /// An empty string with room for at least `bytes`: a recycled one, or a new one.
  std::string take(std::size_t bytes) {
    std::string s;
    if (bytes < min_bytes || bytes > max_bytes) {
      s.reserve(bytes);
      return s;
    }
    const std::size_t cls = PoolAllocator::size_class(bytes);
    if (Magazines* all = magazines()) {
      Magazine& m = all->slot[cls - first_class];
      if (m.count == 0) m.count = refill_from_shared(cls, m.strings);
      if (m.count != 0) return std::move(m.strings[--m.count]);
    }
    s.reserve(PoolAllocator::class_bytes(cls));
    return s;
  }

  /// Keeps `s`'s buffer for a later take() (a string too small or too large
  /// for the classes is left to free itself).
  void give(std::string& s) noexcept {
    const std::size_t capacity = s.capacity();
    if (capacity < min_bytes || capacity > max_bytes) return;
    std::size_t cls = PoolAllocator::size_class(capacity);
    if (PoolAllocator::class_bytes(cls) > capacity) --cls;  // serves requests up to its capacity
    Magazines* all = magazines();
    if (all == nullptr) return;
    s.clear();
    Magazine& m = all->slot[cls - first_class];
    if (m.count == magazine) {
      m.count -= refill;
      spill(cls, m.strings + m.count, refill);
    }
    m.strings[m.count++] = std::move(s);
  }

  /// Counters of the shared lists.
  struct Stats {
    std::size_t bytes_cached = 0;  ///< free bytes held there (the magazines' are not counted)
    std::uint64_t spilled = 0;     ///< strings a thread's full magazine handed over
    std::uint64_t refilled = 0;    ///< strings an empty magazine took from there
  };
  Stats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }
  /// Strings the calling thread's magazine holds for requests of `bytes`.
  std::size_t cached_here(std::size_t bytes) {
    Magazines* all = magazines();
    if (bytes < min_bytes || bytes > max_bytes || all == nullptr) return 0;
    return all->slot[PoolAllocator::size_class(bytes) - first_class].count;
  }

 private:
  static constexpr std::size_t first_class = PoolAllocator::size_class(min_bytes);
  static constexpr std::size_t num_classes = PoolAllocator::size_class(max_bytes) + 1 - first_class;
  static constexpr std::uint32_t magazine = 16;
  static constexpr std::uint32_t refill = magazine / 2;

  struct Magazine {
    std::string strings[magazine];
    std::uint32_t count = 0;
  };
  struct Magazines {
    std::array<Magazine, num_classes> slot;
  };
  // Allocated on a thread's first use (most threads never touch records;
  // without memory for them, strings are neither kept nor reused); spilled
  // into the shared lists when the thread exits.
  struct Holder {
    Magazines* m = nullptr;
    ~Holder() {
      if (m == nullptr) return;
      for (std::size_t c = 0; c < num_classes; ++c) {
        instance().spill(c + first_class, m->slot[c].strings, m->slot[c].count);
      }
      delete m;
    }
  };
  static Magazines* magazines() noexcept {
    thread_local Holder holder;
    if (holder.m == nullptr) holder.m = new (std::nothrow) Magazines();
    return holder.m;
  }

  std::uint32_t refill_from_shared(std::size_t cls, std::string* out) {
    std::lock_guard lock(mu_);
    auto& list = shared_[cls - first_class];
    const std::size_t k = std::min<std::size_t>(refill, list.size());
    for (std::size_t i = 0; i < k; ++i) {
      out[i] = std::move(list.back());
      list.pop_back();
    }
    stats_.bytes_cached -= k * PoolAllocator::class_bytes(cls);
    stats_.refilled += k;
    return static_cast<std::uint32_t>(k);
  }

  // Moves n strings into the shared lists, up to the budget; the rest are freed.
  void spill(std::size_t cls, std::string* strings, std::size_t n) noexcept {
    const std::size_t bytes = PoolAllocator::class_bytes(cls);
    std::size_t kept = 0;
    {
      std::lock_guard lock(mu_);
      auto& list = shared_[cls - first_class];
      try {
        for (; kept < n && stats_.bytes_cached + bytes <= max_cached_bytes; ++kept) {
          list.push_back(std::move(strings[kept]));
          stats_.bytes_cached += bytes;
        }
      } catch (...) {  // no memory for the list: those strings are freed instead
      }
      stats_.spilled += kept;
    }
    for (std::size_t i = kept; i < n; ++i) std::string().swap(strings[i]);
  }

  StringRecycler() = default;

  mutable std::mutex mu_;
  std::array<std::vector<std::string>, num_classes> shared_;
  Stats stats_;
};

/// A stage is done with element `x`: a std::string's buffer goes to the
/// StringRecycler; anything else is left as it is.
template <class T>
void recycle(T& x) noexcept {
  if constexpr (std::is_same_v<T, std::string>) StringRecycler::instance().give(x);
}

}  // namespace detail

namespace detail {

// A reference-counted buffer. For host-accessible allocators the header sits
// in the first tensor_alignment bytes of the allocation itself, so a tensor
// costs one (pooled) allocation; for device memory it is allocated apart.
struct Block {
  std::atomic<std::int64_t> refs{1};
  Allocator* allocator = nullptr;  // null for external memory
  std::byte* data = nullptr;
  std::size_t capacity = 0;  // usable bytes at `data`
  bool header_inline = false;
  MemoryKind kind = MemoryKind::host;
};
static_assert(sizeof(Block) <= tensor_alignment);

struct ExternalBlock : Block {
  std::function<void()> release;
};

inline Block* allocate_block(Allocator& allocator, std::size_t bytes) {
  const MemoryKind kind = allocator.memory_kind();
  if (kind != MemoryKind::device) {
    auto* raw = static_cast<std::byte*>(allocator.allocate(bytes + tensor_alignment));
    auto* b = new (raw) Block();
    b->allocator = &allocator;
    b->data = raw + tensor_alignment;
    b->capacity = bytes;
    b->header_inline = true;
    b->kind = kind;
    return b;
  }
  auto* b = new Block();
  try {
    b->data = static_cast<std::byte*>(allocator.allocate(bytes));
  } catch (...) {
    delete b;
    throw;
  }
  b->allocator = &allocator;
  b->capacity = bytes;
  b->kind = allocator.memory_kind();
  return b;
}

inline void retain(Block* b) noexcept {
  if (b) b->refs.fetch_add(1, std::memory_order_relaxed);
}

inline void release(Block* b) noexcept {
  if (!b) return;
  // The sole owner frees without a locked read-modify-write (one per batch
  // on the hand-off path): holding the only reference, nobody else can take
  // another. Otherwise the last of several owners frees.
  if (b->refs.load(std::memory_order_acquire) != 1 &&
      b->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  if (!b->allocator) {
    auto* e = static_cast<ExternalBlock*>(b);
    if (e->release) e->release();
    delete e;
  } else if (b->header_inline) {
    Allocator* a = b->allocator;
    const std::size_t total = b->capacity + tensor_alignment;
    b->~Block();
    a->deallocate(b, total);
  } else {
    b->allocator->deallocate(b->data, b->capacity);
    delete b;
  }
}

}  // namespace detail
}  // namespace ingest
