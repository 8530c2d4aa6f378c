// csv_rows(paths, {.column_names, .header, .select_columns, .column_defaults,
// ...}): the records of CSV files as CsvRow, whose fields are found by column
// name: row["label"] (text), row.get<float>("age") (parsed when asked for).
// tf.data counterpart: experimental.make_csv_dataset, whose element is a dict
// of named columns; its batching, shuffling and repeating are left to
// .batch(), .shuffle() and .repeat(), and there is no type inference (a
// field is typed when read). The names are column_names or else the first
// file's header line, read when the dataset is built; every file's header
// must equal it (a file that differs raises InvalidArgument naming it and is
// skipped). Record errors are csv's: InvalidArgument naming the file, line
// and column (0-based, and its name), and the next record follows.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/formats/compression.hpp"
#include "ingest/formats/csv.hpp"
#include "ingest/sources/csv.hpp"
#include "ingest/sources/file_dataset.hpp"

namespace ingest {

/// Options of csv_rows (tf: make_csv_dataset's arguments of the same names).
struct CsvRowsOptions {
  /// The names of the file's columns, in order; empty: the first file's
  /// header line (then `header` must be true).
  std::vector<std::string> column_names = {};
  /// Every file starts with a header line, which is skipped (and, when the
  /// names come from it, must equal the first file's).
  bool header = true;
  /// The row's columns, by name, in the order listed (tf: select_columns,
  /// whose dict is in the file's order); empty: all the file's columns.
  std::vector<std::string> select_columns = {};
  /// Per row column (select_columns' order, or the file's): the text of an
  /// empty field (or one equal to na_value); std::nullopt makes the column
  /// required (an empty field is an error when the record is read). Empty:
  /// no defaults, none required (an empty field reads as "", and get<T> of a
  /// number raises).
  std::vector<std::optional<std::string>> column_defaults = {};
  char delimiter = ',';  ///< tf: field_delim
  bool quoting = true;   ///< treat '"' as the quote character (tf: use_quote_delim)
  /// A field equal to this counts as empty (tf: na_value).
  std::string na_value = {};
  Compression compression = Compression::none;  ///< tf: compression_type
  /// Read window in bytes.
  std::size_t buffer_size = default_buffer_size;
  /// The longest record held in memory (bytes, line breaks included): a
  /// longer one raises InvalidArgument naming the file and line, is
  /// skipped, and the next record is read. Fields past the schema's are
  /// counted, never stored.
  std::size_t max_line_bytes = std::size_t{64} << 20;
};

namespace detail {

/// What every row of one csv_rows dataset shares: the columns and where
/// they are in the files.
struct CsvRowsSchema {
  std::vector<std::string> header;                   // the file's column names
  std::vector<std::string> names;                    // the row's columns, in order
  std::vector<std::size_t> file_columns;             // the file's column of each
  std::vector<std::optional<std::string>> defaults;  // per row column, or empty
  std::vector<std::size_t> by_name;                  // row columns sorted by name
  std::size_t needed_fields = 0;                     // a record has at least these
  bool exact_fields = true;                          // and exactly these (no selection)
  bool check_header = false;                         // names came from a header

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  /// The row column named `name`, or npos.
  std::size_t find(std::string_view name) const noexcept {
    const auto it = std::lower_bound(
        by_name.begin(), by_name.end(), name,
        [this](std::size_t c, std::string_view n) { return std::string_view(names[c]) < n; });
    return it != by_name.end() && names[*it] == name ? *it : npos;
  }
};

/// One file's share of its rows: the schema and the path, for messages.
struct CsvRowsFile {
  std::shared_ptr<const CsvRowsSchema> schema;
  std::string path;
};

class CsvRowsReader;

}  // namespace detail

/// One CSV record of csv_rows: its fields by column name. Holds one buffer
/// (the fields' text and their end offsets) and a shared pointer to the
/// column names; copies are independent.
class CsvRow {
 public:
  CsvRow() = default;

