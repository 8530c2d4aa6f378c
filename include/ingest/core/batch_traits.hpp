// How elements stack into batches (batch, map-and-batch) and split again
// (unbatch). tf.data counterpart: batch_util::CopyElementToSlice. Arithmetic
// scalars and Tensors stack into one contiguous Tensor with a leading batch
// dimension; std::tuple / std::pair stack field by field; anything else
// becomes std::vector<T>. Specialise batch_traits (and unbatch_traits) for
// your own element types.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "ingest/core/allocator.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/tensor.hpp"

namespace ingest {

/// What a batch builder is asked to build.
struct BatchSpec {
  std::size_t capacity;  ///< number of slots (the batch size)
  Allocator* allocator;  ///< where batch buffers come from (host-accessible)
};

namespace detail {
/// A full batch of `capacity` elements of `element_bytes` each must fit
/// max_tensor_bytes: an impossible batch_size is InvalidArgument (the stage
/// adds its name), raised when the first element shows its size, before
/// anything is allocated by the batch size.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_batch_bytes(std::size_t capacity,
                                                                     std::size_t element_bytes) {
  throw InvalidArgument("batch_size " + std::to_string(capacity) + " x " +
                        std::to_string(element_bytes) + "-byte elements exceeds " + tib_limit());
}
inline void check_batch_bytes(std::size_t capacity, std::size_t element_bytes) {
  std::uint64_t bytes = 0;
  if (!bounded_mul(capacity, element_bytes, bytes)) [[unlikely]]
    throw_batch_bytes(capacity, element_bytes);
}
}  // namespace detail

/// How elements of type T stack into a batch. The primary template collects
/// them into a std::vector<T>. A specialisation provides:
///
///     using batch_type = ...;
///     class builder {
///      public:
///       explicit builder(const BatchSpec& spec);
///       void set(std::size_t slot, T&& value);  // distinct slots may be set concurrently
///       batch_type finish(std::size_t count) &&;  // slots [0, count) have been set
///     };
///
/// set() throws InvalidArgument when a value cannot join the batch (e.g. a
/// shape differing from the other elements').
template <class T>
struct batch_traits {
  /// The batch: a std::vector of the elements, in slot order.
  using batch_type = std::vector<T>;
  /// Collects the elements of one batch into their slots.
  class builder {
   public:
    /// Prepares `spec.capacity` empty slots.
    explicit builder(const BatchSpec& spec) : slots_(spec.capacity) {}
    /// Moves `value` into `slot`; distinct slots may be set concurrently.
    void set(std::size_t slot, T&& value) { slots_[slot].emplace(std::move(value)); }
    /// The batch of slots [0, `count`), all of which have been set.
    batch_type finish(std::size_t count) && {
      batch_type out;
      out.reserve(count);
      for (std::size_t i = 0; i < count; ++i) out.push_back(std::move(*slots_[i]));
      return out;
    }

   private:
    std::vector<std::optional<T>> slots_;
  };
};

/// Arithmetic scalars stack into a rank-1 Tensor.
template <TensorElement T>
struct batch_traits<T> {
  /// The batch: a rank-1 Tensor of the scalars' dtype.
  using batch_type = Tensor;
  /// Writes the scalars straight into one Tensor from the batch allocator.
  class builder {
   public:
    /// Allocates the `spec.capacity`-element Tensor; InvalidArgument if it would
    /// exceed max_tensor_bytes.
    explicit builder(const BatchSpec& spec)
        : tensor_((detail::check_batch_bytes(spec.capacity, sizeof(T)), dtype_of_v<T>),
                  Shape{static_cast<std::int64_t>(spec.capacity)}, *spec.allocator),
          data_(tensor_.data<T>()),
          capacity_(spec.capacity) {}
    /// Writes `value` into `slot`; distinct slots may be set concurrently.
    void set(std::size_t slot, T value) noexcept { data_[slot] = value; }
    /// The batch buffer itself, for stages that fill it in bulk.
    std::span<T> slots() noexcept { return {data_, capacity_}; }
    /// The batch of slots [0, `count`): the whole Tensor, or a view of its first
    /// `count` rows (a short last batch).
    Tensor finish(std::size_t count) && {
      if (count == capacity_) return std::move(tensor_);
      return tensor_.narrow(0, static_cast<std::int64_t>(count));
    }

