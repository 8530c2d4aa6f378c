// world(): who this process is in a distributed job (a World, core/world.hpp:
// its rank, the world size, its place among the job's processes on its node),
// read from the variables of the launcher that started it: torchrun, Open MPI's
// mpirun, an MPICH/Hydra (PMI) launcher, or SLURM's srun. No communication.
//
// Variables (rank, size; local rank, local size):
//   torchrun  RANK, WORLD_SIZE; LOCAL_RANK, LOCAL_WORLD_SIZE
//   openmpi   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE;
//             OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
//   pmi       PMI_RANK, PMI_SIZE; MPI_LOCALRANKID, MPI_LOCALNRANKS (Hydra)
//   slurm     SLURM_PROCID, SLURM_STEP_NUM_TASKS; SLURM_LOCALID and this
//             node's entry (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE, else
//             SLURM_TASKS_PER_NODE ("4", "4(x2)", "2(x3),1"), else
//             SLURM_NTASKS_PER_NODE (the job's request, one number)
// A launcher is present when its rank or size variable is set; one without
// the other is an error. SLURM is present only inside a job step that srun
// started, which SLURM_STEP_NUM_TASKS marks: a batch script (sbatch) and an
// salloc shell also see SLURM_PROCID=0 and the job's SLURM_NTASKS, yet are one
// process, and a program run there directly is not one of N tasks.
//
// Precedence, innermost launcher first: torchrun > Open MPI > PMI > SLURM.
// Launchers nest: srun starts one torchrun, or one MPI daemon, per node, and a
// batch script runs mpirun. The outer launcher's variables then describe the
// agent it started, not this process: under `srun -N2 torchrun
// --nproc-per-node 4` SLURM says 2 tasks and torchrun 8 ranks, both truly,
// and torchrun numbers its nodes in rendezvous order, not by SLURM_PROCID. So
// an outer launcher never overrides the inner one, whatever its rank; it
// only lends its local variables to an inner one that has none when both
// report the same rank and size (srun --mpi=pmi2 sets
// PMI_RANK and PMI_SIZE but not Hydra's MPI_LOCALRANKID; `RANK=$SLURM_PROCID
// WORLD_SIZE=$SLURM_NTASKS python train.py` under srun).
//
// Without local variables (and none to borrow), local_rank = rank and
// local_world_size = world_size: right on one node, and the only guess that
// keeps local_rank unique on the node; local_rank = 0 would put every process
// on one GPU.
//
// Errors (ingest::InvalidArgument, naming the variables and their values): a
// value that is not a decimal integer (sign, space, trailing junk, empty),
// negative or out of int's range; a rank or local rank outside its size;
// a size below 1; a local size above the world size; a rank variable without
// its size variable or the reverse; a SLURM task list that is malformed or
// does not add up to the step's tasks; two launchers that disagree (both
// above one process, and the inner one's size not a multiple of the outer
// one's: they cannot be one inside the other). Only the variables above are
// read, and
// a malformed one fails world() even when it belongs to an outer launcher.
// world() reads the environment on every call (std::getenv): call it where
// nothing modifies the environment at the same time.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/core/world.hpp"

