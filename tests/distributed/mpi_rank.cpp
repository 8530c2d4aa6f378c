// The rank program of the tests under a launcher (label "mpi"; mpi_test.sh
// drives it): each rank reads who it is from distributed::world(), runs the
// job's pipeline (a global shuffle dealt by shard(world), a filter, a
// parallel map, batches, a prefetch), calls MPI_Allreduce once per step, and
// logs the element ids of each step to its own file. Another mode checks the
// ranks' logs together. Only this program and the example link MPI.
//
//   mpi_rank data DIR N                 N records "0".."N-1" in 4 TFRecord files
//   mpi_rank run OUT_DIR [opts]         one rank of a job: OUT_DIR/rank-R.log
//   mpi_rank elastic WORK RUN [opts]    one rank of run RUN (1, 2, ...) of the
//                                       elastic job: WORK/run-RUN/rank-R.{log,step-S.state}
//   mpi_rank check OUT_DIR [opts]       checks a job's logs
//   mpi_rank check-elastic WORK RUNS [opts]
//
// Options: --n N (elements), --data DIR (an indexed TFRecord set; default
// range(N)), --policy uneven|drop|pad, --filter all|mod7 (keep every
// element, or drop ids with id % 7 == 3), --sync strict|join|none,
// --world W and --launcher NAME and --local-size L (check: what the logs must
// say), --old-world M (elastic: the previous run's ranks), --kill-at STEP
// --kill-rank R (elastic: that rank SIGKILLs itself once it saved STEP).
//
// Sync: `strict` allreduces {1, batch size} per batch and {0, 0} at the end;
// every rank must see every rank at a batch, then every rank done, or it
// aborts the job (a rank with one batch more or less). `join` allreduces
// {has a batch, batch size} per step; a rank without a batch contributes an
// empty step, and the job stops when no rank has one (a filter gives ranks
// different batch counts). `none` runs without MPI (torchrun- and
// SLURM-style processes): MPI_Init is not called.
//
// Exits 0 when done (check: when the logs pass), 1 on a failure (printed), 2
// on bad arguments.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ingest/ingest.hpp>

namespace fs = std::filesystem;
using ingest::distributed::World;

namespace {

struct Config {
  std::int64_t n = 2000;
  std::string data;  // an indexed TFRecord set's directory; empty: range(n)
  ingest::Remainder policy = ingest::Remainder::uneven;
  bool padded = false;  // policy pad: shard_padded
  bool filter_some = true;
  std::string sync = "join";
  int world = 0;  // check: the job's ranks
  std::string launcher;
  int local_size = 0;
  int old_world = 0;
  std::int64_t kill_at = -1;
  int kill_rank = 0;
  std::uint64_t seed = 43;
  std::int64_t batch = 8;
};

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

Config parse(int argc, char** argv, int first) {
  Config c;
  for (int i = first; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) fail("option " + key + " needs a value");
    const std::string value = argv[i + 1];
    if (key == "--n") {
      c.n = std::stoll(value);
    } else if (key == "--data") {
      c.data = value;
    } else if (key == "--policy") {
      if (value == "uneven") {
        c.policy = ingest::Remainder::uneven;
      } else if (value == "drop") {
        c.policy = ingest::Remainder::drop;
      } else if (value == "pad") {
        c.policy = ingest::Remainder::pad;
        c.padded = true;
      } else {
        fail("--policy " + value + ": uneven, drop or pad");
      }
    } else if (key == "--filter") {
      if (value != "all" && value != "mod7") fail("--filter " + value + ": all or mod7");
      c.filter_some = value == "mod7";
    } else if (key == "--sync") {
      if (value != "strict" && value != "join" && value != "none") {
        fail("--sync " + value + ": strict, join or none");
      }
      c.sync = value;
    } else if (key == "--world") {
      c.world = std::stoi(value);
    } else if (key == "--launcher") {
      c.launcher = value;
    } else if (key == "--local-size") {
      c.local_size = std::stoi(value);
    } else if (key == "--old-world") {
      c.old_world = std::stoi(value);
    } else if (key == "--kill-at") {
      c.kill_at = std::stoll(value);
    } else if (key == "--kill-rank") {
      c.kill_rank = std::stoi(value);
    } else {
      fail("unknown option " + key);
    }
  }
  return c;
}

