// HostLoader: the loaders' ring, order and buffer lifetime logic
// (runtime/loader.hpp), run through the host backend. Runs under TSan.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <ingest/core/dlpack.hpp>
#include <ingest/loader.hpp>

#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace std::chrono_literals;
using V = std::vector<std::int64_t>;

namespace {

// Values of an int64 field, once the batch's copy has completed.
V int_values(const HostBatch& b, std::size_t field = 0) {
  b.wait();
  auto s = b.field(field).values<std::int64_t>();
  return {s.begin(), s.end()};
}

// Batches of `rows` int64 values, batch k holding k in every slot.
auto id_batches(std::int64_t count, std::int64_t rows) {
  return range(count * rows).map([rows](std::int64_t x) { return x / rows; }).batch(rows);
}

bool all_equal(const HostBatch& b, std::int64_t v) {
  b.wait();
  for (std::int64_t x : b.field().values<std::int64_t>()) {
    if (x != v) return false;
  }
  return true;
}

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

TEST_CASE("host loader yields every batch in order", "[loader][concurrency]") {
  for (std::int64_t depth : {std::int64_t{1}, std::int64_t{2}, std::int64_t{5}, autotune}) {
    INFO("depth " << depth);
    std::int64_t count = 0;
    for (auto& b : HostLoader(range(1000).batch(10), {.depth = depth})) {
      CHECK(b.index() == count);
      REQUIRE(b.size() == 1);
      CHECK(b.shape() == Shape{10});
      CHECK(b.dtype() == DType::int64);
      CHECK(b.nbytes() == 80);
      CHECK(b.field().memory_kind() == MemoryKind::host);
      CHECK(int_values(b) == iota(count * 10, count * 10 + 10));
      ++count;
    }
    CHECK(count == 100);
  }
  CHECK_THROWS_AS(HostLoader(range(3).batch(1), {.depth = 0}), InvalidArgument);
}

TEST_CASE("host loader: empty input, one batch, re-iteration", "[loader][concurrency]") {
  CHECK(collect(HostLoader(range(0).batch(4))).empty());
  auto one = collect(HostLoader(range(3).batch(4)));
  REQUIRE(one.size() == 1);
  CHECK(one[0].shape() == Shape{3});
  CHECK(int_values(one[0]) == V{0, 1, 2});
  const auto loader = HostLoader(range(50).batch(7), {.depth = 3});
  for (int pass = 0; pass < 2; ++pass) {
    auto batches = collect(loader);
    REQUIRE(batches.size() == 8);
    CHECK(int_values(batches[7]) == V{49});
  }
}

TEST_CASE("host loader copies tuple and pair batches, field by field", "[loader][concurrency]") {
  auto ds =
      range(23)
          .map([](std::int64_t x) {
            const auto b = static_cast<std::uint8_t>(x);
            return std::make_tuple(x, static_cast<float>(x) * 0.5f,
                                   Tensor::from_values<std::uint8_t>({b, std::uint8_t(b + 1)}));
          })
          .batch(8);
  auto batches = collect(HostLoader(ds));
  REQUIRE(batches.size() == 3);
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const HostBatch& b = batches[k];
    const std::int64_t rows = k < 2 ? 8 : 7;  // the last batch is smaller
    REQUIRE(b.size() == 3);
    CHECK(b.shape(0) == Shape{rows});
    CHECK(b.shape(1) == Shape{rows});
    CHECK(b.shape(2) == Shape{rows, 2});
    CHECK(b.dtype(1) == DType::float32);
    CHECK(b.dtype(2) == DType::uint8);
    b.wait();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t x = static_cast<std::int64_t>(k) * 8 + r;
      CHECK(b.data<std::int64_t>(0)[r] == x);
      CHECK(b.data<float>(1)[r] == static_cast<float>(x) * 0.5f);
      CHECK(b.data<std::uint8_t>(2)[2 * r + 1] == x + 1);
    }
    // Fields start on DLPack's 256-byte boundary of one buffer.
    for (std::size_t f = 0; f < b.size(); ++f) {
      CHECK(reinterpret_cast<std::uintptr_t>(b.data(f)) % 256 == 0);
    }
  }
  CHECK_THROWS_AS(batches[0].field(3), InvalidArgument);
  CHECK_THROWS_AS(batches[0].data<double>(0), InvalidArgument);

  auto pairs = collect(
      HostLoader(range(5).map([](std::int64_t x) { return std::make_pair(x, x * x); }).batch(5)));
  REQUIRE(pairs.size() == 1);
  CHECK(int_values(pairs[0], 1) == V{0, 1, 4, 9, 16});
}

