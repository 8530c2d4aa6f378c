// TFRecord framing: each record is a uint64 little-endian length, the masked
// CRC-32C of those 8 bytes, the payload, and the masked CRC-32C of the
// payload. TFRecordReader reads the records of one file (plain, GZIP or
// ZLIB); tf counterpart: io::RecordReader. A reader is not synchronised; it
// owns its file and window buffer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/allocator.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/formats/compression.hpp"
#include "ingest/formats/crc32c.hpp"

namespace ingest {

/// Options of TFRecord reading (ingest::tfrecord, TFRecordReader).
struct TFRecordOptions {
  /// How the files are compressed (tf: compression_type).
  Compression compression = Compression::none;
  /// Read window in bytes; records larger than half of it are read straight
  /// into their own storage.
  std::size_t buffer_size = default_buffer_size;
  /// Largest payload accepted (default 1 GiB); a longer length is rejected as
  /// corrupt before anything is allocated.
  std::uint64_t max_record_bytes = std::uint64_t{1} << 30;
  /// Check both CRCs of every record. They cover every byte, so zlib then
  /// leaves out a GZIP or ZLIB file's own checksum (ISA-L checks it anyway);
  /// with this off it is checked, and is all that catches corruption that
  /// still inflates. Turning it off is faster and misses corruption in plain
  /// files.
  bool verify_crc = true;
  /// Memory-map plain regular files instead of read()ing them into the window:
  /// no copy through a buffer (the fastest way to read files in the page
  /// cache). A file truncated in place by another process while it is mapped
  /// raises SIGBUS; files replaced by rename (as TFRecordWriter does) are safe.
  /// Turn it off for files that may shrink while being read.
  bool memory_map = true;