   private:
    Tensor tensor_;
    T* data_;
    std::size_t capacity_;
  };
};

/// Tensors of equal dtype and shape stack into a Tensor with a leading batch dimension.
template <>
struct batch_traits<Tensor> {
  /// The batch: one Tensor with a leading dimension of the batch size.
  using batch_type = Tensor;
  /// Copies each element's bytes into one Tensor, allocated when the first
  /// element fixes the dtype and shape.
  class builder {
   public:
    /// Remembers `spec`; nothing is allocated before the first element.
    explicit builder(const BatchSpec& spec) : spec_(spec) {}
    builder(const builder&) = delete;
    builder& operator=(const builder&) = delete;

    /// Copies `value` into `slot` (thread-safe for distinct slots). Throws
    /// InvalidArgument if its dtype or shape differs from the first element's, or
    /// if it lives on the device.
    void set(std::size_t slot, Tensor&& value) {
      std::byte* to = prepare(slot, value.dtype(), value.shape(), value.nbytes());
      if (!value.defined()) return;
      if (value.memory_kind() == MemoryKind::device) {
        throw InvalidArgument("batch: cannot stack a tensor that lives on the device");
      }
      if (element_bytes_ != 0) std::memcpy(to, value.raw_data(), element_bytes_);
    }

    /// The bytes of `slot`, for an element of `dtype` and `shape` that is
    /// written there in place (a type whose builder computes its element
    /// into the batch, such as image::PendingNormalize's): the first element
    /// fixes the batch's dtype and shape, as set() does, and another dtype or
    /// shape throws set()'s InvalidArgument. Thread-safe for distinct slots.
    std::byte* slot_bytes(std::size_t slot, DType dtype, const Shape& shape) {
      return prepare(slot, dtype, shape,
                     detail::checked_byte_size(shape, dtype_size(dtype), "batch element"));
    }

    /// The batch of slots [0, `count`) (a view of the first `count` rows when
    /// short). Throws InvalidArgument if no element was set.
    Tensor finish(std::size_t count) && {
      if (state_.load(std::memory_order_acquire) != ready) {
        throw InvalidArgument("batch: finish() before any element was set");
      }
      if (count == spec_.capacity) return std::move(batch_);
      return batch_.narrow(0, static_cast<std::int64_t>(count));
    }

   private:
    std::byte* prepare(std::size_t slot, DType dtype, const Shape& shape, std::size_t bytes) {
      if (state_.load(std::memory_order_acquire) != ready) init(dtype, shape, bytes);
      if (dtype != dtype_ || !(shape == element_shape_)) {
        throw InvalidArgument("batch: elements must have equal dtype and shape; got " +
                              describe(dtype, shape) + " after " +
                              describe(dtype_, element_shape_) +
                              " (use padded_batch for elements of varying shape)");
      }
      return base_ + slot * element_bytes_;
    }

    static std::string describe(DType t, const Shape& s) {
      return std::string(dtype_name(t)) + s.to_string();
    }
    // The first element to arrive fixes dtype and shape and allocates the
    // buffer; concurrent setters wait for it (a short spin, never a pool task).
    void init(DType dtype, const Shape& shape, std::size_t bytes) {
      int expected = empty;
      if (state_.compare_exchange_strong(expected, initialising, std::memory_order_acq_rel)) {
        try {
          detail::check_batch_bytes(spec_.capacity, bytes);
          dtype_ = dtype;
          element_shape_ = shape;
          batch_ = Tensor(dtype_, element_shape_.prepend(static_cast<std::int64_t>(spec_.capacity)),
                          *spec_.allocator);
          base_ = static_cast<std::byte*>(batch_.raw_data());
          element_bytes_ = bytes;
        } catch (...) {
          state_.store(empty, std::memory_order_release);
          throw;
        }
        state_.store(ready, std::memory_order_release);
        return;
      }
      while (state_.load(std::memory_order_acquire) == initialising) std::this_thread::yield();
      if (state_.load(std::memory_order_acquire) != ready) init(dtype, shape, bytes);
    }

    static constexpr int empty = 0, initialising = 1, ready = 2;
    BatchSpec spec_;
    std::atomic<int> state_{empty};
    DType dtype_ = DType::float32;
    Shape element_shape_;
    Tensor batch_;
    std::byte* base_ = nullptr;
    std::size_t element_bytes_ = 0;
  };
};

