// DLPack export and import of Tensors: dtype and device mapping, shared
// ownership through the deleter, and a round trip through a hand-written
// consumer that reads only DLPack's fields.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <ingest/core/dlpack.hpp>

#include "support/testing.hpp"

using namespace ingest;

namespace {

// A consumer that knows only DLPack: sums a float32 or int64 tensor of any
// rank through its shape and strides, then releases it.
double consume(DLManagedTensor* m) {
  const DLTensor& t = m->dl_tensor;
  std::int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  const auto* base = static_cast<const std::byte*>(t.data) + t.byte_offset;
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t offset = 0, rest = i;
    for (int d = t.ndim - 1; d >= 0; --d) {
      offset += (rest % t.shape[d]) * t.strides[d];
      rest /= t.shape[d];
    }
    if (t.dtype.code == kDLFloat && t.dtype.bits == 32) {
      sum += reinterpret_cast<const float*>(base)[offset];
    } else if (t.dtype.code == kDLInt && t.dtype.bits == 64) {
      sum += static_cast<double>(reinterpret_cast<const std::int64_t*>(base)[offset]);
    }
  }
  m->deleter(m);
  return sum;
}

}  // namespace

TEST_CASE("dtypes map to DLPack and back", "[core][dlpack]") {
  for (DType t : {DType::boolean, DType::uint8, DType::int8, DType::uint16, DType::int16,
                  DType::uint32, DType::int32, DType::uint64, DType::int64, DType::float16,
                  DType::bfloat16, DType::float32, DType::float64}) {
    INFO(dtype_name(t));
    const DLDataType dl = to_dlpack_dtype(t);
    CHECK(dl.bits == dtype_size(t) * 8);
    CHECK(dl.lanes == 1);
    CHECK(from_dlpack_dtype(dl) == t);
  }
  CHECK(to_dlpack_dtype(DType::boolean).code == 6);  // DLPack >= 0.8's kDLBool
  CHECK(to_dlpack_dtype(DType::bfloat16).code == kDLBfloat);
  CHECK(to_dlpack_dtype(DType::float16).code == kDLFloat);
  CHECK(to_dlpack_dtype(DType::uint32).code == kDLUInt);
  CHECK_FALSE(from_dlpack_dtype({kDLFloat, 32, 4}));  // vector lanes
  CHECK_FALSE(from_dlpack_dtype({kDLComplex, 64, 1}));
  CHECK_FALSE(from_dlpack_dtype({kDLInt, 4, 1}));
  CHECK_FALSE(from_dlpack_dtype({kDLBfloat, 32, 1}));
}

TEST_CASE("a tensor exports to DLPack without a copy, kept alive by the deleter",
          "[core][dlpack]") {
  auto t = Tensor::from_values<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  DLManagedTensor* m = to_dlpack(t);
  CHECK(t.use_count() == 2);
  const DLTensor& dl = m->dl_tensor;
  CHECK(dl.data == t.raw_data());
  CHECK(dl.device.device_type == kDLCPU);
  CHECK(dl.device.device_id == 0);
  REQUIRE(dl.ndim == 2);
  CHECK(dl.shape[0] == 2);
  CHECK(dl.shape[1] == 3);
  CHECK(dl.strides[0] == 3);
  CHECK(dl.strides[1] == 1);
  CHECK(dl.byte_offset == 0);
  CHECK(dl.dtype.code == kDLFloat);
  CHECK(dl.dtype.bits == 32);
  const void* data = t.raw_data();
  t = Tensor();  // the export alone keeps the storage
  CHECK(static_cast<const float*>(dl.data) == data);
  CHECK(consume(m) == 21.0);

  // A view exports its own first element; a scalar has rank 0.
  auto rows = Tensor::from_values<std::int64_t>({1, 2, 3, 4, 5, 6}, Shape{3, 2});
  CHECK(consume(to_dlpack(rows.narrow(1, 2))) == 18.0);
  CHECK(consume(to_dlpack(rows.slice(2))) == 11.0);
  DLManagedTensor* s = to_dlpack(Tensor::scalar<std::int64_t>(42));
  CHECK(s->dl_tensor.ndim == 0);
  CHECK(consume(s) == 42.0);
  CHECK(rows.use_count() == 1);

  DLManagedTensor* u = to_dlpack(Tensor());
  CHECK(u->dl_tensor.data == nullptr);
  CHECK(u->dl_tensor.ndim == 1);
  CHECK(u->dl_tensor.shape[0] == 0);
  u->deleter(u);
}

