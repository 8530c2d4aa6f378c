#include <catch2/catch.hpp>

#include <cstdint>

#include <ingest/core/dtype.hpp>

using namespace ingest;

TEST_CASE("dtypes map to C++ types, sizes and names", "[core][dtype]") {
  STATIC_REQUIRE(dtype_of_v<float> == DType::float32);
  STATIC_REQUIRE(dtype_of_v<double> == DType::float64);
  STATIC_REQUIRE(dtype_of_v<std::int64_t> == DType::int64);
  STATIC_REQUIRE(dtype_of_v<long long> == DType::int64);
  STATIC_REQUIRE(dtype_of_v<unsigned long long> == DType::uint64);
  STATIC_REQUIRE(dtype_of_v<std::uint8_t> == DType::uint8);
  STATIC_REQUIRE(dtype_of_v<bool> == DType::boolean);
  STATIC_REQUIRE(dtype_of_v<const std::int32_t> == DType::int32);
  STATIC_REQUIRE(dtype_of_v<float16_t> == DType::float16);
  STATIC_REQUIRE(!TensorElement<std::string>);
  STATIC_REQUIRE(!TensorElement<int*>);

  CHECK(dtype_size(DType::boolean) == 1);
  CHECK(dtype_size(DType::bfloat16) == 2);
  CHECK(dtype_size(DType::int32) == 4);
  CHECK(dtype_size(DType::float64) == 8);
  CHECK(dtype_name(DType::float32) == "float32");
  CHECK(dtype_name(DType::uint16) == "uint16");
}
