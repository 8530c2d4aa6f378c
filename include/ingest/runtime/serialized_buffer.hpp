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
// to elements that left the buffer, the least live chunks have their live
// elements copied into the newest chunk and are dropped (those still held by
// a state live on in it) until a third of the kept bytes are dead: the bytes
// kept stay under twice the buffer's serialized size plus a chunk, and the
// chunks dropped are mostly dead (compact()). Chunks come from the
// process-wide pooled host allocator (default_allocator()), so the memory of
// chunks every holder let go is reused, its pages already mapped.
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

#include "ingest/core/allocator.hpp"
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
      set(slot, refs_[last], homes_[last]);
      set(last, {});
      refs_.pop_back();
      homes_.pop_back();
    } else if (slot < refs_.size()) {
      set(slot, {});
    }
  }
  /// The buffer was replaced (a restore): nothing of it is kept.
  void clear() noexcept {
    refs_.clear();
    homes_.clear();
    live_ = 0;
    dirty_.clear();
    dirty_flag_.clear();
    base_.reset();
    journal_.clear();
    journal_size_ = 0;
    chunks_.clear();
    used_ = 0;
  }

  /// A restore: the buffer's elements are `elements`, serialized bytes
  /// that `owner` keeps alive (a state's storage), not deserialized yet
  /// (read() does it when the stage needs one). Activates.
  void adopt(std::shared_ptr<const void> owner, std::vector<std::span<const std::byte>> elements) {
    clear();
    active_ = true;
    if (elements.empty()) return;
    // The state's storage is a chunk of its own: full (nothing is appended
    // to it), dropped by compactions as the others are.
    auto& chunk = *chunks_.emplace_back(std::make_unique<Chunk>());
    chunk.keep = std::move(owner);
    grow(elements.size());
    for (std::size_t i = 0; i < elements.size(); ++i) {
      set(i, {elements[i].data(), elements[i].size()}, &chunk);
      chunk.used += elements[i].size();
    }
    chunk.capacity = chunk.used;
    used_ = chunk.used;
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
      if (i < refs_.size() && !refs_[i].data) append_element(i, *elements[i]);
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
    snapshot->owners.reserve(chunks_.size());
    for (const auto& chunk : chunks_) snapshot->owners.push_back(chunk->keep);
    snapshot->total = live_ + 8 * refs_.size();
    w.write_deferred(std::move(snapshot));
  }

  /// Bytes kept, live and dead.
  std::size_t kept_bytes() const noexcept { return used_; }
  /// Bytes that compactions copied, in all.
  std::size_t compacted_bytes() const noexcept { return compacted_; }
  /// Chunks held (a restored state's storage counts as one).
  std::size_t chunks() const noexcept { return chunks_.size(); }

 private:
  // Bytes appended one after the other. Its counts are the stage thread's;
  // the states that refer to its bytes hold `keep` only.
  struct Chunk {
    std::shared_ptr<const void> keep;  // owns the bytes
    std::byte* data = nullptr;         // where appends go (null: a restored state's)
    std::size_t capacity = 0;
    std::size_t used = 0;  // bytes appended
    std::size_t live = 0;  // of which refs_ refer to
    bool dropping = false;
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

  // Sets the ref of `slot` (< refs_.size()), its bytes in `home`, and marks it changed.
  void set(std::size_t slot, Ref r, Chunk* home = nullptr) noexcept {
    if (homes_[slot]) homes_[slot]->live -= refs_[slot].size;
    if (home) home->live += r.size;
    live_ = live_ - refs_[slot].size + r.size;
    refs_[slot] = r;
    homes_[slot] = home;
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
    homes_.resize(n, nullptr);
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

  // Serializes `x` into the kept bytes as the element at `slot`: in place,
  // at the newest chunk's end, where it fits (on W3 the copy through a
  // scratch buffer cost as much as the chunk's own).
  template <class T>
  void append_element(std::size_t slot, const T& x) {
    Chunk* tail = appendable();
    const std::span<std::byte> room =
        tail ? std::span(tail->data + tail->used, tail->capacity - tail->used)
             : std::span<std::byte>();
    ByteWriter bytes(room, std::move(scratch_));
    try {
      serializer<T>::write(bytes, x);
    } catch (...) {
      scratch_ = std::move(bytes).release();
      throw;
    }
    const bool in_place = tail && bytes.in_room();
    const std::size_t n = bytes.size();
    scratch_ = std::move(bytes).release();
    if (in_place) {
      commit(slot, *tail, n);
    } else {
      append(slot, scratch_);
    }
  }

  // Copies `b` into the newest chunk (a new one when it lacks room) as the
  // bytes of the element at `slot`.
  void append(std::size_t slot, std::span<const std::byte> b) {
    Chunk* tail = appendable();
    if (!tail || tail->capacity - tail->used < b.size()) {
      auto chunk = std::make_unique<Chunk>();
      chunk->capacity = std::max(chunk_bytes, b.size());
      // From the pooled host allocator: the memory of chunks dropped earlier.
      Allocator& pool = default_allocator();
      chunk->data = static_cast<std::byte*>(pool.allocate(chunk->capacity));
      chunk->keep = std::shared_ptr<std::byte>(
          chunk->data, [&pool, n = chunk->capacity](std::byte* p) { pool.deallocate(p, n); });
      tail = chunks_.emplace_back(std::move(chunk)).get();
    }
    if (!b.empty()) std::memcpy(tail->data + tail->used, b.data(), b.size());
    commit(slot, *tail, b.size());
  }

  // The newest chunk if appends can go there (not a restored state's, not
  // being dropped), else null.
  Chunk* appendable() const noexcept {
    if (chunks_.empty() || !chunks_.back()->data || chunks_.back()->dropping) return nullptr;
    return chunks_.back().get();
  }

  // The `n` bytes at `tail`'s end are the element at `slot`'s.
  void commit(std::size_t slot, Chunk& tail, std::size_t n) noexcept {
    const Ref r{tail.data + tail.used, n};
    tail.used += n;
    used_ += n;
    set(slot, r, &tail);
  }

  // Called when more than half the kept bytes are dead: drops the least
  // live chunks, their live elements copied into the newest chunk (a new
  // one if the newest is dropped), until at most a third of the kept bytes
  // are dead. A shuffle draws uniformly, so those are the oldest chunks,
  // mostly dead, where copying every live element copied about one element
  // per element serialized (on W3, as much as the serialization).
  void compact() {
    std::vector<Chunk*> order;
    order.reserve(chunks_.size());
    for (const auto& chunk : chunks_) order.push_back(chunk.get());
    std::sort(order.begin(), order.end(), [](const Chunk* a, const Chunk* b) {
      // live / used, ascending (an empty chunk first)
      if (a->used == 0 || b->used == 0) return a->used == 0 && b->used != 0;
      return a->live * b->used < b->live * a->used;
    });
    std::size_t used = used_;
    bool any = false;
    for (Chunk* chunk : order) {
      if (2 * used <= 3 * live_ + 2 * chunk_bytes) break;
      chunk->dropping = any = true;
      used -= chunk->used - chunk->live;  // its live bytes are copied
    }
    if (!any) return;
    for (std::size_t i = 0; i < refs_.size(); ++i) {
      if (!homes_[i] || !homes_[i]->dropping) continue;
      compacted_ += refs_[i].size;
      append(i, std::span(refs_[i].data, refs_[i].size));
    }
    std::erase_if(chunks_, [&](const std::unique_ptr<Chunk>& chunk) {
      if (!chunk->dropping) return false;
      used_ -= chunk->used;
      return true;
    });
  }

  bool active_ = false;
  std::vector<Ref> refs_;                 // one per buffered element (from the front), or fewer
  std::vector<Chunk*> homes_;             // per ref: the chunk its bytes are in (null: none)
  std::size_t live_ = 0;                  // the kept refs' bytes
  std::vector<std::size_t> dirty_;        // slots changed since the last save, each once
  std::vector<std::uint8_t> dirty_flag_;  // per slot: in dirty_
  std::shared_ptr<const std::vector<Ref>> base_;        // refs_ as of the last new base
  std::vector<std::shared_ptr<JournalBlock>> journal_;  // the changes since, in blocks
  std::size_t journal_size_ = 0;                        // entries in journal_
  std::vector<std::unique_ptr<Chunk>> chunks_;          // oldest first; appends go to the last
  std::size_t used_ = 0;                                // the chunks' bytes appended
  std::size_t compacted_ = 0;                           // bytes compact() copied
  std::vector<std::byte> scratch_;
};

}  // namespace ingest::detail
