// cache() and cache(path): the first complete pass over the input fills the
// cache and later passes read it instead of recomputing. tf.data
// counterpart: CacheDataset, with two deliberate differences. A file cache is
// written under a temporary name and renamed into place only when the pass
// completes, so there are no lock files, a pass stopped halfway (or failing)
// leaves nothing behind, concurrent writers (threads or processes) each
// produce a complete file and the last rename wins, and a later run or
// another process reuses the file. A file that is truncated, corrupt at its
// ends, or written for another element layout is detected and rebuilt,
// never read. A memory cache is shared by every copy of the dataset; a pass
// that starts while another is filling it reads the input directly.
// Elements are copied into the cache (memory) or serialised through
// ingest::serializer<T> (file); a pass in which an element failed keeps no
// cache, so the cache never silently lacks elements (tf.data caches the
// elements that did not fail). As in tf.data, a pass is complete at the
// input's end, or as soon as it read as many elements as the input's known
// cardinality(), even if the reader never asks for the end. A process killed
// while filling a cache file leaves its temporary file behind; the next
// cache(path) or TFRecordWriter that opens the directory removes it (a live
// filler's temporary is locked and kept; see remove_orphaned_temporaries).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/core/serializer.hpp"
#include "ingest/core/state.hpp"
#include "ingest/formats/cache_file.hpp"
#include "ingest/formats/tfrecord_format.hpp"
#include "ingest/formats/tfrecord_writer.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/runtime/unary_stage.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

/// Iterator of CacheDataset: reads a complete cache, or passes the input through and fills the
/// cache when the pass completes.
template <class InputIt>
class CacheIterator {
 public:
  /// The element type (the input's).
  using value_type = typename InputIt::value_type;

  /// The cache's shared state (one per dataset, shared by its copies).
  struct State {
    /// Guards the fields below.
    std::mutex mu;
    std::string path;                                         ///< empty: memory cache
    unsigned file_mode = 0600;                                ///< of the cache file
    std::shared_ptr<const std::vector<value_type>> elements;  ///< a complete memory cache
    bool filling = false;  ///< a pass is filling the memory cache
    /// The context epoch of the pass that filled the cache, plus one (0: not
    /// filled). random_map's generators depend on it, so a pass that must
    /// fill the cache again reads the input in that epoch, not its own: a
    /// pass restored mid-fill, or any pass after a restore in a process that
    /// lacks the memory cache (the state holds it as a pass counter of the
    /// dataset: Fingerprint::counter).
    Fingerprint::Counter filled_in = std::make_shared<std::atomic<std::uint64_t>>(0);

    /// The epoch in which a pass of context epoch `epoch` reads the input.
    std::uint64_t fill_epoch_or(std::uint64_t epoch) const noexcept {
      const std::uint64_t v = filled_in->load(std::memory_order_relaxed);
      return v ? v - 1 : epoch;
    }
  };

  /// Makes the input's iterator for a pass in the given context epoch.
  /// `counters`: the pass counters of the input's datasets
  /// (detail::PassCounters) as the iterator is made: if given, they are set
  /// to these values first (a restored fill re-reads the input as the saved
  /// run read it, reshuffles included); if empty, they are filled in.
  using MakeInput =
      std::function<InputIt(std::uint64_t epoch, std::vector<std::uint64_t>& counters)>;

  /// Reads a complete memory cache, filled in context epoch `fill_epoch`.
  CacheIterator(std::shared_ptr<const std::vector<value_type>> elements, std::uint64_t fill_epoch)
      : epoch_(fill_epoch), cached_(std::move(elements)), mode_(Mode::memory) {}

  /// Reads a complete cache file holding `count` elements (filled in context
  /// epoch `fill_epoch`, as far as this process knows).
  CacheIterator(const std::string& path, std::uint64_t count, std::uint64_t fill_epoch)
      : epoch_(fill_epoch),
        reader_(std::make_unique<TFRecordReader>(path, TFRecordOptions{})),
        expected_(count),
        mode_(Mode::file) {
    reader_->read_view();  // the header, validated already
  }

