// Tensor shapes: up to Shape::max_rank dimensions stored inline, so creating,
// copying and comparing a shape never allocates. tf.data counterpart:
// TensorShape. A dimension of -1 means "unknown" where a shape is a pattern
// (padded_batch's padded shapes); a Tensor's own shape is always concrete.
// Every product of dimensions and every byte size that ingest allocates by
// goes through the checked helpers at the bottom (detail::checked_*), bounded
// by max_tensor_bytes, so no shape can overflow or over-allocate.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"

namespace ingest {

/// The largest tensor (and batch, and element count) ingest creates: 1 TiB.
/// Bigger sizes are mistakes (a batch size or padded shape off by orders of
/// magnitude) or corrupt input, and are refused with InvalidArgument before
/// anything is allocated.
inline constexpr std::uint64_t max_tensor_bytes = std::uint64_t{1} << 40;

/// A tensor's dimensions: up to max_rank of them, stored inline (no
/// allocation). A dimension of -1 is unknown (a pattern, such as a padded
/// shape); a Tensor's shape is always concrete.
class Shape {
 public:
  /// The most dimensions a shape holds.
  static constexpr std::size_t max_rank = 8;

  constexpr Shape() = default;
  /// A shape of the dimensions `dims`; InvalidArgument for more than max_rank
  /// of them or a dimension below -1.
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.size()); }
  /// A shape of the dimensions `dims`; InvalidArgument for more than max_rank
  /// of them or a dimension below -1.
  explicit Shape(std::span<const std::int64_t> dims) { assign(dims.data(), dims.size()); }

  /// The number of dimensions (0 for a scalar).
  constexpr std::size_t rank() const noexcept { return rank_; }
  /// Dimension `i` (unchecked: `i` must be below rank()).
  constexpr std::int64_t operator[](std::size_t i) const noexcept { return dims_[i]; }
  /// Dimension `i`, writable (unchecked: `i` must be below rank()).
  constexpr std::int64_t& operator[](std::size_t i) noexcept { return dims_[i]; }
  /// The first dimension, for a range-for over the dimensions.
  constexpr const std::int64_t* begin() const noexcept { return dims_.data(); }
  /// One past the last dimension.
  constexpr const std::int64_t* end() const noexcept { return dims_.data() + rank_; }
  /// The dimensions as a span.
  std::span<const std::int64_t> dims() const noexcept { return {dims_.data(), rank_}; }

  /// Product of the dimensions (1 for a scalar). Unknown (-1) dims count as 0.
  /// Saturates at INT64_MAX rather than overflowing (only a pattern can get
  /// there: a Tensor's shape is bounded by max_tensor_bytes); code that sizes
  /// memory uses detail::checked_num_elements instead.
  constexpr std::int64_t num_elements() const noexcept {
    std::int64_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) {
      if (dims_[i] <= 0) return 0;
      if (__builtin_mul_overflow(n, dims_[i], &n)) n = INT64_MAX;
    }
    return n;
  }
  /// True if no dimension is unknown (-1).
  constexpr bool is_concrete() const noexcept {
    return std::all_of(begin(), end(), [](std::int64_t d) { return d >= 0; });
  }

  /// This shape with `leading` prepended: the shape of a batch of these.
  Shape prepend(std::int64_t leading) const {
    if (rank_ == max_rank) {
      throw InvalidArgument("shape " + to_string() + " has the maximum rank " +
                            std::to_string(max_rank) + " and cannot gain a batch dimension");
    }
    Shape s;
    s.rank_ = rank_ + 1;
    s.dims_[0] = leading;
    std::copy(begin(), end(), s.dims_.begin() + 1);
    return s;
  }
  /// This shape without its first dimension: the shape of one element of a batch.
  Shape drop_front() const noexcept {
    Shape s;
    if (rank_ == 0) return s;
    s.rank_ = rank_ - 1;
    std::copy(begin() + 1, end(), s.dims_.begin());
    return s;
  }

  /// "[2, 3]": the dimensions in brackets ("[]" for a scalar).
  std::string to_string() const {
    std::string s = "[";
    for (std::size_t i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[i]);
    }
    return s + "]";
  }

  /// Same rank and dimensions.
  friend constexpr bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  friend class Tensor;
  // [0]: a moved-from Tensor's shape, built without a call (a Tensor moves on
  // every hand-off, and assign() would write the shape through the stack).
  static constexpr Shape empty_vector() noexcept {
    Shape s;
    s.rank_ = 1;
    return s;
  }

  void assign(const std::int64_t* dims, std::size_t n) {
    if (n > max_rank) {
      throw InvalidArgument("shape of rank " + std::to_string(n) + " exceeds the maximum rank " +
                            std::to_string(max_rank));
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (dims[i] < -1) {
        throw InvalidArgument("shape dimension " + std::to_string(i) + " is " +
                              std::to_string(dims[i]) + "; dimensions are >= 0, or -1 for unknown");
      }
      dims_[i] = dims[i];
    }
    rank_ = static_cast<std::uint8_t>(n);
  }

  std::array<std::int64_t, max_rank> dims_{};
  std::uint8_t rank_ = 0;
};