TEST_CASE("memory kinds map to DLPack devices", "[core][dlpack]") {
  std::int32_t storage[2] = {7, 8};
  auto pinned = Tensor::from_external(
      storage, DType::int32, Shape{2}, [] {}, MemoryKind::pinned);
  auto device = Tensor::from_external(
      storage, DType::int32, Shape{2}, [] {}, MemoryKind::device);
  DLManagedTensor* p = to_dlpack(pinned, 1);
  DLManagedTensor* d = to_dlpack(device, 3);
  CHECK(p->dl_tensor.device.device_type == kDLCUDAHost);
  CHECK(p->dl_tensor.device.device_id == 1);
  CHECK(d->dl_tensor.device.device_type == kDLCUDA);
  CHECK(d->dl_tensor.device.device_id == 3);
  DLManagedTensor* h = to_dlpack(Tensor::zeros(DType::int8, Shape{1}), 5);
  CHECK(h->dl_tensor.device.device_id == 0);  // host memory has no device
  h->deleter(h);
  for (DLManagedTensor* m : {p, d}) {
    const Tensor back = from_dlpack(m);
    CHECK(back.raw_data() == storage);
  }
  CHECK(from_dlpack(to_dlpack(pinned)).memory_kind() == MemoryKind::pinned);
  CHECK(from_dlpack(to_dlpack(device)).memory_kind() == MemoryKind::device);
}

TEST_CASE("from_dlpack imports without a copy and calls the deleter once", "[core][dlpack]") {
  auto t = Tensor::from_values<std::int64_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  {
    Tensor back = from_dlpack(to_dlpack(t));
    CHECK_FALSE(back.shares_storage_with(t));  // a new block around the same bytes
    CHECK(back.raw_data() == t.raw_data());
    CHECK(back.shape() == Shape{2, 3});
    CHECK(back == t);
    CHECK(t.use_count() == 2);  // held by the export inside `back`
    Tensor copy = back;
    back = Tensor();
    CHECK(t.use_count() == 2);
  }
  CHECK(t.use_count() == 1);

  // A producer of ours: byte offset, no strides, a counting deleter.
  struct Producer {
    std::int64_t data[5] = {0, 10, 20, 30, 40};
    std::int64_t shape[1] = {3};
    DLManagedTensor managed{};
    int deleted = 0;
  } producer;
  producer.managed.dl_tensor.data = producer.data;
  producer.managed.dl_tensor.byte_offset = 2 * sizeof(std::int64_t);
  producer.managed.dl_tensor.device = {kDLCPU, 0};
  producer.managed.dl_tensor.ndim = 1;
  producer.managed.dl_tensor.dtype = {kDLInt, 64, 1};
  producer.managed.dl_tensor.shape = producer.shape;
  producer.managed.dl_tensor.strides = nullptr;
  producer.managed.manager_ctx = &producer;
  producer.managed.deleter = [](DLManagedTensor* self) {
    ++static_cast<Producer*>(self->manager_ctx)->deleted;
  };
  {
    const Tensor imported = from_dlpack(&producer.managed);
    CHECK(testing::values_of(imported) == std::vector<std::int64_t>{20, 30, 40});
  }
  CHECK(producer.deleted == 1);

  // Unsupported inputs are refused and stay the caller's.
  std::int64_t strides[1] = {2};
  producer.managed.dl_tensor.strides = strides;
  CHECK_THROWS_AS(from_dlpack(&producer.managed), InvalidArgument);
  producer.managed.dl_tensor.strides = nullptr;
  producer.managed.dl_tensor.device = {kDLOpenCL, 0};
  CHECK_THROWS_AS(from_dlpack(&producer.managed), InvalidArgument);
  producer.managed.dl_tensor.device = {kDLCPU, 0};
  producer.managed.dl_tensor.dtype = {kDLComplex, 128, 1};
  CHECK_THROWS_AS(from_dlpack(&producer.managed), InvalidArgument);
  CHECK_THROWS_AS(from_dlpack(nullptr), InvalidArgument);
  CHECK(producer.deleted == 1);
}

TEST_CASE("from_dlpack refuses shapes that overflow or exceed max_tensor_bytes (issue 10 item 1)",
          "[core][dlpack]") {
  std::int64_t data[1] = {0};
  std::int64_t shape[2] = {std::int64_t{1} << 62, std::int64_t{1} << 62};
  std::int64_t strides[2] = {std::int64_t{1} << 62, 1};
  int deleted = 0;
  DLManagedTensor managed{};
  managed.dl_tensor.data = data;
  managed.dl_tensor.device = {kDLCPU, 0};
  managed.dl_tensor.ndim = 2;
  managed.dl_tensor.dtype = {kDLInt, 64, 1};
  managed.dl_tensor.shape = shape;
  managed.dl_tensor.strides = strides;
  managed.manager_ctx = &deleted;
  managed.deleter = [](DLManagedTensor* self) { ++*static_cast<int*>(self->manager_ctx); };
  // Was: a signed overflow in the stride check, then a tensor of 2^124 elements.
  CHECK_THROWS_WITH(from_dlpack(&managed),
                    Catch::Contains("from_dlpack") && Catch::Contains("4611686018427387904"));
  shape[0] = -1;
  shape[1] = 1;
  CHECK_THROWS_AS(from_dlpack(&managed), InvalidArgument);
  shape[0] = std::int64_t{1} << 38;  // 2 TiB of int64
  strides[0] = 1;
  CHECK_THROWS_AS(from_dlpack(&managed), InvalidArgument);
  CHECK(deleted == 0);  // refused inputs stay the caller's
}
