// Checkpoint states: IteratorState (the bytes of a saved iterator),
// StateWriter / StateReader (what stages write their positions with) and
// Fingerprint (what identifies a pipeline's description). tf.data
// counterpart: IteratorStateWriter / IteratorStateReader and the checkpoint
// the iterator saves into.
//
// An IteratorState's bytes, all integers little-endian:
//
//   offset 0   "INGS"                         magic
//   offset 4   u32 format version             (6)
//   offset 8   u64 pipeline fingerprint
//   offset 16  u64 payload length L
//   offset 24  L bytes payload                what the stages wrote
//   offset 24+L u32 CRC-32C of bytes [0, 24+L)
//
// The payload is a tree of sections, one per stage, outermost first:
//   string stage name, u64 body length, body (the stage's own fields, then
//   its input's section). Every read is bounds-checked against the bytes
//   left in its section, and a length read from the state is checked against
//   them before anything is allocated, so a corrupt or truncated state raises
//   DataLossError naming the byte offset, never a crash or a huge allocation.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/crc32c.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/serializer.hpp"

namespace ingest {

/// A 64-bit fingerprint of a pipeline's description (stage kinds and
/// parameters, never user functions): FNV-1a over what is added. Strings are
/// added with their length, so ("ab", "c") and ("a", "bc") differ.
class Fingerprint {
 public:
  /// A counter of a dataset, shared by its copies, that its iterators depend
  /// on: how many passes a reshuffling shuffle (or list_files, ...) began.
  using Counter = std::shared_ptr<std::atomic<std::uint64_t>>;
  /// A counter found below a stage, and whether its value at a save of that
  /// stage may be ahead of the stage's position (see Below).
  struct CounterRef {
    Counter counter;     ///< the dataset's counter
    bool ahead = false;  ///< its value at a save may be ahead of the stage's position
  };

  Fingerprint() = default;
  /// A fingerprint that also collects the counters its datasets name
  /// (detail::PassCounters).
  explicit Fingerprint(std::vector<CounterRef>* counters) noexcept : counters_(counters) {}
  /// Only collects the counters, hashing nothing (value() is then meaningless).
  static Fingerprint counters_only(std::vector<CounterRef>* counters) noexcept {
    Fingerprint fp(counters);
    fp.hash_ = false;
    return fp;
  }

  /// Names a dataset's counter (its value is no part of the fingerprint).
  /// A state of an iterator that makes its input's iterators later (repeat's
  /// next pass, concatenate's second input) must hold the counters below it,
  /// since no state of theirs is in it yet.
  Fingerprint& counter(const Counter& c) {
    if (counters_ && c) counters_->push_back({c, ahead_ > 0});
    return *this;
  }

  /// While a Below lives, the datasets added are the input of a stage of its
  /// kind: `anchor`, a stage whose state holds its input's state at an
  /// anchor, ahead of which the input may run (prefetch, parallel map,
  /// map-and-batch, the loaders); `maker`, a stage that makes its input's
  /// iterators as it runs (repeat, cache, concatenate's second input). A
  /// counter below a maker below an anchor may have counted, at a save
  /// above the anchored stage, iterators made ahead of its position.
  class Below {
   public:
    /// The kind of stage whose input is being added.
    enum Kind { anchor, maker };
    /// Marks the datasets added to `fp` from now until this Below is destroyed as
    /// the input of a stage of kind `kind`.
    Below(Fingerprint& fp, Kind kind) noexcept
        : fp_(fp), kind_(kind), ahead_(kind == maker && fp.anchored_ > 0) {
      if (kind_ == anchor) ++fp_.anchored_;
      if (ahead_) ++fp_.ahead_;
    }
    ~Below() {
      if (kind_ == anchor) --fp_.anchored_;
      if (ahead_) --fp_.ahead_;
    }
    Below(const Below&) = delete;
    Below& operator=(const Below&) = delete;

   private:
    Fingerprint& fp_;
    Kind kind_;
    bool ahead_;
  };

  /// @name Adding to the fingerprint
  /// @{

