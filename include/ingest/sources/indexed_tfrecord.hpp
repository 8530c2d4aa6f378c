// indexed_tfrecord(paths or index, {.verify_crc, .block_bytes, .in_flight}): the records
// of TFRecord files by position. build_tfrecord_index(paths) reads the files
// once and keeps where each record starts (8 bytes per record); the dataset
// then reads record i of the concatenated files with one positional read
// (pread, or one HTTP range request for a URL), so it can start anywhere:
// `.global_shuffle({.seed, .reshuffle_each_iteration})` visits every record
// once per pass in a pseudo-random order over the whole data set, with no
// shuffle buffer, and a checkpoint is the pass and the position (24 bytes),
// whatever the order. tf.data counterpart: a random-access dataset with
// Dataset.global_shuffle (TF 2.17); Grain's IndexSampler; DALI's TFRecord
// reader with its index files.
//
// The order of a global shuffle is a bijection of [0, N) computed per
// position (a four-round Feistel network on the next power of four, with
// cycle walking, keyed by the seed and the pass), as
// tf.random.experimental.index_shuffle does: no permutation is stored, and
// a restore costs nothing beyond opening the file it resumes in.
//
// Records that lie one after another in a file (no shuffle) are read
// together, up to `.block_bytes` per read; a shuffled read fetches exactly its
// record. For URLs the reads of the next `.in_flight` (16) spans are planned
// ahead of the consumer and their range requests sent together, so a global
// shuffle over an object store waits for one round trip per 16 records, not
// per record; the files are opened for positional reads with the indexed
// size (no request at open, nothing read ahead: the first range response
// pins the object's ETag, and a missing or resized object fails its reads).
// Each record's header and CRCs are checked against the index: a file
// whose size differs from the indexed one raises DataLossError naming it
// (indexed, then changed), a vanished local one too (a vanished object: the
// IoError of its reads' 404, naming the URL); a mismatch inside a record
// raises DataLossError with the file and offset, and the iterator moves on to
// the next record. Compressed files cannot be indexed (GZIP and ZLIB have no
// random access): InvalidArgument. Each iterator keeps at most 16 files open.
// A global shuffle over local files maps each one (up to 256 MiB; larger ones
// are read with pread) and enters its pages into the page tables when it
// opens it: a shuffled read is then a copy out of the page cache, with no
// system call or page fault per record (1.4x the records/s of pread on 3 KiB
// records in 16 files). The mapped pages count in the resident set while the
// file is open; they are the page cache's, shared, not the process's own.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/deal.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/options.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/state.hpp"
#include "ingest/formats/tfrecord_format.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/sources/file_dataset.hpp"
#include "ingest/sources/positional.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

/// Where each record of a list of TFRecord files starts (build_tfrecord_index).
class TFRecordIndex {
 public:
  /// Where one record lies: its file, the offset of its header and its
  /// payload's length.
  struct Location {
    /// The file's index in the index's file list.
    std::size_t file = 0;
    /// The offset of the record's header in the file.
    std::uint64_t offset = 0;
    /// The payload's length in bytes.
    std::uint64_t length = 0;
  };

  /// Records in all files.
  std::uint64_t size() const noexcept { return offsets_.size(); }
  /// The number of files.
  std::size_t num_files() const noexcept { return files_.size(); }
  /// The path of file `f`.
  const std::string& file(std::size_t f) const noexcept { return files_[f]; }
  /// The file's size when it was indexed.
  std::uint64_t file_size(std::size_t f) const noexcept { return sizes_[f]; }
  /// Records in the files before file `f` (f = num_files(): size()).
  std::uint64_t first_record(std::size_t f) const noexcept { return first_[f]; }

  /// Record `i` (< size()) of the files in order.
  Location locate(std::uint64_t i) const noexcept {
    const auto f = static_cast<std::size_t>(std::upper_bound(first_.begin() + 1, first_.end(), i) -
                                            (first_.begin() + 1));
    const std::uint64_t offset = offsets_[i];
    const std::uint64_t end = i + 1 < first_[f + 1] ? offsets_[i + 1] : sizes_[f];
    return {f, offset,
            end - offset - detail::tfrecord_header_bytes - detail::tfrecord_footer_bytes};
  }

