// cuda::DeviceLoader. Without a device: iterator() reports Unavailable, and
// the rest is skipped. With one: order, fields, the smaller last batch,
// errors at their batch, buffers not reused while a consumer stream may
// still read them, staging of pageable input, DLPack, shutdown.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <ingest/cuda/device_loader.hpp>
#include <ingest/cuda/overlap.hpp>

#include "support/cuda_testing.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using namespace std::chrono_literals;
using V = std::vector<std::int64_t>;

namespace {

// Field `i` of a batch as int64 values, read back on `stream` after wait(stream).
V int_values(cuda::DeviceBatch& b, cudaStream_t stream, std::size_t i = 0) {
  b.wait(stream);
  return copy_to_host<std::int64_t>(b.data(i), static_cast<std::size_t>(b.shape(i).num_elements()),
                                    stream);
}

auto id_batches(std::int64_t count, std::int64_t rows) {
  return range(count * rows).map([rows](std::int64_t x) { return x / rows; }).batch(rows);
}

}  // namespace

TEST_CASE("without a device, DeviceLoader reports Unavailable before starting",
          "[cuda][device_loader]") {
  if (cuda::device_count() > 0) {
    std::cout << "SKIPPED: a CUDA device is present; the no-device path cannot be tested"
              << std::endl;
    return;
  }
  int pulled = 0;
  auto ds = range(10)
                .map([&pulled](std::int64_t x) {
                  ++pulled;
                  return x;
                })
                .batch(5);
  const cuda::DeviceLoader loader(ds, {.depth = 2});
  try {
    auto it = loader.iterator();
    FAIL("iterator() did not throw");
  } catch (const Unavailable& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("Unavailable: no CUDA device: cudaGetDevice failed: "));
  }
  CHECK(pulled == 0);  // nothing ran
  // Options are still checked first.
  CHECK_THROWS_AS(cuda::DeviceLoader(ds, {.depth = 0}), InvalidArgument);
}

TEST_CASE("device loader yields every batch in order, in device memory", "[cuda][device_loader]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  TestStream stream;
  for (std::int64_t depth : {std::int64_t{1}, std::int64_t{3}, autotune}) {
    INFO("depth " << depth);
    std::int64_t count = 0;
    for (auto& b : cuda::DeviceLoader(range(1000).batch(10), {.depth = depth})) {
      CHECK(b.index() == count);
      CHECK(b.field().memory_kind() == MemoryKind::device);
      CHECK(b.device() == 0);
      CHECK(int_values(b, stream) == iota(count * 10, count * 10 + 10));
      ++count;
    }
    CHECK(count == 100);
  }
}

TEST_CASE("device loader copies tuples and a smaller last batch", "[cuda][device_loader]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  TestStream stream;
  auto ds = range(23)
                .map([](std::int64_t x) { return std::make_tuple(x, static_cast<float>(x) / 4); })
                .batch(8);
  std::int64_t k = 0;
  for (auto& b : cuda::DeviceLoader(ds)) {
    const std::int64_t rows = k < 2 ? 8 : 7;
    REQUIRE(b.size() == 2);
    CHECK(b.shape(1) == Shape{rows});
    CHECK(int_values(b, stream) == iota(8 * k, 8 * k + rows));
    const auto floats =
        copy_to_host<float>(b.data<float>(1), static_cast<std::size_t>(rows), stream);
    for (std::int64_t r = 0; r < rows; ++r) CHECK(floats[r] == static_cast<float>(8 * k + r) / 4);
    ++k;
  }
  CHECK(k == 3);
  CHECK(collect(cuda::DeviceLoader(range(0).batch(4))).empty());
}

TEST_CASE("device loader builds its input in pinned memory, and stages other input",
          "[cuda][device_loader]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  TestStream stream;
  // The batch stage allocates from the context: pinned, with options.pinned.
  std::vector<MemoryKind> kinds;
  auto probe = range(20).batch(10).map([&kinds](Tensor t) {
    kinds.push_back(t.memory_kind());
    return t;
  });
  CHECK(collect(cuda::DeviceLoader(probe)).size() == 2);
  CHECK(kinds == std::vector<MemoryKind>{MemoryKind::pinned, MemoryKind::pinned});
  kinds.clear();
  CHECK(collect(cuda::DeviceLoader(probe, {.pinned = false})).size() == 2);
  CHECK(kinds == std::vector<MemoryKind>{MemoryKind::host, MemoryKind::host});
  // Tensors made elsewhere (pageable) are staged, or copied as they are.
  std::vector<Tensor> tensors{Tensor::from_values<std::int64_t>(iota(0, 1000)),
                              Tensor::from_values<std::int64_t>(iota(5, 9))};
  for (bool pinned : {true, false}) {
    auto batches = collect(cuda::DeviceLoader(from_vector(tensors), {.pinned = pinned}));
    REQUIRE(batches.size() == 2);
    CHECK(int_values(batches[0], stream) == iota(0, 1000));
    CHECK(int_values(batches[1], stream) == iota(5, 9));
  }
}