  /// Adds a field of the description and returns *this: a string as its length
  /// then its bytes; an integer or bool as 8 bytes, little-endian; a double as
  /// its bits.
  Fingerprint& add(std::string_view s) noexcept {
    add(static_cast<std::uint64_t>(s.size()));
    mix(s.data(), s.size());
    return *this;
  }
  Fingerprint& add(const char* s) noexcept { return add(std::string_view(s)); }
  Fingerprint& add(const std::string& s) noexcept { return add(std::string_view(s)); }
  Fingerprint& add(std::uint64_t v) noexcept {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    mix(b, 8);
    return *this;
  }
  Fingerprint& add(std::int64_t v) noexcept { return add(static_cast<std::uint64_t>(v)); }
  Fingerprint& add(int v) noexcept { return add(static_cast<std::int64_t>(v)); }
  Fingerprint& add(bool v) noexcept { return add(static_cast<std::uint64_t>(v ? 1 : 0)); }
  Fingerprint& add(double v) noexcept { return add(std::bit_cast<std::uint64_t>(v)); }
  /// @}

  /// The fingerprint of everything added so far.
  std::uint64_t value() const noexcept { return h_; }

 private:
  void mix(const void* data, std::size_t n) noexcept {
    if (!hash_) return;
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 0x100000001b3ull;
    }
  }
  std::uint64_t h_ = 0xcbf29ce484222325ull;
  std::vector<CounterRef>* counters_ = nullptr;
  int anchored_ = 0;  // depth below anchors
  int ahead_ = 0;     // depth below makers below an anchor
  bool hash_ = true;  // false: counters_only
};

namespace detail {
/// What a restored iterator of pass `pass` of a dataset does to the
/// dataset's counter, so that the passes after it differ. A stage above
/// that stored the counters (repeat, concatenate) sets them to their saved
/// values once its input is restored (detail::PassCounters): exact also
/// where two iterators of one dataset are restored (rejection_resample).
inline void restored_pass(const Fingerprint::Counter& counter, std::uint64_t pass) noexcept {
  counter->store(pass + 1, std::memory_order_relaxed);
}

[[noreturn]] inline void throw_state_error(const std::string& what, std::uint64_t offset) {
  throw DataLossError("checkpoint: " + what + " at byte " + std::to_string(offset),
                      {.offset = offset});
}
inline void put_le(std::vector<std::byte>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}
inline std::uint64_t get_le(const std::byte* p, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
}  // namespace detail

namespace detail {
/// What a stage that stores values in its state (shuffle's buffer, scan's
/// state, unique's set) raises at save() when they have no serializer.
[[noreturn]] inline void throw_no_serializer(std::string_view stage, std::string_view what) {
  throw Unimplemented("checkpoint: stage '" + std::string(stage) + "' stores " + std::string(what) +
                          " in its state, and they have no ingest::serializer<T> (specialise it "
                          "for their type)",
                      {.stage = std::string(stage)});
}
}  // namespace detail

/// Bytes of a known size that a state refers to and copies only when it is
/// written out (StateWriter::write_deferred): what a stage keeps serialized
/// from one save to the next (shuffle's buffer), so that a save shares it
/// instead of copying it. Immutable once made; read from any thread.
class DeferredBytes {
 public:
  virtual ~DeferredBytes() = default;
  /// The number of bytes.
  virtual std::size_t size() const noexcept = 0;
  /// Writes exactly size() bytes to `out`.
  virtual void copy_to(std::byte* out) const noexcept = 0;
};

namespace detail {
/// Thrown by a stage's save() into a speculative StateWriter (an anchor
/// taken before the pipeline's first save or restore) when its state would
/// cost much to write now and the stage makes it cheap once the pipeline is
/// saved (shuffle's buffer, kept serialized from then on): the anchor is
/// tried again later. Not an error; never thrown into a save() a user asked for.
struct SaveDeclined {};

/// Bytes of a restored state, shared with its storage (`owner`, which keeps
/// them alive) instead of copied: a part of it that a stage writes again as
/// it was read (the anchor a restore starts from).
class SharedBytes final : public DeferredBytes {
 public:
  SharedBytes(std::span<const std::byte> bytes, std::shared_ptr<const void> owner) noexcept
      : bytes_(bytes), owner_(std::move(owner)) {}
  std::size_t size() const noexcept override { return bytes_.size(); }
  void copy_to(std::byte* out) const noexcept override {
    if (!bytes_.empty()) std::memcpy(out, bytes_.data(), bytes_.size());
  }