namespace detail {
template <class Batch, class Builders, std::size_t... I>
Batch finish_fields(Builders& parts, std::size_t count, std::index_sequence<I...>) {
  return Batch(std::move(std::get<I>(parts)).finish(count)...);
}
template <class Builders, class Value, std::size_t... I>
void set_fields(Builders& parts, std::size_t slot, Value&& v, std::index_sequence<I...>) {
  std::size_t field = 0;
  try {
    ((field = I, std::get<I>(parts).set(slot, std::get<I>(std::move(v)))), ...);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("field " + std::to_string(field) + ": " + e.message(), e.context());
  }
}
}  // namespace detail

/// Tuples stack field by field into a tuple of batches.
template <class... Ts>
struct batch_traits<std::tuple<Ts...>> {
  /// The batch: a tuple of each field's batch.
  using batch_type = std::tuple<typename batch_traits<Ts>::batch_type...>;
  /// Builds one batch per field.
  class builder {
   public:
    /// Makes one field builder per field, each with `spec`.
    explicit builder(const BatchSpec& spec) : parts_(((void)sizeof(Ts), spec)...) {}
    /// Sets each field of `value` into its field's `slot`; an InvalidArgument names
    /// the field.
    void set(std::size_t slot, std::tuple<Ts...>&& value) {
      detail::set_fields(parts_, slot, std::move(value), std::index_sequence_for<Ts...>{});
    }
    /// The tuple of the fields' batches of `count` rows.
    batch_type finish(std::size_t count) && {
      return detail::finish_fields<batch_type>(parts_, count, std::index_sequence_for<Ts...>{});
    }

   private:
    std::tuple<typename batch_traits<Ts>::builder...> parts_;
  };
};

/// Pairs stack field by field into a pair of batches.
template <class A, class B>
struct batch_traits<std::pair<A, B>> {
  /// The batch: a pair of the two fields' batches.
  using batch_type =
      std::pair<typename batch_traits<A>::batch_type, typename batch_traits<B>::batch_type>;
  /// Builds one batch per field.
  class builder {
   public:
    /// Makes the two field builders, each with `spec`.
    explicit builder(const BatchSpec& spec) : parts_(spec, spec) {}
    /// Sets `value.first` and `value.second` into their fields' `slot`; an
    /// InvalidArgument names the field.
    void set(std::size_t slot, std::pair<A, B>&& value) {
      detail::set_fields(parts_, slot, std::move(value), std::make_index_sequence<2>{});
    }
    /// The pair of the fields' batches of `count` rows.
    batch_type finish(std::size_t count) && {
      return detail::finish_fields<batch_type>(parts_, count, std::make_index_sequence<2>{});
    }

   private:
    std::pair<typename batch_traits<A>::builder, typename batch_traits<B>::builder> parts_;
  };
};

/// The batch type that batch() makes of elements of type T.
template <class T>
using batch_t = typename batch_traits<T>::batch_type;

namespace detail {
/// A builder that exposes its batch buffer for bulk writes (arithmetic elements).
template <class B, class T>
concept bulk_builder = requires(B& b) {
  { b.slots() } -> std::same_as<std::span<T>>;
};
}  // namespace detail

/// How a batch splits back into elements (unbatch). A specialisation provides
/// `element_type`, `static std::size_t size(const B&)` and
/// `static element_type get(B&, std::size_t i)` (may move out of the batch).
template <class B>
struct unbatch_traits;

/// A Tensor splits along its first dimension into views of its rows.
template <>
struct unbatch_traits<Tensor> {
  /// An element: one row of the batch.
  using element_type = Tensor;
  /// The rows of `t`; InvalidArgument for a scalar (no batch dimension).
  static std::size_t size(const Tensor& t) {
    if (t.rank() == 0) {
      throw InvalidArgument("unbatch: a scalar tensor has no batch dimension");
    }
    return static_cast<std::size_t>(t.dim(0));
  }
  /// Row `i` of `t`, a view sharing its storage.
  static Tensor get(Tensor& t, std::size_t i) { return t.slice(static_cast<std::int64_t>(i)); }
};

