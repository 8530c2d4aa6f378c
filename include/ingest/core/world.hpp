// distributed::World: which process of a job this is (its rank among
// world_size, and on its node). Defined in core so that every dataset's
// shard(world) can take one; distributed::world() (distributed/world.hpp)
// reads it from the launcher's environment.
#pragma once

#include <string>

namespace ingest::distributed {

/// One process of a job: its rank in the world and on its node, and the
/// launcher that said so ("torchrun", "openmpi", "pmi", "slurm"; "none" for
/// a single process or a World written by hand).
struct World {
  /// This process's index in the job, in [0, world_size).
  int rank = 0;
  /// The job's processes.
  int world_size = 1;
  /// This process's index on its node, in [0, local_world_size) (picks its GPU).
  int local_rank = 0;
  /// The job's processes on this node.
  int local_world_size = 1;
  /// The launcher whose variables gave these numbers.
  std::string launcher = "none";
};

}  // namespace ingest::distributed
