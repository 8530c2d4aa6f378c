// fixed_length_records(paths, record_bytes, {.header_bytes, .footer_bytes}):
// each file is a header, then records of exactly record_bytes bytes, then a
// footer; yields the records as std::string. tf.data counterpart:
// FixedLengthRecordDataset. A body (the bytes between header and footer)
// that is not a whole number of records raises DataLossError "truncated
// record at OFFSET" (the last record's start) and the iterator moves to the
// next file: for a plain file, whose size is known, at the first next() and
// before any of its records (tf.data fails at the same point, but with
// InvalidArgumentError, and does not move on); for a compressed file, whose size
// is known only once it is decompressed, when the reader reaches the
// truncated record (the records before it are yielded). Files may be gzip or
// zlib compressed (header and footer are then counted in the decompressed
// bytes). Memory grows with the bytes read, never with header_bytes,
// footer_bytes or record_bytes alone. Each iterator opens its own files.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/formats/compression.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/sources/file_dataset.hpp"

namespace ingest {

/// Options of fixed_length_records.
struct FixedLengthRecordOptions {
  /// Bytes to skip at the start of each file.
  std::size_t header_bytes = 0;
  /// Bytes to ignore at the end of each file.
  std::size_t footer_bytes = 0;
  /// How the files are compressed (header and footer count in the decompressed bytes).
  Compression compression = Compression::none;
  /// Read window in bytes.
  std::size_t buffer_size = default_buffer_size;
};

namespace detail {

struct FixedLengthConfig {
  std::size_t record_bytes = 0;
  FixedLengthRecordOptions options{};

  /// The framing and compression (a checkpoint's offsets depend on them).
  void fingerprint(Fingerprint& fp) const {
    fp.add(static_cast<std::uint64_t>(record_bytes))
        .add(static_cast<std::uint64_t>(options.header_bytes))
        .add(static_cast<std::uint64_t>(options.footer_bytes))
        .add(static_cast<int>(options.compression));
  }
};

/// The records of one file.
class FixedLengthRecordReader {
 public:
  FixedLengthRecordReader(const std::string& path, const FixedLengthConfig& config)
      : stream_(path, config.options.compression, config.options.buffer_size,
                "fixed_length_records"),
        record_bytes_(config.record_bytes),
        header_bytes_(config.options.header_bytes),
        footer_bytes_(config.options.footer_bytes),
        chunk_(std::max<std::size_t>(config.options.buffer_size, 64)) {}

  /// Offset of the next record in the (decompressed) stream; 0 before the
  /// first read (the header is not skipped yet).
  std::uint64_t offset() const noexcept { return stream_.offset(); }
  /// Continues at `offset`, a record's start that offset() returned, on a
  /// reader that has read nothing. The offset is checked against the file:
  /// past the header, on a record boundary and before the footer.
  void seek(std::uint64_t offset) {
    if (offset == 0) return;  // nothing was read: the header is skipped as usual
    header_skipped_ = true;
    const auto not_a_record = [&](const std::string& why) {
      done_ = true;
      throw DataLossError("checkpoint: offset " + std::to_string(offset) +
                              " is not a record's start: " + why + " (did the file change?)",
                          {.file = stream_.path(), .offset = offset});
    };
    if (offset < header_bytes_ || (offset - header_bytes_) % record_bytes_ != 0) {
      not_a_record("header_bytes " + std::to_string(header_bytes_) + ", record_bytes " +
                   std::to_string(record_bytes_));
    }
    if (const auto size = stream_.remaining()) {
      const std::uint64_t bytes = header_bytes_ + footer_bytes_;
      if (*size < bytes || offset > *size - footer_bytes_ || (*size - bytes) % record_bytes_ != 0) {
        not_a_record("the file has " + std::to_string(*size) + " bytes");
      }
      records_left_ = (*size - footer_bytes_ - offset) / record_bytes_;
    }
    stream_.seek(offset);
  }

  std::optional<std::string> read() {
    if (done_) return std::nullopt;
    if (!header_skipped_) {
      header_skipped_ = true;
      start();
    }
    if (records_left_) {  // the size is known: no look-ahead for the footer
      if (*records_left_ == 0) return finish();
      --*records_left_;
      if (!fill(record_bytes_)) throw_truncated();  // the file shrank
      return take();
    }
    // A record is one only if the footer still fits after it.
    if (fill(record_bytes_ + footer_bytes_)) return take();
    done_ = true;
    if (stream_.available() == footer_bytes_) return std::nullopt;
    throw_truncated();
  }

