// Where ingest's few log lines go (a large shuffle buffer still filling, an
// autotuner decision): stderr by default, or a sink the application sets.
// Logging is rare by design; nothing on the per-element path logs. URLs in a
// line are redacted (core/redact.hpp) before any sink sees it.
#pragma once

#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/redact.hpp"

namespace ingest {

namespace detail {
struct LogState {
  std::mutex mu;
  std::function<void(std::string_view)> sink;
};
inline LogState& log_state() {
  static LogState state;
  return state;
}
}  // namespace detail

/// Sends ingest's log lines to `sink` (empty: back to stderr). Thread-safe.
inline void set_log_sink(std::function<void(std::string_view)> sink) {
  auto& s = detail::log_state();
  std::lock_guard lock(s.mu);
  s.sink = std::move(sink);
}

/// Logs one line, its URLs redacted (no query secret, no password).
inline void log_line(std::string_view raw) {
  const std::string line = redact_urls(raw);
  auto& s = detail::log_state();
  std::lock_guard lock(s.mu);
  if (s.sink) {
    s.sink(line);
  } else {
    std::fprintf(stderr, "[ingest] %.*s\n", static_cast<int>(line.size()), line.data());
  }
}

}  // namespace ingest
