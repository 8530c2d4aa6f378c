// The dataset and iterator every file-reading source shares (tfrecord,
// text_lines, csv, fixed_length_records): opens its files one after another
// with a per-file reader and yields the reader's records. Errors carry the stage and file; a
// DataLossError or IoError abandons the rest of that file and the next call
// moves on to the next file (tf.data behaviour, so ignore_errors cannot loop
// on one bad file), while other errors (a bad CSV field) skip only the record.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/runtime.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

/// The files a source reads: one path, a braced list, or a vector of paths.
/// Copies share the list.
class FileList {
 public:
  /// The files `paths`, in order.
  FileList(std::vector<std::string> paths)  // NOLINT: implicit on purpose
      : paths_(std::make_shared<const std::vector<std::string>>(std::move(paths))) {}
  /// The files of a braced list, in order.
  FileList(std::initializer_list<std::string> paths) : FileList(std::vector<std::string>(paths)) {}
  /// The one file `path`.
  FileList(std::string path)  // NOLINT
      : FileList(std::vector<std::string>{std::move(path)}) {}
  /// @copydoc FileList(std::string)
  FileList(const char* path) : FileList(std::string(path)) {}  // NOLINT
  /// @copydoc FileList(std::string)
  FileList(std::string_view path) : FileList(std::string(path)) {}  // NOLINT

  /// The paths, in order.
  const std::vector<std::string>& paths() const noexcept { return *paths_; }
  /// The number of files.
  std::size_t size() const noexcept { return paths_->size(); }
  /// The `i`-th path (unchecked).
  const std::string& operator[](std::size_t i) const noexcept { return (*paths_)[i]; }

 private:
  std::shared_ptr<const std::vector<std::string>> paths_;
};

}  // namespace ingest

namespace ingest::detail {

/// Reader: constructible from (const std::string& path, const Options&), and
/// optionally with a BackgroundExecutor after them (then it gets one that
/// posts to the pipeline's runtime), with `std::optional<T> read()` returning
/// std::nullopt at the end of its file.
template <class Reader, class Options>
class FileSequenceIterator {
 public:
  using value_type = typename decltype(std::declval<Reader&>().read())::value_type;

  FileSequenceIterator(FileList paths, Options options, const char* stage,
                       std::shared_ptr<Runtime> runtime = nullptr,
                       std::shared_ptr<StageNode> node = nullptr)
      : paths_(std::move(paths)),
        options_(std::move(options)),
        stage_(stage),
        runtime_(std::move(runtime)),
        node_(std::move(node)) {}

  std::optional<value_type> next() {
    for (;;) {
      if (!reader_) {
        if (file_ == paths_.size()) return std::nullopt;
        const std::string& path = paths_[file_++];
        try {
          open(path);
        } catch (Error& e) {
          e.add_context({.stage = stage_, .element = produced_, .file = path});
          throw;
        }
      }
      const bool mine = keep_stride_ == 1 || produced_ % keep_stride_ == keep_offset_;
      try {
        if (std::optional<value_type> x = reader_->read()) {
          ++produced_;
          if (!mine) continue;
          return x;
        }
        reader_.reset();
      } catch (Error& e) {
        e.add_context({.stage = stage_, .element = produced_, .file = paths_[file_ - 1]});
        ++produced_;  // the failed record counts as consumed
        if (dynamic_cast<const DataLossError*>(&e) || dynamic_cast<const IoError*>(&e)) {
          reader_.reset();
        }
        if (!mine) continue;  // another rank's record, and its error
        throw;
      }
    }
  }

  /// Yields only the records at positions offset, offset + stride, ... of
  /// its files (with_options({.auto_shard}) by element).
  void keep_every(std::int64_t stride, std::int64_t offset) noexcept {
    keep_stride_ = stride;
    keep_offset_ = offset;
  }

  /// Checkpoint: the next file's index, whether a file is open, the record
  /// count, and the open file's position: the offset of its next record
  /// (Reader::offset/seek) or what the reader saves itself (Reader::save/
  /// restore, e.g. csv's offset and line). Restore reopens that file and
  /// continues there.
  void save(StateWriter& w) const {
    if constexpr (self_saving || seekable) {
      w.write(file_, reader_.has_value(), produced_);
      if constexpr (self_saving) {
        if (reader_) reader_->save(w);
      } else {
        if (reader_) w.write(reader_->offset());
      }
    } else {
      (void)w;
      throw_not_seekable();
    }
  }
  void restore(StateReader& r) {
    if constexpr (self_saving || seekable) {
      const std::uint64_t at = r.offset();
      std::uint64_t file = 0;
      bool open_file = false;
      r.read(file, open_file, produced_);
      if (file > paths_.size() || (open_file && file == 0)) {
        throw DataLossError("checkpoint: file index " + std::to_string(file) + " of " +
                                std::to_string(paths_.size()) + " files is out of range",
                            {.stage = stage_, .offset = at});
      }
      file_ = static_cast<std::size_t>(file);
      reader_.reset();
      if (open_file) {
        const std::string& path = paths_[file_ - 1];
        try {
          open(path);
          if constexpr (self_saving) {
            reader_->restore(r);
          } else {
            reader_->seek(r.read_u64());
          }
        } catch (Error& e) {
          reader_.reset();
          // The file the state was reading is gone: the data changed since
          // the save, not a passing I/O failure.
          bool gone = false;
          if (dynamic_cast<const IoError*>(&e) != nullptr) {
            try {
              gone = !detail::file_exists(path, stage_);
            } catch (const Error&) {
            }
          }
          if (gone) {
            throw DataLossError("checkpoint: the file the state was reading no longer exists",
                                {.stage = stage_, .file = path});
          }
          e.add_context({.stage = stage_, .file = path});
          throw;
        }
      }
    } else {
      (void)r;
      throw_not_seekable();
    }
  }