namespace detail {

inline std::string tib_limit() { return "the limit of 1 TiB (max_tensor_bytes)"; }

/// a * b if neither overflows nor exceeds `limit`; otherwise false.
constexpr bool bounded_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out,
                           std::uint64_t limit = max_tensor_bytes) noexcept {
  return !__builtin_mul_overflow(a, b, &out) && out <= limit;
}

/// The number of elements of concrete `shape`, checked: throws InvalidArgument
/// naming `what` and the shape if a dimension is unknown or negative, or if
/// the product of the non-zero dimensions exceeds max_tensor_bytes (an element
/// has at least one byte). Zero dimensions do not excuse huge others: a
/// [2^62, 2^62, 0] shape is refused, so loops over any one dimension stay bounded.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_unchecked_shape(const Shape& shape,
                                                                         std::string_view what) {
  for (std::int64_t d : shape) {
    if (d < 0) {
      throw InvalidArgument(std::string(what) + ": shape " + shape.to_string() +
                            " has an unknown or negative dimension");
    }
  }
  throw InvalidArgument(std::string(what) + ": shape " + shape.to_string() +
                        " has more elements than " + tib_limit() + " allows");
}
inline std::int64_t checked_num_elements(const Shape& shape, std::string_view what = "tensor") {
  std::uint64_t n = 1;
  bool zero = false;
  for (std::int64_t d : shape) {
    if (d < 0) [[unlikely]]
      throw_unchecked_shape(shape, what);
    if (d == 0) {
      zero = true;
    } else if (!bounded_mul(n, static_cast<std::uint64_t>(d), n)) [[unlikely]] {
      throw_unchecked_shape(shape, what);
    }
  }
  return zero ? 0 : static_cast<std::int64_t>(n);
}

/// `count` items of `item_bytes` bytes each, checked against max_tensor_bytes:
/// throws InvalidArgument "<what>: <count> x <item_bytes> bytes exceeds ...".
inline std::size_t checked_bytes(std::uint64_t count, std::uint64_t item_bytes,
                                 std::string_view what) {
  std::uint64_t n = 0;
  if (!bounded_mul(count, item_bytes, n)) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(count) + " x " +
                          std::to_string(item_bytes) + " bytes exceeds " + tib_limit());
  }
  return static_cast<std::size_t>(n);
}

/// The byte size of a tensor of concrete `shape` with `element_size`-byte
/// elements, checked as checked_num_elements, then against max_tensor_bytes.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_too_many_bytes(const Shape& shape,
                                                                        std::size_t element_size,
                                                                        std::string_view what) {
  throw InvalidArgument(std::string(what) + ": shape " + shape.to_string() + " of " +
                        std::to_string(element_size) + "-byte elements exceeds " + tib_limit());
}
inline std::size_t checked_byte_size(const Shape& shape, std::size_t element_size,
                                     std::string_view what = "tensor") {
  const auto n = static_cast<std::uint64_t>(checked_num_elements(shape, what));
  std::uint64_t bytes = 0;
  if (!bounded_mul(n, element_size, bytes)) [[unlikely]]
    throw_too_many_bytes(shape, element_size, what);
  return static_cast<std::size_t>(bytes);
}

}  // namespace detail
}  // namespace ingest
