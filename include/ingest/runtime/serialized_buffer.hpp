// The serialized form of a stage's buffered elements, kept from one save to
// the next (shuffle's buffer): a save serializes only the elements that
// entered the buffer since the last one and shares the bytes of the others
// with the states that hold them. A save costs the slots that changed since
// the last one, not a pass over the buffer: its refs (where each element's
// bytes are) are a full copy made now and then (the base) and a journal of
// the slots changed since, both shared between saves. A new base is made
// once the journal would hold a quarter of the buffer's size, so a change
// costs about four refs' copy in all. The anchors of the stages that run
// ahead of the consumer (anchors.hpp) can then anchor a large shuffle buffer
// every batch or every few (their pacing), and a restore replays that many
// pulls at most instead of most of an epoch.
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
    dirty_.clear();
    dirty_flag_.clear();
    base_.reset();
    journal_.clear();
    journal_size_ = 0;
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
  /// (kept). Costs the slots changed since the last call (their new
  /// elements serialized, their refs added to the journal) and a pointer
  /// per journal block, not a pass over the buffer (but for a new base).
  template <serializable T>
  void write(StateWriter& w, std::span<const std::optional<T>> elements) {
    const std::int64_t start = now_ns();
    grow(elements.size());
    for (const std::size_t i : dirty_)
      if (i < refs_.size() && !refs_[i].data) set(i, append_element(*elements[i]));
    if (used_ > 2 * live_ + chunk_bytes) compact();
    const std::int64_t serialized = now_ns();
    // A new base is prepaid too: made once for the saves of the next
    // quarter buffer's changes.
    w.add_prepaid_ns((publish() ? now_ns() : serialized) - start);
    auto snapshot = std::make_shared<Snapshot>();
    snapshot->base = base_;
    snapshot->journal = journal_;
    snapshot->journal_size = journal_size_;
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
  // A slot's ref from some save on. The journal lives in blocks that are
  // never moved: a snapshot reads the entries written before it while later
  // ones are appended (other entries, on the stage's thread).
  struct Entry {
    std::size_t slot = 0;
    Ref ref;
  };
  static constexpr std::size_t journal_block = 1024;
  using JournalBlock = std::array<Entry, journal_block>;

  // A save's refs: the base's, then the journal's first journal_size
  // entries applied in order (later ones win), over `count` slots. Read on
  // other threads; what it refers to is never changed.
  struct Snapshot final : DeferredBytes {
    std::shared_ptr<const std::vector<Ref>> base;
    std::vector<std::shared_ptr<JournalBlock>> journal;
    std::size_t journal_size = 0;
    std::size_t count = 0;
    std::vector<std::shared_ptr<const void>> owners;  // keep the refs' bytes alive
    std::size_t total = 0;
    std::size_t size() const noexcept override { return total; }
    // StateWriter::write_element_table's layout: the lengths, then the
    // bytes. Without allocating: each slot's length field first holds where
    // its ref comes from (0: the base; j + 1: journal entry j), then its length.
    void copy_to(std::byte* out) const noexcept override {
      const auto put = [&](std::size_t slot, std::uint64_t v) {
        std::byte* at = out + 8 * slot;
        for (int k = 0; k < 8; ++k) at[k] = static_cast<std::byte>((v >> (8 * k)) & 0xff);
      };
      const auto get = [&](std::size_t slot) {
        std::uint64_t v = 0;
        for (int k = 0; k < 8; ++k) v |= static_cast<std::uint64_t>(out[8 * slot + k]) << (8 * k);
        return v;
      };
      for (std::size_t i = 0; i < count; ++i) put(i, 0);
      for (std::size_t j = 0; j < journal_size; ++j) {
        const Entry& e = entry(j);
        if (e.slot < count) put(e.slot, j + 1);
      }
      std::byte* bytes = out + 8 * count;
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t from = get(i);
        const Ref r = from == 0 ? (*base)[i] : entry(static_cast<std::size_t>(from - 1)).ref;
        if (r.size != 0) std::memcpy(bytes, r.data, r.size);
        bytes += r.size;
        put(i, r.size);
      }
    }
    const Entry& entry(std::size_t j) const noexcept {
      return (*journal[j / journal_block])[j % journal_block];
    }
  };

  // Sets the ref of `slot` (< refs_.size()) and marks it changed.
  void set(std::size_t slot, Ref r) noexcept {
    live_ = live_ - refs_[slot].size + r.size;
    refs_[slot] = r;
    mark(slot);
  }
  void mark(std::size_t slot) noexcept {
    if (dirty_flag_[slot]) return;
    dirty_flag_[slot] = 1;
    dirty_.push_back(slot);  // room reserved by grow()
  }

  // Covers `n` slots (the new ones not kept, changed).
  void grow(std::size_t n) {
    if (n <= refs_.size()) return;
    if (dirty_flag_.size() < n) {
      dirty_flag_.resize(n, 0);
      dirty_.reserve(n);
    }
    const std::size_t from = refs_.size();
    refs_.resize(n);
    for (std::size_t i = from; i < n; ++i) mark(i);
  }

  // Makes the refs changed since the last save a save's: appended to the
  // journal, or a new base once the journal would hold more than a quarter
  // of the slots (then returns true). Clears the changed marks.
  bool publish() {
    const std::size_t count = refs_.size();
    const bool based = !base_ || journal_size_ + dirty_.size() > count / 4;
    if (based) {
      base_ = std::make_shared<const std::vector<Ref>>(refs_);
      journal_.clear();
      journal_size_ = 0;
    } else {
      for (const std::size_t i : dirty_) {
        if (i >= count) continue;  // removed since
        if (journal_size_ == journal_.size() * journal_block)
          journal_.push_back(std::make_shared<JournalBlock>());
        (*journal_.back())[journal_size_ % journal_block] = {i, refs_[i]};
        ++journal_size_;
      }
    }
    for (const std::size_t i : dirty_) dirty_flag_[i] = 0;
    dirty_.clear();
    return based;
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
  std::vector<Ref> refs_;                 // one per buffered element (from the front), or fewer
  std::size_t live_ = 0;                  // the kept refs' bytes
  std::vector<std::size_t> dirty_;        // slots changed since the last save, each once
  std::vector<std::uint8_t> dirty_flag_;  // per slot: in dirty_
  std::shared_ptr<const std::vector<Ref>> base_;        // refs_ as of the last new base
  std::vector<std::shared_ptr<JournalBlock>> journal_;  // the changes since, in blocks
  std::size_t journal_size_ = 0;                        // entries in journal_
  std::vector<std::shared_ptr<Chunk>> chunks_;
  std::vector<std::shared_ptr<const void>> adopted_;  // a restored state's storage
  std::size_t tail_used_ = 0;                         // bytes used in the newest chunk
  std::size_t used_ = 0;                              // bytes appended since the last compaction
  std::vector<std::byte> scratch_;
};

}  // namespace ingest::detail
