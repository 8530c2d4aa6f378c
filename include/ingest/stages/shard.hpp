// shard(num_shards, index), shard(world, {.remainder}), shard_padded(world):
// keeps the elements at positions k with k % num_shards == index (tf.data
// counterpart: ShardDataset). It still reads every element, so shard right
// after the file list, not after decoding; a random-access source
// (indexed_tfrecord, range, from_vector) deals its positions instead
// (sources/positional.hpp) and reads only its rank's. An error at a position
// this shard keeps surfaces here; errors at positions other shards keep are
// left to those shards (every error surfaces in exactly one shard).
//
// Remainders (core/options.hpp, Remainder): `uneven` is the plain split;
// `drop` holds an element until its group of num_shards positions is
// complete, so that a group the pass ends inside gives no rank an element;
// `pad` (shard_padded: (element, valid) pairs) gives the ranks missing from
// the last group a copy of the pass's first element, marked not valid.
#pragma once

#include <string_view>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "ingest/core/dataset.hpp"
#include "ingest/core/deal.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/options.hpp"
#include "ingest/core/serializer.hpp"
#include "ingest/core/world.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

/// Iterator of ShardDataset: the input's elements at the positions this shard keeps.
template <class InputIt, bool Marked>
class ShardIterator {
 public:
  /// The input's element type.
  using input_type = typename InputIt::value_type;
  /// The element type: the input's, or `(element, valid)` pairs for shard_padded.
  using value_type = std::conditional_t<Marked, std::pair<input_type, bool>, input_type>;

  /// Owns the input iterator; keeps positions k with k % num_shards == index.
  ShardIterator(InputIt input, std::int64_t num_shards, std::int64_t index, Remainder remainder)
      : input_(std::move(input)),
        num_shards_(static_cast<std::uint64_t>(num_shards)),
        index_(static_cast<std::uint64_t>(index)),
        remainder_(remainder) {}

  /// The next kept element (padding at the end as `remainder` says), or std::nullopt at the end;
  /// throws the error of a kept position only.
  std::optional<value_type> next() {
    for (;;) {
      if (done_) return pad();
      const std::uint64_t p = position_;
      const bool mine = p % num_shards_ == index_;
      std::optional<input_type> x;
      std::exception_ptr error;
      try {
        x = input_.next();
      } catch (const Error&) {
        error = std::current_exception();  // this shard's, or left to the one it belongs to
      }
      if (!x && !error) {
        end_at(p);
        continue;
      }
      ++position_;
      if constexpr (Marked) {
        if (p == 0) {
          first_failed_ = error != nullptr;
          if (x) first_.emplace(*x);
        }
      }
      const bool group_ends = (p + 1) % num_shards_ == 0;
      if (mine) {
        if (remainder_ != Remainder::drop || group_ends) return deliver(std::move(x), error);
        held_ = std::move(x);
        held_error_ = error;
        holding_ = true;
      } else if (holding_ && group_ends) {
        holding_ = false;
        return deliver(std::exchange(held_, std::nullopt), std::exchange(held_error_, nullptr));
      }
    }
  }

  /// Checkpoint: the input position and whether the input ended (with pad,
  /// whether the repeat is due and the pass's first element), then the input.
  void save(StateWriter& w) const {
    w.write(position_, done_);
    if constexpr (Marked) {
      w.write(pad_due_, first_failed_, first_.has_value());
      if (first_) {
        if constexpr (serializable<input_type>) {
          w.write_element(*first_);
        } else {
          throw Unimplemented(
              "checkpoint: shard_padded keeps the pass's first element (its pads repeat it) and "
              "this element type has no ingest::serializer",
              {.stage = "shard"});
        }
      }
    }
    input_.save(w);
  }
  /// Restores what save() wrote, on a fresh iterator of the same dataset.
  void restore(StateReader& r) {
    r.read(position_, done_);
    if constexpr (Marked) {
      bool has_first = false;
      r.read(pad_due_, first_failed_, has_first);
      first_.reset();
      if (has_first) {
        if constexpr (serializable<input_type>) first_.emplace(r.read_element<input_type>("shard"));
      }
    }
    holding_ = false;
    input_.restore(r);
  }

