#include <catch2/catch.hpp>

#include <cstdint>
#include <sstream>

#include <ingest/core/tensor.hpp>

using namespace ingest;

TEST_CASE("a tensor has dtype, shape and aligned storage", "[core][tensor]") {
  Tensor t(DType::float32, Shape{2, 3});
  CHECK(t.defined());
  CHECK(t.dtype() == DType::float32);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.num_elements() == 6);
  CHECK(t.nbytes() == 24);
  CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % tensor_alignment == 0);
  CHECK(t.memory_kind() == MemoryKind::host);
  CHECK(t.allocator() == &default_allocator());
}

TEST_CASE("an undefined tensor is empty and safe to use", "[core][tensor]") {
  Tensor t;
  CHECK_FALSE(t.defined());
  CHECK(t.num_elements() == 0);
  CHECK(t.nbytes() == 0);
  CHECK(t.raw_data() == nullptr);
  CHECK(t.use_count() == 0);
  Tensor u = t;
  CHECK(u == t);
  CHECK(t.to_string() == "float32[0](undefined)");
}

TEST_CASE("typed access checks the dtype", "[core][tensor]") {
  Tensor t = Tensor::from_values<std::int64_t>({1, 2, 3, 4}, Shape{2, 2});
  CHECK(t.data<std::int64_t>()[3] == 4);
  CHECK(t.values<std::int64_t>().size() == 4);
  CHECK_THROWS_AS(t.data<float>(), InvalidArgument);
  CHECK_THROWS_AS(t.item<std::int64_t>(), InvalidArgument);  // four values
  CHECK(Tensor::scalar(2.5).item<double>() == 2.5);
  CHECK(Tensor::scalar(true).item<bool>());
  CHECK_THROWS_AS(Tensor::from_values<int>({1, 2, 3}, Shape{2, 2}), InvalidArgument);
}

TEST_CASE("copies share storage, clones do not", "[core][tensor]") {
  Tensor a = Tensor::from_values<int>({1, 2, 3});
  Tensor b = a;
  CHECK(a.shares_storage_with(b));
  CHECK(a.use_count() == 2);
  b.data<int>()[0] = 10;
  CHECK(a.data<int>()[0] == 10);
  Tensor c = a.clone();
  CHECK_FALSE(c.shares_storage_with(a));
  c.data<int>()[0] = 20;
  CHECK(a.data<int>()[0] == 10);
  CHECK(c == Tensor::from_values<int>({20, 2, 3}));

  Tensor moved = std::move(b);
  CHECK(a.use_count() == 2);
  CHECK_FALSE(b.defined());  // NOLINT(bugprone-use-after-move): moved-from is undefined
}

TEST_CASE("slice, narrow and reshape are views", "[core][tensor]") {
  Tensor t = Tensor::from_values<std::int32_t>({0, 1, 2, 3, 4, 5}, Shape{3, 2});
  Tensor row = t.slice(1);
  CHECK(row.shape() == Shape{2});
  CHECK(row.data<std::int32_t>()[0] == 2);
  CHECK(row.shares_storage_with(t));
  Tensor rows = t.narrow(1, 2);
  CHECK(rows.shape() == Shape{2, 2});
  CHECK(rows == Tensor::from_values<std::int32_t>({2, 3, 4, 5}, Shape{2, 2}));
  CHECK(t.reshape(Shape{6}).data<std::int32_t>()[5] == 5);
  CHECK_THROWS_AS(t.reshape(Shape{4}), InvalidArgument);
  CHECK_THROWS_AS(t.slice(3), InvalidArgument);
  CHECK_THROWS_AS(t.slice(-1), InvalidArgument);
  CHECK_THROWS_AS(t.narrow(2, 2), InvalidArgument);
  CHECK_THROWS_AS(Tensor::scalar(1).slice(0), InvalidArgument);
}

