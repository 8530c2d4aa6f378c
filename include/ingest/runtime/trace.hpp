// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): a span
// per traced call of each stage, on the thread that made it, and the
// autotuner's knob changes as counters. Written from a model's recorded
// events when the pipeline iterator that owns it is destroyed (or on request).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "ingest/core/errors.hpp"
#include "ingest/runtime/model.hpp"

namespace ingest::detail {

inline std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += c;
        }
    }
  }
  return out;
}

/// Writes the model's trace events to `path`. Throws IoError. (<cstdio>,
/// not <fstream>: every pipeline header includes this one.)
inline void write_chrome_trace(const Model& model, const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!file)
    throw IoError("cannot open the trace file for writing", {.stage = "trace", .file = path});
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out +=
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"ingest "
      "pipeline\"}}";
  const std::int64_t t0 = model.start_ns();
  char num[64];
  for (const TraceEvent& e : model.trace_events()) {
    out += ",\n{\"name\":\"" + json_escape(e.name) + "\",\"cat\":\"ingest\",\"ph\":\"";
    out += e.phase;
    out += "\",\"pid\":1,\"tid\":" + std::to_string(e.thread);
    std::snprintf(num, sizeof num, "%.3f", static_cast<double>(e.ts_ns - t0) / 1e3);
    out += ",\"ts\":";
    out += num;
    if (e.phase == 'X') {
      std::snprintf(num, sizeof num, "%.3f", static_cast<double>(e.dur_ns) / 1e3);
      out += ",\"dur\":";
      out += num;
    } else {
      out += ",\"args\":{" + e.args + "}";
    }
    out += "}";
  }
  out += "\n]}\n";
  const bool written = std::fwrite(out.data(), 1, out.size(), file.get()) == out.size();
  if (!written || std::fclose(file.release()) != 0)
    throw IoError("writing the trace file failed", {.stage = "trace", .file = path});
}

}  // namespace ingest::detail