 private:
  // Skips the header; with the file's size known, checks the body's length
  // before any record is read.
  void start() {
    const std::uint64_t bytes = header_bytes_ + footer_bytes_;  // checked not to wrap
    if (const auto size = stream_.remaining()) {
      if (*size < bytes) throw_short(*size);
      const std::uint64_t body = *size - bytes;
      if (body % record_bytes_ != 0) {
        done_ = true;
        const std::uint64_t at = header_bytes_ + body / record_bytes_ * record_bytes_;
        throw DataLossError("truncated record at " + std::to_string(at) + " (the body of " +
                                std::to_string(body) +
                                " bytes between header and footer is not a multiple of "
                                "record_bytes " +
                                std::to_string(record_bytes_) + ")",
                            {.file = stream_.path(), .offset = at});
      }
      records_left_ = body / record_bytes_;
    }
    for (std::size_t left = header_bytes_; left != 0;) {  // through the window, in steps
      const std::size_t step = std::min(left, chunk_);
      if (!stream_.fill(step)) throw_short(stream_.offset() + stream_.available());
      stream_.consume(step);
      left -= step;
    }
    if (!records_left_ && !fill(footer_bytes_)) {
      throw_short(stream_.offset() + stream_.available());
    }
  }

  // fill(want), growing the window at most to twice the bytes that arrived,
  // so a huge record_bytes or footer_bytes allocates only what the data holds.
  bool fill(std::size_t want) {
    while (stream_.available() < want) {
      const std::size_t step = std::max(stream_.available() * 2, chunk_);
      if (!stream_.fill(std::min(want, step))) return false;
    }
    return true;
  }

  std::string take() {
    std::string record(stream_.data(), record_bytes_);
    stream_.consume(record_bytes_);
    return record;
  }

  std::optional<std::string> finish() {
    done_ = true;
    return std::nullopt;
  }

  [[noreturn]] void throw_short(std::uint64_t size) {
    done_ = true;
    throw DataLossError("the file has " + std::to_string(size) +
                            " bytes, fewer than header_bytes + footer_bytes = " +
                            std::to_string(std::uint64_t{header_bytes_} + footer_bytes_),
                        {.file = stream_.path(), .offset = 0});
  }

  [[noreturn]] void throw_truncated() {
    done_ = true;
    const std::size_t have = stream_.available();
    const std::size_t got = have > footer_bytes_ ? have - footer_bytes_ : have;
    throw DataLossError("truncated record at " + std::to_string(stream_.offset()) + " (" +
                            std::to_string(got) + " of " + std::to_string(record_bytes_) +
                            " bytes before the footer)",
                        {.file = stream_.path(), .offset = stream_.offset()});
  }

  InputStream stream_;
  std::size_t record_bytes_, header_bytes_, footer_bytes_;
  std::size_t chunk_;
  std::optional<std::uint64_t> records_left_;  // plain files: their size tells
  bool header_skipped_ = false;
  bool done_ = false;
};

}  // namespace detail

namespace detail {
inline constexpr char fixed_length_records_stage[] = "fixed_length_records";
}

/// The dataset of `fixed_length_records(paths, record_bytes, options)`: the records as std::string.
using FixedLengthRecordDataset =
    FileDataset<detail::FixedLengthRecordReader, detail::FixedLengthConfig,
                detail::fixed_length_records_stage>;

/// The fixed-size records of the files `paths` (one path, or a list), in order
/// (tf: FixedLengthRecordDataset). Throws InvalidArgument if record_bytes is 0
/// or record_bytes + header_bytes + footer_bytes does not fit in a size_t.
inline FixedLengthRecordDataset fixed_length_records(FileList paths, std::size_t record_bytes,
                                                     FixedLengthRecordOptions options = {}) {
  detail::check_buffer_size(options.buffer_size, detail::fixed_length_records_stage);
  if (record_bytes == 0) {
    throw InvalidArgument("fixed_length_records: record_bytes must be > 0",
                          {.stage = detail::fixed_length_records_stage});
  }
  // The readers add these; a sum that wraps would pass their checks.
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  if (options.header_bytes > max - options.footer_bytes) {
    throw InvalidArgument("fixed_length_records: header_bytes + footer_bytes (" +
                              std::to_string(options.header_bytes) + " + " +
                              std::to_string(options.footer_bytes) + ") is too large",
                          {.stage = detail::fixed_length_records_stage});
  }
  if (record_bytes > max - options.header_bytes - options.footer_bytes) {
    throw InvalidArgument("fixed_length_records: record_bytes (" + std::to_string(record_bytes) +
                              ") plus header_bytes and footer_bytes is too large",
                          {.stage = detail::fixed_length_records_stage});
  }
  return {std::move(paths), detail::FixedLengthConfig{record_bytes, options}};
}

}  // namespace ingest