  /// The number of columns.
  std::size_t size() const noexcept { return file_ ? file_->schema->names.size() : 0; }
  /// The columns' names, in order.
  const std::vector<std::string>& names() const noexcept {
    static const std::vector<std::string> none;
    return file_ ? file_->schema->names : none;
  }
  /// Whether the schema has a column named `name`.
  bool contains(std::string_view name) const noexcept {
    return file_ && file_->schema->find(name) != detail::CsvRowsSchema::npos;
  }
  /// The text of column `name` (its default if the field was empty).
  /// Throws InvalidArgument naming the column and the row's columns if absent.
  std::string_view operator[](std::string_view name) const { return field(index_of(name)); }
  /// By position, use field(i): row[0] would otherwise become a null name.
  std::string_view operator[](std::size_t) const = delete;
  /// The text of the i-th column (names()[i]); i < size().
  std::string_view field(std::size_t i) const noexcept {
    const std::size_t n = size();
    const char* text = data_.data() + n * sizeof(std::uint32_t);
    const std::uint32_t begin = i == 0 ? 0 : end_of(i - 1);
    return {text + begin, end_of(i) - begin};
  }
  /// Column `name` as T (std::int32_t, std::int64_t, float, double,
  /// std::string or std::string_view), parsed as csv parses. Throws
  /// InvalidArgument naming the file, line, column and its name when the
  /// column is absent, or its field is empty (for a number) or unparsable.
  template <class T>
  T get(std::string_view name) const {
    static_assert(detail::csv_column_type<T> || std::is_same_v<T, std::string_view>,
                  "CsvRow::get: T must be std::int32_t, std::int64_t, float, double, "
                  "std::string or std::string_view");
    const std::size_t i = index_of(name);
    const std::string_view text = field(i);
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view>) {
      return T(text);
    } else {
      if (text.empty()) {
        fail(i, detail::csv_column_label(column_of(i), header()) +
                    " is empty (give it a default in column_defaults)");
      }
      T value{};
      if (!detail::parse_csv_number(text, value)) {
        fail(i, "cannot parse '" + std::string(text.substr(0, 64)) + "' as " +
                    detail::csv_type_name<T>() + " in " +
                    detail::csv_column_label(column_of(i), header()));
      }
      return value;
    }
  }
  /// The file the row was read from.
  const std::string& file() const noexcept {
    static const std::string none;
    return file_ ? file_->path : none;
  }
  /// The 1-based line where the record starts.
  std::int64_t line() const noexcept { return line_; }

 private:
  friend class detail::CsvRowsReader;

  std::uint32_t end_of(std::size_t i) const noexcept {
    std::uint32_t end;
    std::memcpy(&end, data_.data() + i * sizeof(std::uint32_t), sizeof end);
    return end;
  }
  const std::vector<std::string>& header() const noexcept { return file_->schema->header; }
  std::size_t column_of(std::size_t i) const noexcept { return file_->schema->file_columns[i]; }

  std::size_t index_of(std::string_view name) const {
    const std::size_t i = file_ ? file_->schema->find(name) : detail::CsvRowsSchema::npos;
    if (i == detail::CsvRowsSchema::npos) {
      throw InvalidArgument("csv_rows: no column named '" + std::string(name) +
                                "'; the row's columns are " + detail::csv_name_list(names()),
                            {.file = file(), .line = file_ ? std::optional(line_) : std::nullopt});
    }
    return i;
  }

  [[noreturn]] void fail(std::size_t i, std::string message) const {
    throw InvalidArgument(
        "csv_rows: " + std::move(message),
        {.file = file(), .line = line_, .column = static_cast<std::int64_t>(column_of(i))});
  }

  std::shared_ptr<const detail::CsvRowsFile> file_;
  std::string data_;  // size() uint32 end offsets, then the fields' text
  std::int64_t line_ = 0;
};

namespace detail {

/// What a csv_rows dataset holds: the options and the resolved columns.
struct CsvRowsConfig {
  CsvRowsOptions options;
  std::shared_ptr<const CsvRowsSchema> schema;
};

class CsvRowsReader {
 public:
  using value_type = CsvRow;

  CsvRowsReader(const std::string& path, const CsvRowsConfig& config)
      : records_(path, config.options.compression, config.options.buffer_size,
                 {config.options.delimiter, config.options.quoting, config.options.max_line_bytes}),
        file_(std::make_shared<const CsvRowsFile>(CsvRowsFile{config.schema, path})),
        na_value_(config.options.na_value),
        skip_header_(config.options.header) {
    // The header is compared whole; records keep what the schema reads.
    const CsvRowsSchema& schema = *file_->schema;
    records_.set_kept_fields(skip_header_ ? std::max(schema.header.size(), schema.needed_fields)
                                          : schema.needed_fields);
  }