  /// Whether a file is a URL (read through its scheme).
  bool has_urls() const noexcept { return has_urls_; }

  /// The files, their sizes and record counts (what a checkpoint depends on).
  void fingerprint(Fingerprint& fp) const {
    fp.add(static_cast<std::uint64_t>(files_.size())).add(size());
    for (std::size_t f = 0; f < files_.size(); ++f)
      fp.add(files_[f]).add(sizes_[f]).add(first_[f + 1]);
  }

  /// Adds the records of one file: `offsets` (each record's start, in
  /// order) of the file `path` of `size` bytes.
  void add_file(std::string path, std::uint64_t size, const std::vector<std::uint64_t>& offsets) {
    has_urls_ = has_urls_ || storage::is_url(path);
    files_.push_back(std::move(path));
    sizes_.push_back(size);
    offsets_.insert(offsets_.end(), offsets.begin(), offsets.end());
    first_.push_back(offsets_.size());
  }

 private:
  std::vector<std::string> files_;
  std::vector<std::uint64_t> sizes_;
  std::vector<std::uint64_t> first_{0};  // files + 1 prefix counts
  std::vector<std::uint64_t> offsets_;   // every record's header offset
  bool has_urls_ = false;
};

/// Reads the TFRecord files `paths` (plain, local or URLs) once, checking
/// every record as ingest::tfrecord does (CRCs and lengths, under
/// `options.verify_crc` and `.max_record_bytes`), and returns where each
/// record starts. Throws InvalidArgument for compressed files, IoError when a
/// file cannot be read and DataLossError (file and offset) for a corrupt or
/// truncated record.
inline TFRecordIndex build_tfrecord_index(const FileList& paths, TFRecordOptions options = {}) {
  if (options.compression != Compression::none) {
    throw InvalidArgument(
        "indexed_tfrecord: compressed files cannot be read by position (GZIP and ZLIB have no "
        "random access); decompress them, or read them in order with ingest::tfrecord",
        {.stage = "indexed_tfrecord"});
  }
  TFRecordIndex index;
  std::vector<std::uint64_t> offsets;
  for (const std::string& path : paths.paths()) {
    TFRecordReader reader(path, options);
    offsets.clear();
    for (;;) {
      const std::uint64_t at = reader.offset();
      if (!reader.read_view()) break;
      offsets.push_back(at);
    }
    index.add_file(path, reader.offset(), offsets);
  }
  return index;
}

/// Options of indexed_tfrecord.
struct IndexedTFRecordOptions {
  /// Check each record's CRCs when it is read.
  bool verify_crc = true;
  /// A global shuffle maps local files of up to 256 MiB (see the header
  /// comment). A file truncated in place by another process while mapped
  /// raises SIGBUS: turn this off for files that may shrink while being read
  /// (files replaced by rename, as TFRecordWriter does, are safe).
  bool memory_map = true;
  /// Records that follow one another in a file are read together, up to
  /// this many bytes per read (one range request for a URL).
  std::size_t block_bytes = std::size_t{1} << 20;
  /// Reads planned ahead of the consumer, each a record or a run of
  /// records that follow one another (0: default_in_flight when a file is
  /// a URL, whose range requests then wait for the network together; 1 for
  /// local files, read when needed).
  std::size_t in_flight = 0;
  /// in_flight's default for URLs.
  static constexpr std::size_t default_in_flight = 16;
};

namespace detail {

template <bool Marked>
class IndexedTFRecordIterator {
 public:
  using value_type = marked_t<Marked, std::string>;
  static constexpr std::size_t max_open_files = 16;
  /// A shuffled read maps local files up to this size (and reads larger
  /// ones with pread): their pages count in the resident set while open.
  static constexpr std::uint64_t max_mapped_bytes = std::uint64_t{256} << 20;