bool kept(std::int64_t id, bool filter_some) { return !filter_some || id % 7 != 3; }

std::int64_t id_of(std::int64_t x) { return x; }
std::int64_t id_of(const std::string& record) { return std::stoll(record); }
template <class T>
std::int64_t id_of(const std::pair<T, bool>& x) {
  return id_of(x.first);
}

// The job's pipeline, as every rank of every run builds it: `source()` (a
// fresh range or indexed TFRecord dataset) globally shuffled, dealt to the
// ranks, filtered, mapped to ids in parallel, batched and prefetched.
template <class Source>
auto job(Source source, const Config& c) {
  return [source, c](const World& w) {
    return source()
        .global_shuffle({.seed = c.seed})
        .shard(w, {.remainder = c.policy})
        .filter([f = c.filter_some](const auto& x) { return kept(id_of(x), f); })
        .map([](const auto& x) { return id_of(x); }, {.parallelism = 2})
        .batch(c.batch)
        .prefetch(2);
  };
}

// As job() with Remainder::pad: (id, valid) pairs.
template <class Source>
auto padded_job(Source source, const Config& c) {
  return [source, c](const World& w) {
    return source()
        .global_shuffle({.seed = c.seed})
        .shard_padded(w)
        .filter([f = c.filter_some](const auto& x) { return kept(id_of(x), f); })
        .map(
            [](const auto& x) {
              return std::pair{id_of(x), x.second};
            },
            {.parallelism = 2})
        .batch(c.batch)
        .prefetch(2);
  };
}

// A batch as log tokens: "id", or "id*" for an element marked not valid.
std::string tokens(const ingest::Tensor& ids) {
  std::string out;
  for (const std::int64_t id : ids.values<std::int64_t>()) out += " " + std::to_string(id);
  return out;
}
std::string tokens(const std::pair<ingest::Tensor, ingest::Tensor>& batch) {
  const auto ids = batch.first.values<std::int64_t>();
  const auto valid = batch.second.values<bool>();
  std::string out;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    out += " " + std::to_string(ids[k]) + (valid[k] ? "" : "*");
  }
  return out;
}
std::int64_t size_of(const ingest::Tensor& ids) { return ids.shape()[0]; }
std::int64_t size_of(const std::pair<ingest::Tensor, ingest::Tensor>& b) {
  return size_of(b.first);
}

