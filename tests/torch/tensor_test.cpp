// ingest::torch::to_tensor: zero copy (the torch tensor's data_ptr is the
// ingest buffer), the buffer's lifetime (held by libtorch's storage until the
// last torch tensor viewing it goes), every DType's mapping checked by value,
// the error for types libtorch lacks, shapes, views, and batches.
// libtorch's headers define glog's CHECK: they come first, and Catch2's
// replaces it (once: in a unity group, Catch2 may be in already).
#include <ingest/ingest.hpp>
#include <ingest/torch/tensor.hpp>
#ifndef CATCH_VERSION_MAJOR
#undef CHECK
#endif
#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

using ingest::DType;
using ingest::Shape;

namespace {

// Counts the buffers it has handed out and not yet had back.
class LiveCountingAllocator final : public ingest::Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    ++live_;
    return ingest::host_allocator().allocate(bytes);
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    --live_;
    ingest::host_allocator().deallocate(p, bytes);
  }
  int live() const noexcept { return live_.load(); }

 private:
  std::atomic<int> live_{0};
};

// Values 0, 1, 2, ... of type T in a tensor of `shape`.
template <class T>
ingest::Tensor iota_tensor(Shape shape) {
  ingest::Tensor t(ingest::dtype_of_v<T>, shape);
  T* p = t.data<T>();
  for (std::int64_t i = 0; i < t.num_elements(); ++i) p[i] = static_cast<T>(i % 100);
  return t;
}

// The torch tensor's values as doubles (through libtorch's own conversion).
std::vector<double> torch_values(const at::Tensor& x) {
  const at::Tensor d = x.to(at::kDouble).contiguous();
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

template <class T>
void check_mapping(at::ScalarType expected) {
  ingest::Tensor t = iota_tensor<T>(Shape{3, 4});
  const void* bytes = t.raw_data();
  const at::Tensor x = ingest::torch::to_tensor(t);
  CHECK(x.scalar_type() == expected);
  CHECK(x.data_ptr() == bytes);
  CHECK(x.sizes().vec() == std::vector<std::int64_t>{3, 4});
  CHECK(x.element_size() == static_cast<std::int64_t>(ingest::dtype_size(t.dtype())));
  std::vector<double> want;
  for (const T v : t.values<T>()) want.push_back(static_cast<double>(v));
  CHECK(torch_values(x) == want);
}

}  // namespace

TEST_CASE("to_tensor: no copy, the torch tensor views the ingest buffer", "[torch]") {
  ingest::Tensor t = ingest::Tensor::from_values<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  void* bytes = t.raw_data();
  at::Tensor x = ingest::torch::to_tensor(t);  // a copy of the handle: shares the buffer
  CHECK(x.data_ptr() == bytes);
  CHECK(x.device().is_cpu());
  CHECK(x.is_contiguous());
  CHECK_FALSE(x.requires_grad());
  CHECK(t.use_count() == 2);  // t, and the one libtorch's storage holds
  // Writes through either side are seen by the other.
  x.mul_(10);
  CHECK(t.values<float>()[5] == 60.0f);
  t.data<float>()[0] = -1;
  CHECK(x[0][0].item<float>() == -1.0f);
  // An rvalue moves the handle in: still the same bytes, one owner.
  at::Tensor y = ingest::torch::to_tensor(std::move(t));
  CHECK(y.data_ptr() == bytes);
}

TEST_CASE("to_tensor: the buffer lives until the last torch tensor viewing it is gone", "[torch]") {
  LiveCountingAllocator allocator;
  {
    ingest::Tensor t(DType::int32, Shape{4, 8}, allocator);
    for (std::int64_t i = 0; i < 32; ++i) t.data<std::int32_t>()[i] = static_cast<std::int32_t>(i);
    at::Tensor x = ingest::torch::to_tensor(std::move(t));
    t = ingest::Tensor();  // the ingest side is gone
    CHECK(allocator.live() == 1);
    // Read and write through the torch tensor alone: here in the test's own
    // (instrumented) code, where ASan sees a use after free, and in libtorch.
    CHECK(static_cast<const std::int32_t*>(x.data_ptr())[31] == 31);
    CHECK(x.sum().item<std::int64_t>() == 31 * 32 / 2);
    x.add_(1);
    at::Tensor row = x[3];  // a view keeps the storage too
    x = at::Tensor();
    CHECK(allocator.live() == 1);
    CHECK(row.sum().item<std::int64_t>() == (24 + 31) * 8 / 2 + 8);
    row = at::Tensor();
    CHECK(allocator.live() == 0);  // libtorch freed its storage: the ingest owner was released
  }
  {
    // The other order: the torch tensor dies first, the ingest tensor keeps the buffer.
    ingest::Tensor t(DType::float32, Shape{16}, allocator);
    { const at::Tensor x = ingest::torch::to_tensor(t); }
    CHECK(allocator.live() == 1);
    CHECK(t.use_count() == 1);
  }
  CHECK(allocator.live() == 0);
}

