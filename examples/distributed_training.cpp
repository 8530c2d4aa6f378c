// Data-parallel training on several processes, resumable with another number
// of them. Each rank reads its share of an indexed TFRecord set
// (global_shuffle, then shard(world): a rank reads only its own records),
// steps in lockstep with the other ranks (one MPI_Allreduce per step, here of
// a loss stand-in), and checkpoints its pipeline's position every step.
// Started again with another number of ranks, the job resumes the epoch where
// it stopped: distributed::restore deals what no rank has read yet to the new
// ranks, so every example is trained on exactly once.
//
//   mpirun -np 4 distributed_training WORK_DIR --stop-at 10   (stops after step 10)
//   mpirun -np 2 distributed_training WORK_DIR                (resumes, to the epoch's end)
//   distributed_training WORK_DIR [--stop-at STEP] [FILE.tfrecord ...]
//
// The ranks come from the launcher's variables (distributed::world(): mpirun,
// srun or torchrun). The data is the files given, or 1000 tf.Examples that
// rank 0 writes to WORK_DIR/data. Checkpoints go to WORK_DIR/ckpt: each rank
// writes its state `step-<S>.rank-<R>.state`; once every rank has, rank 0
// writes `latest`, naming the step and the number of ranks that saved it.
#include <mpi.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ingest/ingest.hpp>

namespace fs = std::filesystem;
using ingest::distributed::World;

namespace {

// What `latest` records: the step every rank saved, how many ranks saved it,
// and the job's totals so far.
struct Progress {
  long long step = 0;
  int ranks = 0;
  long long examples = 0, id_sum = 0;
};

// 1000 tf.Examples {id, label} in 4 files (each renamed into place when complete).
void write_data(const std::vector<std::string>& files) {
  for (int f = 0; f < 4; ++f) {
    ingest::TFRecordWriter writer(files[static_cast<std::size_t>(f)]);
    for (int id = f * 250; id < (f + 1) * 250; ++id) {
      writer.write(ingest::ExampleBuilder()
                       .add_int64s("id", {id})
                       .add_int64s("label", {id % 10})
                       .serialize());
    }
    writer.close();
  }
}

// The input pipeline of a rank in `world`: the same function in every rank
// of every run (distributed::restore calls it for the old ranks too).
// Remainder::drop gives every rank the same number of batches, so no rank
// waits in an allreduce for one that ran out (with a filter, ranks differ:
// step until no rank has a batch, an empty step for those without one).
auto make_pipeline(const std::vector<std::string>& files) {
  auto index = std::make_shared<const ingest::TFRecordIndex>(ingest::build_tfrecord_index(files));
  const ingest::ExampleSpec spec{
      {"id", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
      {"label", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
  };
  return [index, spec](const World& world) {
    return ingest::indexed_tfrecord(*index)
        .global_shuffle({.seed = 7})
        .shard(world, {.remainder = ingest::Remainder::drop})
        .map(
            [spec](const std::string& record) {
              const ingest::ParsedExample ex = ingest::parse_example(record, spec);
              return std::pair{ex.tensor("id").item<std::int64_t>(),
                               ex.tensor("label").item<std::int64_t>()};
            },
            {.parallelism = 2})
        .batch(16)
        .prefetch(2);
  };
}

std::string state_path(const fs::path& ckpt, long long step, int rank) {
  return (ckpt / ("step-" + std::to_string(step) + ".rank-" + std::to_string(rank) + ".state"))
      .string();
}

void write_latest(const fs::path& ckpt, const Progress& p) {
  const fs::path tmp = ckpt / "latest.tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%lld %d %lld %lld\n", p.step, p.ranks, p.examples, p.id_sum);
    std::fflush(f);
    ::fsync(::fileno(f));
    std::fclose(f);
  }
  fs::rename(tmp, ckpt / "latest");  // atomic: the previous step or this one
}

bool read_latest(const fs::path& ckpt, Progress& p) {
  std::FILE* f = std::fopen((ckpt / "latest").c_str(), "r");
  if (!f) return false;
  const bool ok =
      std::fscanf(f, "%lld %d %lld %lld", &p.step, &p.ranks, &p.examples, &p.id_sum) == 4;
  std::fclose(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const World world = ingest::distributed::world();
  const bool leader = world.rank == 0;
  if (argc < 2) {
    if (leader) std::fprintf(stderr, "usage: %s WORK_DIR [--stop-at STEP] [FILE ...]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const fs::path work = argv[1], ckpt = work / "ckpt";
  long long stop_at = -1;
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--stop-at" && i + 1 < argc) {
      stop_at = std::atoll(argv[++i]);
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) {
    for (int f = 0; f < 4; ++f) {
      files.push_back((work / "data" / ("train-" + std::to_string(f) + ".tfrecord")).string());
    }
    if (leader && !fs::exists(files.back())) {
      fs::create_directories(work / "data");
      write_data(files);
    }
  }
  if (leader) fs::create_directories(ckpt);
  MPI_Barrier(MPI_COMM_WORLD);  // the data and the checkpoint directory are there

  const auto make = make_pipeline(files);
  Progress progress;
  const bool resume = read_latest(ckpt, progress);
  auto it = [&] {
    if (!resume) return make(world).iterator();
    // Every old rank's state of the step they all saved, in rank order.
    std::vector<ingest::IteratorState> states;
    for (int r = 0; r < progress.ranks; ++r) {
      states.push_back(ingest::read_state(state_path(ckpt, progress.step, r)));
    }
    return ingest::distributed::restore(make, states, world).iterator;
  }();
  if (leader && resume) {
    std::printf("resumed at step %lld, saved by %d ranks, on %d ranks\n", progress.step,
                progress.ranks, world.world_size);
  }

  while (auto batch = it.next()) {
    const auto& [ids, labels] = *batch;
    // The training step: every rank's share of the loss (a stand-in: the
    // labels' sum) and of the counts, summed over the ranks.
    long long local[3] = {ids.num_elements(), 0, 0}, total[3];
    for (const std::int64_t id : ids.values<std::int64_t>()) local[1] += id;
    for (const std::int64_t label : labels.values<std::int64_t>()) local[2] += label;
    MPI_Allreduce(local, total, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    progress.step += 1;
    progress.ranks = world.world_size;
    progress.examples += total[0];
    progress.id_sum += total[1];

    // The checkpoint: each rank its own state, then rank 0 the step they all saved.
    ingest::write_state(state_path(ckpt, progress.step, world.rank), it.save());
    MPI_Barrier(MPI_COMM_WORLD);
    if (leader) write_latest(ckpt, progress);
    fs::remove(state_path(ckpt, progress.step - 2, world.rank));  // `latest` is past it

    if (leader && progress.step % 5 == 0) {
      std::printf("step %lld: loss %.3f\n", progress.step,
                  static_cast<double>(total[2]) / static_cast<double>(total[0]));
    }
    if (progress.step == stop_at) {
      if (leader) {
        std::printf("%d ranks stopped at step %lld, %lld examples so far\n", world.world_size,
                    progress.step, progress.examples);
      }
      MPI_Finalize();
      return 0;
    }
  }
  if (leader) {
    std::printf("epoch done at step %lld on %d ranks: %lld examples, id sum %lld\n", progress.step,
                world.world_size, progress.examples, progress.id_sum);
  }
  MPI_Finalize();
  return 0;
}
