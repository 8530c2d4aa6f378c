// The file format of cache(path): TFRecord framing (every record
// CRC-checked), the first record a header naming the format version and the
// element layout (the serializer's signature), the elements, and the last
// record a footer with the element count; check_cache_file() tells whether
// a file is complete and was written for this layout, reading only its ends.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"
#include "ingest/formats/crc32c.hpp"
#include "ingest/formats/tfrecord_format.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

namespace detail {

// The file layout: TFRecord framing (every record CRC-checked), the first
// record a header naming the format and the element layout, the last a
// footer with the element count.
inline constexpr std::string_view cache_magic = "ingest-cache";
inline constexpr std::uint32_t cache_version = 1;
inline constexpr std::string_view cache_footer_magic = "ingest-cache-end";
inline constexpr std::size_t cache_footer_bytes = 16 + 8;  // magic + count

inline std::string cache_header(const std::string& signature) {
  std::string h(cache_magic);
  char v[4];
  store_le32(v, cache_version);
  h.append(v, 4);
  h += signature;
  return h;
}

inline std::string cache_footer(std::uint64_t count) {
  std::string f(cache_footer_magic);
  char c[8];
  store_le64(c, count);
  f.append(c, 8);
  return f;
}

// A usable cache file's element count, or why it cannot be used.
struct CacheFileCheck {
  std::optional<std::uint64_t> count;  // set when the file is usable
  std::string problem;
};

inline CacheFileCheck check_cache_file(const std::string& path, const std::string& signature) {
  if (!file_exists(path, "cache")) return {std::nullopt, "it does not exist"};
  std::uint64_t count = 0;
  try {
    FileReader file(path, "cache");
    const std::size_t tail = tfrecord_header_bytes + cache_footer_bytes + tfrecord_footer_bytes;
    if (!file.has_size() || file.size() < tail) return {std::nullopt, "it is truncated"};
    // The footer: the last record, of a known size.
    std::string bytes(tail, '\0');
    if (file.read_at(file.size() - tail, bytes.data(), tail) != tail) {
      return {std::nullopt, "its end cannot be read"};
    }
    const char* p = bytes.data();
    if (load_le64(p) != cache_footer_bytes || crc32c_unmask(load_le32(p + 8)) != crc32c(p, 8) ||
        crc32c_unmask(load_le32(p + 12 + cache_footer_bytes)) !=
            crc32c(p + 12, cache_footer_bytes) ||
        std::string_view(p + 12, cache_footer_magic.size()) != cache_footer_magic) {
      return {std::nullopt, "it is truncated (no valid footer)"};
    }
    count = load_le64(p + 12 + cache_footer_magic.size());
    // The header: the first record.
    TFRecordReader reader(path, {.memory_map = false});
    std::optional<std::string_view> header = reader.read_view();
    if (!header || *header != cache_header(signature)) {
      return {std::nullopt, "it was written by another version or for another element type"};
    }
  } catch (const Error& e) {
    return {std::nullopt, std::string("it cannot be read: ") + e.what()};
  }
  return {count, {}};
}

}  // namespace detail

}  // namespace ingest