 private:
  std::span<const std::byte> bytes_;
  std::shared_ptr<const void> owner_;
};
}  // namespace detail

/// Writes a state's payload: fixed-width little-endian fields, length-prefixed
/// strings, and one nested section per stage. Parts written with
/// write_deferred are held by reference until the payload is copied out
/// (copy_to, IteratorState's constructor).
class StateWriter {
 public:
  /// @name Scalar fields
  /// @{

  /// Writes one fixed-width field, little-endian: u8, u32, u64, i64 (two's
  /// complement), double (its bits), bool (one byte, 0 or 1).
  void write_u8(std::uint8_t v) { detail::put_le(out_, v, 1); }
  void write_u32(std::uint32_t v) { detail::put_le(out_, v, 4); }
  void write_u64(std::uint64_t v) { detail::put_le(out_, v, 8); }
  void write_i64(std::int64_t v) { write_u64(static_cast<std::uint64_t>(v)); }
  void write_double(double v) { write_u64(std::bit_cast<std::uint64_t>(v)); }
  void write_bool(bool v) { write_u8(v ? 1 : 0); }
  /// @}

  /// Writes `b` as a field: its length (u64), then its bytes.
  void write_bytes(std::span<const std::byte> b) {
    write_u64(b.size());
    out_.insert(out_.end(), b.begin(), b.end());
  }
  /// Writes `s` as a field: its length (u64), then its bytes.
  void write_string(std::string_view s) {
    write_bytes(std::as_bytes(std::span(s.data(), s.size())));
  }
  /// Writes an element (or any value with an ingest::serializer<T>) as one
  /// length-prefixed field: what shuffle's buffer and scan's state store.
  template <serializable T>
  void write_element(const T& v) {
    // Serialized in place after its length, which is filled in after: one
    // copy of the element's bytes (a shuffle buffer of records is most of a
    // state).
    const std::size_t length_at = out_.size();
    write_u64(0);
    patch_u64(length_at, append_serialized(v, length_at));
  }
  /// Writes values (each present) as a table: their lengths (8 bytes
  /// each), then their bytes, one after the other; StateReader::
  /// read_element_table reads it. What shuffle's buffer is stored as: a
  /// restore finds every element's place from the table alone, without
  /// touching the bytes.
  template <serializable T>
  void write_element_table(std::span<const std::optional<T>> values) {
    const std::size_t table_at = out_.size();
    out_.resize(table_at + 8 * values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      patch_u64(table_at + 8 * i, append_serialized(*values[i], table_at));
  }
  /// Writes scalar fields in order: bools, integers (as 64 bits) and doubles.
  template <class... T>
  void write(const T&... v) {
    (write_field(v), ...);
  }

  /// A stage's section: its name, then what `body` writes (the stage's own
  /// fields, then its input's section).
  template <class F>
  void section(std::string_view stage, F&& body) {
    const Section open = open_section(stage);
    std::forward<F>(body)();
    close_section(open);
  }

  /// Appends `bytes`' bytes (no length), held by reference until copied out.
  void write_deferred(std::shared_ptr<const DeferredBytes> bytes) {
    deferred_size_ += bytes->size();
    deferred_.push_back({out_.size(), std::move(bytes)});
  }
  /// Writes what `nested` wrote as one length-prefixed field (as
  /// write_bytes would its copy), sharing its deferred parts.
  void write_nested(const StateWriter& nested) {
    note_replay(nested.replay());
    write_u64(nested.size());
    const std::size_t base = out_.size();
    out_.insert(out_.end(), nested.out_.begin(), nested.out_.end());
    for (const Deferred& d : nested.deferred_) deferred_.push_back({base + d.at, d.bytes});
    deferred_size_ += nested.deferred_size_;
  }
  /// Copies the payload, deferred parts included, to `out` (size() bytes).
  void copy_to(std::byte* out) const noexcept {
    std::size_t from = 0;
    for (const Deferred& d : deferred_) {
      if (d.at > from) std::memcpy(out, out_.data() + from, d.at - from);
      out += d.at - from;
      d.bytes->copy_to(out);
      out += d.bytes->size();
      from = d.at;
    }
    if (out_.size() > from) std::memcpy(out, out_.data() + from, out_.size() - from);
  }
  /// A save taken in case the pipeline is saved later (an anchor before
  /// its first save or restore): a stage may decline it (SaveDeclined).
  void set_speculative(bool speculative) noexcept { speculative_ = speculative; }
  /// Whether this save is speculative (set_speculative()).
  bool speculative() const noexcept { return speculative_; }
  /// Time spent on work that later saves will not repeat (serializing
  /// elements kept for them): the anchors' pacing leaves it out.
  void add_prepaid_ns(std::int64_t ns) noexcept { prepaid_ns_ += ns; }
  /// The prepaid time added so far (add_prepaid_ns()), in nanoseconds.
  std::int64_t prepaid_ns() const noexcept { return prepaid_ns_; }
  /// The inputs a restore of this state pulls again and discards, summed
  /// over its stages (each from its anchor to its position,
  /// runtime/anchors.hpp), nested states included: PipelineIterator::save()
  /// compacts a state that replays long.
  void note_replay(std::int64_t pulls) noexcept { replay_ += pulls; }
  /// The inputs a restore of this state replays (note_replay()'s sum).
  std::int64_t replay() const noexcept { return replay_; }

  /// The payload's size, deferred parts included.
  std::size_t size() const noexcept { return out_.size() + deferred_size_; }
  /// Room for `n` bytes in all (a state about as large as the last one).
  void reserve(std::size_t n) { out_.reserve(n); }
  /// Writes into `buffer`'s storage (cleared; its capacity is kept): a
  /// buffer recycled from an earlier state, whose pages are already mapped.
  void reuse(std::vector<std::byte>&& buffer) noexcept {
    out_ = std::move(buffer);
    out_.clear();
  }
  /// The bytes written here, without the deferred parts (the whole payload
  /// when write_deferred was not used; see copy_to).
  const std::vector<std::byte>& bytes() const& noexcept { return out_; }
  /// The storage of bytes(), for reuse; the deferred parts are dropped.
  std::vector<std::byte> take() && noexcept { return std::move(out_); }

 private:
  template <class T>
  void write_field(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      write_bool(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      write_double(static_cast<double>(v));
    } else if constexpr (std::is_signed_v<T>) {
      static_assert(std::is_integral_v<T>, "write: bools, integers and doubles only");
      write_i64(v);
    } else {
      static_assert(std::is_integral_v<T>, "write: bools, integers and doubles only");
      write_u64(v);
    }
  }

  // Serializes `v` in place at the end of the bytes and returns its size;
  // if the serializer throws, the bytes are cut back to `undo_to`.
  template <class T>
  std::size_t append_serialized(const T& v, std::size_t undo_to) {
    const std::size_t start = out_.size();
    ByteWriter bytes(std::move(out_));
    try {
      serializer<T>::write(bytes, v);
    } catch (...) {
      out_ = std::move(bytes).release();
      out_.resize(undo_to);
      throw;
    }
    out_ = std::move(bytes).release();
    return out_.size() - start;
  }

  void patch_u64(std::size_t at, std::uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i) out_[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
  }

  // section()'s parts apart from its body, compiled once rather than once
  // for every stage that saves: the name and a length patched at the close.
  struct Section {
    std::size_t length_at;  // where the length goes
    std::size_t start;      // size() after it
  };
  Section open_section(std::string_view stage) {
    write_string(stage);
    const std::size_t length_at = out_.size();
    write_u64(0);
    return {length_at, size()};
  }
  void close_section(const Section& open) noexcept {
    patch_u64(open.length_at, size() - open.start);
  }

  struct Deferred {
    std::size_t at;  // where in out_ its bytes go (before out_[at])
    std::shared_ptr<const DeferredBytes> bytes;
  };

  std::vector<std::byte> out_;
  std::vector<Deferred> deferred_;  // in order of `at`
  std::size_t deferred_size_ = 0;
  std::int64_t prepaid_ns_ = 0;
  std::int64_t replay_ = 0;
  bool speculative_ = false;
};

/// A value stored by StateWriter::write_element (its bytes, without the
/// length): a serializer's error, or bytes it left unread, is a
/// DataLossError naming `stage` (and `offset`, when known).
template <serializable T>
T read_stored(std::span<const std::byte> stored, std::string_view stage,
              std::optional<std::uint64_t> offset = std::nullopt) {
  ByteReader bytes(stored);
  std::optional<T> v;
  try {
    v.emplace(serializer<T>::read(bytes));
  } catch (Error& e) {
    e.add_context({.stage = std::string(stage), .offset = offset});
    throw;
  }
  if (bytes.remaining() != 0) {
    throw DataLossError("checkpoint: a stored value of stage '" + std::string(stage) + "' has " +
                            std::to_string(bytes.remaining()) + " bytes left after it was read",
                        {.stage = std::string(stage), .offset = offset});
  }
  return std::move(*v);
}

/// Reads a payload StateWriter wrote. Every read is bounds-checked against
/// the current section; errors are DataLossError naming the byte offset
/// (counted from the start of the whole state when `base` is its payload's
/// offset).
class StateReader {
 public:
  /// `owner`, if given, keeps `payload` alive (IteratorState::storage()):
  /// a stage may then keep parts of it after the restore (owner()).
  explicit StateReader(std::span<const std::byte> payload, std::uint64_t base = 0,
                       std::shared_ptr<const void> owner = nullptr)
      : data_(payload), limit_(payload.size()), base_(base), owner_(std::move(owner)) {}