TEST_CASE("host loader copies batches of any size, reusing its buffers", "[loader][concurrency]") {
  std::vector<Tensor> elements;
  for (std::int64_t n : {1, 1000, 10, 100'000, 5, 0, 70'000, 3}) {
    elements.push_back(Tensor::from_values<std::int64_t>(iota(n, 2 * n)));
  }
  auto ds = from_vector(elements).repeat(5);
  std::set<void*> buffers;
  std::size_t i = 0;
  for (auto& b : HostLoader(ds, {.depth = 2})) {
    const Tensor& expected = elements[i % elements.size()];
    CHECK(b.shape() == expected.shape());
    CHECK(int_values(b) == values_of(expected));
    if (b.nbytes()) buffers.insert(b.data());
    ++i;
  }
  CHECK(i == 40);
  CHECK(buffers.size() <= 12);  // a pool, not an allocation per batch
}

TEST_CASE("a held batch's buffer is never written while held", "[loader][concurrency]") {
  for (std::int64_t depth : {1, 2, 4}) {
    INFO("depth " << depth);
    auto it = HostLoader(id_batches(300, 64), {.depth = depth}).iterator();
    std::vector<HostBatch> held;
    std::optional<Tensor> view;  // a field copied out of batch 20, which is then dropped
    std::int64_t view_id = -1;
    std::set<void*> buffers;
    bool reused_while_held = false;
    while (auto b = it.next()) {
      const void* p = b->data();
      buffers.insert(b->data());
      for (const HostBatch& h : held) reused_while_held |= h.data() == p;
      if (view && view->raw_data() == p) reused_while_held = true;
      CHECK(all_equal(*b, b->index()));
      if (b->index() == 20) {
        view = b->field();
        view_id = 20;
      }
      if (b->index() % 37 == 3) held.push_back(std::move(*b));
    }
    CHECK_FALSE(reused_while_held);
    for (const HostBatch& h : held) CHECK(all_equal(h, h.index()));
    REQUIRE(view);
    for (std::int64_t x : view->values<std::int64_t>()) REQUIRE(x == view_id);
    // Buffers come back to the pool: far fewer than batches.
    CHECK(buffers.size() <= held.size() + static_cast<std::size_t>(depth) + 4);
  }
}

TEST_CASE("depth bounds the batches loaded ahead of the consumer", "[loader][concurrency]") {
  for (std::int64_t depth : {1, 3}) {
    INFO("depth " << depth);
    std::atomic<int> pulled{0};
    auto ds = counted_range(100, pulled).batch(1);
    auto it = HostLoader(ds, {.depth = depth}).iterator();
    auto first = it.next();
    REQUIRE(first);
    // The producer fills the ring (`depth` batches, the consumer's first
    // among them) and pulls the next only when there is room again; once
    // full, it refills when half empty.
    CHECK(eventually([&] { return pulled.load() >= depth; }));
    std::this_thread::sleep_for(30ms);
    CHECK(pulled.load() <= depth + 2);
  }
}

TEST_CASE("an upstream error surfaces at its batch and iteration continues",
          "[loader][concurrency]") {
  auto ds = range(100)
                .map([](std::int64_t x) -> std::int64_t {
                  if (x == 35) throw Boom("bad element");
                  return x;
                })
                .batch(10);
  for (std::int64_t depth : {1, 3}) {
    auto out = collect_outcomes(HostLoader(ds, {.depth = depth}));
    REQUIRE(out.size() == 10);
    for (std::size_t k = 0; k < out.size(); ++k) {
      INFO("batch " << k);
      if (k == 3) {
        CHECK_FALSE(out[k].value);
        CHECK(out[k].error == "FunctionError: bad element [stage 'map', element 35]");
      } else {
        REQUIRE(out[k].value);
        CHECK(out[k].value->index() == static_cast<std::int64_t>(k));
        CHECK(int_values(*out[k].value) == iota(10 * static_cast<std::int64_t>(k), 10 * k + 10));
      }
    }
  }
}

