// fixed_length_records(paths, record_bytes, {.header_bytes, .footer_bytes}):
// each file is a header, then records of exactly record_bytes bytes, then a
// footer; yields the records as std::string. tf.data counterpart:
// FixedLengthRecordDataset. A last record cut short raises DataLossError
// "truncated record at OFFSET" and the iterator moves to the next file. Files
// may be gzip or zlib compressed (header and footer are then counted in the
// decompressed bytes). Each iterator opens its own files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/formats/compression.hpp"
#include "ingest/formats/file_sequence.hpp"

namespace ingest {

/// Options of fixed_length_records.
struct FixedLengthRecordOptions {
  /// Bytes to skip at the start of each file.
  std::size_t header_bytes = 0;
  /// Bytes to ignore at the end of each file.
  std::size_t footer_bytes = 0;
  Compression compression = Compression::none;
  std::size_t buffer_size = default_buffer_size;
};

namespace detail {

struct FixedLengthConfig {
  std::size_t record_bytes = 0;
  FixedLengthRecordOptions options{};
};

/// The records of one file.
class FixedLengthRecordReader {
 public:
  FixedLengthRecordReader(const std::string& path, const FixedLengthConfig& config)
      : stream_(path, config.options.compression, config.options.buffer_size,
                "fixed_length_records"),
        record_bytes_(config.record_bytes),
        header_bytes_(config.options.header_bytes),
        footer_bytes_(config.options.footer_bytes) {}

  std::optional<std::string> read() {
    if (done_) return std::nullopt;
    if (!header_skipped_) {
      header_skipped_ = true;
      if (!stream_.fill(header_bytes_ + footer_bytes_)) {
        done_ = true;
        throw DataLossError("the file has " + std::to_string(stream_.available()) +
                                " bytes, fewer than header_bytes + footer_bytes = " +
                                std::to_string(header_bytes_ + footer_bytes_),
                            {.file = stream_.path(), .offset = 0});
      }
      stream_.consume(header_bytes_);
    }
    // A record is one only if the footer still fits after it.
    if (stream_.fill(record_bytes_ + footer_bytes_)) {
      std::string record(stream_.data(), record_bytes_);
      stream_.consume(record_bytes_);
      return record;
    }
    done_ = true;
    if (stream_.available() == footer_bytes_) return std::nullopt;
    throw DataLossError("truncated record at " + std::to_string(stream_.offset()) + " (" +
                            std::to_string(stream_.available() - footer_bytes_) + " of " +
                            std::to_string(record_bytes_) + " bytes before the footer)",
                        {.file = stream_.path(), .offset = stream_.offset()});
  }

 private:
  InputStream stream_;
  std::size_t record_bytes_, header_bytes_, footer_bytes_;
  bool header_skipped_ = false;
  bool done_ = false;
};

}  // namespace detail

namespace detail {
inline constexpr char fixed_length_records_stage[] = "fixed_length_records";
}

using FixedLengthRecordDataset =
    FileDataset<detail::FixedLengthRecordReader, detail::FixedLengthConfig,
                detail::fixed_length_records_stage>;

/// The fixed-size records of the files `paths` (one path, or a list), in order
/// (tf: FixedLengthRecordDataset). Throws InvalidArgument if record_bytes is 0.
inline FixedLengthRecordDataset fixed_length_records(FileList paths, std::size_t record_bytes,
                                                     FixedLengthRecordOptions options = {}) {
  detail::check_buffer_size(options.buffer_size, detail::fixed_length_records_stage);
  if (record_bytes == 0) {
    throw InvalidArgument("fixed_length_records: record_bytes must be > 0",
                          {.stage = detail::fixed_length_records_stage});
  }
  return {std::move(paths), detail::FixedLengthConfig{record_bytes, options}};
}

}  // namespace ingest
