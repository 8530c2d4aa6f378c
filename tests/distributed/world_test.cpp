// distributed::world() and distributed::validate(): each launcher's variables, local
// information present or absent, SLURM's task lists, malformed and
// contradictory values, nested launchers. Every case runs in an environment
// cleared of every launcher variable and restored afterwards.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ingest/distributed/world.hpp>

using namespace ingest;
using Catch::Contains;
using distributed::World;

namespace {

// Every variable distributed::world() reads.
constexpr const char* kLauncherVariables[] = {
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_NTASKS_PER_NODE",
};

// Clears every launcher variable, sets the given ones, and restores the
// previous environment when it goes.
class LauncherEnv {
 public:
  LauncherEnv(std::initializer_list<std::pair<const char*, const char*>> vars = {}) {
    for (const char* name : kLauncherVariables) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::unsetenv(name);
    }
    for (const auto& [name, value] : vars) set(name, value);
  }
  LauncherEnv(const LauncherEnv&) = delete;
  LauncherEnv& operator=(const LauncherEnv&) = delete;
  ~LauncherEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name, value->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }

  void set(const char* name, const char* value) {
    bool known = false;
    for (const char* v : kLauncherVariables) known = known || std::string(v) == name;
    REQUIRE(known);  // so that the destructor restores it
    ::setenv(name, value, 1);
  }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

// "rank/world_size local local_rank/local_world_size launcher", for readable failures.
std::string show_world(const World& w) {
  return std::to_string(w.rank) + "/" + std::to_string(w.world_size) + " local " +
         std::to_string(w.local_rank) + "/" + std::to_string(w.local_world_size) + " " + w.launcher;
}

}  // namespace

static_assert(std::is_aggregate_v<World>, "World stays an aggregate (designated initializers)");

TEST_CASE("world() without a launcher is one process", "[distributed][world]") {
  const LauncherEnv env;
  CHECK(show_world(distributed::world()) == "0/1 local 0/1 none");
}

