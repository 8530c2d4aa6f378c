// How many payload bytes an element holds, for the RAM budget (the
// autotuner's buffer sizes), stats() and the trace. Tensors, arithmetic
// values, strings and vectors, tuples and pairs are measured; a batch a
// loader hands out counts all its fields. For a type of your own, say how
// many bytes it holds by specialising ingest::element_size:
//
//     template <>
//     struct ingest::element_size<Sample> {
//       static std::size_t bytes(const Sample& s) { return s.image.nbytes() + sizeof s.label; }
//     };
//
// Without one, a type counts as sizeof(T), which misses what it holds on
// the heap.
#pragma once

#include <concepts>
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "ingest/core/tensor.hpp"

namespace ingest {

/// Specialise with `static std::size_t bytes(const T&)` to measure a T.
template <class T>
struct element_size {};

namespace detail {

/// Bytes an element occupies (payload, not bookkeeping), for memory budgets.
template <class T>
std::size_t element_bytes(const T& v) {
  if constexpr (requires { element_size<T>::bytes(v); }) {
    return static_cast<std::size_t>(element_size<T>::bytes(v));
  } else if constexpr (std::is_same_v<T, Tensor>) {
    return v.nbytes();
  } else if constexpr (std::is_arithmetic_v<T>) {
    return sizeof(T);
  } else if constexpr (requires {
                         v.size();
                         v.data();
                         typename T::value_type;
                       }) {
    using E = typename T::value_type;
    if constexpr (std::is_trivially_copyable_v<E>) {
      return v.size() * sizeof(E);
    } else {
      std::size_t n = 0;
      for (const auto& e : v) n += element_bytes(e);
      return n;
    }
  } else if constexpr (requires {
                         v.size();
                         { v.field(std::size_t{0}) } -> std::convertible_to<Tensor>;
                       }) {
    // A loaded batch (HostBatch, cuda::DeviceBatch): all of its fields.
    std::size_t n = 0;
    for (std::size_t i = 0; i < v.size(); ++i) n += v.field(i).nbytes();
    return n;
  } else if constexpr (requires { std::tuple_size<T>::value; }) {
    return std::apply([](const auto&... f) { return (std::size_t{0} + ... + element_bytes(f)); },
                      v);
  } else {
    return sizeof(T);
  }
}

}  // namespace detail
}  // namespace ingest