// A rank's log: its world, then one line per step ("step S id id ..."),
// flushed to the kernel before the step's state is written, so that a state
// on disk implies the log of its steps (a SIGKILL loses no written line).
class Log {
 public:
  Log(const fs::path& path, const World& w) : out_(std::fopen(path.c_str(), "w")) {
    if (!out_) fail("cannot write " + path.string());
    std::fprintf(out_, "world %d %d %d %d %s\n", w.rank, w.world_size, w.local_rank,
                 w.local_world_size, w.launcher.c_str());
    std::fflush(out_);
  }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;
  ~Log() { std::fclose(out_); }
  void line(const std::string& text) {
    std::fprintf(out_, "%s\n", text.c_str());
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
};

void mpi_abort(const std::string& message) {
  std::fprintf(stderr, "mpi_rank: %s\n", message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// One step's allreduce: {1 or 0 (has a batch), batch size}, summed.
std::array<std::int64_t, 2> allreduce_step(bool has_batch, std::int64_t size) {
  std::array<std::int64_t, 2> local{has_batch ? 1 : 0, size}, sum{};
  MPI_Allreduce(local.data(), sum.data(), 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

// `run`: one rank of a job, one pass.
template <class Make>
void run_rank(const Make& make, const Config& c, const fs::path& out) {
  const World w = ingest::distributed::world();
  Log log(out / ("rank-" + std::to_string(w.rank) + ".log"), w);
  auto it = make(w).iterator();
  std::int64_t step = 0, elements = 0, job_elements = 0;
  for (;;) {
    auto batch = it.next();
    const std::int64_t size = batch ? size_of(*batch) : 0;
    if (c.sync == "strict") {
      const auto sum = allreduce_step(batch.has_value(), size);
      const std::int64_t expected = batch ? w.world_size : 0;
      if (sum[0] != expected) {
        mpi_abort("rank " + std::to_string(w.rank) + " at step " + std::to_string(step + 1) +
                  (batch ? " has a batch" : " is done") + " but " + std::to_string(sum[0]) +
                  " of " + std::to_string(w.world_size) +
                  " ranks have one: the ranks' batch counts differ");
      }
      job_elements += sum[1];
    } else if (c.sync == "join") {
      const auto sum = allreduce_step(batch.has_value(), size);
      if (sum[0] == 0) break;
      job_elements += sum[1];
    }
    if (!batch) {
      if (c.sync == "join") continue;  // an empty step while other ranks have batches
      break;
    }
    ++step;
    elements += size;
    log.line("step " + std::to_string(step) + tokens(*batch));
  }
  log.line("end " + std::to_string(step) + " " + std::to_string(elements));
  if (w.rank == 0 && c.sync != "none") {
    std::printf("%d ranks (%s): %lld elements in the job, rank 0 %lld steps\n", w.world_size,
                w.launcher.c_str(), static_cast<long long>(job_elements),
                static_cast<long long>(step));
  }
}

fs::path state_path(const fs::path& dir, int rank, std::int64_t step) {
  return dir / ("rank-" + std::to_string(rank) + ".step-" + std::to_string(step) + ".state");
}

// The newest step of which every one of `ranks` ranks saved a state in `dir`.
std::int64_t newest_common_step(const fs::path& dir, int ranks) {
  std::map<std::int64_t, int> saved;  // step -> ranks with a state of it
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const auto dot = name.find(".step-");
    if (!name.starts_with("rank-") || dot == std::string::npos || !name.ends_with(".state")) {
      continue;
    }
    ++saved[std::stoll(name.substr(dot + 6, name.size() - dot - 6 - 6))];
  }
  for (auto s = saved.rbegin(); s != saved.rend(); ++s) {
    if (s->second == ranks) return s->first;
  }
  fail("no step of which all " + std::to_string(ranks) + " ranks saved a state in " + dir.string());
}

// `elastic`: one rank of run `run` of a job resized between runs. Run 1
// starts the pass; run k restores from the newest step every rank of run
// k-1 saved (distributed::restore with all their states) and records it in
// resumed-from. Every step is a join step (the filter gives ranks different
// batch counts), after which each rank saves its state (atomically; the last
// two steps are kept). Rank `kill_rank` SIGKILLs itself once it has saved
// step `kill_at`, so mpirun ends the job there.
template <class Make>
void elastic_rank(const Make& make, const Config& c, const fs::path& work, int run) {
  const World w = ingest::distributed::world();
  const fs::path dir = work / ("run-" + std::to_string(run));
  if (w.rank == 0) fs::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  std::int64_t step = 0;
  auto it = [&] {
    if (run == 1) return make(w).iterator();
    const fs::path old = work / ("run-" + std::to_string(run - 1));
    step = newest_common_step(old, c.old_world);
    std::vector<ingest::IteratorState> states;
    for (int r = 0; r < c.old_world; ++r) {
      states.push_back(ingest::read_state(state_path(old, r, step).string()));
    }
    if (w.rank == 0) std::ofstream(dir / "resumed-from") << step << "\n";
    return ingest::distributed::restore(make, states, w).iterator;
  }();
  Log log(dir / ("rank-" + std::to_string(w.rank) + ".log"), w);
  const std::int64_t first = step + 1;
  for (;;) {
    auto batch = it.next();
    const auto sum = allreduce_step(batch.has_value(), batch ? size_of(*batch) : 0);
    if (sum[0] == 0) break;
    ++step;
    log.line("step " + std::to_string(step) + (batch ? tokens(*batch) : ""));
    ingest::write_state(state_path(dir, w.rank, step).string(), it.save());
    std::error_code ec;
    fs::remove(state_path(dir, w.rank, step - 2), ec);
    if (step == c.kill_at && w.rank == c.kill_rank) std::raise(SIGKILL);
  }
  log.line("end " + std::to_string(step));
  if (w.rank == 0) {
    std::printf("run %d: %d ranks, steps %lld-%lld, done\n", run, w.world_size,
                static_cast<long long>(first), static_cast<long long>(step));
  }
}

// A rank's log as read back.
struct RankLog {
  int rank = -1, world_size = 0, local_rank = -1, local_world_size = 0;
  std::string launcher;
  std::int64_t steps = 0;
  bool ended = false;
  // (step, id, valid) of every element.
  struct Element {
    std::int64_t step, id;
    bool valid;
  };
  std::vector<Element> elements;
};

RankLog read_log(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read " + path.string());
  RankLog log;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "world") {
      words >> log.rank >> log.world_size >> log.local_rank >> log.local_world_size >> log.launcher;
    } else if (kind == "step") {
      std::int64_t step = 0;
      words >> step;
      log.steps = std::max(log.steps, step);
      std::string token;
      while (words >> token) {
        const bool valid = !token.ends_with('*');
        log.elements.push_back(
            {step, std::stoll(valid ? token : token.substr(0, token.size() - 1)), valid});
      }
    } else if (kind == "end") {
      log.ended = true;
    }
  }
  return log;
}

// What a set of logs delivered: valid elements per id, elements not valid,
// and the ids delivered that the filter drops.
struct Tally {
  std::map<std::int64_t, int> valid;
  std::int64_t not_valid = 0, rejected = 0;
  void add(const RankLog::Element& e, bool filter_some) {
    if (!kept(e.id, filter_some)) ++rejected;
    if (e.valid) {
      ++valid[e.id];
    } else {
      ++not_valid;
    }
  }
  std::int64_t duplicates() const {
    std::int64_t d = 0;
    for (const auto& [id, count] : valid) d += count - 1;
    return d;
  }
  std::int64_t missing(std::int64_t n, bool filter_some) const {
    std::int64_t m = 0;
    for (std::int64_t id = 0; id < n; ++id) m += kept(id, filter_some) && !valid.contains(id);
    return m;
  }
  std::int64_t outside(std::int64_t n) const {
    std::int64_t o = 0;
    for (const auto& [id, count] : valid) o += id < 0 || id >= n;
    return o;
  }
};

// `check`: the logs of one job (c.world ranks) against its policy.
int check(const Config& c, const fs::path& dir) {
  std::vector<std::string> errors;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) errors.push_back(what);
  };
  const int world = c.world;
  std::vector<RankLog> logs;
  for (int r = 0; r < world; ++r)
    logs.push_back(read_log(dir / ("rank-" + std::to_string(r) + ".log")));
  Tally tally;
  std::string steps;
  std::vector<std::int64_t> per_rank;
  for (int r = 0; r < world; ++r) {
    const RankLog& log = logs[static_cast<std::size_t>(r)];
    const std::string who = "rank " + std::to_string(r);
    expect(log.rank == r && log.world_size == world, who + ": world() said rank " +
                                                         std::to_string(log.rank) + " of " +
                                                         std::to_string(log.world_size));
    expect(c.launcher.empty() || log.launcher == c.launcher,
           who + ": launcher " + log.launcher + ", expected " + c.launcher);
    expect(log.local_rank >= 0 && log.local_rank < log.local_world_size,
           who + ": local rank " + std::to_string(log.local_rank) + " of " +
               std::to_string(log.local_world_size));
    expect(c.local_size == 0 || log.local_world_size == c.local_size,
           who + ": local size " + std::to_string(log.local_world_size) + ", expected " +
               std::to_string(c.local_size));
    expect(log.ended, who + ": its log has no end (the rank did not finish)");
    for (const auto& e : log.elements) tally.add(e, c.filter_some);
    steps += (r ? " " : "") + std::to_string(log.steps);
    per_rank.push_back(static_cast<std::int64_t>(log.elements.size()));
  }
  const std::int64_t n = c.n, w = world;
  const std::int64_t delivered = static_cast<std::int64_t>(tally.valid.size()) + tally.duplicates();
  const std::int64_t missing = tally.missing(n, c.filter_some);
  expect(tally.duplicates() == 0, std::to_string(tally.duplicates()) + " duplicates");
  expect(tally.rejected == 0, std::to_string(tally.rejected) + " elements the filter drops");
  expect(tally.outside(n) == 0, std::to_string(tally.outside(n)) + " ids outside [0, n)");
  const bool equal_steps = std::all_of(logs.begin(), logs.end(),
                                       [&](const RankLog& l) { return l.steps == logs[0].steps; });
  const bool equal_counts =
      std::all_of(per_rank.begin(), per_rank.end(), [&](auto k) { return k == per_rank[0]; });
  switch (c.policy) {
    case ingest::Remainder::uneven:
      expect(missing == 0, std::to_string(missing) + " elements missing");
      expect(tally.not_valid == 0, "elements marked not valid");
      break;
    case ingest::Remainder::drop:
      // Fewer than W elements of the pass are not read; without a filter every
      // rank reads floor(n / W), so the ranks' steps are equal.
      expect(missing <= n % w, std::to_string(missing) + " elements missing (drop: at most " +
                                   std::to_string(n % w) + ")");
      if (!c.filter_some) {
        expect(delivered == w * (n / w),
               std::to_string(delivered) + " elements, expected " + std::to_string(w * (n / w)));
        expect(equal_steps && equal_counts,
               "the ranks' step or element counts differ: steps " + steps);
      }
      expect(tally.not_valid == 0, "elements marked not valid");
      break;
    case ingest::Remainder::pad:
      // Every element once among the valid ones; ceil(n / W) per rank, the
      // copies marked not valid.
      expect(missing == 0, std::to_string(missing) + " elements missing");
      if (!c.filter_some) {
        const std::int64_t per = (n + w - 1) / w;
        expect(equal_steps && equal_counts && per_rank[0] == per,
               "the ranks' step or element counts differ or are not ceil(n / W) = " +
                   std::to_string(per) + ": steps " + steps);
        expect(tally.not_valid == w * per - n, std::to_string(tally.not_valid) +
                                                   " elements not valid, expected " +
                                                   std::to_string(w * per - n));
      }
      break;
  }
  std::printf(
      "check: %d ranks (%s, local size %d), steps per rank %s: %lld elements, %lld not "
      "valid, duplicates %lld, missing %lld\n",
      world, logs[0].launcher.c_str(), logs[0].local_world_size, steps.c_str(),
      static_cast<long long>(delivered), static_cast<long long>(tally.not_valid),
      static_cast<long long>(tally.duplicates()), static_cast<long long>(missing));
  for (const auto& e : errors) std::printf("check: FAILED: %s\n", e.c_str());
  if (!errors.empty()) return 1;
  std::printf("check: ok\n");
  return 0;
}