namespace ingest::distributed {

namespace detail {

/// How the fields are named in messages: "rank 3" (a World) or "RANK=3"
/// (an environment variable).
struct WorldLabels {
  std::string rank{}, world_size{}, local_rank{}, local_world_size{};
};

/// Throws InvalidArgument unless `w`'s fields are consistent.
inline void check_world(const World& w, const WorldLabels& l) {
  auto fail = [](std::string message) {
    throw InvalidArgument("distributed: " + std::move(message), {.stage = "distributed"});
  };
  auto range = [](int size) { return " is outside [0, " + std::to_string(size) + ")"; };
  if (w.world_size < 1) fail(l.world_size + " must be at least 1");
  if (w.rank < 0 || w.rank >= w.world_size) {
    fail(l.rank + range(w.world_size) + " (" + l.world_size + ")");
  }
  if (w.local_world_size < 1) fail(l.local_world_size + " must be at least 1");
  if (w.local_rank < 0 || w.local_rank >= w.local_world_size) {
    fail(l.local_rank + range(w.local_world_size) + " (" + l.local_world_size + ")");
  }
  if (w.local_world_size > w.world_size) {
    fail(l.local_world_size + " is larger than " + l.world_size);
  }
}

inline std::string env_label(std::string_view name, int value) {
  return std::string(name) + "=" + std::to_string(value);
}

[[noreturn]] inline void throw_bad_value(std::string_view name, std::string_view value,
                                         std::string_view why) {
  throw InvalidArgument(
      "distributed: " + std::string(name) + "=\"" + std::string(value) + "\" " + std::string(why),
      {.stage = "distributed"});
}

/// `text` as a non-negative int; throws InvalidArgument naming `name`.
inline int parse_count(std::string_view name, std::string_view text) {
  const bool negative = !text.empty() && text.front() == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    throw_bad_value(name, text, "is not a number");
  }
  if (negative) throw_bad_value(name, text, "is negative");
  int value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) throw_bad_value(name, text, "is out of range");
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    throw_bad_value(name, text, "is not a number");
  }
  return value;
}

/// Environment variable `name` as a non-negative int; nullopt when unset.
inline std::optional<int> env_count(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return parse_count(name, value);
}

/// Both or neither: a launcher sets a rank variable with its size variable.
inline void check_pair(const char* a, std::optional<int> va, const char* b, std::optional<int> vb) {
  if (va.has_value() == vb.has_value()) return;
  const auto [set, value, unset] = va ? std::tuple(a, *va, b) : std::tuple(b, *vb, a);
  throw InvalidArgument("distributed: " + env_label(set, value) + " is set but " + unset +
                            " is not (a launcher sets both)",
                        {.stage = "distributed"});
}

/// A SLURM task count list ("4", "4(x2)", "2(x3),1": per node, in node
/// order, "(xN)" repeating a count for N nodes), from variable `name`.
class TaskCounts {
 public:
  TaskCounts(std::string_view name, std::string_view text) {
    auto bad = [&] {
      throw_bad_value(name, text,
                      "is not a task count list such as \"4\", \"4(x2)\" or \"2(x3),1\"");
    };
    auto number = [&](std::string_view& rest) {
      const std::size_t n = std::min(rest.find_first_not_of("0123456789"), rest.size());
      if (n == 0) bad();
      int value = 0;
      const auto [end, ec] = std::from_chars(rest.data(), rest.data() + n, value);
      if (ec == std::errc::result_out_of_range) throw_bad_value(name, text, "is out of range");
      if (ec != std::errc() || end != rest.data() + n) bad();
      rest.remove_prefix(n);
      return value;
    };
    std::string_view rest = text;
    for (;;) {
      Run run{.count = number(rest), .nodes = 1};
      if (rest.starts_with("(x")) {
        rest.remove_prefix(2);
        run.nodes = number(rest);
        if (run.nodes < 1 || !rest.starts_with(')')) bad();
        rest.remove_prefix(1);
      }
      runs_.push_back(run);
      total_ += std::int64_t{run.count} * run.nodes;
      nodes_ += run.nodes;
      // No world has more than INT_MAX processes (and no int64 overflow).
      if (total_ > std::numeric_limits<int>::max() || nodes_ > std::numeric_limits<int>::max()) {
        throw_bad_value(name, text, "is out of range");
      }
      if (rest.empty()) break;
      if (rest.front() != ',') bad();
      rest.remove_prefix(1);
    }
  }