  /// Passes the input through (its iterator made by `make_input` in context
  /// epoch `epoch` when first needed); fills the cache if `state` is given
  /// (memory, or a file when state->path is set). `cardinality`: the input's
  /// element count when known (>= 0): the cache is complete once that many
  /// elements were read, even if the reader stops before asking for the end
  /// (tf.data).
  CacheIterator(MakeInput make_input, std::uint64_t epoch, std::shared_ptr<State> state,
                std::int64_t cardinality)
      : make_input_(std::move(make_input)),
        epoch_(epoch),
        state_(std::move(state)),
        cardinality_(cardinality) {
    if constexpr (serializable<value_type>) {
      if (state_ && !state_->path.empty()) {
        writer_ = std::make_unique<TFRecordWriter>(
            state_->path, TFRecordWriterOptions{.file_mode = state_->file_mode});
        writer_->write(detail::cache_header(serializer<value_type>::signature()));
      }
    }
  }

  /// Movable, not assignable; destroying an iterator whose pass did not complete keeps nothing
  /// of its fill (its temporary file is removed).
  CacheIterator(CacheIterator&&) noexcept = default;
  CacheIterator& operator=(CacheIterator&&) = delete;
  ~CacheIterator() {
    // A pass that did not complete keeps nothing: the writer's destructor
    // removes its temporary file; a memory fill is given up.
    if (filling_memory()) {
      std::lock_guard lock(state_->mu);
      state_->filling = false;
    }
  }

  /// The next element, from the cache or the input, or std::nullopt at the end; an input error
  /// surfaces in its place and leaves this pass's fill incomplete (it keeps no cache).
  std::optional<value_type> next() {
    if (ended_) return std::nullopt;  // after the end, the end forever
    if constexpr (std::is_copy_constructible_v<value_type>) {
      if (cached_) {
        if (pos_ == cached_->size()) return std::nullopt;
        return (*cached_)[pos_++];
      }
    }
    if (reader_) return read_file();
    return pull_step();
  }

  /// Checkpoint: how the pass reads (the input, the memory cache or the
  /// cache file), how many elements it delivered and the context epoch in
  /// which the cache's elements were (or are being) made; then, when it
  /// reads the input, whether the input's iterator was made, the pass
  /// counters below it as it was made (detail::PassCounters) and its state;
  /// or the cache file's offset. Restore
  /// continues in whatever way this iterator reads, even another than the
  /// saved one's (another process has no memory cache; a cache file may have
  /// been completed meanwhile): a pass that fills the cache re-reads the
  /// input up to the position, in the saved epoch (so the cache gets every
  /// element, made as the saved run made them, and the passes after it read
  /// what they would have read; restoring the input's state instead would
  /// leave the cache to a later pass, whose epoch, reshuffle and random_map
  /// generators differ); one that reads the input without filling restores
  /// the input's state; one that reads a cache moves to the position.
  void save(StateWriter& w) const {
    w.write(static_cast<std::uint8_t>(mode_), position(), ended_, epoch_);
    if (mode_ == Mode::input) {
      // Not made yet: a save does not make it (the order in which iterators
      // of a dataset are made sets their passes).
      w.write(input_.has_value());
      if (!input_) return;
      w.write_u64(made_with_.size());
      for (const std::uint64_t v : made_with_) w.write_u64(v);
      w.write(failed_);
      input_->save(w);
    } else if (mode_ == Mode::file) {
      w.write(reader_ ? reader_->offset() : std::uint64_t{0});  // none once ended
    }
  }
  /// Restores what save() wrote (the mode and position of the pass), on a fresh iterator of the
  /// same dataset; a pass saved while filling refills from its saved input state.
  void restore(StateReader& r) {
    const std::uint64_t at = r.offset();
    std::uint8_t saved = 0;
    std::uint64_t k = 0, epoch = 0;
    bool ended = false;
    r.read(saved, k, ended, epoch);
    if (saved > static_cast<std::uint8_t>(Mode::file)) {
      throw DataLossError("checkpoint: cache mode " + std::to_string(saved) + " is unknown",
                          {.stage = "cache", .offset = at});
    }
    std::vector<std::uint64_t> made_with;
    bool made = false;
    if (saved == static_cast<std::uint8_t>(Mode::input)) r.read(made);
    if (made) {
      const std::uint64_t n_at = r.offset();
      const std::uint64_t n = r.read_u64();
      if (n > r.remaining() / 8) {
        throw DataLossError(
            "checkpoint: cache: " + std::to_string(n) + " pass counters do not fit in the state",
            {.stage = "cache", .offset = n_at});
      }
      made_with.resize(n);
      for (std::uint64_t& v : made_with) v = r.read_u64();
    }
    const Mode mode = mode_;
    if (mode == Mode::input && !input_) {
      // Read the input as the saved run did: in its epoch, with its passes.
      epoch_ = epoch;
      made_with_ = std::move(made_with);
    }
    if (saved == static_cast<std::uint8_t>(Mode::input) && !made) {
      if (mode != Mode::input) move_to(0);
      return;
    }
    if (saved == static_cast<std::uint8_t>(Mode::input) && mode == Mode::input && !filling()) {
      r.read(failed_);
      input().restore(r);
      passed_ = k;
      ended_ = ended;
      return;
    }
    if (saved == static_cast<std::uint8_t>(Mode::input)) {
      r.skip_section_rest();  // the input's state: this pass reads the cache instead
    } else if (saved == static_cast<std::uint8_t>(Mode::file)) {
      std::uint64_t offset = 0;
      r.read(offset);
      if (mode == Mode::file) return seek_file(offset, k, ended);
    }
    move_to(k);  // the end, if the saved pass had reached it, comes next
  }

