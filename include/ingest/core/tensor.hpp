// ingest::Tensor: a dtype, a shape and contiguous row-major storage with shared
// ownership. tf.data counterpart: tensorflow::Tensor. Copies share storage
// (like tf and torch tensors); clone() copies the bytes. Storage comes from an
// Allocator (the pooled host allocator by default, pinned memory for the
// device loader). A Tensor is not synchronised: share it between threads only
// for reading.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "ingest/core/allocator.hpp"
#include "ingest/core/dtype.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/shape.hpp"

namespace ingest {

/// A dtype, a shape and contiguous row-major storage with shared ownership
/// (tf: tensorflow::Tensor). Copies share storage; clone() copies the bytes.
/// Not synchronised: share a Tensor between threads only for reading.
class Tensor {
 public:
  /// An undefined tensor: no storage, float32, shape [0].
  Tensor() noexcept : shape_(Shape::empty_vector()), dtype_(DType::float32) {}

  /// A tensor with uninitialised contents. Throws InvalidArgument for a shape
  /// that is not concrete or larger than max_tensor_bytes.
  Tensor(DType dtype, Shape shape, Allocator& allocator = default_allocator())
      : shape_(shape), dtype_(dtype) {
    check_concrete(shape_);
    block_ = detail::allocate_block(allocator,
                                    detail::checked_byte_size(shape_, element_size(), "Tensor"));
  }

  /// A tensor of zeros (host-accessible allocators only).
  static Tensor zeros(DType dtype, Shape shape, Allocator& allocator = default_allocator()) {
    Tensor t(dtype, shape, allocator);
    t.require_host("zeros");
    std::memset(t.raw_data(), 0, t.nbytes());
    return t;
  }

  /// A rank-0 tensor holding `value`.
  template <TensorElement T>
  static Tensor scalar(T value, Allocator& allocator = default_allocator()) {
    Tensor t(dtype_of_v<T>, Shape{}, allocator);
    *t.data<T>() = value;
    return t;
  }

  /// A tensor holding a copy of `values`, shaped `shape` (default: [values.size()]).
  template <TensorElement T>
  static Tensor from_values(std::span<const T> values, std::optional<Shape> shape = std::nullopt,
                            Allocator& allocator = default_allocator()) {
    Shape s = shape ? *shape : Shape{static_cast<std::int64_t>(values.size())};
    if (s.num_elements() != static_cast<std::int64_t>(values.size()) || !s.is_concrete()) {
      throw InvalidArgument("Tensor::from_values: " + std::to_string(values.size()) +
                            " values do not fill shape " + s.to_string());
    }
    Tensor t(dtype_of_v<T>, s, allocator);
    if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size_bytes());
    return t;
  }
  /// A tensor holding a copy of `values`, shaped `shape` (default:
  /// [values.size()]); InvalidArgument if the values do not fill the shape.
  template <TensorElement T>
  static Tensor from_values(std::initializer_list<T> values,
                            std::optional<Shape> shape = std::nullopt) {
    return from_values(std::span<const T>(values.begin(), values.size()), shape);
  }

  /// Wraps memory the caller owns, without copying; `release` runs when the
  /// last tensor sharing it is destroyed.
  static Tensor from_external(void* data, DType dtype, Shape shape, std::function<void()> release,
                              MemoryKind kind = MemoryKind::host) {
    check_concrete(shape);
    const std::size_t bytes =
        detail::checked_byte_size(shape, dtype_size(dtype), "Tensor::from_external");
    auto* b = new detail::ExternalBlock();
    b->data = static_cast<std::byte*>(data);
    b->capacity = bytes;
    b->kind = kind;
    b->release = std::move(release);
    Tensor t;
    t.block_ = b;
    t.shape_ = shape;
    t.dtype_ = dtype;
    return t;
  }