TEST_CASE("a buffer is not reused while a consumer stream may read it", "[cuda][device_loader]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  TestStream stream;
  auto it = cuda::DeviceLoader(id_batches(200, 4096), {.depth = 2}).iterator();
  std::vector<cuda::DeviceBatch> held;
  std::set<void*> buffers;
  // Pinned, so that the read below is truly asynchronous.
  Tensor readback(DType::int64, Shape{4096}, cuda::pinned_pool());
  while (auto b = it.next()) {
    for (const auto& h : held) REQUIRE(h.data() != b->data());
    buffers.insert(b->data());
    b->wait(stream);
    // Queue a read of the batch on the consumer stream and drop the batch
    // at once: its buffer must not be overwritten before the read ran.
    cuda::check(cudaMemcpyAsync(readback.raw_data(), b->data(), readback.nbytes(),
                                cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync");
    const std::int64_t id = b->index();
    if (id % 50 == 7) held.push_back(std::move(*b));
    b.reset();
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    for (std::int64_t v : readback.values<std::int64_t>()) REQUIRE(v == id);
  }
  for (auto& h : held) CHECK(int_values(h, stream) == V(4096, h.index()));
  CHECK(buffers.size() <= held.size() + 6);  // pooled, not one per batch
}

TEST_CASE("device loader: errors at their batch, DLPack, early shutdown", "[cuda][device_loader]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  TestStream stream;
  auto failing = range(50)
                     .map([](std::int64_t x) -> std::int64_t {
                       if (x == 21) throw Boom("bad");
                       return x;
                     })
                     .batch(10);
  auto out = collect_outcomes(cuda::DeviceLoader(failing));
  REQUIRE(out.size() == 5);
  CHECK(out[2].error == "FunctionError: bad [stage 'map', element 21]");
  REQUIRE(out[3].value);
  CHECK(out[3].value->index() == 3);
  CHECK(int_values(*out[3].value, stream) == iota(30, 40));

  std::optional<cuda::DeviceBatch> kept;
  {
    auto it = cuda::DeviceLoader(id_batches(1000, 256), {.depth = 4}).iterator();
    kept = it.next();
    REQUIRE(it.next());
  }  // destroyed mid-stream
  DLManagedTensor* m = kept->to_dlpack(0, stream);
  CHECK(m->dl_tensor.device.device_type == kDLCUDA);
  CHECK(m->dl_tensor.device.device_id == 0);
  CHECK(m->dl_tensor.data == kept->data());
  kept.reset();  // the export keeps the buffer
  CHECK(copy_to_host<std::int64_t>(m->dl_tensor.data, 256, stream) == V(256, 0));
  m->deleter(m);
}

TEST_CASE("device loader saves and restores at the consumer's position",
          "[cuda][device_loader][checkpoint]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  TestStream stream;
  // The batches in flight at the save (copied, queued) are produced again
  // after the restore; the state holds the input's position, not them.
  const auto make = [](std::int64_t depth) {
    return cuda::DeviceLoader(range(130).map([](std::int64_t x) { return x * 3; }).batch(10),
                              {.depth = depth});
  };
  const auto values = [&](auto& it) {
    std::vector<V> out;
    while (auto b = it.next()) out.push_back(int_values(*b, stream));
    return out;
  };
  auto reference = make(2).iterator();
  const auto full = values(reference);
  REQUIRE(full.size() == 13);
  for (std::size_t k = 0; k <= full.size(); ++k) {
    INFO("saved after " << k);
    auto it = make(3).iterator();
    for (std::size_t i = 0; i < k; ++i) REQUIRE(it.next());
    const IteratorState state = IteratorState::from_bytes(it.save().bytes());
    auto restored = make(k % 2 ? 1 : autotune).iterator(state);
    CHECK(values(restored) ==
          std::vector(full.begin() + static_cast<std::ptrdiff_t>(k), full.end()));
  }
}

TEST_CASE("OverlapTimer needs timed copies", "[cuda][device_loader][overlap]") {
  INGEST_REQUIRE_CUDA_DEVICE();
  TestStream stream;
  cuda::OverlapTimer timer(stream);
  auto untimed = cuda::DeviceLoader(range(8).batch(4)).iterator();
  auto b = untimed.next();
  CHECK_THROWS_AS(timer.begin_step(*b), InvalidArgument);
  auto timed = cuda::DeviceLoader(range(8).batch(4), {.timing = true}).iterator();
  std::int64_t steps = 0;
  while (auto t = timed.next()) {
    t->wait(stream);
    timer.begin_step(*t);
    timer.end_step();
    ++steps;
  }
  const cuda::OverlapReport r = timer.report();
  CHECK(r.steps == steps);
  CHECK(r.copy_ms > 0);
  CHECK(r.overlap_ms <= r.copy_ms);
}
