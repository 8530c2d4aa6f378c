// The demo's pictures, as standalone SVG files: a timeline of a pipeline's
// trace (one row per thread, a bar per traced span, like the figures of
// TensorFlow's "Better performance with tf.data" guide) and a bar chart of
// the ladder. Everything drawn comes from the run: the spans are the
// library's own trace events (PipelineIterator::trace_events()).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>

namespace demo::svg {

/// What a span of a stage stands for in a picture: its legend entry and colour.
struct Role {
  std::string label;
  std::string colour;
};

/// The roles every rung uses (the colours stay the same across pictures).
inline const Role& role(const std::string& key) {
  static const std::map<std::string, Role> roles = {
      {"read", {"read (TFRecord)", "#4e79a7"}}, {"decode", {"decode", "#f28e2b"}},
      {"augment", {"augment", "#e15759"}},      {"decode+augment", {"decode + augment", "#edc948"}},
      {"batch", {"batch", "#59a14f"}},          {"wait", {"waiting for input", "#d3d3d3"}},
      {"cache", {"cache (read)", "#b07aa1"}},   {"step", {"training step", "#76b7b2"}},
  };
  const auto it = roles.find(key);
  if (it == roles.end()) throw std::logic_error("demo: no role " + key);
  return it->second;
}

inline std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

inline std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("demo: cannot write " + path);
}

/// An SVG document's start: its size, a white background, a bold title.
inline std::string open_svg(double width, double height, double font_size,
                            const std::string& title) {
  std::string s =
      fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" ",
          width, height, width, height);
  s += fmt("font-size=\"%.0f\">\n", font_size);
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += fmt("<text x=\"10\" y=\"%.0f\" font-size=\"%.0f\" font-weight=\"bold\">", font_size + 6,
           font_size + 2) +
       escape(title) + "</text>\n";
  return s;
}

/// One rung's timeline: the spans of `events` between `begin_ns` and
/// `end_ns`, a row per thread (the training loop's first; thread ~0 is the
/// GPU's row), coloured by
/// `roles` (stage name in the trace -> role key; spans of other stages are
/// left out). Nested spans (a batch's call around its map's calls) are drawn
/// longest first, so each instant shows the innermost work.
inline void write_timeline(const std::string& path, const std::string& title,
                           const std::vector<ingest::TraceEvent>& events, std::int64_t begin_ns,
                           std::int64_t end_ns, const std::map<std::string, std::string>& roles) {
  const double width = 960, left = 130, row_h = 22, top = 58;
  const double span_ns = static_cast<double>(std::max<std::int64_t>(1, end_ns - begin_ns));
  const double scale = (width - left - 10) / span_ns;
  // Rows: the consumer's thread first, the others in order of appearance.
  std::vector<std::uint64_t> threads;
  for (const ingest::TraceEvent& e : events) {
    if (e.phase == 'X' && e.name == "consumer") {
      threads.push_back(e.thread);
      break;
    }
  }
  std::vector<const ingest::TraceEvent*> shown;
  for (const ingest::TraceEvent& e : events) {
    if (e.phase != 'X' || !roles.contains(e.name)) continue;
    if (e.ts_ns + e.dur_ns < begin_ns || e.ts_ns > end_ns) continue;
    shown.push_back(&e);
    if (std::find(threads.begin(), threads.end(), e.thread) == threads.end())
      threads.push_back(e.thread);
  }
  std::stable_sort(shown.begin(), shown.end(),
                   [](const auto* a, const auto* b) { return a->dur_ns > b->dur_ns; });
  const double height = top + row_h * static_cast<double>(threads.size()) + 40;
  std::string s = open_svg(width, height, 12, title);
  // The legend: the roles this rung uses, in a fixed order.
  double lx = 10;
  for (const char* key :
       {"step", "wait", "read", "decode", "augment", "decode+augment", "cache", "batch"}) {
    bool used = false;
    for (const auto& [name, k] : roles) used |= k == key;
    if (!used) continue;
    const Role& r = role(key);
    s += fmt("<rect x=\"%.1f\" y=\"28\" width=\"12\" height=\"12\" fill=\"", lx) + r.colour +
         "\"/>\n";
    s += fmt("<text x=\"%.1f\" y=\"38\">", lx + 16) + escape(r.label) + "</text>\n";
    lx += 28 + 7.0 * static_cast<double>(r.label.size());
  }
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const double y = top + row_h * static_cast<double>(i);
    const std::string name = threads[i] == ~std::uint64_t{0} ? "GPU"
                             : i == 0                        ? "training loop"
                                                             : "thread " + std::to_string(i);
    s += fmt("<text x=\"10\" y=\"%.1f\">", y + 15) + name + "</text>\n";
    s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f7f7f7\"/>\n",
             left, y + 2, width - left - 10, row_h - 4);
  }
  for (const ingest::TraceEvent* e : shown) {
    const auto row =
        static_cast<double>(std::find(threads.begin(), threads.end(), e->thread) - threads.begin());
    const double x0 = left + static_cast<double>(std::max(e->ts_ns, begin_ns) - begin_ns) * scale;
    const double x1 =
        left + static_cast<double>(std::min(e->ts_ns + e->dur_ns, end_ns) - begin_ns) * scale;
    const Role& r = role(roles.at(e->name));
    s += fmt("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"", x0,
             top + row_h * row + 3, std::max(0.4, x1 - x0), row_h - 6) +
         r.colour + "\"><title>" + escape(e->name) +
         fmt(" %.2f ms", 1e-6 * static_cast<double>(e->dur_ns)) + "</title></rect>\n";
  }
  // The time axis, in ms from the window's start.
  const double axis_y = top + row_h * static_cast<double>(threads.size()) + 4;
  const double ms = span_ns / 1e6;
  const double tick = ms > 400 ? 100 : ms > 200 ? 50 : ms > 80 ? 20 : ms > 40 ? 10 : 5;
  s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", left,
           axis_y, width - 10, axis_y);
  for (double t = 0; t <= ms; t += tick) {
    const double x = left + t * 1e6 * scale;
    s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", x,
             axis_y, x, axis_y + 4);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x, axis_y + 16, t);
  }
  s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">ms</text>\n", width - 10, axis_y + 30);
  s += "</svg>\n";
  write_file(path, s);
}

