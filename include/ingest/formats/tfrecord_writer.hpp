// TFRecordWriter: writes records in TFRecord framing (plain, GZIP or ZLIB),
// readable by TensorFlow's TFRecordDataset and by ingest::tfrecord. tf
// counterpart: tf.io.TFRecordWriter. The file is written under a hidden
// temporary name in the same directory and renamed into place by close(), so
// a crash never leaves a half-written shard under the final name; a writer
// destroyed without close() removes its temporary file. A writer's process
// killed before close() leaves the temporary; the next writer (or
// cache(path)) opening that directory removes it, never touching the
// temporary of a live writer (each is flock()ed by its writer). Not
// synchronised.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/formats/compression.hpp"
#include "ingest/formats/crc32c.hpp"
#include "ingest/formats/tfrecord_format.hpp"

namespace ingest {

/// Options of TFRecordWriter.
struct TFRecordWriterOptions {
  /// How the file is compressed (tf: TFRecordOptions.compression_type).
  Compression compression = Compression::none;
  /// zlib level for gzip and zlib: -1 (zlib's default, 6) or 0..9.
  int compression_level = Z_DEFAULT_COMPRESSION;
  /// Write buffer in bytes.
  std::size_t buffer_size = default_buffer_size;
  /// Permissions of the file created (masked by the umask): 0644 for data
  /// shards; cache(path) writes 0600.
  unsigned file_mode = 0644;
};

/// Writes records in TFRecord framing to a file that appears under its final name on close().
class TFRecordWriter {
 public:
  /// Creates the temporary file beside `path`. Throws IoError.
  explicit TFRecordWriter(std::string path, TFRecordWriterOptions options = {})
      : out_(std::move(path), options.compression, options.compression_level, options.buffer_size,
             "TFRecordWriter", options.file_mode) {}

  /// Appends one record. Throws IoError; InvalidArgument after close().
  void write(std::string_view record) {
    char header[detail::tfrecord_header_bytes];
    detail::store_le64(header, record.size());
    detail::store_le32(header + 8, masked_crc32c(header, 8));
    char footer[detail::tfrecord_footer_bytes];
    detail::store_le32(footer, masked_crc32c(record.data(), record.size()));
    out_.write(header, sizeof header);
    out_.write(record.data(), record.size());
    out_.write(footer, sizeof footer);
    ++records_;
  }

  /// Writes the buffered records (and, compressed, ends the compressed
  /// block) to the temporary file, so that a reader of temp_path() sees every
  /// record written so far; the file still appears under path() only on
  /// close(). tf: TFRecordWriter.flush(). Throws IoError; InvalidArgument
  /// after close().
  void flush() { out_.flush(); }

  /// Finishes the file and renames it to its final name. Closing again is a
  /// no-op (as in tf). Throws IoError; a close that throws removes the
  /// temporary file and leaves the writer closed.
  void close() { out_.close(); }

  /// Records written so far.
  std::uint64_t records_written() const noexcept { return records_; }
  /// Whether records can still be written (true until close()).
  bool is_open() const noexcept { return out_.is_open(); }
  /// The final path, where the file appears on close().
  const std::string& path() const noexcept { return out_.path(); }
  /// Where the file is written until close().
  const std::string& temp_path() const noexcept { return out_.temp_path(); }

 private:
  detail::OutputStream out_;
  std::uint64_t records_ = 0;
};

}  // namespace ingest
