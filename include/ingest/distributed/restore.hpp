// distributed::restore: resumes a job in a world of another size, exactly
// once. Each old rank's state is restored into the pipeline as that rank
// built it (`make(old world)`), which shows how far its sharded source had
// read; what no old rank read of that pass is then dealt to the new world
// (core/deal.hpp's levels), and the passes after it deal to the new world
// from the start. Needs a random-access source sharded by shard(world)
// (indexed_tfrecord, range or from_vector, with or without global_shuffle);
// a stream pipeline restores rank by rank into a world of the same size.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/context.hpp"
#include "ingest/core/deal.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/core/world.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/probe.hpp"

namespace ingest::distributed {

/// What restore gives a rank of the new world: its dataset (whose later
/// passes deal to the new world) and the iterator of the interrupted pass.
template <class D, class It>
struct Resumed {
  D dataset;    ///< the rank's dataset, dealing its later passes to the new world
  It iterator;  ///< the iterator of the interrupted pass, at the rank's position in it
};

namespace detail {

// "state 2 of 4 (rank 2): ..."
inline std::string state_name(std::size_t r, std::size_t n) {
  return "state " + std::to_string(r) + " of " + std::to_string(n) + " (rank " + std::to_string(r) +
         ")";
}

// Whether a resize can deal `d`'s pass: a random-access source sharded by
// shard(world) under stages that, at a save, have delivered every element
// they pulled (their `elastic_passthrough`), so that the source's position at
// the restored consumer's is what the rank consumed. Throws InvalidArgument
// naming what is in the way.
template <class D>
void check_resizable(const D& d, std::size_t old_size, int new_size) {
  const auto sizes = [&] {
    return "the states are of " + std::to_string(old_size) + " ranks and the world has " +
           std::to_string(new_size);
  };
  if constexpr (requires { d.positional_spec(); }) {
    if (d.positional_spec().sharded) return;
    throw InvalidArgument("distributed::restore: " + sizes() + ", but the pipeline's source '" +
                              std::string(ingest::detail::stage_name_of<D>()) +
                              "' is not sharded by shard(world)",
                          {.stage = "distributed::restore"});
  } else if constexpr (requires {
                         D::elastic_passthrough;
                         d.input();
                       }) {
    check_resizable(d.input(), old_size, new_size);
  } else if constexpr (
      requires { d.input(); } && !requires { D::reads_every_element; }) {
    throw InvalidArgument(
        "distributed::restore: " + sizes() + ", but stage '" +
            std::string(ingest::detail::stage_name_of<D>()) +
            "' lies between the consumer and the sharded source and keeps elements or counts "
            "across a save, so its state cannot be dealt to a new world (a resize allows filter, "
            "map, batch, padded_batch, prefetch, ignore_errors and with_options above "
            "shard(world)); restore into a world of the same size",
        {.stage = "distributed::restore"});
  } else {
    throw InvalidArgument(
        "distributed::restore: " + sizes() +
            ", but this pipeline reads a stream: only a random-access source sharded by "
            "shard(world) (indexed_tfrecord, range, from_vector) can be dealt to a new world; "
            "a stream pipeline restores rank by rank into a world of the same size",
        {.stage = "distributed::restore"});
  }
}

}  // namespace detail

/// Resumes the pipeline `make(world)` returns (make: World -> dataset, the
/// same function every rank and every run calls) in `world` from `states`,
/// the last states of every rank of the old world, in rank order. Over the
/// job every element of the interrupted pass is delivered exactly once: what
/// an old rank consumed is not repeated, the rest is dealt to the new
/// world's ranks under the pipeline's Remainder.
///
/// Throws InvalidArgument when `states` is empty, when state r is not rank
/// r's of a world of states.size() ranks of this pipeline (a rank missing,
/// the states out of order, another dataset), when the states are of
/// different passes (mixed epochs: restore the last step every rank saved),
/// and when the world's size changed but the pipeline reads a stream (no
/// shard(world) on a random-access source); DataLossError for a corrupt state.
template <class Make>
auto restore(Make&& make, std::span<const IteratorState> states, World world) {
  using D = std::remove_cvref_t<std::invoke_result_t<Make&, World>>;
  using It = decltype(std::declval<const D&>().iterator());
  if (states.empty()) {
    throw InvalidArgument("distributed::restore: no states (one per rank of the old world)",
                          {.stage = "distributed::restore"});
  }
  if (world.world_size < 1 || world.rank < 0 || world.rank >= world.world_size) {
    throw InvalidArgument("distributed::restore: rank " + std::to_string(world.rank) +
                              " is outside [0, " + std::to_string(world.world_size) + ")",
                          {.stage = "distributed::restore"});
  }
  const std::size_t old_size = states.size();
  if (old_size == static_cast<std::size_t>(world.world_size)) {
    // The same world: each rank goes on from its own state.
    D d = make(world);
    It it = d.iterator(states[static_cast<std::size_t>(world.rank)]);
    return Resumed<D, It>{std::move(d), std::move(it)};
  }

  ingest::detail::DealLevel level{.world_size = old_size, .consumed = {}};
  level.consumed.reserve(old_size);
  std::shared_ptr<ingest::detail::ElasticLink::Report> first;
  for (std::size_t r = 0; r < old_size; ++r) {
    World old{.rank = static_cast<int>(r),
              .world_size = static_cast<int>(old_size),
              .local_rank = 0,
              .local_world_size = 1,
              .launcher = "restore"};
    auto report = std::make_shared<ingest::detail::ElasticLink::Report>();
    old.elastic.report = report;
    {
      const D d = make(old);
      if (r == 0) detail::check_resizable(d, old_size, world.world_size);
      try {
        // In a replica: its stages pull nothing ahead of the rank's position
        // (a parallel map launching batches while an outer prefetch replays
        // through it would move the source past what the rank consumed).
        ingest::detail::restored_replica(
            d, states[r], std::make_shared<ingest::detail::CounterSandbox>(),
            ingest::detail::fingerprint_value(d), ingest::detail::description_of(d));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument("distributed::restore: " + detail::state_name(r, old_size) +
                                  " does not restore as rank " + std::to_string(r) + " of a " +
                                  std::to_string(old_size) +
                                  "-rank world of this pipeline (a rank missing, the states out "
                                  "of order, or another dataset): " +
                                  e.message(),
                              {.stage = "distributed::restore"});
      }
    }
    if (!report->restored) {
      throw InvalidArgument("distributed::restore: " + detail::state_name(r, old_size) +
                                " holds no position of the sharded source",
                            {.stage = "distributed::restore"});
    }
    if (first) {
      if (report->pass != first->pass) {
        throw InvalidArgument(
            "distributed::restore: the states are of different passes (" +
                detail::state_name(0, old_size) + ": pass " + std::to_string(first->pass) + ", " +
                detail::state_name(r, old_size) + ": pass " + std::to_string(report->pass) +
                "); restore the states of a step that every rank saved",
            {.stage = "distributed::restore"});
      }
      if (report->levels != first->levels || report->records != first->records) {
        throw InvalidArgument("distributed::restore: " + detail::state_name(r, old_size) +
                                  " was dealt another pass than state 0 (other resizes before "
                                  "it, or another data set)",
                              {.stage = "distributed::restore"});
      }
    } else {
      first = report;
    }
    level.consumed.push_back(report->consumed);
  }

  auto resume = std::make_shared<ingest::detail::ElasticLink::Resume>();
  resume->pass = first->pass;
  resume->levels = first->levels;
  resume->levels.push_back(std::move(level));
  world.elastic = {.resume = std::move(resume), .report = nullptr};
  D d = make(world);
  It it = d.iterator();
  return Resumed<D, It>{std::move(d), std::move(it)};
}

/// restore() with the states as a vector (e.g. read_state of each old rank's file).
template <class Make>
auto restore(Make&& make, const std::vector<IteratorState>& states, World world) {
  return restore(std::forward<Make>(make), std::span<const IteratorState>(states),
                 std::move(world));
}

}  // namespace ingest::distributed
