// from_vector(std::vector<T>): the vector's elements in order. tf.data
// counterpart: Dataset.from_tensor_slices. The vector is shared by every copy
// of the dataset and every iterator; each pass copies elements out of it, so
// T must be copyable. Supports the bulk fill protocol.
#pragma once

#include <string_view>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/sources/positional.hpp"

namespace ingest {

/// Iterator of FromVectorDataset: copies of the vector's elements, in order.
template <class T>
class FromVectorIterator {
 public:
  /// The element type.
  using value_type = T;

  /// Iterates over the shared vector `data`.
  explicit FromVectorIterator(std::shared_ptr<const std::vector<T>> data)
      : data_(std::move(data)) {}

  /// A copy of the next element, or std::nullopt at the end.
  std::optional<T> next() {
    if (pos_ == data_->size()) return std::nullopt;
    return (*data_)[pos_++];
  }
  /// Bulk protocol: copies the next up to out.size() elements to `out`; returns how many.
  std::size_t fill(std::span<T> out) requires std::is_copy_assignable_v<T> {
    const std::size_t n = std::min(out.size(), data_->size() - pos_);
    std::copy_n(data_->begin() + static_cast<std::ptrdiff_t>(pos_), n, out.begin());
    pos_ += n;
    return n;
  }

  /// Checkpoint: the index of the next element.
  void save(StateWriter& w) const { w.write(pos_); }
  /// Restores what save() wrote, on a fresh iterator of the same dataset; throws DataLossError
  /// for an index past the vector's end.
  void restore(StateReader& r) { pos_ = r.read_position(data_->size(), "from_vector", "elements"); }

  /// fill with `f` applied in the same loop (see iterator.hpp); f gets a copy.
  template <class U, class F>
  std::size_t fill_map(std::span<U> out, F& f, std::exception_ptr& error) {
    const std::size_t n = std::min(out.size(), data_->size() - pos_);
    const T* src = data_->data() + pos_;
    std::size_t i = 0;
    try {
      for (; i < n; ++i) out[i] = f(T(src[i]));
    } catch (...) {
      error = std::current_exception();
      pos_ += i + 1;  // the failed element is consumed
      return i;
    }
    pos_ += n;
    return n;
  }

 private:
  std::shared_ptr<const std::vector<T>> data_;
  std::size_t pos_ = 0;
};

/// The dataset of `from_vector(std::vector<T>)`: the vector's elements in order, copied out on
/// each pass (the vector is shared by every copy and iterator).
template <class T>
class FromVectorDataset : public DatasetBase<FromVectorDataset<T>, T> {
  static_assert(std::is_copy_constructible_v<T>,
                "from_vector: elements are copied out on every pass, so T must be copyable "
                "(use from_generator for move-only elements)");

 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "from_vector";

  /// Shares `data` between its copies and iterators.
  explicit FromVectorDataset(std::vector<T> data)
      : data_(std::make_shared<const std::vector<T>>(std::move(data))) {}
  /// An iterator over the shared vector.
  FromVectorIterator<T> make_iterator(const IteratorContext&) const {
    return FromVectorIterator<T>(data_);
  }

  /// The number of elements.
  std::int64_t cardinality() const { return static_cast<std::int64_t>(data_->size()); }
  /// The element count (the elements themselves are not hashed).
  void fingerprint(Fingerprint& fp) const { fp.add(static_cast<std::uint64_t>(data_->size())); }

  /// The same elements by position, once per pass in a pseudo-random order
  /// (tf: Dataset.global_shuffle); see PositionalDataset.
  PositionalDataset<detail::VectorAccess<T>> global_shuffle(ShuffleOptions options = {}) const {
    return positional().global_shuffle(options);
  }
  using FromVectorDataset::DatasetBase::shard;
  /// The positions dealt to `world`'s rank (PositionalDataset::shard): this
  /// rank copies out its elements only.
  PositionalDataset<detail::VectorAccess<T>> shard(const distributed::World& world,
                                                   ShardOptions options = {}) const {
    return positional().shard(world, options);
  }
  /// The positions dealt to `world`'s rank, as `(element, valid)` pairs padded so that every
  /// rank gets as many (PositionalDataset::shard_padded).
  PositionalDataset<detail::VectorAccess<T>, true> shard_padded(
      const distributed::World& world) const {
    return positional().shard_padded(world);
  }

 private:
  PositionalDataset<detail::VectorAccess<T>> positional() const {
    return {detail::VectorAccess<T>{data_}, {}};
  }

  std::shared_ptr<const std::vector<T>> data_;
};

/// A dataset of the vector's elements, in order (tf: from_tensor_slices).
template <class T>
FromVectorDataset<T> from_vector(std::vector<T> data) {
  return FromVectorDataset<T>(std::move(data));
}

}  // namespace ingest