// `check-elastic`: runs 1..runs of the elastic job. Run k's logs count up to
// the step run k+1 resumed from (what its states recorded); the last run's
// in full. Every element the filter keeps must appear exactly once.
int check_elastic(const Config& c, const fs::path& work, int runs) {
  Tally tally;
  bool ok = true;
  for (int run = 1; run <= runs; ++run) {
    const fs::path dir = work / ("run-" + std::to_string(run));
    std::int64_t until = -1;
    if (run < runs) {
      std::ifstream in(work / ("run-" + std::to_string(run + 1)) / "resumed-from");
      if (!(in >> until)) fail("run " + std::to_string(run + 1) + " has no resumed-from");
    }
    std::int64_t first = -1, last = 0, elements = 0, ranks = 0;
    for (;; ++ranks) {
      const fs::path path = dir / ("rank-" + std::to_string(ranks) + ".log");
      if (!fs::exists(path)) break;
      const RankLog log = read_log(path);
      for (const auto& e : log.elements) {
        if (until >= 0 && e.step > until) continue;
        tally.add(e, c.filter_some);
        ++elements;
        first = first < 0 ? e.step : std::min(first, e.step);
        last = std::max(last, e.step);
      }
      if (run == runs && !log.ended) {
        std::printf("check-elastic: run %d rank %lld did not finish\n", run,
                    static_cast<long long>(ranks));
        ok = false;
      }
    }
    std::printf(
        "check-elastic: run %d: %lld ranks, steps %lld-%lld%s: %lld elements\n", run,
        static_cast<long long>(ranks), static_cast<long long>(first), static_cast<long long>(last),
        until >= 0 ? (" (cut at the step run " + std::to_string(run + 1) + " resumed from)").c_str()
                   : "",
        static_cast<long long>(elements));
  }
  std::int64_t expected = 0;
  for (std::int64_t id = 0; id < c.n; ++id) expected += kept(id, c.filter_some);
  const std::int64_t missing = tally.missing(c.n, c.filter_some);
  std::printf(
      "check-elastic: %lld of %lld elements the filter keeps: duplicates %lld, missing %lld, "
      "filtered out but delivered %lld, outside [0, n) %lld\n",
      static_cast<long long>(tally.valid.size()), static_cast<long long>(expected),
      static_cast<long long>(tally.duplicates()), static_cast<long long>(missing),
      static_cast<long long>(tally.rejected), static_cast<long long>(tally.outside(c.n)));
  ok = ok && tally.duplicates() == 0 && missing == 0 && tally.rejected == 0 &&
       tally.outside(c.n) == 0 && tally.not_valid == 0;
  std::printf("check-elastic: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

// `data`: n records, "0".."n-1", over 4 files of different sizes.
void write_data(const fs::path& dir, std::int64_t n) {
  fs::create_directories(dir);
  const std::int64_t ends[] = {n / 7, n / 2, n * 3 / 4, n};
  std::int64_t id = 0;
  for (int f = 0; f < 4; ++f) {
    ingest::TFRecordWriter out((dir / ("part-" + std::to_string(f) + ".tfrecord")).string());
    for (; id < ends[f]; ++id) out.write(std::to_string(id));
    out.close();
  }
}

std::vector<std::string> data_files(const fs::path& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".tfrecord") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) fail("no .tfrecord files in " + dir.string());
  return paths;
}