 private:
  enum class Mode : std::uint8_t { input, memory, file };

  // Elements this pass delivered.
  std::uint64_t position() const noexcept {
    switch (mode_) {
      case Mode::file: return read_;
      case Mode::memory: return pos_;
      case Mode::input: break;
    }
    return passed_;
  }

  // One step of the pass from the input: an element, the end, or an
  // element's error (rethrown); elements and errors count in passed_.
  std::optional<value_type> pull_step() {
    std::optional<value_type> x;
    try {
      x = pull_input();
    } catch (const detail::Cancelled&) {
      throw;
    } catch (...) {
      ++passed_;  // a failed element is consumed: a step of the pass too
      throw;
    }
    if (x) ++passed_;
    return x;
  }

  // The next input element, added to the cache being filled.
  std::optional<value_type> pull_input() {
    std::optional<value_type> x;
    try {
      x = input().next();
    } catch (...) {
      failed_ = true;  // this pass cannot complete the cache
      throw;
    }
    if (!x) {
      finish();
      ended_ = true;
      return x;
    }
    if (state_ && !failed_ && !done_) {
      if (writer_) {
        if constexpr (serializable<value_type>) {
          bytes_.clear();
          serializer<value_type>::write(bytes_, *x);
          const auto b = bytes_.bytes();
          writer_->write(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
        }
      } else if constexpr (std::is_copy_constructible_v<value_type>) {
        filled_.push_back(*x);
      }
      ++count_;
      if (static_cast<std::int64_t>(count_) == cardinality_) finish();
    }
    return x;
  }

  // Moves a fresh pass to its k-th element: in the memory cache, by reading
  // the cache file, or by re-reading the input (which fills the cache).
  void move_to(std::uint64_t k) {
    const auto short_by = [&](std::uint64_t have) {
      throw DataLossError("checkpoint: the cache's pass has " + std::to_string(have) +
                              " elements, fewer than the saved position " + std::to_string(k),
                          {.stage = "cache"});
    };
    if (cached_) {
      if (k > cached_->size()) short_by(cached_->size());
      pos_ = static_cast<std::size_t>(k);
      return;
    }
    if (reader_) {
      if (k > expected_) short_by(expected_);
      while (read_ < k) read_file();
      return;
    }
    // Errors before the position were delivered before the save (each is a
    // step of the pass); they fail the cache's fill again here.
    while (passed_ < k) {
      bool end = false;
      try {
        end = !pull_step();
      } catch (const detail::Cancelled&) {
        throw;
      } catch (...) {
        continue;
      }
      if (end) short_by(passed_);
    }
  }

  // Continues a fresh cache file reader at `offset`, the saved reader's, its
  // k-th element.
  void seek_file(std::uint64_t offset, std::uint64_t k, bool ended) {
    if (ended) {  // the saved pass had read the footer
      read_ = expected_;
      reader_.reset();
      ended_ = true;
      return;
    }
    if (k > expected_) {
      throw DataLossError("checkpoint: the cache file has " + std::to_string(expected_) +
                              " elements, fewer than the saved position " + std::to_string(k),
                          {.stage = "cache", .file = reader_->path()});
    }
    try {
      reader_->seek(offset);
    } catch (Error& e) {
      e.add_context({.stage = "cache", .file = reader_->path()});
      throw;
    }
    read_ = k;
  }

  bool filling_memory() const noexcept { return state_ && state_->path.empty() && !done_; }
  bool filling() const noexcept { return state_ && !done_; }

  // The input's iterator, made when first needed (after a restore has set
  // the epoch to read it in).
  InputIt& input() const {
    if (!input_) input_.emplace(make_input_(epoch_, made_with_));
    return *input_;
  }

  std::optional<value_type> read_file() {
    std::optional<std::string_view> record;
    try {
      record = reader_->read_view();
    } catch (Error& e) {
      e.add_context({.stage = "cache"});
      throw;
    }
    if (!record) {
      throw DataLossError("cache file ended before its footer",
                          {.stage = "cache", .file = reader_->path()});
    }
    if (read_ == expected_) {
      reader_.reset();  // this record is the footer: the end
      ended_ = true;
      return std::nullopt;
    }
    ++read_;
    if constexpr (serializable<value_type>) {
      ByteReader r(std::span(reinterpret_cast<const std::byte*>(record->data()), record->size()));
      try {
        return serializer<value_type>::read(r);
      } catch (Error& e) {
        e.add_context({.stage = "cache", .file = reader_->path()});
        throw;
      }
    } else {
      throw InternalError("cache: reading a file cache of a type without a serializer");
    }
  }

  // The end of the input: publish the cache if this pass filled it completely.
  void finish() {
    if (done_ || !state_) return;
    done_ = true;
    if (failed_) {
      log_line(
          "cache: an element failed during the pass that filled the cache; nothing was cached");
      if (state_->path.empty()) {
        std::lock_guard lock(state_->mu);
        state_->filling = false;
      }
      writer_.reset();
      return;
    }
    if (writer_) {
      writer_->write(detail::cache_footer(count_));
      writer_->close();  // renames the complete file into place
      writer_.reset();
    } else {
      std::lock_guard lock(state_->mu);
      state_->elements = std::make_shared<const std::vector<value_type>>(std::move(filled_));
      state_->filling = false;
    }
    state_->filled_in->store(epoch_ + 1, std::memory_order_relaxed);
  }

  MakeInput make_input_;
  std::uint64_t epoch_ = 0;  // the context epoch the input is (or the cache was) read in
  mutable std::vector<std::uint64_t> made_with_;  // the pass counters below as input_ was made
  mutable std::optional<InputIt> input_;
  std::shared_ptr<State> state_;
  std::unique_ptr<TFRecordWriter> writer_;  // a unique_ptr: the writer does not move
  ByteWriter bytes_;
  std::vector<value_type> filled_;
  std::uint64_t count_ = 0;
  std::uint64_t passed_ = 0;  // elements (and errors) this pass took from the input
  std::int64_t cardinality_ = unknown_cardinality;
  bool failed_ = false;
  bool done_ = false;   // the cache was published (or given up)
  bool ended_ = false;  // next() returned the end
  std::shared_ptr<const std::vector<value_type>> cached_;
  std::size_t pos_ = 0;
  std::unique_ptr<TFRecordReader> reader_;
  std::uint64_t read_ = 0;
  std::uint64_t expected_ = 0;
  Mode mode_ = Mode::input;  // how this pass reads
};

/// The dataset of `ds.cache()` (memory) and `ds.cache(path)` (a file): the first complete pass
/// fills the cache and later passes read it instead of the input.
template <class Input>
class CacheDataset
    : public detail::UnaryStageBase<CacheDataset<Input>, Input, typename Input::element_type> {
  using T = typename Input::element_type;
  using Iterator = CacheIterator<detail::child_iterator_t<Input>>;
  using State = typename Iterator::State;

 public:
  /// The stage's name in errors, stats, traces and checkpoints.
  static constexpr std::string_view stage_name = "cache";
  /// It makes its input's iterators as it runs (Fingerprint::Below).
  static constexpr bool makes_input_iterators = true;

  /// Caches `input` in memory (`path` empty) or in the file `path`, written with
  /// options.file_mode.
  CacheDataset(Input input, std::string path, CacheOptions options = {})
      : CacheDataset::UnaryStageBase(std::move(input)), state_(std::make_shared<State>()) {
    state_->path = std::move(path);
    state_->file_mode = options.file_mode;
  }

  /// An iterator that reads the cache when it is complete (a valid file, or the memory cache),
  /// else passes the input through and fills it; a damaged file is rebuilt, never read.
  Iterator make_iterator(const IteratorContext& ctx) const {
    // Its fill is shared with the live pipeline's passes.
    detail::refuse_in_replica(ctx);
    // The input's iterator is made when the pass first reads it: a restore
    // may ask for another epoch first.
    typename Iterator::MakeInput make_input =
        [input = this->input(), ctx](std::uint64_t epoch, std::vector<std::uint64_t>& counters) {
          const detail::PassCounters below(input);
          if (counters.empty()) {
            counters = below.values();
          } else {
            below.set(counters);
          }
          IteratorContext c = ctx;
          c.epoch = epoch;
          return detail::child_iterator(input, c);
        };
    if (state_->path.empty()) {
      std::unique_lock lock(state_->mu);
      if (state_->elements) return Iterator(state_->elements, state_->fill_epoch_or(ctx.epoch));
      if (state_->filling) {
        // Another pass fills it.
        return Iterator(std::move(make_input), state_->fill_epoch_or(ctx.epoch), nullptr,
                        unknown_cardinality);
      }
      state_->filling = true;
      lock.unlock();
      return Iterator(std::move(make_input), state_->fill_epoch_or(ctx.epoch), state_,
                      cardinality());
    }
    // Temporaries that killed processes left while filling a cache here
    // would otherwise stay forever (a live filler's is kept: it is locked).
    // Local directories only: a URL's "parent" is no directory of ours
    // ("s3://b/x" would sweep a local "s3:/b").
    if (!storage::is_url(state_->path)) {
      detail::remove_orphaned_temporaries(detail::parent_directory(state_->path));
    }
    const detail::CacheFileCheck check =
        detail::check_cache_file(state_->path, serializer<T>::signature());
    if (check.count) {
      std::unique_lock lock(state_->mu);
      return Iterator(state_->path, *check.count, state_->fill_epoch_or(ctx.epoch));
    }
    if (detail::file_exists(state_->path, "cache")) {
      log_line("cache: rebuilding '" + state_->path + "' because " + check.problem);
    }
    return Iterator(std::move(make_input), state_->fill_epoch_or(ctx.epoch), state_, cardinality());
  }

  /// The input's cardinality.
  std::int64_t cardinality() const { return this->input_cardinality(); }

  /// The epoch of the fill, for the states of stages above (see State).
  void fingerprint(Fingerprint& fp) const { fp.counter(state_->filled_in); }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ingest
