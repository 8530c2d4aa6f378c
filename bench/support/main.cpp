// main() of every benchmark binary: parses --smoke, runs the benchmarks and
// prints the ratios against their references.
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

  void print_ratios() {
    std::size_t repetitions = 1;
    for (auto& [name, values] : runs_) {
      std::sort(values.begin(), values.end());
      const std::size_t n = values.size();
      rates_[name] = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
      repetitions = std::max(repetitions, n);
    }
    const std::string of = repetitions > 1 ? ", medians of the repetitions" : "";
    bool header = false;
    for (const auto& r : state().references) {
      // The reference is the first benchmark whose name starts with r.name
      // (Google Benchmark appends arguments and flags to names).
      auto ref = std::find_if(rates_.begin(), rates_.end(),
                              [&](const auto& kv) { return kv.first.rfind(r.name, 0) == 0; });
      if (ref == rates_.end() || ref->second <= 0) continue;
      for (const auto& [name, rate] : rates_) {
        if (name == ref->first || name.rfind(r.prefix, 0) != 0) continue;
        if (!header) {
          std::printf("\nRatios against the reference measured in this run (items/s%s):\n",
                      of.c_str());
          header = true;
        }
        std::string against = ref->first;
        if (r.scale != 1.0) against = std::to_string(r.scale).substr(0, 4) + " x " + against;
        std::printf("  %-52s %8.3f %-10s vs %s (%.4g/s vs %.4g/s)\n", name.c_str(),
                    rate / (ref->second * r.scale), r.label.c_str(), against.c_str(), rate,
                    ref->second);
      }
    }
    for (const auto& b : state().bests) {
      auto cand = std::find_if(rates_.begin(), rates_.end(),
                               [&](const auto& kv) { return kv.first.rfind(b.candidate, 0) == 0; });
      const std::pair<const std::string, double>* best = nullptr;
      for (const auto& kv : rates_) {
        if (kv.first.rfind(b.group, 0) == 0 && (!best || kv.second > best->second)) best = &kv;
      }
      if (cand == rates_.end() || !best || best->second <= 0) continue;
      std::printf("\n%s: %.3f x the best of %s* (%s, %.4g/s vs %.4g/s)\n", cand->first.c_str(),
                  cand->second / best->second, b.group.c_str(), best->first.c_str(), cand->second,
                  best->second);
    }
    for (const auto& line : state().notes) std::printf("%s\n", line.c_str());
  }

 private:
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
  for (int i = 0; i < argc; ++i) {
    config.args.emplace_back(argv[i]);
    if (std::strcmp(argv[i], "--smoke") == 0) {
      config.smoke = true;
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
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
