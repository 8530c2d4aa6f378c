// The serialized form of a stage's buffered elements, kept from one save to
// the next (shuffle's buffer): a save serializes only the elements that
// entered the buffer since the last one and shares the bytes of the others
// with the states that hold them. It costs a pointer per 64 elements and a
// copy of the refs of each 64-slot block that changed since the last save,
// not a copy of the buffer. The anchors of the stages that run ahead of the
// consumer (anchors.hpp) can then anchor a large shuffle buffer every few
// pulls, and a restore replays a few pulls instead of most of an epoch.
//
// The bytes live in chunks of 4 MiB or more, shared (read-only) with the
// states that refer to them: each element is serialized once while it is
// buffered, into the newest chunk. When more than half the kept bytes belong
// to elements that left the buffer, the live ones are copied into new chunks
// and the old ones are dropped (those still held by a state live on in it):
// the bytes kept stay under twice the buffer's serialized size plus a chunk.
// The stage activates it (on the pipeline's first save or restore, Model::
// checkpointed), so a pipeline that is never saved pays nothing.
//
// Not synchronised: one thread (the stage's) calls everything; the deferred
// parts it writes are read from any thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/clock.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/serializer.hpp"
#include "ingest/core/state.hpp"

namespace ingest::detail {

class SerializedBuffer {
 public:
  /// The smallest chunk.
  static constexpr std::size_t chunk_bytes = std::size_t{4} << 20;

  bool active() const noexcept { return active_; }
  /// From now on the stage reports its buffer's changes and saves through write().
  void activate() noexcept { active_ = true; }

  /// The stage's buffer changed: the element at `slot` was replaced by a new one.
  void replaced(std::size_t slot) noexcept {
    if (slot < refs_.size()) set(slot, {});
  }
  /// The element at `slot` of a buffer of `size` elements was removed and
  /// the last one moved into its place.
  void removed(std::size_t slot, std::size_t size) noexcept {
    const std::size_t last = size - 1;
    if (last < refs_.size()) {  // then refs_ covers the whole buffer
      set(slot, refs_[last]);
      set(last, {});
      refs_.pop_back();
    } else if (slot < refs_.size()) {
      set(slot, {});
    }
  }
  /// The buffer was replaced (a restore): nothing of it is kept.
  void clear() noexcept {
    refs_.clear();
    live_ = 0;
    published_.clear();
    changed_.clear();
    chunks_.clear();
    adopted_.clear();
    tail_used_ = 0;
    used_ = 0;
  }

  /// A restore: the buffer's elements are `elements`, serialized bytes
  /// that `owner` keeps alive (a state's storage), not deserialized yet
  /// (read() does it when the stage needs one). Activates.
  void adopt(std::shared_ptr<const void> owner, std::vector<std::span<const std::byte>> elements) {
    clear();
    active_ = true;
    adopted_.push_back(std::move(owner));
    grow(elements.size());
    for (std::size_t i = 0; i < elements.size(); ++i) {
      set(i, {elements[i].data(), elements[i].size()});
      used_ += elements[i].size();
    }
  }

  /// The element at `slot` (kept) deserialized; a serializer's error, or
  /// bytes it left unread, is a DataLossError naming `stage`.
  template <serializable T>
  T read(std::size_t slot, std::string_view stage) const {
    return read_stored<T>(std::span(refs_[slot].data, refs_[slot].size), stage);
  }

  /// Writes the elements of `slots` (the whole buffer, in order) to `w` as
  /// StateWriter::write_element_table would, as one deferred part: the
  /// elements not kept yet are serialized now (time reported as prepaid),
  /// the others are shared. An empty slot is one adopted and not read yet
  /// (kept). Costs the blocks of slots changed since the last call (their
  /// new elements serialized, their refs copied) and a pointer per block,
  /// not a pass over the buffer.
  template <serializable T>
  void write(StateWriter& w, std::span<const std::optional<T>> elements) {
    const std::int64_t start = now_ns();
    grow(elements.size());
    for (std::size_t b = 0; b < changed_.size(); ++b) {
      if (!changed_[b]) continue;
      const std::size_t end = std::min(refs_.size(), (b + 1) * block_refs);
      for (std::size_t i = b * block_refs; i < end; ++i)
        if (!refs_[i].data) set(i, append_element(*elements[i]));
    }
    if (used_ > 2 * live_ + chunk_bytes) compact();
    w.add_prepaid_ns(now_ns() - start);
    // The changed blocks' refs, copied once; the others shared with the
    // last snapshot.
    const std::size_t blocks = (refs_.size() + block_refs - 1) / block_refs;
    published_.resize(blocks);
    for (std::size_t b = 0; b < blocks; ++b) {
      if (!changed_[b] && published_[b]) continue;
      auto block = std::make_shared<Block>();
      const std::size_t n = std::min(block_refs, refs_.size() - b * block_refs);
      std::copy_n(refs_.begin() + static_cast<std::ptrdiff_t>(b * block_refs), n, block->begin());
      published_[b] = std::move(block);
      changed_[b] = false;
    }
    auto snapshot = std::make_shared<Snapshot>();
    snapshot->blocks = published_;
    snapshot->count = refs_.size();
    snapshot->owners.assign(chunks_.begin(), chunks_.end());
    snapshot->owners.insert(snapshot->owners.end(), adopted_.begin(), adopted_.end());
    snapshot->total = live_ + 8 * refs_.size();
    w.write_deferred(std::move(snapshot));
  }