TEST_CASE("zeros, equality and printing", "[core][tensor]") {
  Tensor z = Tensor::zeros(DType::int16, Shape{3});
  CHECK(z == Tensor::from_values<std::int16_t>({0, 0, 0}));
  CHECK_FALSE(z == Tensor::zeros(DType::int16, Shape{1, 3}));  // shape differs
  CHECK_FALSE(z == Tensor::zeros(DType::uint16, Shape{3}));    // dtype differs
  std::ostringstream os;
  os << Tensor::from_values<std::int64_t>({1, 2, 3}, Shape{1, 3});
  CHECK(os.str() == "int64[1, 3]{1, 2, 3}");
  CHECK(Tensor::zeros(DType::uint8, Shape{20}).to_string(2) == "uint8[20]{0, 0, ...}");
}

TEST_CASE("a zero-element tensor", "[core][tensor]") {
  Tensor t(DType::float64, Shape{0, 4});
  CHECK(t.defined());
  CHECK(t.nbytes() == 0);
  CHECK(t.clone() == t);
}

TEST_CASE("external memory is wrapped without a copy and released once", "[core][tensor]") {
  static float storage[4] = {1, 2, 3, 4};
  int released = 0;
  {
    Tensor t = Tensor::from_external(storage, DType::float32, Shape{2, 2}, [&] { ++released; });
    CHECK(t.raw_data() == storage);
    Tensor u = t.slice(1);
    CHECK(u.data<float>()[1] == 4);
    CHECK(t.allocator() == nullptr);
  }
  CHECK(released == 1);
}

TEST_CASE("tensors from a custom allocator return their memory to it", "[core][tensor]") {
  struct Counting final : Allocator {
    void* allocate(std::size_t bytes) override {
      live += bytes;
      return host_allocator().allocate(bytes);
    }
    void deallocate(void* p, std::size_t bytes) noexcept override {
      live -= bytes;
      host_allocator().deallocate(p, bytes);
    }
    std::size_t live = 0;
  } counting;
  {
    Tensor t(DType::uint8, Shape{100}, counting);
    CHECK(counting.live >= 100);
    Tensor copy = t;
  }
  CHECK(counting.live == 0);
}

TEST_CASE("device memory keeps its header apart and refuses host access", "[core][tensor]") {
  struct FakeDevice final : Allocator {
    void* allocate(std::size_t bytes) override { return host_allocator().allocate(bytes); }
    void deallocate(void* p, std::size_t bytes) noexcept override {
      host_allocator().deallocate(p, bytes);
    }
    MemoryKind memory_kind() const noexcept override { return MemoryKind::device; }
  } device;
  Tensor t(DType::float32, Shape{4}, device);
  CHECK(t.memory_kind() == MemoryKind::device);
  CHECK_THROWS_AS(t.clone(), InvalidArgument);
  CHECK(t.to_string() == "float32[4](device)");
}

TEST_CASE("impossible shapes are refused before allocating (issue 10 item 1)", "[core][tensor]") {
  constexpr std::int64_t p62 = std::int64_t{1} << 62, p32 = std::int64_t{1} << 32;
  // Was: 4611686018427387904 elements over 0 bytes of storage.
  CHECK_THROWS_WITH(Tensor(DType::float32, Shape{p62}), Catch::Contains("[4611686018427387904]"));
  CHECK_THROWS_AS(Tensor(DType::float32, Shape{p32, p32}), InvalidArgument);
  CHECK_THROWS_AS(Tensor(DType::float64, Shape{std::int64_t{1} << 38}), InvalidArgument);
  CHECK_THROWS_AS(Tensor::zeros(DType::uint8, Shape{p62, p62, 0}), InvalidArgument);
  CHECK(Tensor(DType::float32, Shape{0, 5}).nbytes() == 0);
  int dummy = 0;
  CHECK_THROWS_AS(Tensor::from_external(&dummy, DType::int32, Shape{p62}, [] {}), InvalidArgument);
  const Tensor t = Tensor::zeros(DType::int32, Shape{4});
  CHECK_THROWS_AS(t.reshape(Shape{p32, p32}), InvalidArgument);
  CHECK_THROWS_AS(t.reshape(Shape{p32 * 4, p32 * 4, 0}), InvalidArgument);
}
