// CSV records (RFC 4180) read from an InputStream: fields separated by a
// delimiter, records by "\n", "\r\n" or a bare "\r" (as tf.data's
// CsvDataset); a field in double quotes may hold delimiters, line breaks and
// doubled quotes (""). An empty line is a record of one empty field, as in
// CsvDataset; a line break at the very end of the data ends the last record
// and makes none. tf counterpart: the record splitting of CsvDataset. Errors
// are InvalidArgument naming the file, the line (1-based) and the column
// (0-based, as select_cols numbers them). Memory is bounded by the schema,
// not by the file: fields past those the caller keeps (set_kept_fields) are
// counted, never stored, and a record longer than max_line_bytes is an
// error (skipped to its end in constant memory). Not synchronised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/formats/compression.hpp"

namespace ingest::detail {

/// How a CSV file is split.
struct CsvDialect {
  char delimiter = ',';
  bool quoting = true;  ///< treat '"' as the quote character (tf: use_quote_delim)
  /// The longest record (bytes, line breaks included) held in memory; a
  /// longer one is an InvalidArgument naming the file and line.
  std::size_t max_line_bytes = std::size_t{64} << 20;
};

/// Splits a file into records of fields. The fields' views are valid until
/// the next call to next().
class CsvRecordReader {
 public:
  CsvRecordReader(const std::string& path, Compression compression, std::size_t buffer_size,
                  CsvDialect dialect)
      : stream_(path, compression, buffer_size, "csv"), dialect_(dialect) {}

  /// Reads the next record; false at the end of the file. A malformed record
  /// throws InvalidArgument after being consumed.
  bool next() {
    for (;;) {
      const bool eof = source_done_;
      const char* base = stream_.data();  // still valid after consume(), until fill()
      const Scan r = scan(base, stream_.available(), eof);
      if (r.status == Scan::need_more) {
        if (stream_.available() >= dialect_.max_line_bytes) skip_long_record();
        if (!stream_.fill(std::min(stream_.available() + 1, dialect_.max_line_bytes))) {
          source_done_ = true;
        }
        continue;
      }
      if (r.status == Scan::end) return false;
      stream_.consume(r.length);
      record_line_ = line_;
      line_ += r.newlines;
      if (r.status == Scan::error) {
        throw InvalidArgument(error_.message, {.file = stream_.path(),
                                               .line = record_line_ + error_.line_delta,
                                               .column = error_.column});
      }
      finish_views(base);
      return true;
    }
  }

  /// Fields in the record, all counted (only the first kept() are stored).
  std::size_t size() const noexcept { return count_; }
  /// Fields stored: field(i) and field_line(i) take i below this.
  std::size_t kept() const noexcept { return views_.size(); }
  std::string_view field(std::size_t i) const noexcept { return views_[i]; }
  /// Stores only the first `n` fields of each record from now on (the
  /// schema's columns), counting the rest: a record of millions of fields
  /// costs what its first n do.
  void set_kept_fields(std::size_t n) noexcept { keep_ = n; }
  /// 1-based line of field i (a quoted field may span lines).
  std::int64_t field_line(std::size_t i) const noexcept {
    return record_line_ + fields_[i].line_delta;
  }
  /// 1-based line where the current record starts.
  std::int64_t record_line() const noexcept { return record_line_; }
  const std::string& path() const noexcept { return stream_.path(); }

  /// Checkpoint: the offset of the next record in the (decompressed) stream
  /// and its line. Restore continues there, numbering lines on from it; the
  /// offset may not be before what was read already (e.g. a header).
  void save(StateWriter& w) const { w.write(stream_.offset(), line_); }
  void restore(StateReader& r) {
    std::uint64_t offset = 0;
    r.read(offset, line_);
    if (offset < stream_.offset()) {
      throw DataLossError("checkpoint: offset " + std::to_string(offset) +
                              " is before the header's end at " + std::to_string(stream_.offset()) +
                              " (did the file change?)",
                          {.file = stream_.path(), .offset = offset});
    }
    stream_.seek(offset);
  }

 private:
  struct Scan {
    enum Status { record, need_more, end, error } status;
    std::size_t length = 0;     // bytes of the record and its terminator
    std::int64_t newlines = 0;  // newlines in those bytes
  };
  struct Field {
    std::size_t begin, size;
    bool in_scratch;
    std::int64_t line_delta;
  };
  struct Failure {
    std::string message;
    std::int64_t line_delta = 0;
    std::int64_t column = 0;
  };

  // Line breaks in p[0, n): "\n", "\r\n" and a bare "\r" count one each.
  static std::int64_t count_newlines(const char* p, std::size_t n) noexcept {
    std::int64_t c = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (p[i] == '\n') {
        ++c;
      } else if (p[i] == '\r' && (i + 1 == n || p[i + 1] != '\n')) {
        ++c;
      }
    }
    return c;
  }

  // The end of the line break at p[at] ('\n' or '\r'), or 0 when a '\r' is
  // the last byte available and more may follow (it may be "\r\n").
  static std::size_t line_break_end(const char* p, std::size_t n, std::size_t at,
                                    bool eof) noexcept {
    if (p[at] == '\n') return at + 1;
    if (at + 1 == n) return eof ? at + 1 : 0;
    return p[at + 1] == '\n' ? at + 2 : at + 1;
  }

