// shard(num_shards, index): keeps the elements at positions k with
// k % num_shards == index. tf.data counterpart: ShardDataset. It still reads
// every element, so shard right after the file list, not after decoding. An
// error at a position this shard keeps surfaces here; errors at positions
// other shards keep are left to those shards (every error surfaces in
// exactly one shard).
#pragma once

#include <string_view>

#include <cstdint>
#include <optional>
#include <string>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"

namespace ingest {

template <class InputIt>
class ShardIterator {
 public:
  using value_type = typename InputIt::value_type;

  ShardIterator(InputIt input, std::int64_t num_shards, std::int64_t index)
      : input_(std::move(input)), num_shards_(num_shards), index_(index) {}

  std::optional<value_type> next() {
    if (done_) return std::nullopt;
    for (;;) {
      const bool mine = position_ % num_shards_ == index_;
      ++position_;
      if (mine) {
        std::optional<value_type> x = input_.next();
        if (!x) done_ = true;
        return x;
      }
      try {
        if (!input_.next()) {
          done_ = true;
          return std::nullopt;
        }
      } catch (const Error&) {
        // belongs to another shard
      }
    }
  }

  /// Checkpoint: the input position and whether the input ended, then the input.
  void save(StateWriter& w) const {
    w.write(position_, done_);
    input_.save(w);
  }
  void restore(StateReader& r) {
    r.read(position_, done_);
    input_.restore(r);
  }

 private:
  InputIt input_;
  std::int64_t num_shards_, index_;
  std::int64_t position_ = 0;
  bool done_ = false;
};

template <class Input>
class ShardDataset
    : public detail::UnaryStage<ShardDataset<Input>, Input, typename Input::element_type> {
 public:
  static constexpr std::string_view stage_name = "shard";

  ShardDataset(Input input, std::int64_t num_shards, std::int64_t index)
      : ShardDataset::UnaryStage(std::move(input)), num_shards_(num_shards), index_(index) {
    if (num_shards <= 0) {
      throw InvalidArgument("shard: num_shards must be > 0; got " + std::to_string(num_shards),
                            {.stage = "shard"});
    }
    if (index < 0 || index >= num_shards) {
      throw InvalidArgument("shard: index must be in [0, num_shards) = [0, " +
                                std::to_string(num_shards) + "); got " + std::to_string(index),
                            {.stage = "shard"});
    }
  }
  template <class It>
  auto make_stage_iterator(It input, const IteratorContext&) const {
    return ShardIterator<It>(std::move(input), num_shards_, index_);
  }

  std::int64_t cardinality() const {
    return detail::map_cardinality(this->input_cardinality(), [&](std::int64_t k) {
      return k / num_shards_ + (k % num_shards_ > index_);
    });
  }

  void fingerprint(Fingerprint& fp) const { fp.add(num_shards_).add(index_); }

 private:
  std::int64_t num_shards_, index_;
};

}  // namespace ingest