TEST_CASE("world() reads torchrun's variables", "[distributed][world]") {
  SECTION("with the local ones") {
    const LauncherEnv env{
        {"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}};
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 torchrun");
  }
  SECTION("without the local ones: local is global (one node)") {
    const LauncherEnv env{{"RANK", "5"}, {"WORLD_SIZE", "8"}};
    CHECK(show_world(distributed::world()) == "5/8 local 5/8 torchrun");
  }
  SECTION("a single process") {
    const LauncherEnv env{
        {"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}};
    CHECK(show_world(distributed::world()) == "0/1 local 0/1 torchrun");
  }
  SECTION("leading zeros are still decimal") {
    const LauncherEnv env{{"RANK", "007"}, {"WORLD_SIZE", "010"}};
    CHECK(show_world(distributed::world()) == "7/10 local 7/10 torchrun");
  }
}

TEST_CASE("world() reads Open MPI's variables", "[distributed][world]") {
  SECTION("with the local ones") {
    const LauncherEnv env{{"OMPI_COMM_WORLD_RANK", "6"},
                          {"OMPI_COMM_WORLD_SIZE", "12"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
    CHECK(show_world(distributed::world()) == "6/12 local 2/4 openmpi");
  }
  SECTION("without the local ones") {
    const LauncherEnv env{{"OMPI_COMM_WORLD_RANK", "6"}, {"OMPI_COMM_WORLD_SIZE", "12"}};
    CHECK(show_world(distributed::world()) == "6/12 local 6/12 openmpi");
  }
}

TEST_CASE("world() reads PMI's variables, with Hydra's local ones or without",
          "[distributed][world]") {
  SECTION("MPICH's Hydra") {
    const LauncherEnv env{
        {"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}};
    CHECK(show_world(distributed::world()) == "3/4 local 1/2 pmi");
  }
  SECTION("PMI alone") {
    const LauncherEnv env{{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}};
    CHECK(show_world(distributed::world()) == "3/4 local 3/4 pmi");
  }
}

TEST_CASE("world() reads SLURM's variables inside a job step", "[distributed][world][slurm]") {
  LauncherEnv env{{"SLURM_PROCID", "5"}, {"SLURM_STEP_NUM_TASKS", "8"}};
  SECTION("no SLURM_LOCALID: local is global") {
    env.set("SLURM_STEP_TASKS_PER_NODE", "4(x2)");
    CHECK(show_world(distributed::world()) == "5/8 local 5/8 slurm");
  }
  SECTION("one count per node, repeated: no SLURM_NODEID needed") {
    env.set("SLURM_LOCALID", "1");
    env.set("SLURM_STEP_TASKS_PER_NODE", "4(x2)");
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 slurm");
  }
  SECTION("one count, written out per node") {
    env.set("SLURM_LOCALID", "1");
    env.set("SLURM_STEP_TASKS_PER_NODE", "4,4");
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 slurm");
  }
  SECTION("different counts per node: SLURM_NODEID picks this node's") {
    // 2(x3),1: nodes 0-2 run 2 tasks each, node 3 runs 1; 7 tasks.
    env.set("SLURM_STEP_NUM_TASKS", "7");
    env.set("SLURM_STEP_TASKS_PER_NODE", "2(x3),1");
    env.set("SLURM_PROCID", "6");
    env.set("SLURM_LOCALID", "0");
    env.set("SLURM_NODEID", "3");
    CHECK(show_world(distributed::world()) == "6/7 local 0/1 slurm");
    env.set("SLURM_PROCID", "5");
    env.set("SLURM_LOCALID", "1");
    env.set("SLURM_NODEID", "2");
    CHECK(show_world(distributed::world()) == "5/7 local 1/2 slurm");
    env.set("SLURM_PROCID", "0");
    env.set("SLURM_LOCALID", "0");
    env.set("SLURM_NODEID", "0");
    CHECK(show_world(distributed::world()) == "0/7 local 0/2 slurm");
  }
  SECTION("the step's list wins over the job's") {
    env.set("SLURM_LOCALID", "1");
    env.set("SLURM_NODEID", "1");
    env.set("SLURM_STEP_TASKS_PER_NODE", "4(x2)");
    env.set("SLURM_TASKS_PER_NODE", "8(x2)");  // the job's, kept by srun --preserve-env
    env.set("SLURM_NTASKS_PER_NODE", "8");
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 slurm");
  }
  SECTION("SLURM_TASKS_PER_NODE without the step's list") {
    env.set("SLURM_LOCALID", "1");
    env.set("SLURM_NODEID", "2");
    env.set("SLURM_TASKS_PER_NODE", "3(x2),2");
    CHECK(show_world(distributed::world()) == "5/8 local 1/2 slurm");
  }
  SECTION("SLURM_NTASKS_PER_NODE as the last resort") {
    env.set("SLURM_LOCALID", "1");
    env.set("SLURM_NTASKS_PER_NODE", "4");
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 slurm");
  }
}

TEST_CASE("SLURM outside a job step is one process", "[distributed][world][slurm]") {
  SECTION("a batch script: SLURM_PROCID=0 and the job's task count") {
    const LauncherEnv env{{"SLURM_PROCID", "0"},
                          {"SLURM_LOCALID", "0"},
                          {"SLURM_NODEID", "0"},
                          {"SLURM_NTASKS", "8"},
                          {"SLURM_TASKS_PER_NODE", "4(x2)"}};
    CHECK(show_world(distributed::world()) == "0/1 local 0/1 none");
  }
  SECTION("a batch script without --ntasks: SLURM_PROCID alone") {
    const LauncherEnv env{{"SLURM_PROCID", "0"}, {"SLURM_TASKS_PER_NODE", "64"}};
    CHECK(show_world(distributed::world()) == "0/1 local 0/1 none");
  }
  SECTION("an salloc shell: the job's task count alone") {
    const LauncherEnv env{{"SLURM_NTASKS", "8"}};
    CHECK(show_world(distributed::world()) == "0/1 local 0/1 none");
  }
}

TEST_CASE("SLURM task lists that do not give this node's count are errors",
          "[distributed][world][slurm]") {
  LauncherEnv env{{"SLURM_PROCID", "5"}, {"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_LOCALID", "1"}};
  SECTION("malformed lists") {
    for (const char* list : {"", "x", "4(x2", "4(2)", "4(x)", "4(x0)", "2,,1", "2,", ",2", "4 ",
                             "-4", "4(x2)1", "4;4"}) {
      INFO(list);
      env.set("SLURM_STEP_TASKS_PER_NODE", list);
      CHECK_THROWS_WITH(distributed::world(), Contains(std::string("SLURM_STEP_TASKS_PER_NODE=\"") +
                                                       list + "\" is not a task count list"));
    }
  }
  SECTION("counts beyond int") {
    env.set("SLURM_STEP_TASKS_PER_NODE", "99999999999");
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("SLURM_STEP_TASKS_PER_NODE=\"99999999999\" is out of range"));
    env.set("SLURM_STEP_TASKS_PER_NODE", "65536(x65536)");
    CHECK_THROWS_WITH(distributed::world(), Contains("is out of range"));
  }
  SECTION("a list that does not add up to the step's tasks") {
    env.set("SLURM_STEP_TASKS_PER_NODE", "4(x3)");
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("SLURM_STEP_TASKS_PER_NODE=\"4(x3)\" counts 12 tasks but "
                               "SLURM_STEP_NUM_TASKS=8"));
  }
  SECTION("different counts per node without SLURM_NODEID") {
    env.set("SLURM_STEP_TASKS_PER_NODE", "3(x2),2");
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("SLURM_STEP_TASKS_PER_NODE=\"3(x2),2\" lists different "
                               "task counts per node but SLURM_NODEID is not set"));
  }
  SECTION("SLURM_NODEID beyond the list") {
    env.set("SLURM_STEP_TASKS_PER_NODE", "3(x2),2");
    env.set("SLURM_NODEID", "3");
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("SLURM_NODEID=3 is outside SLURM_STEP_TASKS_PER_NODE="
                               "\"3(x2),2\", which lists 3 nodes"));
  }
  SECTION("SLURM_LOCALID without any task list") {
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("SLURM_LOCALID=1 is set but the tasks on this node are "
                               "unknown"));
  }
  SECTION("SLURM_LOCALID beyond this node's count") {
    env.set("SLURM_LOCALID", "4");
    env.set("SLURM_STEP_TASKS_PER_NODE", "4(x2)");
    CHECK_THROWS_WITH(distributed::world(), Contains("SLURM_LOCALID=4 is outside [0, 4) "
                                                     "(SLURM_STEP_TASKS_PER_NODE=\"4(x2)\")"));
    env.set("SLURM_STEP_TASKS_PER_NODE", "2(x3),1,1");
    env.set("SLURM_NODEID", "3");
    env.set("SLURM_LOCALID", "1");
    CHECK_THROWS_WITH(distributed::world(), Contains("SLURM_LOCALID=1 is outside [0, 1) "
                                                     "(SLURM_STEP_TASKS_PER_NODE=\"2(x3),1,1\" at "
                                                     "SLURM_NODEID=3)"));
  }
}

TEST_CASE("malformed values name the variable and its value", "[distributed][world]") {
  LauncherEnv env{{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  SECTION("not a number") {
    env.set("WORLD_SIZE", "abc");
    CHECK_THROWS_AS(distributed::world(), InvalidArgument);
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("distributed: WORLD_SIZE=\"abc\" is not a number"));
  }
  SECTION("trailing junk, spaces, signs, empty") {
    for (const char* value : {"3x", "3 ", " 3", "+3", "", "0x10", "1e3", "2.0", "-"}) {
      INFO('"' << value << '"');
      env.set("RANK", value);
      CHECK_THROWS_WITH(distributed::world(),
                        Contains(std::string("RANK=\"") + value + "\" is not a number"));
    }
  }
  SECTION("negative") {
    env.set("RANK", "-1");
    CHECK_THROWS_WITH(distributed::world(), Contains("RANK=\"-1\" is negative"));
  }
  SECTION("overflow") {
    env.set("WORLD_SIZE", "99999999999");
    CHECK_THROWS_WITH(distributed::world(), Contains("WORLD_SIZE=\"99999999999\" is out of range"));
    env.set("WORLD_SIZE", "2147483648");
    CHECK_THROWS_WITH(distributed::world(), Contains("WORLD_SIZE=\"2147483648\" is out of range"));
  }
  SECTION("in a local variable") {
    env.set("LOCAL_RANK", "one");
    env.set("LOCAL_WORLD_SIZE", "2");
    CHECK_THROWS_WITH(distributed::world(), Contains("LOCAL_RANK=\"one\" is not a number"));
  }
  SECTION("in another launcher's variables") {
    env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "4k");
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("OMPI_COMM_WORLD_LOCAL_SIZE=\"4k\" is not a number"));
    env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    env.set("SLURM_LOCALID", "-2");
    CHECK_THROWS_WITH(distributed::world(), Contains("SLURM_LOCALID=\"-2\" is negative"));
  }
}

TEST_CASE("contradictory values name the variables and values", "[distributed][world]") {
  SECTION("rank beyond the world") {
    const LauncherEnv env{{"RANK", "3"}, {"WORLD_SIZE", "2"}};
    CHECK_THROWS_AS(distributed::world(), InvalidArgument);
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("distributed: RANK=3 is outside [0, 2) (WORLD_SIZE=2)"));
  }
  SECTION("rank equal to the world size") {
    const LauncherEnv env{{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}};
    CHECK_THROWS_WITH(
        distributed::world(),
        Contains("OMPI_COMM_WORLD_RANK=4 is outside [0, 4) (OMPI_COMM_WORLD_SIZE=4)"));
  }
  SECTION("an empty world") {
    const LauncherEnv env{{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}};
    CHECK_THROWS_WITH(distributed::world(), Contains("PMI_SIZE=0 must be at least 1"));
  }
  SECTION("local rank beyond the node") {
    const LauncherEnv env{
        {"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "4"}, {"LOCAL_WORLD_SIZE", "4"}};
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("LOCAL_RANK=4 is outside [0, 4) (LOCAL_WORLD_SIZE=4)"));
  }
  SECTION("an empty node") {
    const LauncherEnv env{
        {"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "0"}};
    CHECK_THROWS_WITH(distributed::world(), Contains("MPI_LOCALNRANKS=0 must be at least 1"));
  }
  SECTION("a node larger than the world") {
    const LauncherEnv env{
        {"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "8"}};
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("LOCAL_WORLD_SIZE=8 is larger than WORLD_SIZE=4"));
  }
  SECTION("errors carry the stage") {
    const LauncherEnv env{{"RANK", "3"}, {"WORLD_SIZE", "2"}};
    try {
      distributed::world();
      FAIL("no exception");
    } catch (const InvalidArgument& e) {
      CHECK(e.context().stage == "distributed");
    }
  }
}

TEST_CASE("a rank variable without its size variable is an error naming both",
          "[distributed][world]") {
  SECTION("torchrun") {
    const LauncherEnv env{{"RANK", "3"}};
    CHECK_THROWS_AS(distributed::world(), InvalidArgument);
    CHECK_THROWS_WITH(distributed::world(), Contains("RANK=3 is set but WORLD_SIZE is not"));
  }
  SECTION("torchrun, the other way round") {
    const LauncherEnv env{{"WORLD_SIZE", "4"}};
    CHECK_THROWS_WITH(distributed::world(), Contains("WORLD_SIZE=4 is set but RANK is not"));
  }
  SECTION("Open MPI") {
    const LauncherEnv env{{"OMPI_COMM_WORLD_SIZE", "4"}};
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("OMPI_COMM_WORLD_SIZE=4 is set but OMPI_COMM_WORLD_RANK is not"));
  }
  SECTION("PMI") {
    const LauncherEnv env{{"PMI_RANK", "0"}};
    CHECK_THROWS_WITH(distributed::world(), Contains("PMI_RANK=0 is set but PMI_SIZE is not"));
  }
  SECTION("SLURM in a step") {
    const LauncherEnv env{{"SLURM_STEP_NUM_TASKS", "4"}};
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("SLURM_STEP_NUM_TASKS=4 is set but SLURM_PROCID is not"));
  }
  SECTION("a local rank without its local size, and the reverse") {
    const LauncherEnv env{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}};
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("LOCAL_RANK=1 is set but LOCAL_WORLD_SIZE is not"));
    const LauncherEnv env2{{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}, {"MPI_LOCALNRANKS", "2"}};
    CHECK_THROWS_WITH(distributed::world(),
                      Contains("MPI_LOCALNRANKS=2 is set but MPI_LOCALRANKID is not"));
  }
  SECTION("a local pair alone is no launcher") {
    const LauncherEnv env{{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}};
    CHECK(show_world(distributed::world()) == "0/1 local 0/1 none");
  }
}

TEST_CASE("the innermost launcher wins: torchrun, Open MPI, PMI, SLURM",
          "[distributed][world][nested]") {
  SECTION("agreeing launchers") {
    // srun --mpi=pmix starting Open MPI ranks directly: both describe this process.
    LauncherEnv env{{"OMPI_COMM_WORLD_RANK", "5"},
                    {"OMPI_COMM_WORLD_SIZE", "8"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                    {"SLURM_PROCID", "5"},
                    {"SLURM_STEP_NUM_TASKS", "8"},
                    {"SLURM_LOCALID", "1"},
                    {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"}};
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 openmpi");
    env.set("PMI_RANK", "5");
    env.set("PMI_SIZE", "8");
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 openmpi");
    env.set("RANK", "5");
    env.set("WORLD_SIZE", "8");
    env.set("LOCAL_RANK", "1");
    env.set("LOCAL_WORLD_SIZE", "4");
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 torchrun");
  }
  SECTION("PMI over SLURM") {
    const LauncherEnv env{{"PMI_RANK", "2"},        {"PMI_SIZE", "4"},
                          {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "1"},
                          {"SLURM_PROCID", "2"},    {"SLURM_STEP_NUM_TASKS", "4"}};
    CHECK(show_world(distributed::world()) == "2/4 local 0/1 pmi");
  }
}

TEST_CASE("an outer launcher's own rank and size do not conflict with the inner one's",
          "[distributed][world][nested]") {
  SECTION("srun -N2 --ntasks-per-node=1 torchrun --nproc-per-node=4") {
    // SLURM describes the torchrun agent (task 1 of 2), torchrun this worker;
    // torchrun numbers nodes in rendezvous order, not by SLURM_PROCID.
    const LauncherEnv env{{"SLURM_PROCID", "1"},
                          {"SLURM_STEP_NUM_TASKS", "2"},
                          {"SLURM_LOCALID", "0"},
                          {"SLURM_NODEID", "1"},
                          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                          {"RANK", "2"},
                          {"WORLD_SIZE", "8"},
                          {"LOCAL_RANK", "2"},
                          {"LOCAL_WORLD_SIZE", "4"}};
    CHECK(show_world(distributed::world()) == "2/8 local 2/4 torchrun");
  }
  SECTION("mpirun in a batch script, its daemons started by srun, one per node") {
    const LauncherEnv env{{"SLURM_PROCID", "1"},
                          {"SLURM_STEP_NUM_TASKS", "2"},
                          {"SLURM_LOCALID", "0"},
                          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                          {"SLURM_NTASKS", "16"},
                          {"OMPI_COMM_WORLD_RANK", "11"},
                          {"OMPI_COMM_WORLD_SIZE", "16"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}};
    CHECK(show_world(distributed::world()) == "11/16 local 3/8 openmpi");
  }
  SECTION("an outer one-task step starting the real launcher") {
    const LauncherEnv env{{"SLURM_PROCID", "0"},    {"SLURM_STEP_NUM_TASKS", "1"},
                          {"SLURM_LOCALID", "0"},   {"SLURM_STEP_TASKS_PER_NODE", "1"},
                          {"PMI_RANK", "3"},        {"PMI_SIZE", "4"},
                          {"MPI_LOCALRANKID", "3"}, {"MPI_LOCALNRANKS", "4"}};
    CHECK(show_world(distributed::world()) == "3/4 local 3/4 pmi");
  }
  SECTION("an inner single process under a larger outer launcher") {
    const LauncherEnv env{{"RANK", "0"},
                          {"WORLD_SIZE", "1"},
                          {"OMPI_COMM_WORLD_RANK", "3"},
                          {"OMPI_COMM_WORLD_SIZE", "4"}};
    CHECK(show_world(distributed::world()) == "0/1 local 0/1 torchrun");
  }
}

TEST_CASE("two launchers whose sizes cannot nest disagree, and the error names both",
          "[distributed][world][nested]") {
  // Open MPI says 4 ranks, an srun step 3 tasks: neither runs inside the other.
  const LauncherEnv env{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                        {"SLURM_PROCID", "1"},         {"SLURM_STEP_NUM_TASKS", "3"},
                        {"SLURM_LOCALID", "1"},        {"SLURM_STEP_TASKS_PER_NODE", "3"}};
  CHECK_THROWS_AS(distributed::world(), InvalidArgument);
  CHECK_THROWS_WITH(distributed::world(), Catch::Contains("launchers disagree") &&
                                              Catch::Contains("OMPI_COMM_WORLD_SIZE=4") &&
                                              Catch::Contains("SLURM_STEP_NUM_TASKS=3"));
}

TEST_CASE("an inner launcher without local variables takes an agreeing outer one's",
          "[distributed][world][nested]") {
  LauncherEnv env{{"SLURM_PROCID", "5"},
                  {"SLURM_STEP_NUM_TASKS", "8"},
                  {"SLURM_LOCALID", "1"},
                  {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"}};
  SECTION("srun --mpi=pmi2: PMI without Hydra's local variables") {
    env.set("PMI_RANK", "5");
    env.set("PMI_SIZE", "8");
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 pmi");
  }
  SECTION("RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS under srun") {
    env.set("RANK", "5");
    env.set("WORLD_SIZE", "8");
    CHECK(show_world(distributed::world()) == "5/8 local 1/4 torchrun");
  }
  SECTION("not from a launcher that reports another rank or size") {
    env.set("RANK", "4");
    env.set("WORLD_SIZE", "8");
    CHECK(show_world(distributed::world()) == "4/8 local 4/8 torchrun");
    env.set("RANK", "5");
    env.set("WORLD_SIZE", "16");
    CHECK(show_world(distributed::world()) == "5/16 local 5/16 torchrun");
  }
}

TEST_CASE("validate() checks explicit Worlds", "[distributed][world]") {
  CHECK_NOTHROW(distributed::validate(World{}));
  CHECK_NOTHROW(distributed::validate(World{.rank = 1, .world_size = 4}));
  CHECK_NOTHROW(distributed::validate(
      World{.rank = 7, .world_size = 8, .local_rank = 3, .local_world_size = 4, .launcher = "x"}));

  CHECK_THROWS_AS(distributed::validate(World{.rank = 3, .world_size = 2}), InvalidArgument);
  CHECK_THROWS_WITH(distributed::validate(World{.rank = 3, .world_size = 2}),
                    Contains("distributed: rank 3 is outside [0, 2) (world_size 2)"));
  CHECK_THROWS_WITH(distributed::validate(World{.rank = -1, .world_size = 2}),
                    Contains("rank -1 is outside [0, 2) (world_size 2)"));
  CHECK_THROWS_WITH(distributed::validate(World{.rank = 0, .world_size = 0}),
                    Contains("world_size 0 must be at least 1"));
  CHECK_THROWS_WITH(distributed::validate(World{.rank = 1, .world_size = 4, .local_world_size = 0}),
                    Contains("local_world_size 0 must be at least 1"));
  CHECK_THROWS_WITH(distributed::validate(
                        World{.rank = 1, .world_size = 4, .local_rank = 2, .local_world_size = 2}),
                    Contains("local_rank 2 is outside [0, 2) (local_world_size 2)"));
  CHECK_THROWS_WITH(distributed::validate(
                        World{.rank = 1, .world_size = 4, .local_rank = -1, .local_world_size = 2}),
                    Contains("local_rank -1 is outside [0, 2) (local_world_size 2)"));
  CHECK_THROWS_WITH(distributed::validate(World{.rank = 1, .world_size = 4, .local_world_size = 8}),
                    Contains("local_world_size 8 is larger than world_size 4"));
}
