// What the `ingest` tool's subcommands share: the exit codes, the argument
// parser, the progress display (a bar on a terminal, plain lines otherwise),
// a small JSON writer for --json, and compression detection. The tool is
// single-process; Progress is the one thing several threads touch.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <ingest/formats/compression.hpp>

namespace ingest::cli {

/// The tool's exit codes (docs/cli.md, "Exit codes").
enum ExitCode : int {
  exit_ok = 0,        ///< everything read or written
  exit_bad_data = 1,  ///< corrupt or truncated data found (CRC, length, CSV record)
  exit_usage = 2,     ///< bad command line
  exit_io = 3,        ///< a file cannot be opened, read or written, or is unsuitable
  exit_internal = 4,  ///< a bug in the tool or the library
};

/// A bad command line; main prints it with the subcommand's usage hint.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A subcommand: its name, one-line summary, full help, and entry point.
struct Command {
  std::string_view name;
  std::string_view summary;
  std::string_view help;
  int (*run)(std::span<const std::string> args);
};

/// Options of one subcommand: `--name VALUE`, `--name=VALUE`, flags, and
/// positional arguments (all after `--`). Throws UsageError for an unknown
/// option, a missing value, or a value given to a flag.
class Args {
 public:
  Args(std::span<const std::string> args, std::set<std::string> flags,
       std::set<std::string> valued) {
    bool options_done = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (options_done || a.size() < 2 || a[0] != '-' || a == "-") {
        positional_.push_back(a);
        continue;
      }
      if (a == "--") {
        options_done = true;
        continue;
      }
      std::string name = a, value;
      bool has_value = false;
      if (const auto eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        has_value = true;
      }
      if (flags.count(name)) {
        if (has_value) throw UsageError("option " + name + " takes no value");
        flags_.insert(name);
      } else if (valued.count(name)) {
        if (!has_value) {
          if (i + 1 >= args.size()) throw UsageError("option " + name + " needs a value");
          value = args[++i];
        }
        values_[name] = value;
      } else {
        throw UsageError("unknown option '" + name + "'");
      }
    }
  }

  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  std::optional<std::string> value(const std::string& name) const {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    return std::nullopt;
  }
  /// A whole number in [min, max]; `fallback` when the option is absent.
  std::uint64_t number(const std::string& name, std::uint64_t fallback, std::uint64_t min = 0,
                       std::uint64_t max = UINT64_MAX) const {
    const auto v = value(name);
    if (!v) return fallback;
    std::uint64_t n = 0;
    std::size_t used = 0;
    try {
      if (v->empty() || (*v)[0] == '-' || (*v)[0] == '+') throw std::invalid_argument("sign");
      n = std::stoull(*v, &used, 10);
    } catch (const std::exception&) {
      throw UsageError("option " + name + ": '" + *v + "' is not a whole number");
    }
    if (used != v->size())
      throw UsageError("option " + name + ": '" + *v + "' is not a whole number");
    if (n < min || n > max) {
      throw UsageError("option " + name + ": " + *v + " is outside [" + std::to_string(min) + ", " +
                       std::to_string(max) + "]");
    }
    return n;
  }
  const std::vector<std::string>& positional() const noexcept { return positional_; }