  std::optional<CsvRow> read() {
    if (abandoned_) return std::nullopt;
    const CsvRowsSchema& schema = *file_->schema;
    if (skip_header_) {
      skip_header_ = false;
      abandoned_ = true;  // until the header is read and found right
      if (!records_.next()) {
        throw InvalidArgument("cannot read the header: the file is empty",
                              {.file = records_.path(), .line = 1});
      }
      if (schema.check_header && !same_header(schema.header)) {
        std::vector<std::string> got;
        for (std::size_t c = 0; c < records_.kept(); ++c) got.emplace_back(records_.field(c));
        throw InvalidArgument("the header " + csv_name_list(got) +
                                  " differs from the first file's " + csv_name_list(schema.header) +
                                  " (every file must have the same header)",
                              {.file = records_.path(), .line = 1});
      }
      abandoned_ = false;
      records_.set_kept_fields(schema.needed_fields);
    }
    if (!records_.next()) return std::nullopt;
    const std::size_t fields = records_.size();
    if (schema.exact_fields ? fields != schema.needed_fields : fields < schema.needed_fields) {
      throw InvalidArgument("expected " + std::string(schema.exact_fields ? "" : "at least ") +
                                std::to_string(schema.needed_fields) + " fields, got " +
                                std::to_string(fields),
                            {.file = records_.path(), .line = records_.record_line()});
    }
    // The fields' texts (defaults for empty ones), then one buffer for all.
    const std::size_t n = schema.names.size();
    texts_.resize(n);
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t column = schema.file_columns[i];
      std::string_view text = records_.field(column);
      if (text.empty() || (!na_value_.empty() && text == na_value_)) {
        if (i < schema.defaults.size()) {
          if (!schema.defaults[i]) {
            throw InvalidArgument(
                csv_column_label(column, schema.header) +
                    " is required (its column_defaults entry is std::nullopt) but its field is " +
                    (text.empty() ? std::string("empty") : "'" + na_value_ + "' (na_value)"),
                {.file = records_.path(),
                 .line = records_.field_line(column),
                 .column = static_cast<std::int64_t>(column)});
          }
          text = *schema.defaults[i];
        } else {
          text = {};
        }
      }
      texts_[i] = text;
      total += text.size();
    }
    if (total > UINT32_MAX) {
      throw InvalidArgument("a record of more than 4 GiB of text",
                            {.file = records_.path(), .line = records_.record_line()});
    }
    CsvRow row;
    row.file_ = file_;
    row.line_ = records_.record_line();
    row.data_.resize(n * sizeof(std::uint32_t) + total);
    char* ends = row.data_.data();
    char* text = ends + n * sizeof(std::uint32_t);
    std::uint32_t end = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!texts_[i].empty()) std::memcpy(text + end, texts_[i].data(), texts_[i].size());
      end += static_cast<std::uint32_t>(texts_[i].size());
      std::memcpy(ends + i * sizeof(std::uint32_t), &end, sizeof end);
    }
    return row;
  }

  /// Checkpoint: whether the header is still to be read, whether the file
  /// was abandoned, then the record reader's offset and line (the header was
  /// checked against the schema when it was read; it is skipped by the seek).
  void save(StateWriter& w) const {
    w.write(skip_header_, abandoned_);
    records_.save(w);
  }
  void restore(StateReader& r) {
    r.read(skip_header_, abandoned_);
    records_.restore(r);
  }

 private:
  bool same_header(const std::vector<std::string>& header) const {
    if (records_.size() != header.size()) return false;
    for (std::size_t c = 0; c < header.size(); ++c) {
      if (records_.field(c) != header[c]) return false;
    }
    return true;
  }

  CsvRecordReader records_;
  std::shared_ptr<const CsvRowsFile> file_;
  std::string na_value_;
  std::vector<std::string_view> texts_;  // reused: no allocation per record but the row's
  bool skip_header_;
  bool abandoned_ = false;  // the header failed: nothing more from this file
};

inline constexpr char csv_rows_stage[] = "csv_rows";

}  // namespace detail

/// The dataset of `csv_rows(paths, options)`: the records of CSV files as CsvRow.
using CsvRowsDataset =
    FileDataset<detail::CsvRowsReader, detail::CsvRowsConfig, detail::csv_rows_stage>;