// Calls `body(make)` with the job's pipeline factory for `c`'s source and policy.
template <class Body>
void with_job(const Config& c, Body&& body) {
  if (c.data.empty()) {
    auto source = [n = c.n] { return ingest::range(n); };
    if (c.padded) {
      body(padded_job(source, c));
    } else {
      body(job(source, c));
    }
  } else {
    if (c.padded) fail("--policy pad reads range(n) only");
    auto index = std::make_shared<const ingest::TFRecordIndex>(
        ingest::build_tfrecord_index(ingest::FileList(data_files(c.data))));
    body(job([index] { return ingest::indexed_tfrecord(*index); }, c));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s data DIR N | run OUT_DIR [opts] | elastic WORK RUN [opts] | check "
                 "OUT_DIR [opts] | check-elastic WORK RUNS [opts]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "data") {
      if (argc != 4) fail("data DIR N");
      write_data(argv[2], std::stoll(argv[3]));
      return 0;
    }
    if (mode == "check") return check(parse(argc, argv, 3), argv[2]);
    if (mode == "check-elastic") {
      if (argc < 4) fail("check-elastic WORK RUNS [opts]");
      return check_elastic(parse(argc, argv, 4), argv[2], std::stoi(argv[3]));
    }
    if (mode == "run") {
      const Config c = parse(argc, argv, 3);
      // Without MPI (torchrun- or SLURM-style processes), MPI_Init is not called.
      const bool mpi = c.sync != "none";
      if (mpi) MPI_Init(&argc, &argv);
      fs::create_directories(argv[2]);
      with_job(c, [&](const auto& make) { run_rank(make, c, argv[2]); });
      if (mpi) MPI_Finalize();
      return 0;
    }
    if (mode == "elastic") {
      if (argc < 4) fail("elastic WORK RUN [opts]");
      const Config c = parse(argc, argv, 4);
      const int run = std::stoi(argv[3]);
      if (run > 1 && c.old_world < 1)
        fail("elastic: run " + std::to_string(run) + " needs --old-world");
      MPI_Init(&argc, &argv);
      with_job(c, [&](const auto& make) { elastic_rank(make, c, argv[2], run); });
      MPI_Finalize();
      return 0;
    }
    fail("unknown mode " + mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_rank %s: %s\n", mode.c_str(), e.what());
    std::fflush(stderr);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
