// The protocol-buffer wire format, read and written without protobuf: varints,
// tags, length-delimited fields and skipping of unknown fields (groups
// included). Used by the tf.Example parser and encoder. Every length read
// from the input is checked against the bytes that remain before it is used.
// Pure functions; no allocation.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ingest::detail::wire {

using u8 = unsigned char;

enum WireType : std::uint32_t {
  varint_type = 0,
  fixed64_type = 1,
  length_type = 2,
  start_group_type = 3,
  end_group_type = 4,
  fixed32_type = 5,
};

/// Thrown by the readers below for malformed input; the parsers turn it into
/// a DataLossError that names what they were reading.
struct WireError {
  const char* what;
};

/// Groups nested deeper than this are rejected (protobuf's recursion limit).
inline constexpr int max_group_depth = 100;

/// The general case of read_varint, out of line.
[[gnu::noinline]] inline const u8* read_varint_slow(const u8* p, const u8* end,
                                                    std::uint64_t& value) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p == end) throw WireError{"truncated varint"};
    const u8 b = *p++;
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) {
      value = v;
      return p;
    }
  }
  throw WireError{"varint longer than 10 bytes"};
}

/// Reads a varint at p; throws WireError if it runs past `end` or past 10 bytes.
[[gnu::always_inline]] inline const u8* read_varint(const u8* p, const u8* end,
                                                    std::uint64_t& value) {
  if (p < end && *p < 0x80) [[likely]] {
    value = *p;
    return p + 1;
  }
  if (end - p >= 2 && p[1] < 0x80) {
    value = (p[0] & 0x7fu) | (std::uint64_t{p[1]} << 7);
    return p + 2;
  }
  return read_varint_slow(p, end, value);
}

/// One field of a message: its number, wire type, and payload.
struct Field {
  std::uint32_t number;
  std::uint32_t wire;
  const u8* tag;    ///< where the field starts (its tag)
  const u8* begin;  ///< payload (length-delimited, fixed, or a group's contents)
  const u8* end;
  std::uint64_t value;  ///< the value of a varint field
};

inline const u8* skip_group(const u8* p, const u8* end, std::uint32_t number, int depth);

/// Reads the field at p (p < end) into f and returns the position after it.
[[gnu::always_inline]] inline const u8* read_field(const u8* p, const u8* end, Field& f,
                                                   int depth = 0) {
  std::uint64_t tag;
  f.tag = p;
  p = read_varint(p, end, tag);
  if (tag > 0xffffffffu || (tag >> 3) == 0) throw WireError{"invalid field tag"};
  f.number = static_cast<std::uint32_t>(tag >> 3);
  f.wire = static_cast<std::uint32_t>(tag & 7);
  f.value = 0;
  switch (f.wire) {
    case varint_type:
      f.begin = p;
      p = read_varint(p, end, f.value);
      f.end = p;
      return p;
    case fixed64_type:
      if (end - p < 8) throw WireError{"truncated fixed64 field"};
      f.begin = p;
      f.end = p + 8;
      return f.end;
    case fixed32_type:
      if (end - p < 4) throw WireError{"truncated fixed32 field"};
      f.begin = p;
      f.end = p + 4;
      return f.end;
    case length_type: {
      std::uint64_t len;
      p = read_varint(p, end, len);
      if (len > static_cast<std::uint64_t>(end - p)) {
        throw WireError{"length-delimited field longer than its message"};
      }
      f.begin = p;
      f.end = p + len;
      return f.end;
    }
    case start_group_type:
      f.begin = p;
      p = skip_group(p, end, f.number, depth + 1);
      f.end = p;
      return p;
    case end_group_type: throw WireError{"unexpected end-group tag"};
    default: throw WireError{"invalid wire type"};
  }
}

/// Skips a group's fields up to and including its end-group tag.
inline const u8* skip_group(const u8* p, const u8* end, std::uint32_t number, int depth) {
  if (depth > max_group_depth) throw WireError{"groups nested too deeply"};
  while (p < end) {
    std::uint64_t tag;
    const u8* q = read_varint(p, end, tag);
    if ((tag & 7) == end_group_type) {
      if ((tag >> 3) != number) throw WireError{"mismatched end-group tag"};
      return q;
    }
    Field f;
    p = read_field(p, end, f, depth);
  }
  throw WireError{"unterminated group"};
}

/// Calls fn(const Field&) for every field in [p, end).
template <class Fn>
inline void for_each_field(const u8* p, const u8* end, Fn&& fn) {
  Field f;
  while (p < end) {
    p = read_field(p, end, f);
    fn(f);
  }
}

inline std::uint32_t load_fixed32(const u8* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

inline std::string_view as_view(const u8* begin, const u8* end) noexcept {
  return {reinterpret_cast<const char*>(begin), static_cast<std::size_t>(end - begin)};
}
inline const u8* as_bytes(std::string_view s) noexcept {
  return reinterpret_cast<const u8*>(s.data());
}

// Writing.

inline std::size_t varint_size(std::uint64_t v) noexcept {
  return static_cast<std::size_t>((std::bit_width(v | 1) + 6) / 7);
}
inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>(static_cast<u8>(v) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
inline void put_tag(std::string& out, std::uint32_t number, WireType wire) {
  put_varint(out, (static_cast<std::uint64_t>(number) << 3) | wire);
}
/// A length-delimited field holding `payload`.
inline void put_bytes_field(std::string& out, std::uint32_t number, std::string_view payload) {
  put_tag(out, number, length_type);
  put_varint(out, payload.size());
  out.append(payload);
}
inline void put_fixed32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace ingest::detail::wire