/// A bar of the ladder chart.
struct Bar {
  std::string label;
  double images_per_s;
  double idle_percent;
};

/// The ladder as horizontal bars of images/s, each with its speed-up over
/// the first and the accelerator's idle share, and a dashed line at the
/// step's own limit.
inline void write_ladder_chart(const std::string& path, const std::string& title,
                               const std::vector<Bar>& bars, double limit_images_per_s,
                               const std::string& limit_label) {
  const double width = 960, left = 250, bar_h = 26, top = 44;
  double most = limit_images_per_s;
  for (const Bar& b : bars) most = std::max(most, b.images_per_s);
  const double scale = (width - left - 330) / most;
  const double height = top + bar_h * static_cast<double>(bars.size()) + 34;
  std::string s = open_svg(width, height, 13, title);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = top + bar_h * static_cast<double>(i);
    const double w = std::max(1.0, b.images_per_s * scale);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", left - 8, y + 17) +
         escape(b.label) + "</text>\n";
    s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#4e79a7\"/>\n",
             left, y + 3, w, bar_h - 6);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\">", left + w + 6, y + 17) +
         fmt("%.0f images/s, %.1fx, accelerator idle %.0f%%", b.images_per_s,
             b.images_per_s / std::max(1e-9, bars.front().images_per_s), b.idle_percent) +
         "</text>\n";
  }
  // The most the step can take: no pipeline goes past it.
  const double lx = left + limit_images_per_s * scale;
  const double bottom = top + bar_h * static_cast<double>(bars.size());
  s +=
      fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e15759\" "
          "stroke-dasharray=\"4 3\"/>\n",
          lx, top, lx, bottom + 4);
  s +=
      fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#e15759\">", lx, bottom + 20) +
      escape(limit_label) + "</text>\n";
  s += "</svg>\n";
  write_file(path, s);
}

}  // namespace demo::svg