  /// Tasks on all nodes together.
  std::int64_t total() const noexcept { return total_; }
  /// Number of nodes listed.
  std::int64_t nodes() const noexcept { return nodes_; }
  /// Whether every node has the same count (then the node's index is not needed).
  bool uniform() const noexcept {
    for (const Run& r : runs_) {
      if (r.count != runs_.front().count) return false;
    }
    return true;
  }
  /// The count of node `node` (0-based, < nodes()).
  int on_node(std::int64_t node) const noexcept {
    for (const Run& r : runs_) {
      if (node < r.nodes) return r.count;
      node -= r.nodes;
    }
    return 0;
  }

 private:
  struct Run {
    int count;
    int nodes;
  };
  std::vector<Run> runs_;
  std::int64_t total_ = 0;
  std::int64_t nodes_ = 0;
};

/// One launcher's view of this process, as read from its variables.
struct LauncherView {
  World world;
  WorldLabels labels;
  bool has_local = false;
};

/// Fills the local fields from the global ones (no local variables).
inline void local_from_global(LauncherView& v) {
  v.world.local_rank = v.world.rank;
  v.world.local_world_size = v.world.world_size;
  v.labels.local_rank = v.labels.rank;
  v.labels.local_world_size = v.labels.world_size;
  v.has_local = false;
}

/// A launcher with four plain variables; nullopt when it is not present.
inline std::optional<LauncherView> read_launcher(const char* launcher, const char* rank,
                                                 const char* size, const char* local_rank,
                                                 const char* local_size) {
  const std::optional<int> r = env_count(rank), n = env_count(size);
  const std::optional<int> lr = env_count(local_rank), ln = env_count(local_size);
  if (!r && !n) return std::nullopt;
  check_pair(rank, r, size, n);
  check_pair(local_rank, lr, local_size, ln);
  LauncherView v{.world = {.rank = *r, .world_size = *n, .launcher = launcher},
                 .labels = {.rank = env_label(rank, *r), .world_size = env_label(size, *n)}};
  if (lr) {
    v.world.local_rank = *lr;
    v.world.local_world_size = *ln;
    v.labels.local_rank = env_label(local_rank, *lr);
    v.labels.local_world_size = env_label(local_size, *ln);
    v.has_local = true;
  } else {
    local_from_global(v);
  }
  check_world(v.world, v.labels);
  return v;
}

/// SLURM inside a job step (srun); nullopt outside one.
inline std::optional<LauncherView> read_slurm() {
  const std::optional<int> r = env_count("SLURM_PROCID"), n = env_count("SLURM_STEP_NUM_TASKS");
  const std::optional<int> lr = env_count("SLURM_LOCALID"), node = env_count("SLURM_NODEID");
  // SLURM_PROCID alone: a batch script or an interactive allocation, one process.
  if (!n) return std::nullopt;
  check_pair("SLURM_PROCID", r, "SLURM_STEP_NUM_TASKS", n);
  LauncherView v{.world = {.rank = *r, .world_size = *n, .launcher = "slurm"},
                 .labels = {.rank = env_label("SLURM_PROCID", *r),
                            .world_size = env_label("SLURM_STEP_NUM_TASKS", *n)}};
  if (!lr) {
    local_from_global(v);
    check_world(v.world, v.labels);
    return v;
  }
  // This node's task count: the step's list, the job's list (the same in a
  // step unless srun --export/--preserve-env kept the job's), or the job's
  // --ntasks-per-node request.
  const char* name = nullptr;
  const char* text = nullptr;
  for (const char* candidate :
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    if ((text = std::getenv(candidate)) != nullptr) {
      name = candidate;
      break;
    }
  }
  if (name == nullptr) {
    throw InvalidArgument("distributed: " + env_label("SLURM_LOCALID", *lr) +
                              " is set but the tasks on this node are unknown: none of "
                              "SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE, "
                              "SLURM_NTASKS_PER_NODE is set",
                          {.stage = "distributed"});
  }
  const TaskCounts counts(name, text);
  const std::string list = std::string(name) + "=\"" + text + "\"";
  if (std::string_view(name) != "SLURM_NTASKS_PER_NODE" && counts.total() != *n) {
    throw InvalidArgument("distributed: " + list + " counts " + std::to_string(counts.total()) +
                              " tasks but " + v.labels.world_size,
                          {.stage = "distributed"});
  }
  v.world.local_rank = *lr;
  v.labels.local_rank = env_label("SLURM_LOCALID", *lr);
  if (counts.uniform()) {
    v.world.local_world_size = counts.on_node(0);
    v.labels.local_world_size = list;
  } else {
    if (!node) {
      throw InvalidArgument("distributed: " + list +
                                " lists different task counts per node but SLURM_NODEID is not "
                                "set, so this node's count is unknown",
                            {.stage = "distributed"});
    }
    if (*node >= counts.nodes()) {
      throw InvalidArgument("distributed: " + env_label("SLURM_NODEID", *node) + " is outside " +
                                list + ", which lists " + std::to_string(counts.nodes()) + " nodes",
                            {.stage = "distributed"});
    }
    v.world.local_world_size = counts.on_node(*node);
    v.labels.local_world_size = list + " at " + env_label("SLURM_NODEID", *node);
  }
  v.has_local = true;
  check_world(v.world, v.labels);
  return v;
}

}  // namespace detail

