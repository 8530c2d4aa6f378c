// Tensor shapes: up to Shape::max_rank dimensions stored inline, so creating,
// copying and comparing a shape never allocates. tf.data counterpart:
// TensorShape. A dimension of -1 means "unknown" where a shape is a pattern
// (padded_batch's padded shapes); a Tensor's own shape is always concrete.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "ingest/core/errors.hpp"

namespace ingest {

class Shape {
 public:
  static constexpr std::size_t max_rank = 8;

  constexpr Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Shape(std::span<const std::int64_t> dims) { assign(dims.data(), dims.size()); }

  constexpr std::size_t rank() const noexcept { return rank_; }
  constexpr std::int64_t operator[](std::size_t i) const noexcept { return dims_[i]; }
  constexpr std::int64_t& operator[](std::size_t i) noexcept { return dims_[i]; }
  constexpr const std::int64_t* begin() const noexcept { return dims_.data(); }
  constexpr const std::int64_t* end() const noexcept { return dims_.data() + rank_; }
  std::span<const std::int64_t> dims() const noexcept { return {dims_.data(), rank_}; }

  /// Product of the dimensions (1 for a scalar). Unknown (-1) dims count as 0.
  constexpr std::int64_t num_elements() const noexcept {
    std::int64_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i] < 0 ? 0 : dims_[i];
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

  std::string to_string() const {
    std::string s = "[";
    for (std::size_t i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[i]);
    }
    return s + "]";
  }

  friend constexpr bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
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

}  // namespace ingest
