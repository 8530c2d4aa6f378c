// How elements turn into bytes and back, for the file cache. Covers
// arithmetic scalars, std::string, std::vector, Tensor, std::optional,
// std::tuple and std::pair; specialise ingest::serializer<T> for your own
// types. A serializer also names its layout (signature()), so a cache file
// written for another element type or layout is detected, never misread.
// Reading is bounds-checked: a length read from a file is compared with the
// bytes that remain before anything is allocated.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/dtype.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/shape.hpp"
#include "ingest/core/tensor.hpp"

namespace ingest {

static_assert(std::endian::native == std::endian::little,
              "ingest's serialized formats are little-endian; big-endian hosts are not supported");

/// Appends bytes to a growable buffer (reused between elements), or to a
/// caller's room while they fit (serializing in place, without a copy).
class ByteWriter {
 public:
  ByteWriter() = default;
  /// Appends to `buffer` (its bytes and capacity are kept); release() hands it back.
  explicit ByteWriter(std::vector<std::byte>&& buffer) noexcept : buffer_(std::move(buffer)) {}
  /// Appends to `room` while the bytes fit (in_room()), then from the write
  /// that does not fit on to `spill` (cleared), the bytes so far copied
  /// over; release() hands `spill` back.
  ByteWriter(std::span<std::byte> room, std::vector<std::byte>&& spill) noexcept
      : buffer_(std::move(spill)), room_(room.data()), room_size_(room.size()) {
    buffer_.clear();
  }
  /// Hands the spill buffer back (the bytes, unless they all fit the room).
  std::vector<std::byte> release() && noexcept { return std::move(buffer_); }

  /// Appends `n` bytes from `data`.
  void write(const void* data, std::size_t n) {
    if (room_) {
      if (n <= room_size_ - room_used_) {
        if (n != 0) std::memcpy(room_ + room_used_, data, n);
        room_used_ += n;
        return;
      }
      buffer_.assign(room_, room_ + room_used_);
      room_ = nullptr;
    }
    // resize + memcpy rather than insert: GCC 12 at -O3 reports a false
    // out-of-bounds write in vector::insert of a few bytes.
    const std::size_t at = buffer_.size();
    buffer_.resize(at + n);
    if (n != 0) std::memcpy(buffer_.data() + at, data, n);
  }
  /// Appends the bytes of `value` as they lie in memory (little-endian).
  template <class T>
  requires std::is_trivially_copyable_v<T>
  void put(const T& value) { write(&value, sizeof(T)); }
  /// Forgets the bytes written; the buffer keeps its capacity.
  void clear() noexcept {
    room_used_ = 0;
    buffer_.clear();
  }
  /// The bytes are in the room given to the constructor (from its start).
  bool in_room() const noexcept { return room_ != nullptr; }
  /// The bytes written so far, in the room or in the buffer.
  std::span<const std::byte> bytes() const noexcept {
    if (room_) return {room_, room_used_};
    return buffer_;
  }
  /// The number of bytes written so far.
  std::size_t size() const noexcept { return room_ ? room_used_ : buffer_.size(); }

 private:
  std::vector<std::byte> buffer_;
  std::byte* room_ = nullptr;  // null: bytes go to buffer_
  std::size_t room_size_ = 0;
  std::size_t room_used_ = 0;
};

/// Reads bytes from a span; any read past the end throws DataLossError.
class ByteReader {
 public:
  /// Reads `data` from its start; the span must outlive the reader.
  explicit ByteReader(std::span<const std::byte> data) : data_(data) {}

  /// Copies the next `n` bytes to `out`; DataLossError if fewer remain.
  void read(void* out, std::size_t n) {
    require(n);
    if (n != 0) std::memcpy(out, data_.data() + pos_, n);  // an empty vector's data() may be null
    pos_ += n;
  }
  /// The next `sizeof(T)` bytes as a T; DataLossError if fewer remain.
  template <class T>
  requires std::is_trivially_copyable_v<T> T get() {
    T value;
    read(&value, sizeof(T));
    return value;
  }
  /// A length prefix, checked against the remaining bytes (each counted
  /// item takes at least `min_item_bytes`) before the caller allocates.
  std::size_t get_length(std::size_t min_item_bytes = 1) {
    const auto n = get<std::uint64_t>();
    if (min_item_bytes != 0 && n > remaining() / min_item_bytes) {
      throw DataLossError("serialized length " + std::to_string(n) + " exceeds the " +
                          std::to_string(remaining()) + " bytes left");
    }
    return static_cast<std::size_t>(n);
  }
  /// The number of bytes not read yet.
  std::size_t remaining() const noexcept { return data_.size() - pos_; }
  /// The number of bytes read so far.
  std::size_t position() const noexcept { return pos_; }