 private:
  std::optional<value_type> deliver(std::optional<input_type> x, std::exception_ptr error) {
    if (error) std::rethrow_exception(error);
    if constexpr (Marked) {
      return value_type(std::move(*x), true);
    } else {
      return x;
    }
  }
  // The input ended with `n` elements: a held element's group is incomplete
  // (dropped); with pad, a rank missing from the last group owes a repeat.
  void end_at(std::uint64_t n) {
    done_ = true;
    holding_ = false;
    held_.reset();
    held_error_ = nullptr;
    if constexpr (Marked) pad_due_ = n % num_shards_ != 0 && index_ >= n % num_shards_;
  }
  std::optional<value_type> pad() {
    if constexpr (Marked) {
      if (!pad_due_) return std::nullopt;
      pad_due_ = false;
      if (first_failed_ || !first_) {
        throw DataLossError(
            "shard_padded: the pass's first element, which this rank's pad repeats, failed",
            {.stage = "shard"});
      }
      return value_type(*first_, false);
    } else {
      return std::nullopt;
    }
  }

  InputIt input_;
  std::uint64_t num_shards_, index_;
  Remainder remainder_;
  std::uint64_t position_ = 0;
  bool done_ = false;
  // drop: this shard's element of a group not yet complete
  bool holding_ = false;
  std::optional<input_type> held_;
  std::exception_ptr held_error_;
  // pad: the pass's first element, and whether this rank's repeat is due
  std::optional<input_type> first_;
  bool first_failed_ = false;
  bool pad_due_ = false;
};

/// The dataset of `ds.shard(num_shards, index)`, `ds.shard(world)` and `ds.shard_padded(world)`:
/// the elements at the positions k with k % num_shards == index.
template <class Input, bool Marked>
class ShardDataset : public detail::UnaryStage<
                         ShardDataset<Input, Marked>, Input,
                         std::conditional_t<Marked, std::pair<typename Input::element_type, bool>,
                                            typename Input::element_type>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "shard";
  /// Reads every element of its input (distributed::restore: a stream's shard).
  static constexpr bool reads_every_element = true;

  /// Shard `index` of `num_shards`; throws InvalidArgument if num_shards <= 0, index is not in
  /// [0, num_shards), or `remainder` is Remainder::pad outside shard_padded.
  ShardDataset(Input input, std::int64_t num_shards, std::int64_t index,
               Remainder remainder = Remainder::uneven)
      : ShardDataset::UnaryStage(std::move(input)),
        num_shards_(num_shards),
        index_(index),
        remainder_(remainder) {
    if (num_shards <= 0) {
      throw InvalidArgument("shard: num_shards must be > 0; got " + std::to_string(num_shards),
                            {.stage = "shard"});
    }
    if (index < 0 || index >= num_shards) {
      throw InvalidArgument("shard: index must be in [0, num_shards) = [0, " +
                                std::to_string(num_shards) + "); got " + std::to_string(index),
                            {.stage = "shard"});
    }
    if (remainder == Remainder::pad && !Marked) detail::pad_needs_marks("shard");
    if constexpr (Marked) {
      static_assert(std::is_copy_constructible_v<typename Input::element_type>,
                    "shard_padded: the pads repeat the pass's first element, so the element "
                    "type must be copyable");
    }
  }
  /// The shard of `world`'s rank.
  ShardDataset(Input input, const distributed::World& world, Remainder remainder)
      : ShardDataset(std::move(input), world.world_size, world.rank, remainder) {}

  /// Wraps the input's iterator in a ShardIterator (called by make_iterator).
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return ShardIterator<It, Marked>(std::move(input), num_shards_, index_, remainder_);
  }

  /// The number of elements this shard yields of the input's cardinality, as `remainder` splits it.
  std::int64_t cardinality() const {
    return detail::map_cardinality(this->input_cardinality(), [&](std::int64_t k) {
      switch (remainder_) {
        case Remainder::drop: return k / num_shards_;
        case Remainder::pad: return (k + num_shards_ - 1) / num_shards_;
        case Remainder::uneven: break;
      }
      return k / num_shards_ + (k % num_shards_ > index_);
    });
  }

  /// Adds num_shards, index and the remainder policy to the pipeline's fingerprint.
  void fingerprint(Fingerprint& fp) const {
    fp.add(num_shards_).add(index_);
    if (remainder_ != Remainder::uneven) fp.add(static_cast<std::uint64_t>(remainder_));
  }

 private:
  std::int64_t num_shards_, index_;
  Remainder remainder_;
};

}  // namespace ingest