  /// What keeps the bytes alive, or null: spans from read_span() may then be
  /// kept as long as it is held.
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

  /// @name Scalar fields
  /// @{

  /// Reads one fixed-width field, as StateWriter's write_u8 ... write_bool wrote
  /// it. DataLossError if the section has too few bytes left, or a bool field
  /// holds a value other than 0 or 1.
  std::uint8_t read_u8() { return static_cast<std::uint8_t>(read_le(1, "u8")); }
  std::uint32_t read_u32() { return static_cast<std::uint32_t>(read_le(4, "u32")); }
  std::uint64_t read_u64() { return read_le(8, "u64"); }
  std::int64_t read_i64() { return static_cast<std::int64_t>(read_le(8, "i64")); }
  double read_double() { return std::bit_cast<double>(read_le(8, "double")); }
  bool read_bool() {
    const std::size_t at = pos_;
    const std::uint8_t v = read_u8();
    if (v > 1) detail::throw_state_error("bool field holds " + std::to_string(v), offset(at));
    return v == 1;
  }
  /// @}

  /// Reads a length-prefixed byte string into a vector (a copy); DataLossError
  /// if its length exceeds the bytes left.
  std::vector<std::byte> read_bytes() {
    const std::span<const std::byte> s = read_span();
    return {s.begin(), s.end()};
  }
  /// Reads a length-prefixed string (a copy); DataLossError if its length
  /// exceeds the bytes left.
  std::string read_string() {
    const std::span<const std::byte> s = read_span();
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }
  /// A length-prefixed byte string, without a copy (valid while the state is).
  std::span<const std::byte> read_span() {
    const std::size_t at = pos_;
    const std::uint64_t n = read_u64();
    if (n > limit_ - pos_) {
      detail::throw_state_error("length " + std::to_string(n) + " exceeds the " +
                                    std::to_string(limit_ - pos_) + " bytes left",
                                offset(at));
    }
    const std::span<const std::byte> s = data_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  /// Reads what StateWriter::write_element_table wrote for `n` values: the
  /// values' bytes, without a copy (valid while the state is). Lengths
  /// that do not fit in the section are a DataLossError naming the offset.
  std::vector<std::span<const std::byte>> read_element_table(std::size_t n) {
    const std::size_t at = pos_;
    if (n > (limit_ - pos_) / 8) {
      detail::throw_state_error(std::to_string(n) + " lengths exceed the " +
                                    std::to_string(limit_ - pos_) + " bytes left",
                                offset(at));
    }
    std::vector<std::span<const std::byte>> out;
    out.reserve(n);
    std::size_t next = pos_ + 8 * n;  // the first value's bytes
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t length = read_u64();
      if (length > limit_ - next) {
        detail::throw_state_error("length " + std::to_string(length) + " of value " +
                                      std::to_string(i) + " exceeds the " +
                                      std::to_string(limit_ - next) + " bytes left",
                                  offset(pos_ - 8));
      }
      out.push_back(data_.subspan(next, static_cast<std::size_t>(length)));
      next += static_cast<std::size_t>(length);
    }
    pos_ = next;
    return out;
  }
  /// The offset, from the start of the state, of `bytes` (a span of the
  /// payload, from read_span or read_element_table).
  std::uint64_t offset_of(std::span<const std::byte> bytes) const noexcept {
    return offset(static_cast<std::size_t>(bytes.data() - data_.data()));
  }
  /// Reads a position in a sequence of `size` items (`size` itself: the
  /// end); a larger one is a DataLossError naming `stage`, e.g. "from_vector
  /// position 9 is past its 4 elements".
  std::size_t read_position(std::size_t size, std::string_view stage, std::string_view items) {
    const std::uint64_t at = offset();
    const std::uint64_t pos = read_u64();
    if (pos > size) {
      throw DataLossError("checkpoint: " + std::string(stage) + " position " + std::to_string(pos) +
                              " is past its " + std::to_string(size) + " " + std::string(items),
                          {.stage = std::string(stage), .offset = at});
    }
    return static_cast<std::size_t>(pos);
  }
  /// Reads what StateWriter::write_element wrote. A serializer's error, or
  /// bytes it left unread, is a DataLossError naming `stage` and the offset.
  template <serializable T>
  T read_element(std::string_view stage) {
    const std::uint64_t at = offset();
    return read_stored<T>(read_span(), stage, at);
  }
  /// Reads scalar fields StateWriter::write wrote, in the same order. An
  /// unsigned integer narrower than 64 bits that does not fit is an error.
  template <class... T>
  void read(T&... v) {
    (read_field(v), ...);
  }

