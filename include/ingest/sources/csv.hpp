// csv<Cols...>(paths, {.defaults, .header, .delimiter, ...}): the records of
// CSV files (RFC 4180 quoting) as std::tuple<Cols...>, each Col one of int32,
// int64, float, double or std::string. tf.data counterpart:
// experimental.CsvDataset. An empty field (or one equal to na_value) takes
// its column's default; a column without a default is required. As in
// CsvDataset, an empty line is a record of one empty field (a one-column
// file gets the default there; with more columns it is a record with too few
// fields), and "\n", "\r\n" and a bare "\r" all end a record. A bad field
// or record raises InvalidArgument naming the file, line and column,
// consumes its record, and the next call continues with the next record. A
// file with `header` set that is empty raises InvalidArgument naming it.
#pragma once

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

/// Options of csv<Cols...>.
template <class... Cols>
struct CsvOptions {
  /// Per column: the value of an empty field; std::nullopt makes the column required.
  std::tuple<std::optional<Cols>...> defaults = {};
  /// Skip the first record of every file.
  bool header = false;
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
  Compression compression = Compression::none;
  std::size_t buffer_size = default_buffer_size;
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

template <class... Cols>
class CsvReader {
 public:
  using value_type = std::tuple<Cols...>;

  CsvReader(const std::string& path, const CsvOptions<Cols...>& options)
      : records_(path, options.compression, options.buffer_size,
                 {options.delimiter, options.quoting}),
        defaults_(options.defaults),
        na_value_(options.na_value),
        select_(options.select_cols),
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
  }

  std::optional<value_type> read() {
    if (skip_header_) {
      skip_header_ = false;
      // tf: "Can't read header of file"; an empty file has no header to skip.
      if (!records_.next()) {
        throw InvalidArgument("cannot read the header: the file is empty",
                              {.file = records_.path(), .line = 1});
      }
    }
    if (!records_.next()) return std::nullopt;
    const bool exact = select_.empty() || exact_;
    const std::size_t needed = select_.empty() ? sizeof...(Cols)
                               : exact_        ? exact_fields_
                                               : select_.back() + 1;
    if (exact ? records_.size() != needed : records_.size() < needed) {
      throw InvalidArgument("expected " + std::string(exact ? "" : "at least ") +
                                std::to_string(needed) + " fields, got " +
                                std::to_string(records_.size()),
                            {.file = records_.path(), .line = records_.record_line()});
    }
    return build(std::index_sequence_for<Cols...>{});
  }

 private:
  template <std::size_t... I>
  value_type build(std::index_sequence<I...>) {
    return value_type{convert<I, Cols>()...};  // braces: left to right
  }

  template <std::size_t I, class T>
  T convert() {
    const std::size_t column = select_.empty() ? I : select_[I];
    const std::string_view text = records_.field(column);
    if (text.empty() || (!na_value_.empty() && text == na_value_)) {
      if (const auto& d = std::get<I>(defaults_)) return *d;
      fail(column, "the field is empty and column " + std::to_string(column + 1) +
                       " has no default (it is required)");
    }
    if constexpr (std::is_same_v<T, std::string>) {
      return std::string(text);
    } else {
      T value{};
      if (!parse_csv_number(text, value)) {
        fail(column,
             "cannot parse '" + std::string(text.substr(0, 64)) + "' as " + csv_type_name<T>());
      }
      return value;
    }
  }

  [[noreturn]] void fail(std::size_t column, std::string message) const {
    throw InvalidArgument(std::move(message), {.file = records_.path(),
                                               .line = records_.field_line(column),
                                               .column = static_cast<std::int64_t>(column + 1)});
  }

  CsvRecordReader records_;
  std::tuple<std::optional<Cols>...> defaults_;
  std::string na_value_;
  std::vector<std::size_t> select_;  // the file's column of each Cols; empty: all
  bool exact_ = false;               // exclude_cols: the record's size is known
  std::size_t exact_fields_ = 0;     // and is this
  bool skip_header_;
};

}  // namespace detail

namespace detail {
inline constexpr char csv_stage[] = "csv";
}

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
  if (options.quoting && options.delimiter == '"') {
    throw InvalidArgument("csv: the delimiter cannot be the quote character", {.stage = "csv"});
  }
  if (options.delimiter == '\n' || options.delimiter == '\r') {
    throw InvalidArgument("csv: the delimiter cannot be a line break", {.stage = "csv"});
  }
  return CsvDataset<Cols...>(std::move(paths), std::move(options));
}

}  // namespace ingest
