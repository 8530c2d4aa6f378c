// main() of every benchmark binary: parses --smoke, runs the benchmarks and
// prints the ratios against their references (--ratios_out=FILE also writes
// them as JSON, beside Google Benchmark's own --benchmark_out).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "support/bench.hpp"

namespace ingest::bench {
namespace {

struct Reference {
  std::string prefix, name;
  double scale;
  std::string label;
};
struct Best {
  std::string candidate, group;
};
struct State {
  std::vector<Reference> references;
  std::vector<Best> bests;
  std::vector<std::string> notes;
};
State& state() {
  static State s;
  return s;
}

// Remembers the rate of every run as it is reported; a benchmark repeated
// (--benchmark_repetitions) is represented by the median of its repetitions.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      auto it = run.counters.find("items_per_second");
      if (it != run.counters.end()) runs_[run.benchmark_name()].push_back(it->second.value);
    }
  }

  // The ratios of this run, printed and (with --ratios_out=FILE) written as
  // JSON for scripts/bench-report.sh.
  struct Ratio {
    std::string name, reference, label;
    double value, rate, reference_rate, scale;
  };
  struct BestRatio {
    std::string candidate, group, best;
    double value, rate, best_rate;
  };

  void print_ratios(const std::string& json_path) {
    std::size_t repetitions = 1;
    for (auto& [name, values] : runs_) {
      std::sort(values.begin(), values.end());
      const std::size_t n = values.size();
      rates_[name] = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
      repetitions = std::max(repetitions, n);
    }
    std::vector<Ratio> ratios;
    for (const auto& r : state().references) {
      // The reference is the first benchmark whose name starts with r.name
      // (Google Benchmark appends arguments and flags to names).
      auto ref = std::find_if(rates_.begin(), rates_.end(),
                              [&](const auto& kv) { return kv.first.rfind(r.name, 0) == 0; });
      if (ref == rates_.end() || ref->second <= 0) continue;
      for (const auto& [name, rate] : rates_) {
        if (name == ref->first || name.rfind(r.prefix, 0) != 0) continue;
        ratios.push_back({name, ref->first, r.label, rate / (ref->second * r.scale), rate,
                          ref->second, r.scale});
      }
    }
    std::vector<BestRatio> bests;
    for (const auto& b : state().bests) {
      auto cand = std::find_if(rates_.begin(), rates_.end(),
                               [&](const auto& kv) { return kv.first.rfind(b.candidate, 0) == 0; });
      const std::pair<const std::string, double>* best = nullptr;
      for (const auto& kv : rates_) {
        if (kv.first.rfind(b.group, 0) == 0 && (!best || kv.second > best->second)) best = &kv;
      }
      if (cand == rates_.end() || !best || best->second <= 0) continue;
      bests.push_back({cand->first, b.group, best->first, cand->second / best->second, cand->second,
                       best->second});
    }

    const std::string of = repetitions > 1 ? ", medians of the repetitions" : "";
    if (!ratios.empty()) {
      std::printf("\nRatios against the reference measured in this run (items/s%s):\n", of.c_str());
    }
    for (const Ratio& r : ratios) {
      std::string against = r.reference;
      if (r.scale != 1.0) against = std::to_string(r.scale).substr(0, 4) + " x " + against;
      std::printf("  %-52s %8.3f %-10s vs %s (%.4g/s vs %.4g/s)\n", r.name.c_str(), r.value,
                  r.label.c_str(), against.c_str(), r.rate, r.reference_rate);
    }
    for (const BestRatio& b : bests) {
      std::printf("\n%s: %.3f x the best of %s* (%s, %.4g/s vs %.4g/s)\n", b.candidate.c_str(),
                  b.value, b.group.c_str(), b.best.c_str(), b.rate, b.best_rate);
    }
    for (const auto& line : state().notes) std::printf("%s\n", line.c_str());
    if (!json_path.empty()) write_json(json_path, repetitions, ratios, bests);
  }

 private:
  static std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x",
                      static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += buf;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

  void write_json(const std::string& path, std::size_t repetitions,
                  const std::vector<Ratio>& ratios, const std::vector<BestRatio>& bests) const {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return;
    }
    std::fprintf(f, "{\n  \"repetitions\": %zu,\n  \"rates\": {", repetitions);
    const char* sep = "";
    for (const auto& [name, rate] : rates_) {
      std::fprintf(f, "%s\n    %s: %.17g", sep, quoted(name).c_str(), rate);
      sep = ",";
    }
    std::fprintf(f, "\n  },\n  \"ratios\": [");
    sep = "";
    for (const Ratio& r : ratios) {
      std::fprintf(f,
                   "%s\n    {\"name\": %s, \"reference\": %s, \"label\": %s, \"ratio\": %.6g, "
                   "\"rate\": %.17g, \"reference_rate\": %.17g, \"scale\": %.6g}",
                   sep, quoted(r.name).c_str(), quoted(r.reference).c_str(),
                   quoted(r.label).c_str(), r.value, r.rate, r.reference_rate, r.scale);
      sep = ",";
    }
    std::fprintf(f, "\n  ],\n  \"bests\": [");
    sep = "";
    for (const BestRatio& b : bests) {
      std::fprintf(f,
                   "%s\n    {\"candidate\": %s, \"group\": %s, \"best\": %s, \"ratio\": %.6g, "
                   "\"rate\": %.17g, \"best_rate\": %.17g}",
                   sep, quoted(b.candidate).c_str(), quoted(b.group).c_str(),
                   quoted(b.best).c_str(), b.value, b.rate, b.best_rate);
      sep = ",";
    }
    std::fprintf(f, "\n  ],\n  \"notes\": [");
    sep = "";
    for (const auto& line : state().notes) {
      std::fprintf(f, "%s\n    %s", sep, quoted(line).c_str());
      sep = ",";
    }
    std::fprintf(f, "\n  ]\n}\n");
    std::fclose(f);
  }

  std::map<std::string, std::vector<double>> runs_;  // items/s of each repetition
  std::map<std::string, double> rates_;              // their medians
};

}  // namespace

void set_reference(const std::string& prefix, const std::string& reference, double scale,
                   const std::string& label) {
  state().references.push_back({prefix, reference, scale, label});
}
void note(const std::string& line) { state().notes.push_back(line); }
void compare_with_best(const std::string& candidate, const std::string& group) {
  state().bests.push_back({candidate, group});
}

}  // namespace ingest::bench

int main(int argc, char** argv) {
  ingest::bench::Config config;
  std::vector<char*> args;
  std::string ratios_out;
  for (int i = 0; i < argc; ++i) {
    config.args.emplace_back(argv[i]);
    if (std::strcmp(argv[i], "--smoke") == 0) {
      config.smoke = true;
    } else if (std::strncmp(argv[i], "--ratios_out=", 13) == 0) {
      ratios_out = argv[i] + 13;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  ingest::bench::register_benchmarks(config);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  ingest::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios(ratios_out);
  benchmark::Shutdown();
  return 0;
}