TEST_CASE("to_tensor: every DType libtorch has maps to its type, value for value", "[torch]") {
  check_mapping<std::uint8_t>(at::kByte);
  check_mapping<std::int8_t>(at::kChar);
  check_mapping<std::int16_t>(at::kShort);
  check_mapping<std::int32_t>(at::kInt);
  check_mapping<std::int64_t>(at::kLong);
  check_mapping<float>(at::kFloat);
  check_mapping<double>(at::kDouble);
  SECTION("bool") {
    const ingest::Tensor t = ingest::Tensor::from_values<bool>({true, false, true});
    const at::Tensor x = ingest::torch::to_tensor(t);
    CHECK(x.scalar_type() == at::kBool);
    CHECK(torch_values(x) == std::vector<double>{1, 0, 1});
  }
  SECTION("float16 and bfloat16, bit for bit") {
    const std::vector<float> values = {0.0f, -1.5f, 3.140625f, 65504.0f, 1e-7f, -0.0f};
    ingest::Tensor h(DType::float16, Shape{6}), b(DType::bfloat16, Shape{6});
    for (std::size_t i = 0; i < values.size(); ++i) {
      h.data<ingest::float16_t>()[i] = ingest::to_float16(values[i]);
      b.data<ingest::bfloat16_t>()[i] = ingest::to_bfloat16(values[i]);
    }
    const at::Tensor xh = ingest::torch::to_tensor(h), xb = ingest::torch::to_tensor(b);
    CHECK(xh.scalar_type() == at::kHalf);
    CHECK(xb.scalar_type() == at::kBFloat16);
    const at::Tensor fh = xh.to(at::kFloat), fb = xb.to(at::kFloat);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto k = static_cast<std::int64_t>(i);
      CHECK(fh[k].item<float>() == ingest::to_float(h.data<ingest::float16_t>()[i]));
      CHECK(fb[k].item<float>() == ingest::to_float(b.data<ingest::bfloat16_t>()[i]));
    }
  }
}

TEST_CASE("to_tensor: a dtype libtorch lacks is an InvalidArgument naming it", "[torch]") {
#if INGEST_TORCH_HAS_WIDE_UNSIGNED
  check_mapping<std::uint16_t>(at::ScalarType::UInt16);
  check_mapping<std::uint32_t>(at::ScalarType::UInt32);
  check_mapping<std::uint64_t>(at::ScalarType::UInt64);
#else
  for (const DType d : {DType::uint16, DType::uint32, DType::uint64}) {
    LiveCountingAllocator allocator;
    {
      const ingest::Tensor t(d, Shape{2}, allocator);
      CHECK_THROWS_AS(ingest::torch::to_tensor(t), ingest::InvalidArgument);
      CHECK_THROWS_WITH(ingest::torch::to_tensor(t),
                        Catch::Contains("no " + std::string(ingest::dtype_name(d)) + " type"));
    }
    CHECK(allocator.live() == 0);  // nothing kept by the failed conversion
  }
#endif
}