 private:
  std::set<std::string> flags_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

/// "1.2 MiB", for people; --json gives exact byte counts.
inline std::string human_bytes(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

/// Progress of a long step on stderr: a redrawn bar when stderr is a
/// terminal, else a plain line at every tenth of the work (logs and CI keep
/// them readable). Disabled, it prints nothing. add() may be called from
/// any thread.
class Progress {
 public:
  Progress(std::string label, std::uint64_t total, std::string unit, bool enabled)
      : label_(std::move(label)),
        unit_(std::move(unit)),
        total_(total),
        enabled_(enabled),
        tty_(enabled && ::isatty(STDERR_FILENO) == 1) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { finish(); }

  void add(std::uint64_t n) {
    const std::uint64_t done = done_.fetch_add(n, std::memory_order_relaxed) + n;
    if (!enabled_) return;
    std::lock_guard lock(mutex_);
    if (finished_) return;
    if (tty_) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      draw(done);
    } else {
      const int tenth =
          total_ ? static_cast<int>(std::min<std::uint64_t>(done, total_) * 10 / total_) : 0;
      if (tenth > last_tenth_ && tenth < 10) {
        last_tenth_ = tenth;
        line(done);
      }
    }
  }

  /// Draws the final state (once).
  void finish() {
    if (!enabled_) return;
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    const std::uint64_t done = done_.load();
    if (tty_) {
      draw(done);
      std::fputc('\n', stderr);
    } else {
      line(done);
    }
    std::fflush(stderr);
  }

 private:
  void draw(std::uint64_t done) {
    constexpr int width = 30;
    const std::uint64_t shown = total_ ? std::min(done, total_) : 0;
    const int filled = total_ ? static_cast<int>(shown * width / total_) : 0;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.append(static_cast<std::size_t>(width - filled), '.');
    std::fprintf(stderr, "\r%s [%s] %3d%% %s", label_.c_str(), bar.c_str(),
                 total_ ? static_cast<int>(shown * 100 / total_) : 100, amount(done).c_str());
    std::fflush(stderr);
  }
  void line(std::uint64_t done) {
    std::fprintf(stderr, "%s: %s (%d%%)\n", label_.c_str(), amount(done).c_str(),
                 total_ ? static_cast<int>(std::min(done, total_) * 100 / total_) : 100);
    std::fflush(stderr);
  }
  std::string amount(std::uint64_t done) const {
    if (unit_ == "bytes") return human_bytes(done) + " of " + human_bytes(total_);
    return std::to_string(done) + " of " + std::to_string(total_) + " " + unit_;
  }

  std::string label_, unit_;
  std::uint64_t total_;
  bool enabled_, tty_;
  std::atomic<std::uint64_t> done_{0};
  std::mutex mutex_;
  std::chrono::steady_clock::time_point last_draw_{};
  int last_tenth_ = 0;
  bool finished_ = false;
};

/// Writes indented JSON: begin/end containers, key(), value().
class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }
  JsonWriter& key(std::string_view k) {
    separate();
    quote(k);
    out_ += ": ";
    after_key_ = true;
    return *this;
  }
  JsonWriter& value(std::string_view s) {
    separate();
    quote(s);
    return *this;
  }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(std::uint64_t n) { return raw(std::to_string(n)); }
  JsonWriter& value(std::int64_t n) { return raw(std::to_string(n)); }
  JsonWriter& value(int n) { return raw(std::to_string(n)); }
  JsonWriter& value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter& null() { return raw("null"); }
  /// A member: key(k).value(v).
  template <class T>
  JsonWriter& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  const std::string& str() const noexcept { return out_; }

 private:
  JsonWriter& raw(std::string_view text) {
    separate();
    out_ += text;
    return *this;
  }
  JsonWriter& open(char c) {
    separate();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  JsonWriter& close(char c) {
    const bool empty = first_.back();
    first_.pop_back();
    if (!empty) newline();
    out_ += c;
    if (first_.empty()) out_ += '\n';
    return *this;
  }
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (first_.empty()) return;
    if (!first_.back()) out_ += ',';
    first_.back() = false;
    newline();
  }
  void newline() {
    out_ += '\n';
    out_.append(first_.size() * 2, ' ');
  }
  void quote(std::string_view s) {
    out_ += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ += buf;
          } else {
            out_ += ch;
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

/// How the TFRecord file at `path` is stored, from its first bytes: plain
/// when its first length's CRC holds, GZIP by its magic number, ZLIB by its
/// header check; anything else is read as plain (and fails its CRC there).
/// Throws IoError when the file cannot be read.
Compression detect_compression(const std::string& path);

/// The subcommands (inspect.cpp, index.cpp, write_tfrecords.cpp).
extern const Command inspect_command;
extern const Command index_command;
extern const Command write_tfrecords_command;

}  // namespace ingest::cli