  /// Reads the section of `stage`: checks its name, runs `body` within its
  /// bounds, and checks that body read all of it.
  template <class F>
  void section(std::string_view stage, F&& body) {
    const std::size_t outer = open_section(stage);
    std::forward<F>(body)();
    close_section(stage, outer);
  }

  /// Skips what is left of the current section (a stage that restores in
  /// another way than it saved, e.g. a cache reading its file where the
  /// saved pass read its input).
  void skip_section_rest() noexcept { pos_ = limit_; }

  /// Throws DataLossError unless every byte was read.
  void finish() const {
    if (pos_ != data_.size()) {
      detail::throw_state_error(std::to_string(data_.size() - pos_) + " bytes left unread",
                                offset(pos_));
    }
  }

  /// The inputs the restore pulls again and discards, as the stages note
  /// them (runtime/anchors.hpp read_position), nested states included:
  /// what StateWriter::replay() was at the save. stats() reports it.
  void note_replayed(std::int64_t pulls) noexcept { replayed_ += pulls; }
  /// The replayed inputs noted so far (note_replayed()'s sum).
  std::int64_t replayed() const noexcept { return replayed_; }

  /// Bytes left in the current section.
  std::size_t remaining() const noexcept { return limit_ - pos_; }
  /// The offset of the next read, from the start of the state.
  std::uint64_t offset() const noexcept { return offset(pos_); }