  // Scans one record at p[0, n). need_more unless the record is complete or
  // the data ends (eof).
  Scan scan(const char* p, std::size_t n, bool eof) {
    fields_.clear();
    scratch_.clear();
    count_ = 0;
    if (n == 0) return {eof ? Scan::end : Scan::need_more};
    const char delim = dialect_.delimiter;
    std::size_t pos = 0;
    std::int64_t lines = 0;
    auto fail = [&](std::string message, std::int64_t line_delta, std::size_t column,
                    std::size_t skip_to) -> Scan {
      error_ = {std::move(message), line_delta, static_cast<std::int64_t>(column)};
      // Consume through the end of the line the error is on.
      std::size_t end = skip_to;
      while (end < n && p[end] != '\n' && p[end] != '\r') ++end;
      if (end == n) {
        if (!eof) return {Scan::need_more};
        return {Scan::error, n, count_newlines(p, n)};
      }
      const std::size_t after = line_break_end(p, n, end, eof);
      if (after == 0) return {Scan::need_more};
      return {Scan::error, after, count_newlines(p, after)};
    };
    for (;;) {
      const std::size_t column = fields_.size();  // 0-based, as the API numbers columns
      const std::int64_t field_line = lines;
      if (dialect_.quoting && pos < n && p[pos] == '"') {
        std::size_t q = pos + 1;
        const std::size_t content = q;
        bool escaped = false;
        for (;;) {
          const void* found = std::memchr(p + q, '"', n - q);
          if (!found) {
            if (!eof) return {Scan::need_more};
            return fail("unterminated quoted field", field_line, column, n);
          }
          q = static_cast<std::size_t>(static_cast<const char*>(found) - p);
          if (q + 1 == n && !eof) return {Scan::need_more};
          if (q + 1 < n && p[q + 1] == '"') {
            escaped = true;
            q += 2;
            continue;
          }
          break;
        }
        lines += count_newlines(p + content, q - content);
        add_field(p, content, q - content, escaped, field_line);
        pos = q + 1;
        if (pos == n) {
          if (!eof) return {Scan::need_more};
          return {Scan::record, pos, lines};
        }
        if (p[pos] == delim) {
          ++pos;
          continue;
        }
        if (p[pos] == '\n' || p[pos] == '\r') {
          const std::size_t after = line_break_end(p, n, pos, eof);
          if (after == 0) return {Scan::need_more};
          return {Scan::record, after, lines + 1};
        }
        return fail("unexpected character after the closing quote of a quoted field", lines, column,
                    pos);
      }
      std::size_t q = pos;
      while (q < n && p[q] != delim && p[q] != '\n' && p[q] != '\r') {
        if (dialect_.quoting && p[q] == '"') {
          return fail("a quote inside an unquoted field (quote the field and double the quote)",
                      lines, column, q);
        }
        ++q;
      }
      if (q == n) {
        if (!eof) return {Scan::need_more};
        add_field(p, pos, q - pos, false, field_line);
        return {Scan::record, n, lines};
      }
      if (p[q] == delim) {
        add_field(p, pos, q - pos, false, field_line);
        pos = q + 1;
        continue;
      }
      const std::size_t after = line_break_end(p, n, q, eof);
      if (after == 0) return {Scan::need_more};
      add_field(p, pos, q - pos, false, field_line);
      return {Scan::record, after, lines + 1};
    }
  }

  void add_field(const char* p, std::size_t begin, std::size_t size, bool escaped,
                 std::int64_t line_delta) {
    if (count_++ >= keep_) return;  // counted, not stored: past the schema
    if (!escaped) {
      fields_.push_back({begin, size, false, line_delta});
      return;
    }
    const std::size_t start = scratch_.size();
    for (std::size_t i = begin; i < begin + size; ++i) {
      scratch_ += p[i];
      if (p[i] == '"') ++i;  // "" -> "
    }
    fields_.push_back({start, scratch_.size() - start, true, line_delta});
  }

  // A record longer than max_line_bytes: consumed to its end without
  // holding it (quotes followed, so a quoted line break does not end it),
  // then reported. The buffer never grows past max_line_bytes.
  [[noreturn]] void skip_long_record() {
    const std::int64_t start_line = line_;
    bool quoted = false, after_cr = false;
    for (;;) {
      const char* p = stream_.data();
      const std::size_t n = stream_.available();
      for (std::size_t i = 0; i < n; ++i) {
        const char c = p[i];
        if (after_cr) {
          after_cr = false;
          if (c == '\n') continue;  // the "\r\n" counted at its '\r'
        }
        if (dialect_.quoting && c == '"') quoted = !quoted;
        if (c != '\n' && c != '\r') continue;
        ++line_;
        after_cr = c == '\r';
        if (quoted) continue;
        std::size_t end = i + 1;
        if (after_cr && end < n && p[end] == '\n') ++end;
        stream_.consume(end);
        throw_long(start_line);
      }
      stream_.consume(n);
      if (!stream_.fill(1)) {
        source_done_ = true;
        throw_long(start_line);
      }
    }
  }
  [[noreturn]] void throw_long(std::int64_t line) const {
    throw InvalidArgument("a record longer than max_line_bytes (" +
                              std::to_string(dialect_.max_line_bytes) + " bytes)",
                          {.file = stream_.path(), .line = line});
  }

  // Views are made once the record is complete: scratch_ may have moved while growing.
  void finish_views(const char* base) {
    views_.clear();
    for (const Field& f : fields_) {
      views_.emplace_back(f.in_scratch ? scratch_.data() + f.begin : base + f.begin, f.size);
    }
  }

  InputStream stream_;
  CsvDialect dialect_;
  std::vector<Field> fields_;
  std::vector<std::string_view> views_;
  std::string scratch_;
  Failure error_;
  std::int64_t line_ = 1;
  std::int64_t record_line_ = 0;
  std::size_t count_ = 0;  // fields of the record scanned, kept or not
  std::size_t keep_ = std::numeric_limits<std::size_t>::max();
  bool source_done_ = false;
};

}  // namespace ingest::detail