/// The records of the CSV files `paths` as CsvRow, fields found by name (tf:
/// experimental.make_csv_dataset without its batching, shuffling and type
/// inference). Reads the first file's header here unless column_names are
/// given. Throws InvalidArgument for inconsistent options, an empty first
/// file, a name missing from the header (naming it and listing the header)
/// or a name there twice; IoError if the first file cannot be read.
inline CsvRowsDataset csv_rows(FileList paths, CsvRowsOptions options = {}) {
  const ErrorContext where{.stage = detail::csv_rows_stage};
  detail::check_buffer_size(options.buffer_size, detail::csv_rows_stage);
  if (options.quoting && options.delimiter == '"') {
    throw InvalidArgument("csv_rows: the delimiter cannot be the quote character", where);
  }
  if (options.delimiter == '\n' || options.delimiter == '\r') {
    throw InvalidArgument("csv_rows: the delimiter cannot be a line break", where);
  }
  if (options.max_line_bytes == 0) {
    throw InvalidArgument("csv_rows: max_line_bytes must be at least 1", where);
  }
  auto schema = std::make_shared<detail::CsvRowsSchema>();
  std::string source;  // where the names came from, for messages
  if (!options.column_names.empty()) {
    schema->header = options.column_names;
  } else {
    if (!options.header) {
      throw InvalidArgument(
          "csv_rows: with .header = false, give the columns' names in .column_names", where);
    }
    if (paths.size() == 0) {
      throw InvalidArgument(
          "csv_rows: no files to read the header from (give .column_names or a file)", where);
    }
    source = paths[0];
    try {
      detail::CsvRecordReader first(source, options.compression, options.buffer_size,
                                    {options.delimiter, options.quoting, options.max_line_bytes});
      if (!first.next()) {
        throw InvalidArgument(
            "csv_rows: cannot read the header: the file is empty (give .column_names, or "
            "files with a header line)",
            {.line = 1});
      }
      for (std::size_t c = 0; c < first.size(); ++c) schema->header.emplace_back(first.field(c));
    } catch (Error& e) {
      e.add_context({.stage = detail::csv_rows_stage, .file = source});
      throw;
    }
    schema->check_header = true;
  }
  const std::vector<std::string>& header = schema->header;
  // tf: "Cannot have duplicate column names."
  for (std::size_t c = 0; c < header.size(); ++c) {
    for (std::size_t d = 0; d < c; ++d) {
      if (header[c] == header[d]) {
        throw InvalidArgument("csv_rows: the column name '" + header[c] + "' appears twice in " +
                                  (source.empty() ? "column_names " : "the header ") +
                                  detail::csv_name_list(header) + " (columns " + std::to_string(d) +
                                  " and " + std::to_string(c) + ")",
                              {.stage = detail::csv_rows_stage, .file = source});
      }
    }
  }
  if (options.select_columns.empty()) {
    schema->names = header;
    for (std::size_t c = 0; c < header.size(); ++c) schema->file_columns.push_back(c);
    schema->needed_fields = header.size();
  } else {
    const auto& select = options.select_columns;
    for (std::size_t i = 0; i < select.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (select[i] == select[j]) {
          throw InvalidArgument("csv_rows: select_columns lists '" + select[i] + "' twice", where);
        }
      }
      // The names are unique here, so csv_find_name only reports a missing one.
      std::size_t c = 0;
      try {
        c = detail::csv_find_name(header, select[i], source, "csv_rows: select_columns");
      } catch (Error& e) {
        e.add_context(where);
        throw;
      }
      schema->names.push_back(select[i]);
      schema->file_columns.push_back(c);
      schema->needed_fields = std::max(schema->needed_fields, c + 1);
    }
    schema->exact_fields = false;  // as CsvDataset with select_cols
  }
  if (!options.column_defaults.empty() && options.column_defaults.size() != schema->names.size()) {
    throw InvalidArgument("csv_rows: column_defaults has " +
                              std::to_string(options.column_defaults.size()) + " values for " +
                              std::to_string(schema->names.size()) + " columns " +
                              detail::csv_name_list(schema->names) +
                              " (one per column: a default text, or std::nullopt for a "
                              "required column)",
                          where);
  }
  schema->defaults = options.column_defaults;
  schema->by_name.resize(schema->names.size());
  for (std::size_t i = 0; i < schema->names.size(); ++i) schema->by_name[i] = i;
  std::sort(schema->by_name.begin(), schema->by_name.end(),
            [&names = schema->names](std::size_t a, std::size_t b) { return names[a] < names[b]; });
  return CsvRowsDataset(std::move(paths),
                        detail::CsvRowsConfig{std::move(options), std::move(schema)});
}

}  // namespace ingest
