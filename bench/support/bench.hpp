// Shared by every benchmark binary: the --smoke flag (CI-sized data), and a
// reporter that prints each benchmark's throughput as a ratio of its
// workload's reference measured in the same run.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ingest::bench {

struct Config {
  bool smoke = false;  ///< CI-sized data: run fast, prove the binary works
  /// The whole command line (argv[0] first), for a binary with a second role
  /// (W10's ranks, started by mpirun with their own flags).
  std::vector<std::string> args{};
};

/// Defined by each benchmark binary: registers its benchmarks.
void register_benchmarks(const Config& config);

/// Declares `reference` (a benchmark, named by a prefix of its full name) the
/// limit that benchmarks whose name starts with `prefix` are compared with: each gets rate /
/// (reference rate x scale), printed with `label` (e.g. scale = cores and label "efficiency" for
/// parallel efficiency against one thread).
void set_reference(const std::string& prefix, const std::string& reference, double scale = 1.0,
                   const std::string& label = "x");

/// Prints `candidate`'s rate as a ratio of the best rate among the
/// benchmarks whose names start with `group` (e.g. autotuned vs the best of a
/// grid of hand-set values), naming that best one.
void compare_with_best(const std::string& candidate, const std::string& group);

/// Prints a line under the results (e.g. a measured property of the workload).
void note(const std::string& line);

}  // namespace ingest::bench