 private:
  static constexpr bool self_saving =
      requires(Reader & reader, const Reader& c, StateWriter& w, StateReader& r) {
    c.save(w);
    reader.restore(r);
  };
  static constexpr bool seekable = requires(Reader & reader, const Reader& c) {
    { c.offset() } -> std::convertible_to<std::uint64_t>;
    reader.seek(std::uint64_t{});
  };
  [[noreturn]] void throw_not_seekable() const {
    throw Unimplemented("checkpoint: stage '" + std::string(stage_) + "' cannot be saved yet",
                        {.stage = stage_});
  }

  void open(const std::string& path) {
    const storage::ScopedTransferAccount account(node_);  // remote reads count for this stage
    if constexpr (std::is_constructible_v<Reader, const std::string&, const Options&,
                                          BackgroundExecutor>) {
      // The default runtime is looked up (and started) only when a job comes.
      reader_.emplace(path, options_, [rt = runtime_](std::function<void()> job) {
        (rt ? rt : default_runtime())->post(std::move(job));
      });
    } else {
      reader_.emplace(path, options_);
    }
  }

  FileList paths_;
  Options options_;
  const char* stage_;
  std::shared_ptr<Runtime> runtime_;  // for readers taking background help; null: the default
  std::shared_ptr<StageNode> node_;   // this source's model node, if measured
  std::size_t file_ = 0;
  std::int64_t produced_ = 0;
  std::int64_t keep_stride_ = 1, keep_offset_ = 0;  // auto_shard by element
  std::optional<Reader> reader_;
};

/// Throws InvalidArgument unless a reader's buffer size is positive.
inline void check_buffer_size(std::size_t buffer_size, const char* stage) {
  if (buffer_size == 0) {
    throw InvalidArgument(std::string(stage) + ": buffer_size must be > 0", {.stage = stage});
  }
}

}  // namespace ingest::detail

namespace ingest {

/// A dataset of the records of `paths`, read file after file by Reader with
/// Options (see FileSequenceIterator). Copies share the file list; each
/// iterator opens its own files.
template <class Reader, class Options, const char* Stage>
class FileDataset
    : public DatasetBase<FileDataset<Reader, Options, Stage>,
                         typename detail::FileSequenceIterator<Reader, Options>::value_type> {
 public:
  /// The stage's name in errors, stats, traces and checkpoints (the source's: "tfrecord", ...).
  static constexpr std::string_view stage_name = Stage;

  /// Reads the files `paths` with `options`.
  FileDataset(FileList paths, Options options)
      : paths_(std::move(paths)), options_(std::move(options)) {}

  /// An iterator that opens the files one after another (with with_options' auto_shard above,
  /// only this rank's files, or this rank's one record in world_size of every file).
  detail::FileSequenceIterator<Reader, Options> make_iterator(const IteratorContext& ctx) const {
    std::shared_ptr<detail::StageNode> node;  // shares the model's ownership
    if (ctx.model && ctx.node) node = std::shared_ptr<detail::StageNode>(ctx.model, ctx.node);
    if (ctx.auto_shard) {  // with_options({.auto_shard}) above
      const distributed::World& world = ctx.auto_shard->world;
      if (const auto first = detail::auto_shard_by_file(ctx, paths_.size(), Stage)) {
        std::vector<std::string> mine;  // this rank's files
        const auto stride = static_cast<std::size_t>(world.world_size);
        for (std::size_t f = *first; f < paths_.size(); f += stride) mine.push_back(paths_[f]);
        return {FileList(std::move(mine)), options_, Stage, ctx.runtime, std::move(node)};
      }
      if (ctx.auto_shard->decision == detail::AutoShard::by_element) {
        detail::FileSequenceIterator<Reader, Options> it(paths_, options_, Stage, ctx.runtime,
                                                         std::move(node));
        it.keep_every(world.world_size, world.rank);
        return it;
      }
    }
    return {paths_, options_, Stage, ctx.runtime, std::move(node)};
  }

  /// The files it reads.
  const FileList& paths() const noexcept { return paths_; }
  /// The options it was made with.
  const Options& options() const noexcept { return options_; }
  /// The file list (a state names positions in it).
  void fingerprint(Fingerprint& fp) const {
    fp.add(static_cast<std::uint64_t>(paths_.size()));
    for (const std::string& p : paths_.paths()) fp.add(p);
    // What changes the records read from the same files (framing,
    // compression), where the options say.
    if constexpr (requires { options_.fingerprint(fp); }) options_.fingerprint(fp);
  }

 private:
  FileList paths_;
  Options options_;
};

}  // namespace ingest