  /// The order (global shuffle, shard) is `spec`'s for the pass this
  /// iterator begins in `ctx`.
  IndexedTFRecordIterator(std::shared_ptr<const TFRecordIndex> index,
                          IndexedTFRecordOptions options,
                          std::shared_ptr<const PositionalSpec> spec, const IteratorContext& ctx,
                          std::shared_ptr<StageNode> node = nullptr)
      : index_(std::move(index)),
        options_(options),
        cursor_(std::move(spec), index_->size(), ctx),
        node_(std::move(node)) {
    window_ = options_.in_flight != 0 ? options_.in_flight
              : index_->has_urls()    ? IndexedTFRecordOptions::default_in_flight
                                      : 1;
  }

  std::optional<value_type> next() {
    if (pos_ == reads()) return std::nullopt;
    plan();
    Span& span = ahead_.front();
    const TFRecordIndex::Location at =
        pos_ == span.first ? span.first_at : index_->locate(record_at(pos_));
    const std::uint64_t k =
        pos_++;  // a record that fails to read is consumed (its error is the element)
    cursor_.note(pos_);
    if (!span.done) {
      span.done = true;
      try {
        if (span.error) std::rethrow_exception(std::exchange(span.error, nullptr));
        if (!span.mapped) span.bytes = span.read.get();
      } catch (...) {
        replan_after_failure();
        throw;
      }
      if (!span.mapped) span.source.reset();  // the file may close once no read needs it
    }
    std::optional<std::string> record;
    const bool last = pos_ == span.end;
    try {
      record.emplace(extract(span, at));
    } catch (...) {
      if (last) pop_front();
      throw;
    }
    if (last) pop_front();
    return mark_read<Marked>(std::move(*record), cursor_.order(), k);
  }

  /// Checkpoint: the number of records, the pass (and the deal's levels)
  /// and the position.
  void save(StateWriter& w) const {
    cursor_.write(w);
    w.write(pos_);
  }
  void restore(StateReader& r) {
    cursor_.read(r, "indexed_tfrecord", "records");
    pos_ = r.read_position(static_cast<std::size_t>(reads()), "indexed_tfrecord", "records");
    cursor_.note(pos_);
    ahead_.clear();  // reads in flight for the old position are dropped
    planned_ = pos_;
    peeked_position_ = no_position;
  }

 private:
  struct OpenFile {
    std::size_t file = 0;
    FileReader reader;
    FileMapping mapping{};  // a local file's bytes, read in place (empty: read with pread)
  };
  // One read: the records at positions [first, end), which lie one after
  // another in one file, `offset` .. `offset + length` of it.
  struct Span {
    std::uint64_t first = 0, end = 0;
    std::size_t file = 0;
    std::uint64_t offset = 0, length = 0;
    TFRecordIndex::Location first_at{};  // the record at `first`
    bool started = false, done = false;
    bool mapped = false;                 // the bytes are source->mapping's: no read
    std::shared_ptr<OpenFile> source{};  // keeps the reader alive while the read is in flight
    FileReader::PendingRead read{};
    std::exception_ptr error{};  // the read could not start (the file would not open)
    std::string bytes{};
  };

  // Reads in this pass (this rank's, when sharded), and the record of each.
  std::uint64_t reads() const noexcept { return cursor_.order().size(); }
  std::uint64_t record_at(std::uint64_t position) const noexcept {
    return cursor_.order().record(position);
  }

  // Plans reads for the positions after those planned, up to `window_`
  // reads, and starts those not started: for URLs the range requests go out
  // together; a local file is read one span at a time.
  void plan() {
    while (ahead_.size() < window_ && planned_ < reads()) {
      ahead_.push_back(span_from(planned_));
      planned_ = ahead_.back().end;
    }
    for (Span& span : ahead_) {
      if (!span.started) start(span);
    }
  }