TEST_CASE("a device tensor in the input is an error at its batch", "[loader][concurrency]") {
  // A stand-in for device memory: the loader must refuse to read it.
  std::int64_t storage[4] = {1, 2, 3, 4};
  auto device_like = Tensor::from_external(
      storage, DType::int64, Shape{4}, [] {}, MemoryKind::device);
  auto out = collect_outcomes(HostLoader(
      from_vector(std::vector<Tensor>{Tensor::from_values<std::int64_t>({7}), device_like,
                                      Tensor::from_values<std::int64_t>({9})})));
  REQUIRE(out.size() == 3);
  CHECK(int_values(*out[0].value) == V{7});
  CHECK(out[1].error ==
        "InvalidArgument: field 0 is already in device memory [stage 'host_loader', element 1]");
  CHECK(int_values(*out[2].value) == V{9});
}

TEST_CASE("destroying a host loader mid-stream is prompt and clean", "[loader][concurrency]") {
  std::atomic<int> produced{0};
  auto ds = counted_range(1'000'000, produced, 1ms).batch(4);
  std::optional<HostBatch> kept;
  const auto start = std::chrono::steady_clock::now();
  {
    auto it = HostLoader(ds, {.depth = 3}).iterator();
    kept = it.next();
    auto second = it.next();
    REQUIRE(second);
    CHECK(second->index() == 1);
  }
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  const int after = produced.load();
  std::this_thread::sleep_for(20ms);
  CHECK(produced.load() == after);
  // A batch outlives its loader.
  REQUIRE(kept);
  CHECK(int_values(*kept) == V{0, 1, 2, 3});
  // Never iterated: nothing runs.
  { auto it = HostLoader(ds).iterator(); }
  CHECK(produced.load() == after);
}

TEST_CASE("release_after keeps a buffer from reuse until the consumer is done",
          "[loader][concurrency]") {
  auto it = HostLoader(id_batches(40, 256), {.depth = 1}).iterator();
  auto first = it.next();
  REQUIRE(first);
  CHECK(all_equal(*first, 0));
  auto* buffer = static_cast<const std::int64_t*>(first->data());
  std::promise<void> consumer_done;
  first->release_after(consumer_done.get_future().share());
  first.reset();  // dropped, but its consumer is still "running"

  // Hold every later batch, so the producer's only free buffer is the fenced one.
  std::vector<HostBatch> held;
  std::optional<HostBatch> reuser;
  while (auto b = it.next()) {
    if (b->data() == buffer) {
      reuser = std::move(b);
      break;
    }
    CHECK(all_equal(*b, b->index()));
    held.push_back(std::move(*b));
    REQUIRE(held.size() < 20);
  }
  REQUIRE(reuser);
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(reuser->ready());                           // its copy waits for the fence
  for (int i = 0; i < 256; ++i) REQUIRE(buffer[i] == 0);  // not overwritten
  consumer_done.set_value();
  CHECK(all_equal(*reuser, reuser->index()));
  CHECK(reuser->ready());
}

TEST_CASE("host batches export to DLPack and keep their buffer while exported",
          "[loader][concurrency][dlpack]") {
  auto it = HostLoader(id_batches(30, 32), {.depth = 2}).iterator();
  DLManagedTensor* exported = nullptr;
  {
    auto b = it.next();
    REQUIRE(b);
    exported = b->to_dlpack();  // waits for the copy
  }
  const DLTensor& dl = exported->dl_tensor;
  CHECK(dl.device.device_type == kDLCPU);
  CHECK(dl.ndim == 1);
  CHECK(dl.shape[0] == 32);
  CHECK(dl.dtype.code == kDLInt);
  CHECK(dl.dtype.bits == 64);
  bool reused = false;
  while (auto b = it.next()) reused |= b->data() == dl.data;
  CHECK_FALSE(reused);
  for (int i = 0; i < 32; ++i) CHECK(static_cast<const std::int64_t*>(dl.data)[i] == 0);
  exported->deleter(exported);
}