/// A vector splits into its elements.
template <class T, class A>
struct unbatch_traits<std::vector<T, A>> {
  /// An element: one entry of the vector.
  using element_type = T;
  /// The number of elements of `v`.
  static std::size_t size(const std::vector<T, A>& v) { return v.size(); }
  /// Moves element `i` out of `v`.
  static T get(std::vector<T, A>& v, std::size_t i) { return std::move(v[i]); }
};

namespace detail {
template <class Tuple, std::size_t... I>
std::size_t common_size(const Tuple& t, std::index_sequence<I...>) {
  const std::size_t sizes[] = {
      unbatch_traits<std::tuple_element_t<I, Tuple>>::size(std::get<I>(t))...};
  for (std::size_t s : sizes) {
    if (s != sizes[0]) {
      throw InvalidArgument("unbatch: the fields of a batch have different sizes (" +
                            std::to_string(sizes[0]) + " and " + std::to_string(s) + ")");
    }
  }
  return sizes[0];
}
}  // namespace detail

/// A tuple of batches splits field by field into tuples.
template <class... Bs>
struct unbatch_traits<std::tuple<Bs...>> {
  /// An element: a tuple of one row of each field.
  using element_type = std::tuple<typename unbatch_traits<Bs>::element_type...>;
  /// The rows of the batch; InvalidArgument if the fields' sizes differ.
  static std::size_t size(const std::tuple<Bs...>& b) {
    return detail::common_size(b, std::index_sequence_for<Bs...>{});
  }
  /// Row `i` of each field, as a tuple (moved out of the batch where it can be).
  static element_type get(std::tuple<Bs...>& b, std::size_t i) {
    return std::apply(
        [i](auto&... f) {
          return element_type(unbatch_traits<std::decay_t<decltype(f)>>::get(f, i)...);
        },
        b);
  }
};

/// A pair of batches splits field by field into pairs.
template <class A, class B>
struct unbatch_traits<std::pair<A, B>> {
  /// An element: a pair of one row of each field.
  using element_type =
      std::pair<typename unbatch_traits<A>::element_type, typename unbatch_traits<B>::element_type>;
  /// The rows of the batch; InvalidArgument if the two fields' sizes differ.
  static std::size_t size(const std::pair<A, B>& b) {
    return detail::common_size(b, std::make_index_sequence<2>{});
  }
  /// Row `i` of each field, as a pair (moved out of the batch where it can be).
  static element_type get(std::pair<A, B>& b, std::size_t i) {
    return element_type(unbatch_traits<A>::get(b.first, i), unbatch_traits<B>::get(b.second, i));
  }
};

/// How a batch hands its fields to a loader (HostLoader,
/// cuda::DeviceLoader), which copies each field into its buffer and hands
/// out a batch whose field(i) is the i-th. A Tensor is one field, a
/// std::tuple or std::pair of Tensors one field per member. Specialise it for
/// a batch type of your own (e.g. the batch_type of your batch_traits):
///
///     template <>
///     struct ingest::loader_fields<SampleBatch> : std::true_type {
///       static void split(SampleBatch&& b, std::vector<ingest::Tensor>& out) {
///         out.push_back(std::move(b.images));   // field 0
///         out.push_back(std::move(b.labels));   // field 1
///       }
///     };
template <class T>
struct loader_fields : std::false_type {};
/// A Tensor batch is one field.
template <>
struct loader_fields<Tensor> : std::true_type {
  /// Appends `t` to `out` as one field.
  static void split(Tensor&& t, std::vector<Tensor>& out) { out.push_back(std::move(t)); }
};
/// A tuple of Tensors is one field per member, in order.
template <class... Ts>
requires(std::same_as<Ts, Tensor>&&...) struct loader_fields<std::tuple<Ts...>> : std::true_type {
  /// Appends each member of `t` to `out`, in order.
  static void split(std::tuple<Ts...>&& t, std::vector<Tensor>& out) {
    std::apply([&out](auto&... f) { (out.push_back(std::move(f)), ...); }, t);
  }
};
/// A pair of Tensors is two fields: first, then second.
template <>
struct loader_fields<std::pair<Tensor, Tensor>> : std::true_type {
  /// Appends `t.first`, then `t.second`, to `out`.
  static void split(std::pair<Tensor, Tensor>&& t, std::vector<Tensor>& out) {
    out.push_back(std::move(t.first));
    out.push_back(std::move(t.second));
  }
};