  // The span of records from `position`: the next positions' records as
  // long as each starts where the one before ends in the same file, up to
  // block_bytes (at least one record).
  Span span_from(std::uint64_t position) {
    const TFRecordIndex::Location at =
        position == peeked_position_ ? peeked_ : index_->locate(record_at(position));
    Span span{.first = position,
              .end = position + 1,
              .file = at.file,
              .offset = at.offset,
              .length = framed(at),
              .first_at = at};
    while (span.end < reads()) {
      // The record after the span: its first one if it does not join this one.
      const TFRecordIndex::Location next = index_->locate(record_at(span.end));
      peeked_position_ = span.end;
      peeked_ = next;
      if (next.file != span.file || next.offset != span.offset + span.length ||
          span.length + framed(next) > options_.block_bytes) {
        break;
      }
      span.length += framed(next);
      ++span.end;
    }
    return span;
  }
  static std::uint64_t framed(const TFRecordIndex::Location& at) noexcept {
    return at.length + detail::tfrecord_header_bytes + detail::tfrecord_footer_bytes;
  }

  void start(Span& span) {
    span.started = true;
    try {
      span.source = open(span.file);
      // A mapped file is read in place: no system call and no copy but the
      // record's own (a shuffled read would otherwise cost a pread each).
      span.mapped = !span.source->mapping.empty();
      if (span.mapped) return;
      span.read = span.source->reader.start_read_at(
          span.offset, static_cast<std::size_t>(span.length), std::move(spare_));
    } catch (...) {
      span.error = std::current_exception();
    }
  }

  // The front span's read failed at the record just consumed: the records
  // after it in the span get a read of their own.
  void replan_after_failure() {
    const Span failed = std::move(ahead_.front());
    ahead_.pop_front();
    if (pos_ == failed.end) return;
    // The span's records lie one after another: the rest ends where it did.
    const TFRecordIndex::Location at = index_->locate(record_at(pos_));
    ahead_.push_front({.first = pos_,
                       .end = failed.end,
                       .file = failed.file,
                       .offset = at.offset,
                       .length = failed.offset + failed.length - at.offset,
                       .first_at = at});
  }

  void pop_front() {
    spare_ = std::move(ahead_.front().bytes);  // its capacity serves the next local read
    ahead_.pop_front();
  }

  // The record `at` from its span's bytes, checked against the index.
  std::string extract(Span& span, const TFRecordIndex::Location& at) {
    const std::uint64_t total = framed(at);
    const std::uint64_t begin = at.offset - span.offset;
    const char* bytes = span.bytes.data();
    std::uint64_t size = span.bytes.size();
    if (span.mapped) {
      // The mapping has the indexed size (checked at open): the span lies in it.
      bytes = span.source->mapping.data() + span.offset;
      size = std::min<std::uint64_t>(span.length, span.source->mapping.size() - span.offset);
    }
    if (size < begin + total) {
      span.bytes.clear();
      changed(at, "it ends inside the record");
    }
    const char* h = bytes + begin;
    if (detail::load_le64(h) != at.length) {
      changed(at, "the record's length is " + std::to_string(detail::load_le64(h)) +
                      ", the index's " + std::to_string(at.length));
    }
    if (options_.verify_crc && masked_crc32c(h, 8) != detail::load_le32(h + 8)) {
      corrupted(at, at.offset, "length checksum mismatch");
    }
    const char* payload = h + detail::tfrecord_header_bytes;
    const auto n = static_cast<std::size_t>(at.length);
    if (options_.verify_crc && masked_crc32c(payload, n) != detail::load_le32(payload + n)) {
      corrupted(at, at.offset + detail::tfrecord_header_bytes, "data checksum mismatch");
    }
    return {payload, n};
  }