 private:
  std::uint64_t offset(std::size_t pos) const noexcept { return base_ + pos; }

  // section()'s checks apart from its body, compiled once rather than once
  // for every stage that restores. open_section reads the name and the
  // length and bounds the reads to the section; it returns the outer bound,
  // which close_section restores once the body read all of the section.
  std::size_t open_section(std::string_view stage) {
    const std::size_t at = pos_;
    const std::string found = read_string();
    if (found != stage) {
      throw DataLossError("checkpoint: expected stage '" + std::string(stage) + "' at byte " +
                              std::to_string(offset(at)) + ", found '" + found + "'",
                          {.stage = std::string(stage), .offset = offset(at)});
    }
    const std::size_t length_at = pos_;
    const std::uint64_t length = read_u64();
    if (length > limit_ - pos_) {
      detail::throw_state_error("section of stage '" + found + "' has length " +
                                    std::to_string(length) + ", more than the " +
                                    std::to_string(limit_ - pos_) + " bytes left",
                                offset(length_at));
    }
    return std::exchange(limit_, pos_ + static_cast<std::size_t>(length));
  }
  void close_section(std::string_view stage, std::size_t outer) {
    if (pos_ != limit_) {
      detail::throw_state_error("stage '" + std::string(stage) + "' left " +
                                    std::to_string(limit_ - pos_) + " bytes of its section unread",
                                offset(pos_));
    }
    limit_ = outer;
  }