  /// Bytes kept (live and dead) since the last compaction.
  std::size_t kept_bytes() const noexcept { return used_; }
  /// Chunks held.
  std::size_t chunks() const noexcept { return chunks_.size(); }

 private:
  struct Chunk {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
  };
  struct Ref {
    const std::byte* data = nullptr;  // null: not kept
    std::size_t size = 0;
  };
  // Snapshots hold the refs in blocks of 64 slots, immutable once made
  // (read on other threads) and shared between snapshots until one of
  // their slots changes.
  static constexpr std::size_t block_refs = 64;
  using Block = std::array<Ref, block_refs>;

  struct Snapshot final : DeferredBytes {
    std::vector<std::shared_ptr<const Block>> blocks;
    std::size_t count = 0;
    std::vector<std::shared_ptr<const void>> owners;  // keep the refs' bytes alive
    std::size_t total = 0;
    std::size_t size() const noexcept override { return total; }
    // StateWriter::write_element_table's layout: the lengths, then the bytes.
    void copy_to(std::byte* out) const noexcept override {
      for (std::size_t i = 0; i < count; ++i) {
        const auto size = static_cast<std::uint64_t>(ref(i).size);
        for (int k = 0; k < 8; ++k) out[k] = static_cast<std::byte>((size >> (8 * k)) & 0xff);
        out += 8;
      }
      for (std::size_t i = 0; i < count; ++i) {
        const Ref r = ref(i);
        if (r.size != 0) std::memcpy(out, r.data, r.size);
        out += r.size;
      }
    }
    Ref ref(std::size_t i) const noexcept { return (*blocks[i / block_refs])[i % block_refs]; }
  };

  // Sets the ref of `slot` (< refs_.size()) and marks its block changed.
  void set(std::size_t slot, Ref r) noexcept {
    live_ = live_ - refs_[slot].size + r.size;
    refs_[slot] = r;
    changed_[slot / block_refs] = true;
  }

  // Covers `n` slots (the new ones not kept).
  void grow(std::size_t n) {
    if (n <= refs_.size()) return;
    const std::size_t blocks = (n + block_refs - 1) / block_refs;
    if (changed_.size() < blocks) changed_.resize(blocks, true);
    for (std::size_t b = refs_.size() / block_refs; b < blocks; ++b) changed_[b] = true;
    refs_.resize(n);
  }

  template <class T>
  Ref append_element(const T& x) {
    ByteWriter bytes(std::move(scratch_));
    bytes.clear();
    try {
      serializer<T>::write(bytes, x);
    } catch (...) {
      scratch_ = std::move(bytes).release();
      throw;
    }
    scratch_ = std::move(bytes).release();
    return append(scratch_);
  }

  // Copies `b` into the newest chunk (a new one when it lacks room).
  Ref append(std::span<const std::byte> b) {
    if (chunks_.empty() || chunks_.back()->capacity - tail_used_ < b.size()) {
      auto chunk = std::make_shared<Chunk>();
      chunk->capacity = std::max(chunk_bytes, b.size());
      chunk->data = std::make_unique_for_overwrite<std::byte[]>(chunk->capacity);
      chunks_.push_back(std::move(chunk));
      tail_used_ = 0;
    }
    std::byte* at = chunks_.back()->data.get() + tail_used_;
    if (!b.empty()) std::memcpy(at, b.data(), b.size());
    tail_used_ += b.size();
    used_ += b.size();
    return {at, b.size()};
  }

  // Copies the live elements' bytes into new chunks (adopted ones too).
  void compact() {
    std::vector<std::shared_ptr<Chunk>> old = std::move(chunks_);
    std::vector<std::shared_ptr<const void>> old_adopted = std::move(adopted_);
    chunks_.clear();
    adopted_.clear();
    tail_used_ = 0;
    used_ = 0;
    for (std::size_t i = 0; i < refs_.size(); ++i)
      set(i, append(std::span(refs_[i].data, refs_[i].size)));
  }

  bool active_ = false;
  std::vector<Ref> refs_;  // one per buffered element (from the front), or fewer
  std::size_t live_ = 0;   // the kept refs' bytes
  std::vector<std::shared_ptr<const Block>> published_;  // refs_ as of the last snapshot
  std::vector<bool> changed_;  // per block: changed since (or not published yet)
  std::vector<std::shared_ptr<Chunk>> chunks_;
  std::vector<std::shared_ptr<const void>> adopted_;  // a restored state's storage
  std::size_t tail_used_ = 0;                         // bytes used in the newest chunk
  std::size_t used_ = 0;                              // bytes appended since the last compaction
  std::vector<std::byte> scratch_;
};

}  // namespace ingest::detail