  // The open reader of file `f`, opening it (and closing the least recently
  // used one beyond max_open_files); its size must be the indexed one.
  std::shared_ptr<OpenFile> open(std::size_t f) {
    for (std::size_t i = 0; i < open_.size(); ++i) {
      if (open_[i]->file == f) {
        std::rotate(open_.begin(), open_.begin() + static_cast<std::ptrdiff_t>(i),
                    open_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return open_.front();
      }
    }
    const std::string& path = index_->file(f);
    const storage::ScopedTransferAccount account(node_);  // remote reads count for this stage
    std::optional<FileReader> reader;
    try {
      // A URL opens without a request: the index has its size.
      reader.emplace(path, "indexed_tfrecord", storage::Access::positional, index_->file_size(f));
    } catch (const IoError&) {
      if (!detail::file_exists(path, "indexed_tfrecord")) {
        throw DataLossError("indexed_tfrecord: " + path + " was indexed but no longer exists",
                            {.stage = "indexed_tfrecord", .file = path});
      }
      throw;
    }
    if (reader->size() != index_->file_size(f)) {
      throw DataLossError("indexed_tfrecord: " + path + " has " + std::to_string(reader->size()) +
                              " bytes, " + std::to_string(index_->file_size(f)) +
                              " when it was indexed (it changed since: build the index again)",
                          {.stage = "indexed_tfrecord", .file = path});
    }
    if (open_.size() == max_open_files) open_.pop_back();  // closed once no read needs it
    auto opened = std::make_shared<OpenFile>(OpenFile{f, std::move(*reader)});
    if (options_.memory_map && opened->reader.is_local() && cursor_.order().shuffled() &&
        index_->file_size(f) <= max_mapped_bytes) {
      opened->mapping = FileMapping(opened->reader, {}, /*sequential=*/false);
      opened->mapping.populate();
    }
    open_.insert(open_.begin(), std::move(opened));
    return open_.front();
  }

  [[noreturn]] void changed(const TFRecordIndex::Location& at, const std::string& why) {
    throw DataLossError(
        "indexed_tfrecord: the record at " + std::to_string(at.offset) +
            " does not match the index (" + why +
            "): the file changed since it "
            "was indexed",
        {.stage = "indexed_tfrecord", .file = index_->file(at.file), .offset = at.offset});
  }
  [[noreturn]] void corrupted(const TFRecordIndex::Location& at, std::uint64_t offset,
                              const std::string& why) {
    throw DataLossError(
        "corrupted record at " + std::to_string(offset) + " (" + why + ")",
        {.stage = "indexed_tfrecord", .file = index_->file(at.file), .offset = offset});
  }

  std::shared_ptr<const TFRecordIndex> index_;
  IndexedTFRecordOptions options_;
  PassCursor cursor_;                // the pass's order: read -> record
  std::shared_ptr<StageNode> node_;  // this source's model node, if measured
  std::uint64_t pos_ = 0;
  std::vector<std::shared_ptr<OpenFile>> open_;  // most recently used first
  std::deque<Span> ahead_;                       // the reads planned, the one at pos_ first
  std::uint64_t planned_ = 0;                    // the first position no read covers
  static constexpr std::uint64_t no_position = ~std::uint64_t{0};
  // The record at peeked_position_, located while planning (the order after
  // a restore is another: the restore forgets it).
  std::uint64_t peeked_position_ = no_position;
  TFRecordIndex::Location peeked_{};
  std::size_t window_ = 1;  // reads planned ahead
  std::string spare_;       // the buffer of the last span read, for the next local read
};

}  // namespace detail

/// indexed_tfrecord's dataset; Marked: shard_padded's (record, valid) pairs.
template <bool Marked = false>
class BasicIndexedTFRecordDataset : public DatasetBase<BasicIndexedTFRecordDataset<Marked>,
                                                       detail::marked_t<Marked, std::string>> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "indexed_tfrecord";

  /// Reads the records of `index` with `options`, in the order `spec` sets (all, in order, by
  /// default); throws InvalidArgument if options.block_bytes is 0.
  BasicIndexedTFRecordDataset(std::shared_ptr<const TFRecordIndex> index,
                              IndexedTFRecordOptions options, detail::PositionalSpec spec = {})
      : index_(std::move(index)),
        options_(options),
        spec_(std::make_shared<const detail::PositionalSpec>(std::move(spec))) {
    if (options_.block_bytes == 0) {
      throw InvalidArgument("indexed_tfrecord: block_bytes must be >= 1",
                            {.stage = "indexed_tfrecord"});
    }
  }