  std::uint64_t read_le(int bytes, const char* what) {
    if (static_cast<std::size_t>(bytes) > limit_ - pos_) truncated(bytes, what);
    const std::uint64_t v = detail::get_le(data_.data() + pos_, bytes);
    pos_ += static_cast<std::size_t>(bytes);
    return v;
  }
  // Out of line: the message is built only for a corrupt state, not inlined
  // into every field's read (where g++ 12 -O1 also warned falsely about it,
  // -Warray-bounds, in a loop of reads under ThreadSanitizer).
  [[noreturn, gnu::noinline, gnu::cold]] void truncated(int bytes, const char* what) const {
    detail::throw_state_error(std::string("truncated: a ") + what + " needs " +
                                  std::to_string(bytes) + " bytes, " +
                                  std::to_string(limit_ - pos_) + " left",
                              offset(pos_));
  }
  template <class T>
  void read_field(T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      v = read_bool();
    } else if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(read_double());
    } else {
      static_assert(std::is_integral_v<T>, "read: bools, integers and doubles only");
      const std::size_t at = pos_;
      if constexpr (std::is_signed_v<T>) {
        const std::int64_t x = read_i64();
        if (!std::in_range<T>(x)) detail::throw_state_error(field_range(x), offset(at));
        v = static_cast<T>(x);
      } else {
        const std::uint64_t x = read_u64();
        if (!std::in_range<T>(x)) detail::throw_state_error(field_range(x), offset(at));
        v = static_cast<T>(x);
      }
    }
  }
  template <class X>
  static std::string field_range(X x) {
    return "field holds " + std::to_string(x) + ", out of its type's range";
  }

  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
  std::size_t limit_;  // end of the current section
  std::uint64_t base_;
  std::shared_ptr<const void> owner_;
  std::int64_t replayed_ = 0;
};

/// A saved iterator: bytes with a magic, a format version, the pipeline's
/// fingerprint, the stages' payload and a CRC-32C (see the layout above).
/// A value type; `bytes()` is what write_state stores.
class IteratorState {
 public:
  /// The layout version this build writes and reads.
  static constexpr std::uint32_t format_version = 6;
  /// Bytes before the payload: magic, version, fingerprint, payload length.
  static constexpr std::size_t header_bytes = 24;
  /// Bytes after the payload: its CRC-32C.
  static constexpr std::size_t crc_bytes = 4;

  IteratorState() : IteratorState(0, std::span<const std::byte>{}) {}
  /// A state of `payload` (what the stages wrote) for the pipeline `fingerprint`.
  IteratorState(std::uint64_t fingerprint, std::span<const std::byte> payload) {
    std::vector<std::byte> bytes = start(fingerprint, payload.size());
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    finish(std::move(bytes));
  }
  /// A state of what `payload` wrote, its deferred parts copied in.
  IteratorState(std::uint64_t fingerprint, const StateWriter& payload) {
    std::vector<std::byte> bytes = start(fingerprint, payload.size());
    const std::size_t at = bytes.size();
    bytes.resize(at + payload.size());
    payload.copy_to(bytes.data() + at);
    finish(std::move(bytes));
  }
  /// Copies share the (immutable) bytes; a moved-from state keeps them too.
  IteratorState(const IteratorState&) = default;
  /// Shares `other`'s bytes, as the copy constructor does.
  IteratorState& operator=(const IteratorState&) = default;

