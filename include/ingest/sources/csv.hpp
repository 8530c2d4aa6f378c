// csv<Cols...>(paths, {.defaults, .header, .delimiter, ...}): the records of
// CSV files (RFC 4180 quoting) as std::tuple<Cols...>, each Col one of int32,
// int64, float, double or std::string. tf.data counterpart:
// experimental.CsvDataset. An empty field (or one equal to na_value) takes
// its column's default; a column without a default is required (.defaults
// may list fewer values than columns: the rest are required). Columns are
// picked by index (select_cols, exclude_cols) or by header name
// (select_names, in the order listed); messages number them from 0. As in
// CsvDataset, an empty line is a record of one empty field (a one-column
// file gets the default there; with more columns it is a record with too few
// fields), and "\n", "\r\n" and a bare "\r" all end a record. A bad field
// or record raises InvalidArgument naming the file, line and column,
// consumes its record, and the next call continues with the next record. A
// file with `header` set that is empty raises InvalidArgument naming it.
// Memory is bounded by the schema: a record's fields past the columns read
// are counted, not stored (a line of millions of fields fails "expected 2
// fields, got 5000000" at the cost of its first two), and a record longer
// than max_line_bytes raises InvalidArgument naming the file and line.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/formats/compression.hpp"
#include "ingest/formats/csv.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/sources/file_dataset.hpp"

namespace ingest {

/// The per-column defaults of csv<Cols...>: one value per column, in order;
/// std::nullopt, or a column past the end of a shorter list, is required.
/// `.defaults = {0, std::nullopt, 1.5}` or `.defaults = {0}` (the rest required).
template <class... Cols>
class CsvDefaults {
 public:
  CsvDefaults() requires(sizeof...(Cols) > 0) = default;
  /// A value (or std::nullopt) for every column; `{}` for one is std::nullopt.
  CsvDefaults(std::optional<Cols>... values)  // NOLINT: implicit, for `.defaults = {...}`
      : values_(std::move(values)...) {}
  /// Values for the first columns; the rest are required.
  template <class... Us>
  requires(sizeof...(Us) != sizeof...(Cols) &&
           !(sizeof...(Us) == 1 && (std::is_same_v<std::remove_cvref_t<Us>, CsvDefaults> && ...)))
      CsvDefaults(Us&&... values) {  // NOLINT: implicit, for `.defaults = {...}`
    static_assert(sizeof...(Us) < sizeof...(Cols),
                  "csv: .defaults lists more values than there are columns (give one per "
                  "column type, std::nullopt for a required column)");
    assign<0>(std::forward<Us>(values)...);
  }

  /// The default of column I (std::nullopt: required).
  template <std::size_t I>
  const auto& get() const noexcept {
    return std::get<I>(values_);
  }
  /// The default of column I, to change it (std::nullopt: required).
  template <std::size_t I>
  auto& get() noexcept {
    return std::get<I>(values_);
  }

 private:
  template <std::size_t I, class U, class... Rest>
  void assign(U&& value, Rest&&... rest) {
    if constexpr (I < sizeof...(Cols)) {
      using Col = std::tuple_element_t<I, std::tuple<Cols...>>;
      static_assert(std::is_constructible_v<std::optional<Col>, U&&>,
                    "csv: a value in .defaults cannot become its column's type (the I-th value "
                    "is the default of the I-th column type)");
      if constexpr (std::is_constructible_v<std::optional<Col>, U&&>) {
        std::get<I>(values_) = std::optional<Col>(std::forward<U>(value));
      }
      if constexpr (sizeof...(Rest) > 0) assign<I + 1>(std::forward<Rest>(rest)...);
    }
  }

