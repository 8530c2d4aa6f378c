// Checkpoints under kill -9 (issue 13 item 6): a child process runs the
// pipeline of support/crash_pipeline.hpp (list_files -> parallel interleave
// of TFRecord, plain and GZIP -> parallel map -> filter -> shuffle -> batch
// -> prefetch, 3 epochs), appending every batch to an output file and
// writing its checkpoint atomically every few batches. The driver SIGKILLs
// it at 100 random moments (while it starts, restores, iterates, or writes
// a checkpoint), starting it again after each; the child resumes from its
// last checkpoint. The final output must equal an uninterrupted run's, byte
// for byte: nothing lost, nothing repeated, the same order.
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/crash_pipeline.hpp"
#include "support/files.hpp"
#include "support/paths.hpp"

extern char** environ;

using namespace ingest::testing;

namespace {

constexpr const char* kBatchesPerCheckpoint = "3";

struct Paths {
  std::string data, out, checkpoint;
};

pid_t spawn_child(const Paths& p) {
  std::vector<std::string> args = {::ingest::testing::crash_child, p.data, p.out, p.checkpoint,
                                   kBatchesPerCheckpoint};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  REQUIRE(::posix_spawn(&pid, ::ingest::testing::crash_child, nullptr, nullptr, argv.data(),
                        environ) == 0);
  return pid;
}

// The child's exit status once it ends by itself.
int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("checkpoint: a pipeline killed at 100 random moments resumes to the uninterrupted output",
          "[checkpoint][crash]") {
  TempDir dir;
  const std::string data = dir / "data";
  std::filesystem::create_directories(data);
  write_crash_data(data);

  // The uninterrupted run: how long it takes, and how long until its first
  // checkpoint (the process's start, the runtime's, the pipeline's).
  const Paths reference{data, dir / "reference.txt", dir / "reference.ckpt"};
  const auto start = std::chrono::steady_clock::now();
  const auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
  };
  const pid_t first = spawn_child(reference);
  std::int64_t startup_ms = -1;
  int status = 0;
  while (::waitpid(first, &status, WNOHANG) == 0) {
    if (startup_ms < 0 && std::filesystem::exists(reference.checkpoint))
      startup_ms = ms_since(start);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const std::int64_t run_ms = ms_since(start);
  if (startup_ms < 0) startup_ms = run_ms;
  const std::string expected = file_contents(reference.out);
  REQUIRE(std::count(expected.begin(), expected.end(), '\n') > 50);

  // Killed runs: each kill comes 0 to startup_ms + (run_ms - startup_ms) / 25
  // ms after a start (at a start, a restore, a batch, a checkpoint being
  // written), so the 100 kills fall over a few runs' work; each start
  // resumes from the last checkpoint.
  // A run that ends before its kill is checked and the next one starts
  // afresh, until 100 kills; then one more run goes to the end.
  const Paths crashed{data, dir / "out.txt", dir / "out.ckpt"};
  std::mt19937 rng(20261127);
  std::uniform_int_distribution<std::int64_t> delay_ms(
      0, std::max<std::int64_t>(startup_ms + (run_ms - startup_ms) / 25, 4));
  int kills = 0, starts = 0, resumes = 0, completed = 0;
  const auto check_output = [&] {
    const std::string got = file_contents(crashed.out);
    CHECK(got.size() == expected.size());
    CHECK(got == expected);
  };
  while (kills < 100) {
    resumes += std::filesystem::exists(crashed.checkpoint) ? 1 : 0;
    const pid_t pid = spawn_child(crashed);
    ++starts;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    if (::waitpid(pid, &status, WNOHANG) == pid) {  // it reached the end first
      REQUIRE(WIFEXITED(status));
      REQUIRE(WEXITSTATUS(status) == 0);
      check_output();
      ++completed;
      std::filesystem::remove(crashed.out);
      std::filesystem::remove(crashed.checkpoint);
      continue;
    }
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ++kills;
  }
  resumes += std::filesystem::exists(crashed.checkpoint) ? 1 : 0;
  REQUIRE(wait_child(spawn_child(crashed)) == 0);  // the rest, uninterrupted
  INFO(kills << " kills in " << starts << " starts, " << resumes << " from a checkpoint, "
             << completed << " runs ended before their kill; an uninterrupted run took " << run_ms
             << " ms, " << startup_ms << " ms to its first checkpoint");
  check_output();
  CHECK(resumes >= 20);  // most starts resumed mid-run
}