  /// Parses and validates `bytes`: magic, version, length and CRC. Throws
  /// DataLossError naming what is wrong and its byte offset.
  static IteratorState from_bytes(std::span<const std::byte> bytes) {
    const std::size_t n = bytes.size();
    if (n < header_bytes + crc_bytes) {
      detail::throw_state_error("truncated state: " + std::to_string(n) + " bytes, at least " +
                                    std::to_string(header_bytes + crc_bytes) + " expected",
                                n);
    }
    if (std::memcmp(bytes.data(), "INGS", 4) != 0) {
      detail::throw_state_error("not a checkpoint state (bad magic)", 0);
    }
    const auto version = static_cast<std::uint32_t>(detail::get_le(bytes.data() + 4, 4));
    if (version != format_version) {
      detail::throw_state_error("unsupported format version " + std::to_string(version) +
                                    " (this build reads " + std::to_string(format_version) + ")",
                                4);
    }
    const std::uint64_t length = detail::get_le(bytes.data() + 16, 8);
    const std::size_t room = n - header_bytes - crc_bytes;
    if (length > room) {
      detail::throw_state_error("truncated state: payload length " + std::to_string(length) +
                                    ", only " + std::to_string(room) + " bytes present",
                                16);
    }
    if (length < room) {
      detail::throw_state_error(std::to_string(room - length) + " unexpected bytes after the CRC",
                                header_bytes + length + crc_bytes);
    }
    const std::size_t crc_at = header_bytes + static_cast<std::size_t>(length);
    const auto stored = static_cast<std::uint32_t>(detail::get_le(bytes.data() + crc_at, 4));
    if (crc32c(bytes.data(), crc_at) != stored) {
      detail::throw_state_error("CRC-32C mismatch (corrupted state)", crc_at);
    }
    IteratorState s;
    s.bytes_ = std::make_shared<const std::vector<std::byte>>(bytes.begin(), bytes.end());
    return s;
  }

  /// The whole state, as write_state stores it.
  std::span<const std::byte> bytes() const noexcept { return *bytes_; }
  /// The fingerprint of the pipeline it was saved from.
  std::uint64_t fingerprint() const noexcept { return detail::get_le(bytes_->data() + 8, 8); }
  /// What the stages wrote (StateReader's input).
  std::span<const std::byte> payload() const noexcept {
    return std::span(*bytes_).subspan(header_bytes, bytes_->size() - header_bytes - crc_bytes);
  }
  /// The number of bytes of the whole state.
  std::size_t size() const noexcept { return bytes_->size(); }
  /// What keeps bytes() alive: a restore shares it with what it keeps of
  /// the state (shuffle's buffered elements, deserialized when drawn).
  std::shared_ptr<const void> storage() const noexcept { return bytes_; }

  /// Two states are equal when their bytes are.
  friend bool operator==(const IteratorState& a, const IteratorState& b) {
    return *a.bytes_ == *b.bytes_;
  }

 private:
  static std::vector<std::byte> start(std::uint64_t fingerprint, std::size_t payload_size) {
    std::vector<std::byte> bytes;
    bytes.reserve(header_bytes + payload_size + crc_bytes);
    for (char c : std::string_view("INGS")) bytes.push_back(static_cast<std::byte>(c));
    detail::put_le(bytes, format_version, 4);
    detail::put_le(bytes, fingerprint, 8);
    detail::put_le(bytes, payload_size, 8);
    return bytes;
  }
  void finish(std::vector<std::byte> bytes) {
    detail::put_le(bytes, crc32c(bytes.data(), bytes.size()), 4);
    bytes_ = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  }

  std::shared_ptr<const std::vector<std::byte>> bytes_;  // never null
};

}  // namespace ingest