namespace user {
// A user's element, its batch, and the traits that batch it and hand it to a loader.
struct Sample {
  std::int64_t id = 0;
  float weight = 0;
};
struct SampleBatch {
  Tensor ids, weights;
};
}  // namespace user

template <>
struct ingest::batch_traits<user::Sample> {
  using batch_type = user::SampleBatch;
  class builder {
   public:
    explicit builder(const BatchSpec& spec) : ids_(spec), weights_(spec) {}
    void set(std::size_t i, user::Sample&& s) {
      ids_.set(i, s.id);
      weights_.set(i, s.weight);
    }
    batch_type finish(std::size_t n) && {
      return {std::move(ids_).finish(n), std::move(weights_).finish(n)};
    }

   private:
    batch_traits<std::int64_t>::builder ids_;
    batch_traits<float>::builder weights_;
  };
};

template <>
struct ingest::loader_fields<user::SampleBatch> : std::true_type {
  static void split(user::SampleBatch&& b, std::vector<Tensor>& out) {
    out.push_back(std::move(b.ids));
    out.push_back(std::move(b.weights));
  }
};

TEST_CASE("a user struct's batches reach the loader through loader_fields",
          "[loader][concurrency]") {
  AnyDataset<user::Sample> samples = range(10).map([](std::int64_t i) {
    return user::Sample{i, static_cast<float>(i) / 4};
  });
  auto it = HostLoader(samples.batch(5)).iterator();
  std::vector<HostBatch> batches;
  while (auto b = it.next()) batches.push_back(std::move(*b));
  REQUIRE(batches.size() == 2);
  REQUIRE(batches[1].size() == 2);
  CHECK(int_values(batches[1], 0) == V{5, 6, 7, 8, 9});
  CHECK(batches[1].dtype(1) == DType::float32);
  CHECK(batches[1].data<float>(1)[3] == 8.0f / 4);

  // The loader's row counts the bytes of every field: 10 x (8 + 4).
  const PipelineStats stats = it.stats();
  REQUIRE_FALSE(stats.stages.empty());
  CHECK(stats.stages[0].name == "host_loader");
  CHECK(stats.stages[0].megabytes == Approx(10 * 12 / 1e6).epsilon(0.01));
}

TEST_CASE("host loader registers a tunable depth with the model", "[loader][concurrency]") {
  auto it = HostLoader(range(200).batch(2), {.depth = autotune}).iterator();
  std::int64_t n = 0;
  while (auto b = it.next()) n += static_cast<std::int64_t>(int_values(*b).size());
  CHECK(n == 200);
  const PipelineStats stats = it.stats();
  REQUIRE_FALSE(stats.stages.empty());
  CHECK(stats.stages[0].name == "host_loader");
  CHECK(stats.stages[0].autotuned);
  CHECK(stats.stages[0].buffer >= 1);
  CHECK(stats.stages[0].buffer <= max_tuned_loader_depth);
  CHECK(stats.stages[0].elements == 100);
}

TEST_CASE("host loader hands batches to another thread", "[loader][concurrency]") {
  // The consumer thread reads batches while the producer and copy threads run.
  auto loader = HostLoader(id_batches(200, 128), {.depth = 4});
  std::atomic<std::int64_t> checked{0};
  std::thread consumer([&] {
    auto it = loader.iterator();
    while (auto b = it.next()) {
      if (all_equal(*b, b->index())) checked.fetch_add(1);
    }
  });
  consumer.join();
  CHECK(checked.load() == 200);
}

TEST_CASE(
    "repeat over an autotuned loader: each epoch's iterator sets up its node while the "
    "autotuner reads it",
    "[loader][repeat][concurrency]") {
  std::size_t batches = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  auto it = HostLoader(range(20).batch(4), {.depth = autotune})
                .repeat()
                .with_options({.autotune = true})
                .iterator();
  while (std::chrono::steady_clock::now() < until) {
    REQUIRE(it.next().has_value());
    ++batches;
  }
  CHECK(batches >= 5);
}