  /// Every record once per pass, in a pseudo-random order over all files
  /// (tf: Dataset.global_shuffle). Without `.seed`, one is drawn for this
  /// dataset; with `.reshuffle_each_iteration` every pass gets its own order.
  /// Before shard(world), with the same seed on every rank.
  BasicIndexedTFRecordDataset global_shuffle(ShuffleOptions options = {}) const {
    if (spec_->sharded) {
      throw InvalidArgument(
          "indexed_tfrecord: global_shuffle goes before shard(world) (the ranks deal one order "
          "of the whole pass)",
          {.stage = "indexed_tfrecord"});
    }
    return {index_, options_, spec_->shuffled(options)};
  }

  using BasicIndexedTFRecordDataset::DatasetBase::shard;
  /// The records of each pass dealt to `world`'s rank (after a global
  /// shuffle, its share of that pass's order): the rank reads only its own
  /// records (see Remainder). Throws InvalidArgument for Remainder::pad (use
  /// shard_padded) and for a rank outside the world.
  BasicIndexedTFRecordDataset shard(const distributed::World& world,
                                    ShardOptions options = {}) const {
    if (options.remainder == Remainder::pad) detail::pad_needs_marks("indexed_tfrecord");
    return {index_, options_, spec_->dealt(world, options.remainder, "indexed_tfrecord")};
  }
  /// As shard(world, {.remainder = Remainder::pad}), each record paired with
  /// whether it is its rank's own (false: a repeat that evens the counts).
  BasicIndexedTFRecordDataset<true> shard_padded(const distributed::World& world) const {
    static_assert(!Marked, "shard_padded: the dataset is sharded already");
    return {index_, options_, spec_->dealt(world, Remainder::pad, "indexed_tfrecord")};
  }

  /// An iterator over this pass's positions (reads planned ahead as options.in_flight says).
  detail::IndexedTFRecordIterator<Marked> make_iterator(const IteratorContext& ctx) const {
    std::shared_ptr<detail::StageNode> node;  // shares the model's ownership
    if (ctx.model && ctx.node) node = std::shared_ptr<detail::StageNode>(ctx.model, ctx.node);
    return {index_, options_, spec_, ctx, std::move(node)};
  }

  /// The index (the files and where each record starts).
  const TFRecordIndex& index() const noexcept { return *index_; }

  /// The number of records this pass yields (this rank's after shard(world)).
  std::int64_t cardinality() const { return spec_->cardinality(index_->size()); }
  /// What global_shuffle and shard(world) set (distributed::restore reads it).
  const detail::PositionalSpec& positional_spec() const noexcept { return *spec_; }

  /// The index and the order.
  void fingerprint(Fingerprint& fp) const {
    index_->fingerprint(fp);
    spec_->fingerprint(fp);
  }

 private:
  template <bool>
  friend class BasicIndexedTFRecordDataset;
  std::shared_ptr<const TFRecordIndex> index_;
  IndexedTFRecordOptions options_;
  std::shared_ptr<const detail::PositionalSpec> spec_;
};

/// The dataset of `indexed_tfrecord(...)`: the records of TFRecord files by position.
using IndexedTFRecordDataset = BasicIndexedTFRecordDataset<>;

/// The records of the TFRecord files `paths` by position: indexes them
/// (build_tfrecord_index, reading each file once) and reads record by record.
inline IndexedTFRecordDataset indexed_tfrecord(const FileList& paths,
                                               IndexedTFRecordOptions options = {}) {
  return {std::make_shared<const TFRecordIndex>(build_tfrecord_index(paths)), options};
}
/// The records of an index built before (build_tfrecord_index).
inline IndexedTFRecordDataset indexed_tfrecord(TFRecordIndex index,
                                               IndexedTFRecordOptions options = {}) {
  return {std::make_shared<const TFRecordIndex>(std::move(index)), options};
}

}  // namespace ingest