TEST_CASE("to_tensor: scalars, zero-size and high-rank shapes, views, undefined", "[torch]") {
  SECTION("rank 0") {
    const at::Tensor x = ingest::torch::to_tensor(ingest::Tensor::scalar<double>(2.5));
    CHECK(x.dim() == 0);
    CHECK(x.item<double>() == 2.5);
  }
  SECTION("zero-size") {
    const at::Tensor x = ingest::torch::to_tensor(ingest::Tensor(DType::float32, Shape{0, 3}));
    CHECK(x.sizes().vec() == std::vector<std::int64_t>{0, 3});
    CHECK(x.numel() == 0);
  }
  SECTION("the largest rank") {
    const ingest::Tensor t = iota_tensor<std::int16_t>(Shape{1, 2, 1, 3, 1, 2, 1, 2});
    const at::Tensor x = ingest::torch::to_tensor(t);
    CHECK(x.sizes().vec() == std::vector<std::int64_t>{1, 2, 1, 3, 1, 2, 1, 2});
    CHECK(x.is_contiguous());
    CHECK(x.flatten()[23].item<std::int16_t>() == 23);
  }
  SECTION("views at an offset: slice, narrow, reshape") {
    const ingest::Tensor t = iota_tensor<std::int32_t>(Shape{5, 4});
    const at::Tensor s = ingest::torch::to_tensor(t.slice(2));
    CHECK(s.data_ptr() == t.slice(2).raw_data());
    CHECK(torch_values(s) == std::vector<double>{8, 9, 10, 11});
    const at::Tensor n = ingest::torch::to_tensor(t.narrow(3, 2));
    CHECK(n.sizes().vec() == std::vector<std::int64_t>{2, 4});
    CHECK(n.sum().item<std::int64_t>() == 12 + 13 + 14 + 15 + 16 + 17 + 18 + 19);
    const at::Tensor r = ingest::torch::to_tensor(t.reshape(Shape{2, 10}));
    CHECK(r.data_ptr() == t.raw_data());
    CHECK(r[1][0].item<std::int32_t>() == 10);
  }
  SECTION("undefined") { CHECK_FALSE(ingest::torch::to_tensor(ingest::Tensor()).defined()); }
  SECTION("device memory is refused: it needs a stream (torch/cuda.hpp)") {
    int fake = 0;
    const ingest::Tensor d = ingest::Tensor::from_external(
        &fake, DType::int32, Shape{1}, [] {}, ingest::MemoryKind::device);
    CHECK_THROWS_AS(ingest::torch::to_tensor(d), ingest::InvalidArgument);
  }
}

TEST_CASE("to_tensor: batches of tuples and pairs, field by field, without copies", "[torch]") {
  SECTION("a tuple of three fields from batch()") {
    std::vector<std::tuple<ingest::Tensor, std::int64_t, float>> rows;
    for (int i = 0; i < 6; ++i) {
      rows.emplace_back(ingest::Tensor::from_values<float>({float(i), float(i) + 0.5f}), i * 10,
                        float(i) / 4);
    }
    auto it = ingest::from_vector(rows).batch(3).iterator();
    auto batch = it.next();
    REQUIRE(batch);
    const void* images = std::get<0>(*batch).raw_data();
    auto [x, labels, weights] = ingest::torch::to_tensor(std::move(*batch));
    CHECK(x.data_ptr() == images);
    CHECK(x.sizes().vec() == std::vector<std::int64_t>{3, 2});
    CHECK(torch_values(labels) == std::vector<double>{0, 10, 20});
    CHECK(weights.scalar_type() == at::kFloat);
    CHECK(torch_values(x) == std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5});
    batch.reset();
    const auto next = it.next();
    auto second = ingest::torch::to_tensor(*next);  // an lvalue: the tuple's Tensors share
    CHECK(std::get<0>(second).data_ptr() == std::get<0>(*next).raw_data());
    CHECK(torch_values(std::get<1>(second)) == std::vector<double>{30, 40, 50});
  }
  SECTION("a pair") {
    LiveCountingAllocator allocator;
    {
      std::pair<ingest::Tensor, ingest::Tensor> b{
          ingest::Tensor(DType::uint8, Shape{2, 2}, allocator),
          ingest::Tensor(DType::int64, Shape{2}, allocator)};
      b.first.values<std::uint8_t>()[3] = 7;
      b.second.values<std::int64_t>()[1] = 9;
      auto [images, labels] = ingest::torch::to_tensor(std::move(b));
      static_assert(std::is_same_v<decltype(images), at::Tensor>);
      CHECK(images[1][1].item<std::uint8_t>() == 7);
      CHECK(labels[1].item<std::int64_t>() == 9);
      CHECK(allocator.live() == 2);
    }
    CHECK(allocator.live() == 0);
  }
}