  std::tuple<std::optional<Cols>...> values_{};
};

/// Options of csv<Cols...>.
template <class... Cols>
struct CsvOptions {
  /// Per column: the value of an empty field; std::nullopt, or no value (a
  /// list shorter than the columns), makes the column required.
  CsvDefaults<Cols...> defaults = {};
  /// Skip the first record of every file.
  bool header = false;
  /// The field separator (tf: field_delim).
  char delimiter = ',';
  /// Treat '"' as the quote character (tf: use_quote_delim).
  bool quoting = true;
  /// A field equal to this counts as empty (tf: na_value).
  std::string na_value = {};
  /// Which of the file's columns (0-based, increasing) become Cols; empty: all,
  /// and then a record must have exactly sizeof...(Cols) fields.
  std::vector<std::size_t> select_cols = {};
  /// Which of the file's columns (0-based, increasing) to drop; the others,
  /// in order, become Cols, so a record must have exactly sizeof...(Cols) +
  /// exclude_cols.size() fields (tf: exclude_cols). Not with select_cols.
  std::vector<std::size_t> exclude_cols = {};
  /// Which columns, by their names in each file's header line, become Cols,
  /// in the order listed here (any order, unlike select_cols); needs
  /// `.header = true`. A file whose header lacks a name (or has it twice)
  /// raises InvalidArgument naming the file, the name and the header's
  /// columns, and is skipped. Not with select_cols or exclude_cols.
  std::vector<std::string> select_names = {};
  /// How the files are compressed (tf: compression_type).
  Compression compression = Compression::none;
  /// Read window in bytes.
  std::size_t buffer_size = default_buffer_size;
  /// The longest record held in memory (bytes, line breaks included): a
  /// longer one raises InvalidArgument naming the file and line, is
  /// skipped, and the next record is read.
  std::size_t max_line_bytes = std::size_t{64} << 20;
};

namespace detail {

template <class T>
inline constexpr bool csv_column_type =
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::string>;

template <class T>
constexpr const char* csv_type_name() {
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  return "string";
}

/// Parses a number the way tf's CSV parsing does: surrounding spaces allowed,
/// a leading '+' allowed, nothing else around it.
template <class T>
bool parse_csv_number(std::string_view s, T& out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

/// "column 2" or, when the header named it, "column 2 ('age')": columns are
/// numbered from 0, as select_cols and exclude_cols number them.
inline std::string csv_column_label(std::size_t column, const std::vector<std::string>& names) {
  std::string label = "column " + std::to_string(column);
  if (column < names.size()) label += " ('" + names[column] + "')";
  return label;
}

/// The names of a header as "[a, b, c]", for messages.
inline std::string csv_name_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  return out + "]";
}

/// The column of `name` in `header`; throws InvalidArgument naming `path`,
/// the name and the header's columns when it is absent or there twice.
/// An empty `path`: the names were given, not read from a file.
inline std::size_t csv_find_name(const std::vector<std::string>& header, const std::string& name,
                                 const std::string& path, const char* option) {
  const std::optional<std::int64_t> line =
      path.empty() ? std::nullopt : std::optional<std::int64_t>(1);
  std::size_t found = header.size();
  for (std::size_t c = 0; c < header.size(); ++c) {
    if (header[c] != name) continue;
    if (found != header.size()) {
      throw InvalidArgument(std::string(option) + ": the name '" + name +
                                "' appears twice in the header " + csv_name_list(header) +
                                " (columns " + std::to_string(found) + " and " + std::to_string(c) +
                                ")",
                            {.file = path, .line = line});
    }
    found = c;
  }
  if (found == header.size()) {
    throw InvalidArgument(std::string(option) + ": no column named '" + name +
                              "' in the header; its columns are " + csv_name_list(header),
                          {.file = path, .line = line});
  }
  return found;
}

template <class... Cols>
class CsvReader {
 public:
  using value_type = std::tuple<Cols...>;

  CsvReader(const std::string& path, const CsvOptions<Cols...>& options)
      : records_(path, options.compression, options.buffer_size,
                 {options.delimiter, options.quoting, options.max_line_bytes}),
        defaults_(options.defaults),
        na_value_(options.na_value),
        select_(options.select_cols),
        select_names_(options.select_names),
        skip_header_(options.header) {
    if (!options.exclude_cols.empty()) {
      // The kept columns of a record of exactly Cols + excluded fields.
      exact_ = true;
      const std::size_t total = sizeof...(Cols) + options.exclude_cols.size();
      exact_fields_ = total;
      std::size_t e = 0;
      for (std::size_t c = 0; c < total; ++c) {
        if (e < options.exclude_cols.size() && options.exclude_cols[e] == c) {
          ++e;
        } else {
          select_.push_back(c);
        }
      }
    }
    for (std::size_t c : select_) select_needs_ = std::max(select_needs_, c + 1);
    // select_names keeps the whole header, then what its columns need.
    if (select_names_.empty()) records_.set_kept_fields(kept_fields());
  }