/// A run of rows of a batch: rows [start, start + count) along its first
/// dimension (rebatch's pieces).
template <class B>
struct RowRange {
  B* batch = nullptr;     ///< the batch the rows are taken from
  std::size_t start = 0;  ///< the first row
  std::size_t count = 0;  ///< the number of rows
};

/// How batches are cut and joined along their first dimension (rebatch). A
/// specialisation provides
///
///     static std::size_t rows(const B&);  // throws InvalidArgument without a batch dimension
///     // rows of pieces at(0) .. at(n - 1) (RowRange<B>s, `total` rows in all) as one batch:
///     template <class At> static B join(std::size_t n, At at, std::size_t total, Allocator&);
///     static B empty_like(const B&);  // a batch of no rows, of the same kind
///
/// join may move out of the pieces' rows (they are not read again) and must
/// not allocate per row: one piece is handed on without a copy where the
/// type allows (a Tensor view, a whole vector), several are copied into one
/// new batch.
template <class B>
struct rebatch_traits;

/// A Tensor is cut and joined along its first dimension.
template <>
struct rebatch_traits<Tensor> {
  /// The rows of `t`; InvalidArgument for a scalar (no batch dimension).
  static std::size_t rows(const Tensor& t) {
    if (t.rank() == 0) {
      throw InvalidArgument("a scalar tensor has no batch dimension to split (batch it first)");
    }
    return static_cast<std::size_t>(t.dim(0));
  }

  /// The rows of the `n` pieces as one Tensor of `total` rows: a view of the
  /// input when one piece is all there is, else a copy into a new Tensor from
  /// `allocator`. InvalidArgument if the pieces' dtypes or row shapes differ, or
  /// if one lives on the device.
  template <class At>
  static Tensor join(std::size_t n, At at, std::size_t total, Allocator& allocator) {
    const RowRange<Tensor> first = at(0);
    if (n == 1) {
      // One piece: a view of its rows, sharing the input batch's storage (as tf.data).
      if (first.start == 0 && first.count == rows(*first.batch)) return std::move(*first.batch);
      return first.batch->narrow(static_cast<std::int64_t>(first.start),
                                 static_cast<std::int64_t>(first.count));
    }
    const DType dtype = first.batch->dtype();
    const Shape row_shape = first.batch->shape().drop_front();
    Tensor out(dtype, row_shape.prepend(static_cast<std::int64_t>(total)), allocator);
    auto* dst = static_cast<std::byte*>(out.raw_data());
    const std::size_t row_bytes = total == 0 ? 0 : out.nbytes() / total;
    for (std::size_t j = 0; j < n; ++j) {
      const RowRange<Tensor> piece = at(j);
      const Tensor& src = *piece.batch;
      if (src.dtype() != dtype || !(src.shape().drop_front() == row_shape)) {
        throw InvalidArgument("rows of " + std::string(dtype_name(src.dtype())) +
                              src.shape().drop_front().to_string() +
                              " cannot join a batch of rows of " + std::string(dtype_name(dtype)) +
                              row_shape.to_string() +
                              " (every input batch must have the same dtype and row shape)");
      }
      if (src.memory_kind() == MemoryKind::device) {
        throw InvalidArgument("cannot copy rows of a tensor that lives on the device");
      }
      const std::size_t bytes = piece.count * row_bytes;
      if (bytes != 0) {
        std::memcpy(dst, static_cast<const std::byte*>(src.raw_data()) + piece.start * row_bytes,
                    bytes);
      }
      dst += bytes;
    }
    return out;
  }

  /// A Tensor of no rows with `t`'s dtype and row shape.
  static Tensor empty_like(const Tensor& t) {
    return Tensor(t.dtype(), t.shape().drop_front().prepend(0));
  }
};

/// A vector is cut and joined element by element.
template <class T, class A>
struct rebatch_traits<std::vector<T, A>> {
  /// The number of elements of `v`.
  static std::size_t rows(const std::vector<T, A>& v) { return v.size(); }