  /// What checkpoints depend on: the compression (offsets are in its data).
  void fingerprint(Fingerprint& fp) const { fp.add(static_cast<int>(compression)); }
};

namespace detail {

inline constexpr std::size_t tfrecord_header_bytes = 12;  // length + its CRC
inline constexpr std::size_t tfrecord_footer_bytes = 4;   // CRC of the payload

inline std::uint64_t load_le64(const char* p) noexcept {
  unsigned char b[8];
  std::memcpy(b, p, 8);
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}
inline std::uint32_t load_le32(const char* p) noexcept {
  unsigned char b[4];
  std::memcpy(b, p, 4);
  return std::uint32_t{b[0]} | std::uint32_t{b[1]} << 8 | std::uint32_t{b[2]} << 16 |
         std::uint32_t{b[3]} << 24;
}
inline void store_le64(char* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void store_le32(char* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace detail

/// Reads the records of one TFRecord file in order.
///
/// Errors: IoError when the file cannot be opened or read; DataLossError
/// "corrupted record at OFFSET" (a CRC mismatch, or a length above
/// max_record_bytes) and "truncated record at OFFSET" (the data ends inside a
/// record), with the file and offset in the context. As in TensorFlow, OFFSET
/// is the record's start for problems with its header, and the payload's
/// start (record + 12) for problems with its payload. A clean end of the data
/// at a record boundary is the end of the file. After an error the reader is
/// finished (further reads return std::nullopt): nothing after corruption in
/// a file can be trusted.
class TFRecordReader {
 public:
  /// Opens `path`. With `background` (ingest::tfrecord passes its runtime's
  /// pool), a memory-mapped file's pages are populated ahead of the reader.
  explicit TFRecordReader(std::string path, TFRecordOptions options = {},
                          detail::BackgroundExecutor background = {})
      : stream_(std::move(path), options.compression, options.buffer_size, "tfrecord",
                options.memory_map, std::move(background)),
        options_(options),
        window_(std::max<std::size_t>(options.buffer_size, 64)) {
    // Both CRCs of every record cover every inflated byte, so the gzip or
    // zlib checksum would check the same bytes twice.
    if (options.verify_crc) stream_.skip_compression_checksum();
  }

  /// The next payload as a view valid until the next call, or std::nullopt
  /// at the end of the file. Allocates only for records larger than half the
  /// buffer (into storage it reuses).
  std::optional<std::string_view> read_view() {
    return guarded([&]() -> std::optional<std::string_view> {
      std::uint64_t length;
      if (!read_header(length)) return std::nullopt;
      if (fits_window(length)) return read_small(static_cast<std::size_t>(length));
      read_large(large_, static_cast<std::size_t>(length));
      return std::string_view(large_);
    });
  }

  /// The next payload in its own string (its one allocation), or std::nullopt at the end.
  std::optional<std::string> read() {
    return guarded([&]() -> std::optional<std::string> {
      std::uint64_t length;
      if (!read_header(length)) return std::nullopt;
      if (fits_window(length)) return read_small_copy(static_cast<std::size_t>(length));
      std::string record;
      read_large(record, static_cast<std::size_t>(length));
      return record;
    });
  }

  /// The path of the file it reads.
  const std::string& path() const noexcept { return stream_.path(); }
  /// Offset of the next record in the (decompressed) stream.
  std::uint64_t offset() const noexcept { return stream_.offset(); }
  /// Continues at `offset`, a record's start that offset() returned (a
  /// checkpoint's position), before anything was read. The record there is
  /// verified as usual (its header CRC); see InputStream::seek for errors.
  void seek(std::uint64_t offset) { stream_.seek(offset); }

 private:
  template <class F>
  auto guarded(F f) -> decltype(f()) {
    if (failed_) return std::nullopt;
    try {
      return f();
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

  // No `length + footer` here: a length near 2^64 (max_record_bytes allows
  // any) would wrap it. A mapped file's lengths were checked against the
  // bytes left by read_header.
  bool fits_window(std::uint64_t length) const noexcept {
    return stream_.mapped() ||
           (length <= window_ / 2 && length <= window_ / 2 - detail::tfrecord_footer_bytes);
  }

  // A payload that fits the window: checked in place; the view is valid
  // until the window moves (the next read).
  std::string_view read_small(std::size_t n) {
    if (!stream_.fill(n + detail::tfrecord_footer_bytes)) throw_truncated(payload_offset());
    const char* p = stream_.data();
    check_payload(p, n, p + n);
    stream_.consume(n + detail::tfrecord_footer_bytes);
    return {p, n};
  }

  // A payload that fits the window, checked in place and then copied into its
  // own string (from cache: the check has just read it), one a stage gave
  // back where there is one (detail::StringRecycler).
  std::string read_small_copy(std::size_t n) {
    if (!stream_.fill(n + detail::tfrecord_footer_bytes)) throw_truncated(payload_offset());
    const char* p = stream_.data();
    check_payload(p, n, p + n);
    std::string out = detail::StringRecycler::instance().take(n);
    out.assign(p, n);
    stream_.consume(n + detail::tfrecord_footer_bytes);
    return out;
  }

  std::uint64_t payload_offset() const noexcept {
    return record_offset_ + detail::tfrecord_header_bytes;
  }

  // Reads and checks a header; false at a clean end of the data.
  bool read_header(std::uint64_t& length) {
    record_offset_ = stream_.offset();
    if (!stream_.fill(detail::tfrecord_header_bytes)) {
      if (stream_.available() == 0) return false;
      throw_truncated(record_offset_);
    }
    const char* h = stream_.data();
    length = detail::load_le64(h);
    if (options_.verify_crc && masked_crc32c(h, 8) != detail::load_le32(h + 8)) {
      throw_corrupted(record_offset_, "length checksum mismatch");
    }
    if (length > options_.max_record_bytes) {
      throw_corrupted(record_offset_, "length " + std::to_string(length) +
                                          " exceeds max_record_bytes " +
                                          std::to_string(options_.max_record_bytes));
    }
    if constexpr (sizeof(std::size_t) < sizeof(std::uint64_t)) {
      if (length > SIZE_MAX - detail::tfrecord_footer_bytes) {
        throw_corrupted(record_offset_, "length " + std::to_string(length) + " exceeds memory");
      }
    }
    stream_.consume(detail::tfrecord_header_bytes);
    // Compared without adding to `length`, which may be near 2^64 (issue 10 item 2).
    if (auto left = stream_.remaining(); left && (*left < detail::tfrecord_footer_bytes ||
                                                  length > *left - detail::tfrecord_footer_bytes)) {
      throw_truncated(payload_offset());
    }
    return true;
  }

  void check_payload(const char* p, std::size_t n, const char* footer) const {
    if (!options_.verify_crc) return;
    // A mapped file's payload comes from memory; a window's was just copied into cache.
    const std::uint32_t crc =
        stream_.mapped() ? detail::crc32c_extend_streamed(0, p, n) : crc32c(p, n);
    if (crc32c_mask(crc) != detail::load_le32(footer)) {
      throw_corrupted(payload_offset(), "data checksum mismatch");
    }
  }

  // A payload too large for the window: read into `out`. Plain files have
  // been checked against their size; compressed ones grow `out` as the data
  // arrives, so a corrupt length cannot make it allocate more than is there.
  void read_large(std::string& out, std::size_t n) {
    const std::size_t step = std::max<std::size_t>(window_, std::size_t{16} << 20);
    std::size_t have = 0;
    out.clear();
    while (have < n) {
      const std::size_t want = stream_.remaining() ? n - have : std::min(n - have, step);
      out.resize(have + want);
      const std::size_t got = stream_.read(out.data() + have, want);
      have += got;
      if (got < want) throw_truncated(payload_offset());
    }
    char footer[detail::tfrecord_footer_bytes];
    if (stream_.read(footer, sizeof footer) != sizeof footer) throw_truncated(payload_offset());
    check_payload(out.data(), n, footer);
  }

  [[noreturn]] void throw_truncated(std::uint64_t offset) const {
    throw DataLossError("truncated record at " + std::to_string(offset),
                        {.stage = "tfrecord", .file = stream_.path(), .offset = offset});
  }
  [[noreturn]] void throw_corrupted(std::uint64_t offset, const std::string& why) const {
    throw DataLossError("corrupted record at " + std::to_string(offset) + " (" + why + ")",
                        {.stage = "tfrecord", .file = stream_.path(), .offset = offset});
  }

  detail::InputStream stream_;
  TFRecordOptions options_;
  std::size_t window_;
  std::uint64_t record_offset_ = 0;
  std::string large_;
  bool failed_ = false;
};

}  // namespace ingest