 private:
  void require(std::size_t n) const {
    if (n > remaining()) {
      throw DataLossError("serialized element is truncated: need " + std::to_string(n) +
                          " bytes, " + std::to_string(remaining()) + " left");
    }
  }
  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
};

/// Serializer of T. A specialisation provides
///   static void write(ByteWriter&, const T&);
///   static T read(ByteReader&);
///   static std::string signature();   // names the layout, e.g. "tuple<int64,tensor>"
template <class T>
struct serializer;

/// True if T has a serializer.
template <class T>
concept serializable = requires(ByteWriter& w, ByteReader& r, const T& v) {
  serializer<T>::write(w, v);
  { serializer<T>::read(r) } -> std::same_as<T>;
  { serializer<T>::signature() } -> std::convertible_to<std::string>;
};

/// Arithmetic scalars: their bytes, little-endian.
template <TensorElement T>
struct serializer<T> {
  /// Appends `v`'s bytes.
  static void write(ByteWriter& w, const T& v) { w.put(v); }
  /// Reads a T; DataLossError if the bytes run out.
  static T read(ByteReader& r) { return r.get<T>(); }
  /// The layout's name: the dtype's, e.g. `int64`.
  static std::string signature() { return std::string(dtype_name(dtype_of_v<T>)); }
};

/// Strings: a 64-bit length, then the bytes.
template <>
struct serializer<std::string> {
  /// Appends the length and the bytes of `s`.
  static void write(ByteWriter& w, const std::string& s) {
    w.put<std::uint64_t>(s.size());
    w.write(s.data(), s.size());
  }
  /// Reads a string; DataLossError if its length exceeds the bytes left.
  static std::string read(ByteReader& r) {
    std::string s(r.get_length(), '\0');
    r.read(s.data(), s.size());
    return s;
  }
  /// The layout's name: `string`.
  static std::string signature() { return "string"; }
};

/// Vectors: a 64-bit count, then the elements (one block of bytes for
/// arithmetic elements other than bool).
template <class T, class A>
requires serializable<T>
struct serializer<std::vector<T, A>> {
  /// Appends the count and the elements of `v`.
  static void write(ByteWriter& w, const std::vector<T, A>& v) {
    w.put<std::uint64_t>(v.size());
    if constexpr (TensorElement<T> && !std::is_same_v<T, bool>) {
      w.write(v.data(), v.size() * sizeof(T));
    } else {
      for (const T& x : v) serializer<T>::write(w, x);
    }
  }
  /// Reads a vector; DataLossError if its count exceeds the bytes left.
  static std::vector<T, A> read(ByteReader& r) {
    if constexpr (TensorElement<T> && !std::is_same_v<T, bool>) {
      std::vector<T, A> v(r.get_length(sizeof(T)));
      r.read(v.data(), v.size() * sizeof(T));
      return v;
    } else {
      const std::size_t n = r.get_length(1);
      std::vector<T, A> v;
      // n is only known to be at most the bytes left; an element in memory
      // may be much larger than its serialised form (a string: 32 bytes for
      // 8), so reserve no more memory than those bytes, and grow past that
      // as elements actually arrive.
      v.reserve(std::min(n, r.remaining() / sizeof(T) + 1));
      for (std::size_t i = 0; i < n; ++i) v.push_back(serializer<T>::read(r));
      return v;
    }
  }
  /// The layout's name: `vector<S>`, S the element's signature.
  static std::string signature() { return "vector<" + serializer<T>::signature() + ">"; }
};

/// Tensors on the host: dtype, rank, dims, then the bytes.
template <>
struct serializer<Tensor> {
  /// Appends `t`; InvalidArgument if it lives on the device.
  static void write(ByteWriter& w, const Tensor& t) {
    if (t.memory_kind() == MemoryKind::device) {
      throw InvalidArgument("cannot serialize a tensor that lives on the device");
    }
    w.put<std::uint8_t>(static_cast<std::uint8_t>(t.dtype()));
    w.put<std::uint8_t>(static_cast<std::uint8_t>(t.rank()));
    for (std::int64_t d : t.shape()) w.put<std::int64_t>(d);
    if (t.nbytes()) w.write(t.raw_data(), t.nbytes());
  }
  /// Reads a Tensor (host memory); DataLossError if its dtype, rank or shape is
  /// invalid or claims more bytes than remain.
  static Tensor read(ByteReader& r) {
    const auto dtype = r.get<std::uint8_t>();
    if (dtype > static_cast<std::uint8_t>(DType::float64)) {
      throw DataLossError("serialized tensor has an unknown dtype " + std::to_string(dtype));
    }
    const auto rank = r.get<std::uint8_t>();
    if (rank > Shape::max_rank) {
      throw DataLossError("serialized tensor has rank " + std::to_string(rank));
    }
    std::int64_t dims[Shape::max_rank];
    std::uint64_t elements = 1;
    for (std::size_t i = 0; i < rank; ++i) {
      dims[i] = r.get<std::int64_t>();
      if (dims[i] < 0) throw DataLossError("serialized tensor has a negative dimension");
      if (dims[i] != 0 && elements > r.remaining() / static_cast<std::uint64_t>(dims[i])) {
        elements = r.remaining() + 1;  // too big for what is left: caught below
      } else {
        elements *= static_cast<std::uint64_t>(dims[i]);
      }
    }
    const auto type = static_cast<DType>(dtype);
    if (elements > r.remaining() / dtype_size(type)) {
      throw DataLossError("serialized tensor claims more bytes than remain");
    }
    const Shape shape(std::span<const std::int64_t>(dims, rank));
    try {
      // Zero dims pass the check above whatever the others say: [0, 2^62, 2^62].
      detail::checked_num_elements(shape, "serialized tensor");
    } catch (const InvalidArgument& e) {
      throw DataLossError(e.message());
    }
    Tensor t(type, shape);
    if (t.nbytes()) r.read(t.raw_data(), t.nbytes());
    return t;
  }
  /// The layout's name: `tensor`.
  static std::string signature() { return "tensor"; }
};

/// Optionals: a presence byte, then the value if there is one.
template <class T>
requires serializable<T>
struct serializer<std::optional<T>> {
  /// Appends whether `v` holds a value, then the value.
  static void write(ByteWriter& w, const std::optional<T>& v) {
    w.put<std::uint8_t>(v ? 1 : 0);
    if (v) serializer<T>::write(w, *v);
  }
  /// Reads an optional.
  static std::optional<T> read(ByteReader& r) {
    if (r.get<std::uint8_t>() == 0) return std::nullopt;
    return serializer<T>::read(r);
  }
  /// The layout's name: `optional<S>`, S the value's signature.
  static std::string signature() { return "optional<" + serializer<T>::signature() + ">"; }
};

namespace detail {
template <class... Ts>
std::string joined_signatures() {
  std::string s;
  ((s += (s.empty() ? "" : ",") + serializer<Ts>::signature()), ...);
  return s;
}
}  // namespace detail

/// Tuples: the fields in order.
template <class... Ts>
requires(serializable<Ts>&&...) struct serializer<std::tuple<Ts...>> {
  /// Appends the fields of `v` in order.
  static void write(ByteWriter& w, const std::tuple<Ts...>& v) {
    std::apply([&w](const Ts&... f) { (serializer<Ts>::write(w, f), ...); }, v);
  }
  /// Reads the fields in order.
  static std::tuple<Ts...> read(ByteReader& r) {
    // Braced initialisation evaluates the fields left to right.
    return std::tuple<Ts...>{serializer<Ts>::read(r)...};
  }
  /// The layout's name: `tuple<S1,S2,...>`, the fields' signatures.
  static std::string signature() { return "tuple<" + detail::joined_signatures<Ts...>() + ">"; }
};

/// Pairs: first, then second.
template <class A, class B>
requires serializable<A> && serializable<B>
struct serializer<std::pair<A, B>> {
  /// Appends `v.first`, then `v.second`.
  static void write(ByteWriter& w, const std::pair<A, B>& v) {
    serializer<A>::write(w, v.first);
    serializer<B>::write(w, v.second);
  }
  /// Reads first, then second.
  static std::pair<A, B> read(ByteReader& r) {
    A a = serializer<A>::read(r);
    B b = serializer<B>::read(r);
    return {std::move(a), std::move(b)};
  }
  /// The layout's name: `pair<S1,S2>`, the two fields' signatures.
  static std::string signature() { return "pair<" + detail::joined_signatures<A, B>() + ">"; }
};

}  // namespace ingest