  std::optional<value_type> read() {
    if (abandoned_) return std::nullopt;
    if (skip_header_) {
      skip_header_ = false;
      read_header();
    }
    if (!records_.next()) return std::nullopt;
    const bool exact = select_.empty() || exact_;
    const std::size_t needed = select_.empty() ? sizeof...(Cols)
                               : exact_        ? exact_fields_
                                               : select_needs_;
    if (exact ? records_.size() != needed : records_.size() < needed) {
      throw InvalidArgument("expected " + std::string(exact ? "" : "at least ") +
                                std::to_string(needed) + " fields, got " +
                                std::to_string(records_.size()),
                            {.file = records_.path(), .line = records_.record_line()});
    }
    return build(std::index_sequence_for<Cols...>{});
  }

  /// Checkpoint: whether the header is still to be read, whether the file
  /// was abandoned, then the record reader's offset and line. Restore
  /// re-reads the header (its names serve messages and select_names).
  void save(StateWriter& w) const {
    w.write(skip_header_, abandoned_);
    records_.save(w);
  }
  void restore(StateReader& r) {
    bool header_pending = true;
    r.read(header_pending, abandoned_);
    if (!header_pending && skip_header_ && !abandoned_) {
      skip_header_ = false;
      read_header();
    }
    records_.restore(r);
  }

 private:
  // Reads the header line: its names label the columns in messages, and
  // select_names is resolved against it. A file whose header cannot serve
  // is abandoned (read() returns nothing more from it).
  void read_header() {
    // tf: "Can't read header of file"; an empty file has no header to skip.
    if (!records_.next()) {
      abandoned_ = true;
      throw InvalidArgument("cannot read the header: the file is empty",
                            {.file = records_.path(), .line = 1});
    }
    names_.reserve(records_.kept());
    for (std::size_t c = 0; c < records_.kept(); ++c) names_.emplace_back(records_.field(c));
    if (!select_names_.empty()) {
      try {
        for (const std::string& name : select_names_) {
          select_.push_back(csv_find_name(names_, name, records_.path(), "csv: select_names"));
        }
      } catch (...) {
        abandoned_ = true;
        throw;
      }
    }
    for (std::size_t c : select_) select_needs_ = std::max(select_needs_, c + 1);
    records_.set_kept_fields(kept_fields());
  }

  // The fields a record's columns come from: every one read, and no more.
  std::size_t kept_fields() const {
    return select_.empty() ? sizeof...(Cols) : exact_ ? exact_fields_ : select_needs_;
  }

  template <std::size_t... I>
  value_type build(std::index_sequence<I...>) {
    return value_type{convert<I, Cols>()...};  // braces: left to right
  }

  template <std::size_t I, class T>
  T convert() {
    const std::size_t column = select_.empty() ? I : select_[I];
    const std::string_view text = records_.field(column);
    if (text.empty() || (!na_value_.empty() && text == na_value_)) {
      if (const auto& d = defaults_.template get<I>()) return *d;
      fail(column, csv_column_label(column, names_) +
                       " is required (it has no default) but its field is " +
                       (text.empty() ? std::string("empty") : "'" + na_value_ + "' (na_value)"));
    }
    if constexpr (std::is_same_v<T, std::string>) {
      return std::string(text);
    } else {
      T value{};
      if (!parse_csv_number(text, value)) {
        fail(column, "cannot parse '" + std::string(text.substr(0, 64)) + "' as " +
                         csv_type_name<T>() + " in " + csv_column_label(column, names_));
      }
      return value;
    }
  }

  [[noreturn]] void fail(std::size_t column, std::string message) const {
    throw InvalidArgument(std::move(message), {.file = records_.path(),
                                               .line = records_.field_line(column),
                                               .column = static_cast<std::int64_t>(column)});
  }

