// How elements of varying shape pad into one batch (padded_batch). tf.data
// counterpart: PaddedBatchDataset. Tensors pad every dimension, std::vector of
// arithmetic values pads its length, arithmetic scalars stack unpadded, and
// tuples / pairs pad field by field. A field's "component" is its position
// among the leaves of the element (a tuple<Tensor, pair<Tensor, int>> has
// components 0, 1, 2), which is how padded shapes and values are addressed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/allocator.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/options.hpp"
#include "ingest/core/tensor.hpp"

namespace ingest {

/// How a batch of T pads. A specialisation provides `batch_type`,
/// `static constexpr std::size_t components` and
/// `template <class Get> static batch_type build(std::size_t n, Get get,
///   const PaddedBatchOptions&, std::size_t first_component, Allocator&)`
/// where get(i) returns the i-th element by reference.
template <class T>
struct padded_batch_traits;

namespace detail {

inline std::string component_name(std::size_t c) { return "component " + std::to_string(c); }

// Whether `value` converts to T without undefined behaviour or loss: integers
// take finite integral values in their range, floats any value in range (or
// an infinity or NaN), bool anything.
template <class T>
bool representable(double value) {
  if constexpr (std::is_same_v<T, bool>) {
    return true;
  } else if constexpr (std::is_floating_point_v<T>) {
    return !std::isfinite(value) || std::fabs(value) <= std::numeric_limits<T>::max();
  } else {
    // Both bounds as doubles: min is a power of two (exact); max + 1 is too.
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double hi_excl = 2.0 * static_cast<double>(std::numeric_limits<T>::max() / 2 + 1);
    return std::isfinite(value) && std::trunc(value) == value && value >= lo && value < hi_excl;
  }
}

template <class T>
void fill_value(void* dst, std::size_t count, double value, std::size_t component) {
  if (!representable<T>(value)) {
    throw InvalidArgument("padded_batch: " + component_name(component) + ": padding value " +
                          std::to_string(value) + " is not representable as " +
                          std::string(dtype_name(dtype_of_v<T>)));
  }
  T v = static_cast<T>(value);
  T* p = static_cast<T*>(dst);
  std::fill(p, p + count, v);
}

inline void fill_padding(Tensor& t, double value, std::size_t component) {
  void* p = t.raw_data();
  const auto n = static_cast<std::size_t>(t.num_elements());
  switch (t.dtype()) {
    case DType::boolean: fill_value<bool>(p, n, value, component); break;
    case DType::uint8: fill_value<std::uint8_t>(p, n, value, component); break;
    case DType::int8: fill_value<std::int8_t>(p, n, value, component); break;
    case DType::uint16: fill_value<std::uint16_t>(p, n, value, component); break;
    case DType::int16: fill_value<std::int16_t>(p, n, value, component); break;
    case DType::uint32: fill_value<std::uint32_t>(p, n, value, component); break;
    case DType::int32: fill_value<std::int32_t>(p, n, value, component); break;
    case DType::uint64: fill_value<std::uint64_t>(p, n, value, component); break;
    case DType::int64: fill_value<std::int64_t>(p, n, value, component); break;
    case DType::float32: fill_value<float>(p, n, value, component); break;
    case DType::float64: fill_value<double>(p, n, value, component); break;
    case DType::float16:
    case DType::bfloat16:
      if (value != 0.0) {
        throw InvalidArgument("padded_batch: " + component_name(component) +
                              ": only 0 can pad float16/bfloat16 components");
      }
      std::memset(p, 0, t.nbytes());
      break;
  }
}

// Copies `src` (shape s) into the top-left corner of `dst` (shape d, same
// rank, d >= s in every dimension), one contiguous innermost run at a time.
inline void copy_padded(std::byte* dst, const Shape& d, const std::byte* src, const Shape& s,
                        std::size_t elem, std::size_t dim = 0) {
  const std::size_t rank = s.rank();
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  std::size_t dst_stride = elem, src_stride = elem;
  for (std::size_t k = dim + 1; k < rank; ++k) {
    dst_stride *= static_cast<std::size_t>(d[k]);
    src_stride *= static_cast<std::size_t>(s[k]);
  }
  if (dim + 1 == rank) {
    std::memcpy(dst, src, static_cast<std::size_t>(s[dim]) * elem);
    return;
  }
  for (std::int64_t i = 0; i < s[dim]; ++i) {
    copy_padded(dst + static_cast<std::size_t>(i) * dst_stride, d,
                src + static_cast<std::size_t>(i) * src_stride, s, elem, dim + 1);
  }
}

// What pad_views needs to know of one element, whatever holds it.
struct PadView {
  DType dtype;
  Shape shape;
  const void* data;
  MemoryKind kind;
};
inline PadView pad_view(const Tensor& t) {
  return {t.dtype(), t.shape(), t.raw_data(), t.memory_kind()};
}
template <class T, class A>
PadView pad_view(const std::vector<T, A>& v) {
  return {dtype_of_v<T>, Shape{static_cast<std::int64_t>(v.size())}, v.data(), MemoryKind::host};
}

// Pads n elements (get(i) returns a PadView) into one batch tensor.
template <class Get>
Tensor pad_views(std::size_t n, Get&& get, const PaddedBatchOptions& options, std::size_t component,
                 Allocator& allocator) {
  const PadView first = get(0);
  const std::size_t rank = first.shape.rank();
  Shape target = first.shape;
  for (std::size_t i = 0; i < n; ++i) {
    const PadView v = get(i);
    if (v.dtype != first.dtype || v.shape.rank() != rank) {
      throw InvalidArgument("padded_batch: " + component_name(component) +
                            ": elements must have equal dtype and rank; got " +
                            std::string(dtype_name(v.dtype)) + v.shape.to_string() + " after " +
                            std::string(dtype_name(first.dtype)) + first.shape.to_string());
    }
    if (v.kind == MemoryKind::device) {
      throw InvalidArgument("padded_batch: cannot pad a tensor that lives on the device");
    }
    for (std::size_t k = 0; k < rank; ++k) target[k] = std::max(target[k], v.shape[k]);
  }
  const bool has_shape = component < options.padded_shapes.size();
  if (has_shape && options.padded_shapes[component].rank() != rank) {
    const Shape& want = options.padded_shapes[component];
    throw InvalidArgument("padded_batch: " + component_name(component) + ": padded shape " +
                          want.to_string() + " has rank " + std::to_string(want.rank()) +
                          " but the elements have rank " + std::to_string(rank));
  }
  if (has_shape || options.pad_unknown_dims_to) {
    for (std::size_t k = 0; k < rank; ++k) {
      const std::int64_t given = has_shape ? options.padded_shapes[component][k] : -1;
      const std::int64_t want = given >= 0 ? given : options.pad_unknown_dims_to.value_or(-1);
      if (want < 0) continue;
      if (want < target[k]) {
        // tf.data: DataLoss, "attempted to pad to a smaller size than the input element".
        std::size_t i = 0;
        while (i + 1 < n && get(i).shape[k] <= want) ++i;
        throw DataLossError(
            "padded_batch: " + component_name(component) + ": element " + std::to_string(i) +
            " of the batch has size " + std::to_string(get(i).shape[k]) + " in dimension " +
            std::to_string(k) + ", larger than " +
            (given >= 0 ? "the padded shape " + options.padded_shapes[component].to_string()
                        : "the size " + std::to_string(want) + " it pads to") +
            " (padding cannot shrink an element)");
      }
      target[k] = want;
    }
  }
  const double pad =
      component < options.padding_values.size() ? options.padding_values[component] : 0.0;
  const std::size_t elem = dtype_size(first.dtype);
  // Checked before allocating: a padded shape can ask for any size.
  const Shape batch_shape = target.prepend(static_cast<std::int64_t>(n));
  detail::checked_byte_size(batch_shape, elem,
                            "padded_batch: " + component_name(component) + ": padded batch");
  Tensor batch(first.dtype, batch_shape, allocator);
  fill_padding(batch, pad, component);
  const std::size_t slot_bytes = static_cast<std::size_t>(target.num_elements()) * elem;
  auto* base = static_cast<std::byte*>(batch.raw_data());
  for (std::size_t i = 0; i < n; ++i) {
    const PadView v = get(i);
    if (v.shape.num_elements() == 0) continue;
    copy_padded(base + i * slot_bytes, target, static_cast<const std::byte*>(v.data), v.shape,
                elem);
  }
  return batch;
}

// As tf.data: a padded shape must have the element's rank, here 0.
// (Out of line: inlined into the traits, GCC 12 warns of a bogus array bound.)
[[gnu::noinline]] inline void check_scalar_padded_shape(const PaddedBatchOptions& options,
                                                        std::size_t component) {
  if (component >= options.padded_shapes.size()) return;
  const Shape& want = options.padded_shapes[component];
  if (want.rank() != 0) {
    throw InvalidArgument("padded_batch: " + component_name(component) + ": padded shape " +
                          want.to_string() + " has rank " + std::to_string(want.rank()) +
                          " but the elements are scalars (rank 0)");
  }
}

/// What padded_batch checks when it is built: no more padded shapes and
/// padding values than the element has components, and no padded shape that
/// could not fit max_tensor_bytes even at one byte per value (so an
/// impossible size fails here, with the argument named, not at allocation).
inline void check_padded_batch_options(std::int64_t batch_size, const PaddedBatchOptions& options,
                                       std::size_t components,
                                       const std::string& stage = "padded_batch") {
  const ErrorContext where{.stage = stage};
  if (options.pad_unknown_dims_to && *options.pad_unknown_dims_to < 0) {
    throw InvalidArgument(stage + ": pad_unknown_dims_to must be >= 0; got " +
                              std::to_string(*options.pad_unknown_dims_to),
                          where);
  }
  if (options.padded_shapes.size() > components || options.padding_values.size() > components) {
    throw InvalidArgument(stage + ": " + std::to_string(options.padded_shapes.size()) +
                              " padded shapes and " +
                              std::to_string(options.padding_values.size()) +
                              " padding values given for an element of " +
                              std::to_string(components) + " component(s)",
                          where);
  }
  for (std::size_t c = 0; c < options.padded_shapes.size(); ++c) {
    const Shape& want = options.padded_shapes[c];
    std::uint64_t n = static_cast<std::uint64_t>(batch_size);
    for (std::int64_t d : want) {
      if (d > 0 && !bounded_mul(n, static_cast<std::uint64_t>(d), n)) {
        throw InvalidArgument(stage + ": padded_shapes[" + std::to_string(c) + "] " +
                                  want.to_string() + " with batch_size " +
                                  std::to_string(batch_size) + " exceeds " + tib_limit(),
                              where);
      }
    }
  }
}

/// Elements padded through pad_view (Tensors, vectors): one padded Tensor.
struct padded_views_traits {
  using batch_type = Tensor;
  static constexpr std::size_t components = 1;
  template <class Get>
  static Tensor build(std::size_t n, Get get, const PaddedBatchOptions& options,
                      std::size_t component, Allocator& allocator) {
    return detail::pad_views(
        n, [&get](std::size_t i) { return detail::pad_view(get(i)); }, options, component,
        allocator);
  }
};

}  // namespace detail

/// Tensors pad every dimension to the longest in the batch, or to the
/// component's padded shape, filled with its padding value.
template <>
struct padded_batch_traits<Tensor> : detail::padded_views_traits {};

/// Arithmetic scalars stack unpadded into a rank-1 tensor.
template <TensorElement T>
struct padded_batch_traits<T> {
  /// The batch: a rank-1 Tensor.
  using batch_type = Tensor;
  /// One component (one entry of padded_shapes and padding_values).
  static constexpr std::size_t components = 1;
  /// The `n` scalars get(0) .. get(n - 1) as a Tensor from `allocator`;
  /// InvalidArgument if the component's padded shape is not a scalar's.
  template <class Get>
  static Tensor build(std::size_t n, Get get, const PaddedBatchOptions& options,
                      std::size_t component, Allocator& allocator) {
    detail::check_scalar_padded_shape(options, component);
    Tensor t(dtype_of_v<T>, Shape{static_cast<std::int64_t>(n)}, allocator);
    T* p = t.data<T>();
    for (std::size_t i = 0; i < n; ++i) p[i] = get(i);
    return t;
  }
};

/// Vectors of arithmetic values pad to the longest (or the padded shape's) length.
template <TensorElement T, class A>
struct padded_batch_traits<std::vector<T, A>> : detail::padded_views_traits {};

namespace detail {
template <class... Ts>
constexpr std::size_t component_offset(std::size_t index) {
  constexpr std::size_t counts[] = {padded_batch_traits<Ts>::components...};
  std::size_t offset = 0;
  for (std::size_t i = 0; i < index; ++i) offset += counts[i];
  return offset;
}
}  // namespace detail

/// Tuples pad field by field into a tuple of batches.
template <class... Ts>
struct padded_batch_traits<std::tuple<Ts...>> {
  /// The batch: a tuple of each field's batch.
  using batch_type = std::tuple<typename padded_batch_traits<Ts>::batch_type...>;
  /// The components of all the fields, in order.
  static constexpr std::size_t components = (padded_batch_traits<Ts>::components + ... + 0);
  /// Pads each field of the `n` elements, its components numbered from `first`.
  template <class Get>
  static batch_type build(std::size_t n, Get get, const PaddedBatchOptions& options,
                          std::size_t first, Allocator& allocator) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return batch_type(padded_batch_traits<Ts>::build(
          n, [&get](std::size_t i) -> auto& { return std::get<I>(get(i)); }, options,
          first + detail::component_offset<Ts...>(I), allocator)...);
    }
    (std::index_sequence_for<Ts...>{});
  }
};

/// Pairs pad field by field into a pair of batches.
template <class A, class B>
struct padded_batch_traits<std::pair<A, B>> {
  /// The batch: a pair of the two fields' batches.
  using batch_type = std::pair<typename padded_batch_traits<A>::batch_type,
                               typename padded_batch_traits<B>::batch_type>;
  /// The components of both fields, first's then second's.
  static constexpr std::size_t components =
      padded_batch_traits<A>::components + padded_batch_traits<B>::components;
  /// Pads each field of the `n` elements, its components numbered from `first`.
  template <class Get>
  static batch_type build(std::size_t n, Get get, const PaddedBatchOptions& options,
                          std::size_t first, Allocator& allocator) {
    auto a = padded_batch_traits<A>::build(
        n, [&get](std::size_t i) -> auto& { return get(i).first; }, options, first, allocator);
    auto b = padded_batch_traits<B>::build(
        n, [&get](std::size_t i) -> auto& { return get(i).second; }, options,
        first + padded_batch_traits<A>::components, allocator);
    return batch_type(std::move(a), std::move(b));
  }
};

}  // namespace ingest
