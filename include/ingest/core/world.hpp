// distributed::World: which process of a job this is (its rank among
// world_size, and on its node). Defined in core so that every dataset's
// shard(world) can take one; distributed::world() (distributed/world.hpp)
// reads it from the launcher's environment.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ingest::detail {

/// A level of a pass that a resize interrupted: its world's size and what
/// each of its ranks had consumed of the items dealt to it (reads, pads
/// included).
struct DealLevel {
  std::uint64_t world_size = 1;
  std::vector<std::uint64_t> consumed;
  friend bool operator==(const DealLevel&, const DealLevel&) = default;
};

/// What distributed::restore hands a dataset through its World: the levels
/// of the pass to resume in (a new world's ranks), or where an old rank's
/// restored iterator reports the position it resumed at.
struct ElasticLink {
  /// The pass the levels belong to, and the levels (oldest first).
  struct Resume {
    std::uint64_t pass = 0;
    std::vector<DealLevel> levels;
  };
  /// Filled by the sharded source's iterator of an old rank at its restore
  /// and at each read: its pass, its levels and its reads so far.
  struct Report {
    bool restored = false;
    std::uint64_t pass = 0, records = 0, consumed = 0;
    std::vector<DealLevel> levels;
  };
  std::shared_ptr<const Resume> resume{};
  std::shared_ptr<Report> report{};
};

}  // namespace ingest::detail

/// Scale-out across processes: who this process is in a job (world()), and
/// resuming a pass saved by a world of another size (restore()).
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
  /// Set by distributed::restore only; leave it empty.
  ingest::detail::ElasticLink elastic{};
};

}  // namespace ingest::distributed