  /// The elements of the `n` pieces moved into one vector of `total` elements
  /// (the input itself when one whole piece is all there is).
  template <class At>
  static std::vector<T, A> join(std::size_t n, At at, std::size_t total, Allocator&) {
    const RowRange<std::vector<T, A>> first = at(0);
    if (n == 1 && first.start == 0 && first.count == first.batch->size()) {
      return std::move(*first.batch);
    }
    std::vector<T, A> out(first.batch->get_allocator());
    out.reserve(total);
    for (std::size_t j = 0; j < n; ++j) {
      const RowRange<std::vector<T, A>> piece = at(j);
      const auto begin = piece.batch->begin() + static_cast<std::ptrdiff_t>(piece.start);
      out.insert(out.end(), std::make_move_iterator(begin),
                 std::make_move_iterator(begin + static_cast<std::ptrdiff_t>(piece.count)));
    }
    return out;
  }

  /// An empty vector with `v`'s allocator.
  static std::vector<T, A> empty_like(const std::vector<T, A>& v) {
    return std::vector<T, A>(v.get_allocator());
  }
};

namespace detail {
/// The common number of rows of a tuple's (or pair's) fields.
template <class Tuple, std::size_t... I>
std::size_t common_rows(const Tuple& t, std::index_sequence<I...>) {
  const std::size_t sizes[] = {
      rebatch_traits<std::tuple_element_t<I, Tuple>>::rows(std::get<I>(t))...};
  for (std::size_t i = 0; i < sizeof...(I); ++i) {
    if (sizes[i] != sizes[0]) {
      throw InvalidArgument("the fields of a batch have different numbers of rows (field 0 has " +
                            std::to_string(sizes[0]) + ", field " + std::to_string(i) + " has " +
                            std::to_string(sizes[i]) + ")");
    }
  }
  return sizes[0];
}

/// Field I of each piece, as pieces of that field.
template <std::size_t I, class B, class At>
auto field_pieces(At& at) {
  using F = std::tuple_element_t<I, B>;
  return [&at](std::size_t j) {
    const RowRange<B> r = at(j);
    return RowRange<F>{&std::get<I>(*r.batch), r.start, r.count};
  };
}

template <class B, class At, std::size_t... I>
B join_fields(std::size_t n, At& at, std::size_t total, Allocator& allocator,
              std::index_sequence<I...>) {
  std::size_t field = 0;
  try {
    // Braces: the fields are joined in order, so `field` names the one that failed.
    return B{(field = I, rebatch_traits<std::tuple_element_t<I, B>>::join(n, field_pieces<I, B>(at),
                                                                          total, allocator))...};
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("field " + std::to_string(field) + ": " + e.message(), e.context());
  }
}
}  // namespace detail

/// Tuples and pairs are cut and joined field by field; their fields must
/// have equal numbers of rows.
template <class... Bs>
struct rebatch_traits<std::tuple<Bs...>> {
  /// The batch type.
  using B = std::tuple<Bs...>;
  /// The rows of the batch; InvalidArgument if the fields' row counts differ.
  static std::size_t rows(const B& b) {
    return detail::common_rows(b, std::index_sequence_for<Bs...>{});
  }
  /// Joins the pieces field by field; an InvalidArgument names the field.
  template <class At>
  static B join(std::size_t n, At at, std::size_t total, Allocator& allocator) {
    return detail::join_fields<B>(n, at, total, allocator, std::index_sequence_for<Bs...>{});
  }
  /// A batch of no rows, field by field.
  static B empty_like(const B& b) {
    return std::apply([](const auto&... f) { return B(rebatch_traits<Bs>::empty_like(f)...); }, b);
  }
};

/// Pairs are cut and joined field by field, as tuples are.
template <class X, class Y>
struct rebatch_traits<std::pair<X, Y>> {
  /// The batch type.
  using B = std::pair<X, Y>;
  /// The rows of the batch; InvalidArgument if the two fields' row counts differ.
  static std::size_t rows(const B& b) {
    return detail::common_rows(b, std::make_index_sequence<2>{});
  }
  /// Joins the pieces field by field; an InvalidArgument names the field.
  template <class At>
  static B join(std::size_t n, At at, std::size_t total, Allocator& allocator) {
    return detail::join_fields<B>(n, at, total, allocator, std::make_index_sequence<2>{});
  }
  /// A batch of no rows, field by field.
  static B empty_like(const B& b) {
    return B(rebatch_traits<X>::empty_like(b.first), rebatch_traits<Y>::empty_like(b.second));
  }
};

}  // namespace ingest