/// Throws ingest::InvalidArgument, naming the fields and their values, unless
/// world_size >= 1, rank is in [0, world_size), local_world_size >= 1,
/// local_rank is in [0, local_world_size) and local_world_size <= world_size.
inline void validate(const World& w) {
  detail::check_world(
      w, {.rank = "rank " + std::to_string(w.rank),
          .world_size = "world_size " + std::to_string(w.world_size),
          .local_rank = "local_rank " + std::to_string(w.local_rank),
          .local_world_size = "local_world_size " + std::to_string(w.local_world_size)});
}

/// This process's World, from the innermost launcher's variables (see the top
/// of this header); {0, 1, 0, 1, "none"} when no launcher is present. The
/// result is valid (validate). Throws ingest::InvalidArgument for malformed,
/// incomplete or contradictory variables. Reads the environment each call.
inline World world() {
  std::optional<detail::LauncherView> views[] = {
      detail::read_launcher("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
      detail::read_launcher("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                            "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
      detail::read_launcher("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
      detail::read_slurm()};
  for (std::size_t i = 0; i < std::size(views); ++i) {
    if (!views[i]) continue;
    // An outer launcher starts the same number of the inner one's ranks in
    // each of its tasks: sizes that do not divide are two launchers that
    // disagree, not one inside the other.
    for (std::size_t j = i + 1; j < std::size(views); ++j) {
      const auto& outer = views[j];
      if (outer && outer->world.world_size > 1 && views[i]->world.world_size > 1 &&
          views[i]->world.world_size % outer->world.world_size != 0) {
        throw InvalidArgument("distributed: the launchers disagree: " + views[i]->labels.rank +
                                  ", " + views[i]->labels.world_size + " (" +
                                  views[i]->world.launcher + ") against " + outer->labels.rank +
                                  ", " + outer->labels.world_size + " (" + outer->world.launcher +
                                  "); a launcher inside another runs a multiple of its "
                                  "tasks. Pass a World by hand to say which is right",
                              {.stage = "distributed"});
      }
    }
    World w = std::move(views[i]->world);
    if (!views[i]->has_local) {
      // An outer launcher that reports the same rank and size started this
      // very process: its local variables apply.
      for (std::size_t j = i + 1; j < std::size(views); ++j) {
        const auto& outer = views[j];
        if (outer && outer->has_local && outer->world.rank == w.rank &&
            outer->world.world_size == w.world_size) {
          w.local_rank = outer->world.local_rank;
          w.local_world_size = outer->world.local_world_size;
          break;
        }
      }
    }
    return w;
  }
  return World{};
}

}  // namespace ingest::distributed