  /// A tensor sharing `o`'s storage (no bytes are copied).
  Tensor(const Tensor& o) noexcept
      : block_(o.block_), offset_(o.offset_), shape_(o.shape_), dtype_(o.dtype_) {
    detail::retain(block_);
  }
  /// Takes `o`'s storage; `o` is left undefined.
  Tensor(Tensor&& o) noexcept
      : block_(std::exchange(o.block_, nullptr)),
        offset_(std::exchange(o.offset_, 0)),
        shape_(o.shape_),
        dtype_(o.dtype_) {
    o.shape_ = Shape::empty_vector();
  }
  /// Shares `o`'s storage, releasing this tensor's own.
  Tensor& operator=(const Tensor& o) noexcept {
    if (this != &o) {
      detail::retain(o.block_);
      detail::release(block_);
      block_ = o.block_;
      offset_ = o.offset_;
      shape_ = o.shape_;
      dtype_ = o.dtype_;
    }
    return *this;
  }
  /// Takes `o`'s storage, releasing this tensor's own; `o` is left undefined.
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      detail::release(block_);
      block_ = std::exchange(o.block_, nullptr);
      offset_ = std::exchange(o.offset_, 0);
      shape_ = o.shape_;
      o.shape_ = Shape::empty_vector();
      dtype_ = o.dtype_;
    }
    return *this;
  }
  ~Tensor() { detail::release(block_); }

  /// Whether the tensor has storage (a default-constructed one has none).
  bool defined() const noexcept { return block_ != nullptr; }
  /// The element type.
  DType dtype() const noexcept { return dtype_; }
  /// The dimensions.
  const Shape& shape() const noexcept { return shape_; }
  /// The number of dimensions (0 for a scalar).
  std::size_t rank() const noexcept { return shape_.rank(); }
  /// Dimension `i`; InvalidArgument if `i` is not below rank().
  std::int64_t dim(std::size_t i) const {
    if (i >= shape_.rank()) {
      throw InvalidArgument("Tensor::dim(" + std::to_string(i) + ") of a tensor of shape " +
                            shape_.to_string());
    }
    return shape_[i];
  }
  /// The number of elements: the product of the dimensions.
  std::int64_t num_elements() const noexcept { return shape_.num_elements(); }
  /// The size of one element in bytes.
  std::size_t element_size() const noexcept { return dtype_size(dtype_); }
  /// The size of the elements in bytes.
  std::size_t nbytes() const noexcept {
    return static_cast<std::size_t>(num_elements()) * element_size();
  }
  /// Where the storage lives (host, pinned or device memory).
  MemoryKind memory_kind() const noexcept { return block_ ? block_->kind : MemoryKind::host; }
  /// The allocator of the storage (null for undefined or external tensors).
  Allocator* allocator() const noexcept { return block_ ? block_->allocator : nullptr; }
  /// Number of tensors sharing this storage.
  long use_count() const noexcept {
    return block_ ? static_cast<long>(block_->refs.load(std::memory_order_relaxed)) : 0;
  }
  /// Whether `o` views the same storage (a copy, a slice, a reshape of it).
  bool shares_storage_with(const Tensor& o) const noexcept {
    return block_ != nullptr && block_ == o.block_;
  }

  /// The first byte of the tensor's elements, or null if it is undefined.
  void* raw_data() noexcept { return block_ ? block_->data + offset_ : nullptr; }
  /// The first byte of the tensor's elements, or null if it is undefined.
  const void* raw_data() const noexcept { return block_ ? block_->data + offset_ : nullptr; }

  /// Typed pointer to the first element. Throws InvalidArgument if T is not the dtype.
  template <TensorElement T>
  T* data() {
    check_dtype<T>();
    return static_cast<T*>(raw_data());
  }
  /// Typed pointer to the first element. Throws InvalidArgument if T is not the dtype.
  template <TensorElement T>
  const T* data() const {
    check_dtype<T>();
    return static_cast<const T*>(raw_data());
  }
  /// The elements as a span; InvalidArgument if T is not the dtype.
  template <TensorElement T>
  std::span<T> values() {
    return {data<T>(), static_cast<std::size_t>(num_elements())};
  }
  /// The elements as a span; InvalidArgument if T is not the dtype.
  template <TensorElement T>
  std::span<const T> values() const {
    return {data<T>(), static_cast<std::size_t>(num_elements())};
  }
  /// The single value of a one-element tensor.
  template <TensorElement T>
  T item() const {
    if (num_elements() != 1) {
      throw InvalidArgument("Tensor::item: tensor of shape " + shape_.to_string() +
                            " does not hold exactly one value");
    }
    require_host("item");
    return *data<T>();
  }

  /// Element `i` along the first dimension, as a view sharing this storage.
  Tensor slice(std::int64_t i) const {
    if (rank() == 0 || i < 0 || i >= shape_[0]) {
      throw InvalidArgument("Tensor::slice(" + std::to_string(i) + ") of a tensor of shape " +
                            shape_.to_string());
    }
    Tensor t(*this);
    t.shape_ = shape_.drop_front();
    t.offset_ += static_cast<std::size_t>(i) * t.nbytes();
    return t;
  }
  /// Rows [start, start + length) along the first dimension, as a view.
  Tensor narrow(std::int64_t start, std::int64_t length) const {
    if (rank() == 0 || start < 0 || length < 0 || start + length > shape_[0]) {
      throw InvalidArgument("Tensor::narrow(" + std::to_string(start) + ", " +
                            std::to_string(length) + ") of a tensor of shape " +
                            shape_.to_string());
    }
    Tensor t(*this);
    const std::size_t row = shape_[0] == 0 ? 0 : nbytes() / static_cast<std::size_t>(shape_[0]);
    t.shape_[0] = length;
    t.offset_ += static_cast<std::size_t>(start) * row;
    return t;
  }
  /// The same storage seen with another shape of the same number of elements.
  Tensor reshape(Shape shape) const {
    check_concrete(shape);
    if (detail::checked_num_elements(shape, "Tensor::reshape") != num_elements()) {
      throw InvalidArgument("Tensor::reshape: cannot view shape " + shape_.to_string() + " as " +
                            shape.to_string());
    }
    Tensor t(*this);
    t.shape_ = shape;
    return t;
  }
  /// A copy of the bytes in new storage (host-accessible memory only).
  Tensor clone(Allocator& allocator = default_allocator()) const {
    require_host("clone");
    Tensor t(dtype_, shape_, allocator);
    if (nbytes()) std::memcpy(t.raw_data(), raw_data(), nbytes());
    return t;
  }

  /// Same dtype, shape and bytes (bitwise: NaNs with equal bits compare equal).
  friend bool operator==(const Tensor& a, const Tensor& b) {
    if (a.dtype_ != b.dtype_ || !(a.shape_ == b.shape_)) return false;
    if (a.nbytes() == 0) return true;
    a.require_host("operator==");
    b.require_host("operator==");
    return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
  }

  /// "int64[2, 3]{1, 2, 3, 4, 5, 6}", with at most `max_values` values.
  std::string to_string(std::size_t max_values = 16) const {
    std::string out = std::string(dtype_name(dtype_)) + shape_.to_string();
    if (!defined()) return out + "(undefined)";
    if (memory_kind() == MemoryKind::device) return out + "(device)";
    out += '{';
    const auto n = static_cast<std::size_t>(num_elements());
    for (std::size_t i = 0; i < n && i < max_values; ++i) {
      if (i) out += ", ";
      append_value(out, i);
    }
    if (n > max_values) out += ", ...";
    out += '}';
    return out;
  }
  // A template, so that <iosfwd> is enough here: it instantiates where a
  // stream is used, which has <ostream>.
  /// Writes to_string() to `os`.
  template <class CharT, class Traits>
  friend std::basic_ostream<CharT, Traits>& operator<<(std::basic_ostream<CharT, Traits>& os,
                                                       const Tensor& t) {
    return os << t.to_string();
  }

 private:
  // The checks inline to a compare and a branch; building their messages
  // stays out of line (every batch and typed access passes through them).
  static void check_concrete(const Shape& s) {
    if (!s.is_concrete()) [[unlikely]]
      not_concrete(s);
  }
  [[noreturn, gnu::cold, gnu::noinline]] static void not_concrete(const Shape& s) {
    throw InvalidArgument("a tensor's shape must be concrete, got " + s.to_string());
  }
  template <class T>
  void check_dtype() const {
    if (dtype_of_v<T> != dtype_) [[unlikely]]
      wrong_dtype(dtype_of_v<T>);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void wrong_dtype(DType asked) const {
    throw InvalidArgument("tensor of dtype " + std::string(dtype_name(dtype_)) + " accessed as " +
                          std::string(dtype_name(asked)));
  }
  void require_host(const char* what) const {
    if (memory_kind() == MemoryKind::device) {
      throw InvalidArgument(std::string("Tensor::") + what +
                            " needs host memory, tensor is on the device");
    }
  }
  template <class T>
  T load(std::size_t i) const {
    T v;
    std::memcpy(&v, static_cast<const std::byte*>(raw_data()) + i * sizeof(T), sizeof(T));
    return v;
  }
  // Appends value `i` as an ostream's defaults write it (integers in
  // decimal, floats as %g with 6 digits), without <sstream>.
  void append_value(std::string& out, std::size_t i) const {
    char buf[32];
    int n = 0;
    switch (dtype_) {
      case DType::boolean: out += load<bool>(i) ? "true" : "false"; return;
      case DType::uint8: out += std::to_string(+load<std::uint8_t>(i)); return;
      case DType::int8: out += std::to_string(+load<std::int8_t>(i)); return;
      case DType::uint16: out += std::to_string(load<std::uint16_t>(i)); return;
      case DType::int16: out += std::to_string(load<std::int16_t>(i)); return;
      case DType::uint32: out += std::to_string(load<std::uint32_t>(i)); return;
      case DType::int32: out += std::to_string(load<std::int32_t>(i)); return;
      case DType::uint64: out += std::to_string(load<std::uint64_t>(i)); return;
      case DType::int64: out += std::to_string(load<std::int64_t>(i)); return;
      case DType::float16:
      case DType::bfloat16:
        n = std::snprintf(buf, sizeof buf, "0x%x", unsigned{load<std::uint16_t>(i)});
        break;
      case DType::float32: n = std::snprintf(buf, sizeof buf, "%g", double{load<float>(i)}); break;
      case DType::float64: n = std::snprintf(buf, sizeof buf, "%g", load<double>(i)); break;
    }
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
  }

  detail::Block* block_ = nullptr;
  std::size_t offset_ = 0;  // bytes from block_->data
  Shape shape_;
  DType dtype_;
};

}  // namespace ingest
