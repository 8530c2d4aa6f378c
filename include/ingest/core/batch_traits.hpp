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
  using batch_type = std::vector<T>;
  class builder {
   public:
    explicit builder(const BatchSpec& spec) : slots_(spec.capacity) {}
    void set(std::size_t slot, T&& value) { slots_[slot].emplace(std::move(value)); }
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
  using batch_type = Tensor;
  class builder {
   public:
    explicit builder(const BatchSpec& spec)
        : tensor_((detail::check_batch_bytes(spec.capacity, sizeof(T)), dtype_of_v<T>),
                  Shape{static_cast<std::int64_t>(spec.capacity)}, *spec.allocator),
          data_(tensor_.data<T>()),
          capacity_(spec.capacity) {}
    void set(std::size_t slot, T value) noexcept { data_[slot] = value; }
    /// The batch buffer itself, for stages that fill it in bulk.
    std::span<T> slots() noexcept { return {data_, capacity_}; }
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
  using batch_type = Tensor;
  class builder {
   public:
    explicit builder(const BatchSpec& spec) : spec_(spec) {}
    builder(const builder&) = delete;
    builder& operator=(const builder&) = delete;

    void set(std::size_t slot, Tensor&& value) {
      if (state_.load(std::memory_order_acquire) != ready) init(value);
      if (value.dtype() != dtype_ || !(value.shape() == element_shape_)) {
        throw InvalidArgument("batch: elements must have equal dtype and shape; got " +
                              describe(value.dtype(), value.shape()) + " after " +
                              describe(dtype_, element_shape_) +
                              " (use padded_batch for elements of varying shape)");
      }
      if (!value.defined()) return;
      if (value.memory_kind() == MemoryKind::device) {
        throw InvalidArgument("batch: cannot stack a tensor that lives on the device");
      }
      if (element_bytes_ != 0) {
        std::memcpy(base_ + slot * element_bytes_, value.raw_data(), element_bytes_);
      }
    }

    Tensor finish(std::size_t count) && {
      if (state_.load(std::memory_order_acquire) != ready) {
        throw InvalidArgument("batch: finish() before any element was set");
      }
      if (count == spec_.capacity) return std::move(batch_);
      return batch_.narrow(0, static_cast<std::int64_t>(count));
    }

   private:
    static std::string describe(DType t, const Shape& s) {
      return std::string(dtype_name(t)) + s.to_string();
    }
    // The first element to arrive fixes dtype and shape and allocates the
    // buffer; concurrent setters wait for it (a short spin, never a pool task).
    void init(const Tensor& first) {
      int expected = empty;
      if (state_.compare_exchange_strong(expected, initialising, std::memory_order_acq_rel)) {
        try {
          detail::check_batch_bytes(spec_.capacity, first.nbytes());
          dtype_ = first.dtype();
          element_shape_ = first.shape();
          batch_ = Tensor(dtype_, element_shape_.prepend(static_cast<std::int64_t>(spec_.capacity)),
                          *spec_.allocator);
          base_ = static_cast<std::byte*>(batch_.raw_data());
          element_bytes_ = first.nbytes();
        } catch (...) {
          state_.store(empty, std::memory_order_release);
          throw;
        }
        state_.store(ready, std::memory_order_release);
        return;
      }
      while (state_.load(std::memory_order_acquire) == initialising) std::this_thread::yield();
      if (state_.load(std::memory_order_acquire) != ready) init(first);
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
  using batch_type = std::tuple<typename batch_traits<Ts>::batch_type...>;
  class builder {
   public:
    explicit builder(const BatchSpec& spec) : parts_(((void)sizeof(Ts), spec)...) {}
    void set(std::size_t slot, std::tuple<Ts...>&& value) {
      detail::set_fields(parts_, slot, std::move(value), std::index_sequence_for<Ts...>{});
    }
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
  using batch_type =
      std::pair<typename batch_traits<A>::batch_type, typename batch_traits<B>::batch_type>;
  class builder {
   public:
    explicit builder(const BatchSpec& spec) : parts_(spec, spec) {}
    void set(std::size_t slot, std::pair<A, B>&& value) {
      detail::set_fields(parts_, slot, std::move(value), std::make_index_sequence<2>{});
    }
    batch_type finish(std::size_t count) && {
      return detail::finish_fields<batch_type>(parts_, count, std::make_index_sequence<2>{});
    }

   private:
    std::pair<typename batch_traits<A>::builder, typename batch_traits<B>::builder> parts_;
  };
};

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

template <>
struct unbatch_traits<Tensor> {
  using element_type = Tensor;
  static std::size_t size(const Tensor& t) {
    if (t.rank() == 0) {
      throw InvalidArgument("unbatch: a scalar tensor has no batch dimension");
    }
    return static_cast<std::size_t>(t.dim(0));
  }
  static Tensor get(Tensor& t, std::size_t i) { return t.slice(static_cast<std::int64_t>(i)); }
};

template <class T, class A>
struct unbatch_traits<std::vector<T, A>> {
  using element_type = T;
  static std::size_t size(const std::vector<T, A>& v) { return v.size(); }
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

template <class... Bs>
struct unbatch_traits<std::tuple<Bs...>> {
  using element_type = std::tuple<typename unbatch_traits<Bs>::element_type...>;
  static std::size_t size(const std::tuple<Bs...>& b) {
    return detail::common_size(b, std::index_sequence_for<Bs...>{});
  }
  static element_type get(std::tuple<Bs...>& b, std::size_t i) {
    return std::apply(
        [i](auto&... f) {
          return element_type(unbatch_traits<std::decay_t<decltype(f)>>::get(f, i)...);
        },
        b);
  }
};

template <class A, class B>
struct unbatch_traits<std::pair<A, B>> {
  using element_type =
      std::pair<typename unbatch_traits<A>::element_type, typename unbatch_traits<B>::element_type>;
  static std::size_t size(const std::pair<A, B>& b) {
    return detail::common_size(b, std::make_index_sequence<2>{});
  }
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
template <>
struct loader_fields<Tensor> : std::true_type {
  static void split(Tensor&& t, std::vector<Tensor>& out) { out.push_back(std::move(t)); }
};
template <class... Ts>
requires(std::same_as<Ts, Tensor>&&...) struct loader_fields<std::tuple<Ts...>> : std::true_type {
  static void split(std::tuple<Ts...>&& t, std::vector<Tensor>& out) {
    std::apply([&out](auto&... f) { (out.push_back(std::move(f)), ...); }, t);
  }
};
template <>
struct loader_fields<std::pair<Tensor, Tensor>> : std::true_type {
  static void split(std::pair<Tensor, Tensor>&& t, std::vector<Tensor>& out) {
    out.push_back(std::move(t.first));
    out.push_back(std::move(t.second));
  }
};

}  // namespace ingest
