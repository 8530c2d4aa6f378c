// Element types of ingest::Tensor and their mapping to C++ types.
// tf.data counterpart: tf.DType. float16 and bfloat16 are storage-only types
// (ingest does no arithmetic on them); they exist so that batches can carry
// them to an accelerator and through DLPack.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace ingest {

/// IEEE half precision, storage only.
struct float16_t {
  std::uint16_t bits;  ///< the IEEE binary16 bit pattern
  /// Bitwise equality.
  friend bool operator==(float16_t, float16_t) = default;
};
/// bfloat16, storage only.
struct bfloat16_t {
  std::uint16_t bits;  ///< the upper 16 bits of a float32
  /// Bitwise equality.
  friend bool operator==(bfloat16_t, bfloat16_t) = default;
};

/// `f` rounded to the nearest float16, ties to even (IEEE's default, as
/// numpy's astype and torch's .half()): too large gives infinity, NaN stays a
/// (quiet) NaN. Branch-free, so that loops of it vectorise.
constexpr float16_t to_float16(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  // Normal results: rebias the exponent (127 -> 15), add half of the 13
  // dropped bits' unit, less one unless the kept part is odd (ties to even);
  // a carry into the exponent is the right result, up to infinity.
  const std::uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal results: adding 0.5 lines the 10 kept bits up with the bottom
  // of the float's mantissa, and the float addition rounds them to even.
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + 0.5f) -
                                  std::bit_cast<std::uint32_t>(0.5f);
  const std::uint32_t special = 0x7c00u | static_cast<std::uint32_t>(a > 0x7f800000u) << 9;
  // Selected with masks, not branches: GCC does not if-convert the float
  // addition above (it could trap), and a branch stops vectorisation.
  const std::uint32_t is_subnormal = 0u - static_cast<std::uint32_t>(a < (113u << 23));
  const std::uint32_t is_special = 0u - static_cast<std::uint32_t>(a >= (143u << 23));
  std::uint32_t r = (normal & ~is_subnormal) | (subnormal & is_subnormal);
  r = (r & ~is_special) | (special & is_special);
  return {static_cast<std::uint16_t>(r | sign)};
}

/// `f` rounded to the nearest bfloat16, ties to even (as torch's
/// .bfloat16()); NaN stays a (quiet) NaN.
constexpr bfloat16_t to_bfloat16(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t nan = 0u - static_cast<std::uint32_t>((u & 0x7fffffffu) > 0x7f800000u);
  return {static_cast<std::uint16_t>((rounded & ~nan) | (((u >> 16) | 0x40u) & nan))};
}

/// The float a float16 holds (exactly).
constexpr float to_float(float16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (h.bits >> 10) & 0x1fu, mantissa = h.bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24
    const float v = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | sign);
  }
  const std::uint32_t e = exponent == 31 ? 255u : exponent + 112u;
  return std::bit_cast<float>(sign | e << 23 | mantissa << 13);
}

/// The float a bfloat16 holds (exactly).
constexpr float to_float(bfloat16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b.bits) << 16);
}

/// The element type of a Tensor (tf: tf.DType). The values are stable: they
/// are stored in cache files and checkpoints.
enum class DType : std::uint8_t {
  boolean,   ///< bool, one byte (0 or 1)
  uint8,     ///< std::uint8_t
  int8,      ///< std::int8_t
  uint16,    ///< std::uint16_t
  int16,     ///< std::int16_t
  uint32,    ///< std::uint32_t
  int32,     ///< std::int32_t
  uint64,    ///< std::uint64_t
  int64,     ///< std::int64_t
  float16,   ///< float16_t (IEEE half precision, storage only)
  bfloat16,  ///< bfloat16_t (storage only)
  float32,   ///< float
  float64,   ///< double
};

/// Bytes per element.
constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::boolean:
    case DType::uint8:
    case DType::int8: return 1;
    case DType::uint16:
    case DType::int16:
    case DType::float16:
    case DType::bfloat16: return 2;
    case DType::uint32:
    case DType::int32:
    case DType::float32: return 4;
    case DType::uint64:
    case DType::int64:
    case DType::float64: return 8;
  }
  return 0;
}

/// The dtype's name: its enumerator's ("int64", "float32", ...), "bool" for boolean.
constexpr std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::boolean: return "bool";
    case DType::uint8: return "uint8";
    case DType::int8: return "int8";
    case DType::uint16: return "uint16";
    case DType::int16: return "int16";
    case DType::uint32: return "uint32";
    case DType::int32: return "int32";
    case DType::uint64: return "uint64";
    case DType::int64: return "int64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::float32: return "float32";
    case DType::float64: return "float64";
  }
  return "unknown";
}

namespace detail {
template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::boolean;
};
template <>
struct dtype_of<std::uint8_t> {
  static constexpr DType value = DType::uint8;
};
template <>
struct dtype_of<std::int8_t> {
  static constexpr DType value = DType::int8;
};
template <>
struct dtype_of<std::uint16_t> {
  static constexpr DType value = DType::uint16;
};
template <>
struct dtype_of<std::int16_t> {
  static constexpr DType value = DType::int16;
};
template <>
struct dtype_of<std::uint32_t> {
  static constexpr DType value = DType::uint32;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr DType value = DType::int32;
};
template <>
struct dtype_of<std::uint64_t> {
  static constexpr DType value = DType::uint64;
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr DType value = DType::int64;
};
template <>
struct dtype_of<float16_t> {
  static constexpr DType value = DType::float16;
};
template <>
struct dtype_of<bfloat16_t> {
  static constexpr DType value = DType::bfloat16;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::float64;
};
// char is distinct from int8_t/uint8_t; treat it as bytes.
template <>
struct dtype_of<char> {
  static constexpr DType value = DType::int8;
};
// long long vs long: whichever of them is not int64_t maps by size.
template <class T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
         !std::is_same_v<T, std::int64_t> && !std::is_same_v<T, std::uint64_t> &&
         sizeof(T) == 8) struct dtype_of<T> {
  static constexpr DType value = std::is_signed_v<T> ? DType::int64 : DType::uint64;
};
}  // namespace detail

/// A C++ type that a Tensor can hold.
template <class T>
concept TensorElement = requires {
  detail::dtype_of<std::remove_cv_t<T>>::value;
};

/// The DType of a C++ element type.
template <TensorElement T>
inline constexpr DType dtype_of_v = detail::dtype_of<std::remove_cv_t<T>>::value;

}  // namespace ingest