  CsvRecordReader records_;
  CsvDefaults<Cols...> defaults_;
  std::string na_value_;
  std::vector<std::size_t> select_;  // the file's column of each Cols; empty: all
  std::vector<std::string> select_names_;
  std::vector<std::string> names_;  // the header's names, when it has one
  std::size_t select_needs_ = 0;    // select_: a record needs this many fields at least
  bool exact_ = false;              // exclude_cols: the record's size is known
  std::size_t exact_fields_ = 0;    // and is this
  bool skip_header_;
  bool abandoned_ = false;  // the header failed: nothing more from this file
};

}  // namespace detail

namespace detail {
inline constexpr char csv_stage[] = "csv";
}

/// The dataset of `csv<Cols...>(paths, options)`: the records of CSV files as
/// `std::tuple<Cols...>`.
template <class... Cols>
using CsvDataset = FileDataset<detail::CsvReader<Cols...>, CsvOptions<Cols...>, detail::csv_stage>;

/// The records of the CSV files `paths` as std::tuple<Cols...> (tf:
/// experimental.CsvDataset). Throws InvalidArgument for inconsistent options.
template <class... Cols>
CsvDataset<Cols...> csv(FileList paths, CsvOptions<std::type_identity_t<Cols>...> options = {}) {
  static_assert(sizeof...(Cols) > 0, "csv: name the column types, e.g. csv<std::int64_t, float>");
  static_assert((detail::csv_column_type<Cols> && ...),
                "csv: column types must be std::int32_t, std::int64_t, float, double or "
                "std::string");
  const auto& select = options.select_cols;
  if (!select.empty()) {
    bool increasing = true;
    for (std::size_t i = 1; i < select.size(); ++i) increasing &= select[i - 1] < select[i];
    if (select.size() != sizeof...(Cols) || !increasing) {
      throw InvalidArgument("csv: select_cols must list " + std::to_string(sizeof...(Cols)) +
                                " increasing column indices, one per column type",
                            {.stage = "csv"});
    }
  }
  const auto& names = options.select_names;
  if (!names.empty()) {
    if (!select.empty() || !options.exclude_cols.empty()) {
      throw InvalidArgument("csv: select_names cannot be given with select_cols or exclude_cols",
                            {.stage = "csv"});
    }
    if (!options.header) {
      throw InvalidArgument(
          "csv: select_names needs .header = true (the names are looked up in each file's "
          "header line)",
          {.stage = "csv"});
    }
    if (names.size() != sizeof...(Cols)) {
      throw InvalidArgument("csv: select_names must list " + std::to_string(sizeof...(Cols)) +
                                " names, one per column type, not " + std::to_string(names.size()),
                            {.stage = "csv"});
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (names[i] == names[j]) {
          throw InvalidArgument("csv: select_names lists '" + names[i] + "' twice",
                                {.stage = "csv"});
        }
      }
    }
  }
  const auto& exclude = options.exclude_cols;
  if (!select.empty() && !exclude.empty()) {
    throw InvalidArgument("csv: select_cols and exclude_cols cannot both be given",
                          {.stage = "csv"});
  }
  if (!exclude.empty()) {
    // Every excluded index must name one of the file's Cols + exclude columns.
    bool valid = exclude.back() < sizeof...(Cols) + exclude.size();
    for (std::size_t i = 1; i < exclude.size(); ++i) valid &= exclude[i - 1] < exclude[i];
    if (!valid) {
      throw InvalidArgument("csv: exclude_cols must list increasing column indices below " +
                                std::to_string(sizeof...(Cols) + exclude.size()) +
                                " (the file's column count: one per column type plus one "
                                "per excluded column)",
                            {.stage = "csv"});
    }
  }
  detail::check_buffer_size(options.buffer_size, detail::csv_stage);
  if (options.max_line_bytes == 0) {
    throw InvalidArgument("csv: max_line_bytes must be at least 1", {.stage = "csv"});
  }
  if (options.quoting && options.delimiter == '"') {
    throw InvalidArgument("csv: the delimiter cannot be the quote character", {.stage = "csv"});
  }
  if (options.delimiter == '\n' || options.delimiter == '\r') {
    throw InvalidArgument("csv: the delimiter cannot be a line break", {.stage = "csv"});
  }
  return CsvDataset<Cols...>(std::move(paths), std::move(options));
}

}  // namespace ingest
