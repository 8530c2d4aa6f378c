// Byte streams under every reader and writer of ingest: InputStream reads a
// file (plain, or a zlib / gzip stream inflated on the fly) through one large
// reused window; OutputStream writes one (deflating if asked) under a
// temporary name and renames it into place on close. tf.data counterpart:
// io::InputBuffer, io::ZlibInputStream, io::ZlibOutputBuffer. Gzip input may
// hold several concatenated members. Neither class is synchronised.
#pragma once

#include <zlib.h>
#if defined(INGEST_HAVE_ISAL)
#include <isa-l/igzip_lib.h>
#endif

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/errors.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

/// How a file's bytes are stored: as they are, or as one zlib or gzip stream
/// over the whole file (tf: compression_type "", "ZLIB", "GZIP").
enum class Compression : std::uint8_t { none, gzip, zlib };

/// "none", "gzip" or "zlib".
constexpr std::string_view compression_name(Compression c) noexcept {
  switch (c) {
    case Compression::none: return "none";
    case Compression::gzip: return "gzip";
    case Compression::zlib: return "zlib";
  }
  return "unknown";
}

/// Default read and write buffer of every reader and writer (tf.data's too).
inline constexpr std::size_t default_buffer_size = std::size_t{256} << 10;

namespace detail {

// zlib's window bits for each compression: 15, plus 16 for a gzip wrapper.
constexpr int zlib_window_bits(Compression c) noexcept {
  return c == Compression::gzip ? MAX_WBITS + 16 : MAX_WBITS;
}

// zlib counts in uInt; feed it at most this much per call.
constexpr std::size_t zlib_chunk(std::size_t n) noexcept {
  return std::min<std::size_t>(n, std::size_t{1} << 30);
}

/// Which library inflates GZIP and ZLIB files: Intel's ISA-L (igzip) where
/// ingest was built with it (INGEST_HAVE_ISAL: CMake finds libisal-dev), 2 to
/// 3 times zlib's speed on compressible data and about 1.4 times on random
/// bytes; zlib otherwise.
enum class InflateEngine : std::uint8_t { zlib, isal };

inline constexpr bool isal_available =
#if defined(INGEST_HAVE_ISAL)
    true;
#else
    false;
#endif

/// The engine the next InputStream uses (ISA-L where available). Tests set it
/// to run the same files through both.
inline std::atomic<InflateEngine>& inflate_engine() noexcept {
  static std::atomic<InflateEngine> engine{isal_available ? InflateEngine::isal
                                                          : InflateEngine::zlib};
  return engine;
}

/// Inflates a zlib or gzip file, member after member, from a FileReader
/// through an input buffer of its own. Errors: DataLossError naming the file,
/// the offset in the inflated data and the compressed offset.
class Inflater {
 public:
  virtual ~Inflater() = default;
  /// Inflates up to n bytes into dst; returns 0 at the clean end of the data.
  /// Throws DataLossError for corrupt or truncated compressed data.
  virtual std::size_t read(FileReader& file, char* dst, std::size_t n) = 0;
  /// Lets the engine leave out the stream's own checksum (gzip's CRC-32 and
  /// length, zlib's Adler-32), for readers that check every inflated byte
  /// themselves: zlib then does; ISA-L's checksum costs about 2% of its
  /// inflation, and it checks it anyway. A truncated stream is an error
  /// either way.
  virtual void skip_checksum() = 0;

 protected:
  Inflater(Compression compression, std::size_t buffer_size)
      : compression_(compression), capacity_(std::max<std::size_t>(buffer_size, 64)) {
    input_ = make_aligned_buffer(capacity_);
  }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  DataLossError corrupt(const FileReader& file, std::size_t unread, std::string what) const {
    return DataLossError(
        what + " (compressed offset " + std::to_string(file.position() - unread) + ")",
        {.file = file.path(), .offset = produced_});
  }
  DataLossError truncated(const FileReader& file, std::size_t unread) const {
    return corrupt(file, unread,
                   "truncated " + std::string(compression_name(compression_)) +
                       " stream: the file ends inside compressed data");
  }
  DataLossError corrupted(const FileReader& file, std::size_t unread, std::string_view why) const {
    return corrupt(file, unread,
                   "corrupted " + std::string(compression_name(compression_)) +
                       " stream: " + std::string(why));
  }
  // Reads the next input buffer: its size (0 at the end of the file).
  std::size_t refill(FileReader& file) {
    const std::size_t got = file.read(input_.get(), capacity_);
    if (got == 0) input_eof_ = true;
    return got;
  }

  Compression compression_;
  AlignedBuffer input_;
  std::size_t capacity_;
  std::uint64_t produced_ = 0;
  bool input_eof_ = false;
  bool in_member_ = false;
  bool finished_ = false;
};

/// zlib's inflate. Lives on the heap because zlib's state points back at its
/// z_stream.
class ZlibInflater final : public Inflater {
 public:
  ZlibInflater(Compression compression, std::size_t buffer_size)
      : Inflater(compression, buffer_size) {
    if (inflateInit2(&zs_, zlib_window_bits(compression)) != Z_OK) throw std::bad_alloc();
  }
  ~ZlibInflater() override { inflateEnd(&zs_); }

  void skip_checksum() override {
    if (inflateValidate(&zs_, 0) != Z_OK) throw InternalError("inflateValidate failed");
  }

  std::size_t read(FileReader& file, char* dst, std::size_t n) override {
    if (finished_ || n == 0) return 0;
    n = zlib_chunk(n);
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(n);
    while (zs_.avail_out == n) {
      if (zs_.avail_in == 0 && !input_eof_) {
        zs_.avail_in = static_cast<uInt>(refill(file));
        zs_.next_in = reinterpret_cast<Bytef*>(input_.get());
      }
      if (zs_.avail_in == 0 && input_eof_) {
        if (!in_member_) {
          finished_ = true;  // the file ends between members (or is empty)
          break;
        }
        throw truncated(file, 0);
      }
      in_member_ = true;
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        in_member_ = false;  // another member may follow
        if (inflateReset(&zs_) != Z_OK)
          throw corrupt(file, zs_.avail_in, "cannot restart inflation");
      } else if (rc == Z_BUF_ERROR) {
        if (zs_.avail_in != 0) throw corrupt(file, zs_.avail_in, "inflation made no progress");
      } else if (rc != Z_OK) {
        if (rc == Z_MEM_ERROR) throw std::bad_alloc();
        throw corrupted(file, zs_.avail_in, zs_.msg ? zs_.msg : "error " + std::to_string(rc));
      }
    }
    const std::size_t produced = n - zs_.avail_out;
    produced_ += produced;
    return produced;
  }

 private:
  z_stream zs_{};
};

#if defined(INGEST_HAVE_ISAL)
/// ISA-L's igzip inflate: the gzip or zlib wrapper parsed and its checksum
/// checked by ISA-L, member after member.
class IsalInflater final : public Inflater {
 public:
  IsalInflater(Compression compression, std::size_t buffer_size)
      : Inflater(compression, buffer_size), state_(std::make_unique<inflate_state>()) {
    isal_inflate_init(state_.get());
    start_member();
  }

  void skip_checksum() override {}  // see Inflater::skip_checksum

  std::size_t read(FileReader& file, char* dst, std::size_t n) override {
    if (finished_ || n == 0) return 0;
    inflate_state& st = *state_;
    n = zlib_chunk(n);
    st.next_out = reinterpret_cast<std::uint8_t*>(dst);
    st.avail_out = static_cast<std::uint32_t>(n);
    while (st.avail_out == n) {
      if (st.avail_in == 0 && !input_eof_) {
        st.avail_in = static_cast<std::uint32_t>(refill(file));
        st.next_in = reinterpret_cast<std::uint8_t*>(input_.get());
      }
      if (st.avail_in == 0 && input_eof_ && !in_member_) {
        finished_ = true;  // the file ends between members (or is empty)
        break;
      }
      if (!in_member_) {
        // Another member follows: ISA-L starts over, keeping the input.
        std::uint8_t* const next_in = st.next_in;
        std::uint8_t* const next_out = st.next_out;
        const std::uint32_t avail_in = st.avail_in, avail_out = st.avail_out;
        isal_inflate_reset(&st);
        start_member();
        st.next_in = next_in;
        st.avail_in = avail_in;
        st.next_out = next_out;
        st.avail_out = avail_out;
      }
      in_member_ = true;
      const std::uint32_t in_before = st.avail_in, out_before = st.avail_out;
      const int rc = isal_inflate(&st);
      if (rc < 0) throw corrupted(file, st.avail_in, error_text(rc));
      if (rc == ISAL_NEED_DICT) throw corrupted(file, st.avail_in, "needs a preset dictionary");
      if (st.block_state == ISAL_BLOCK_FINISH) {
        in_member_ = false;  // another member may follow
      } else if (st.avail_in == in_before && st.avail_out == out_before) {
        // ISA-L holds input bits and output of its own, so the end of the
        // file is truncation only once a call with no input does nothing.
        if (st.avail_in != 0) throw corrupt(file, st.avail_in, "inflation made no progress");
        if (input_eof_) throw truncated(file, 0);
      }
    }
    const std::size_t produced = n - st.avail_out;
    produced_ += produced;
    return produced;
  }

 private:
  void start_member() noexcept {
    state_->crc_flag = compression_ == Compression::gzip ? ISAL_GZIP : ISAL_ZLIB;
  }
  // zlib's words for the same faults, so messages do not depend on the engine.
  static std::string error_text(int rc) {
    switch (rc) {
      case ISAL_INVALID_BLOCK: return "invalid block type";
      case ISAL_INVALID_SYMBOL: return "invalid code";
      case ISAL_INVALID_LOOKBACK: return "invalid distance too far back";
      case ISAL_INVALID_WRAPPER: return "incorrect header check";
      case ISAL_UNSUPPORTED_METHOD: return "unknown compression method";
      case ISAL_INCORRECT_CHECKSUM: return "incorrect data check";
      default: return "error " + std::to_string(rc);
    }
  }

  std::unique_ptr<inflate_state> state_;  // about 20 KiB
};
#endif

/// The engine inflate_engine() names, for `compression` (gzip or zlib).
inline std::unique_ptr<Inflater> make_inflater(Compression compression, std::size_t buffer_size) {
#if defined(INGEST_HAVE_ISAL)
  if (inflate_engine().load(std::memory_order_relaxed) == InflateEngine::isal) {
    return std::make_unique<IsalInflater>(compression, buffer_size);
  }
#endif
  return std::make_unique<ZlibInflater>(compression, buffer_size);
}

/// Deflates into an AtomicFileWriter. Lives on the heap (see ZlibInflater).
class Deflater {
 public:
  Deflater(Compression compression, int level, std::size_t buffer_size)
      : capacity_(std::max<std::size_t>(buffer_size, 64)) {
    output_ = make_aligned_buffer(capacity_);
    if (deflateInit2(&zs_, level, Z_DEFLATED, zlib_window_bits(compression), 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      throw InvalidArgument("invalid compression level " + std::to_string(level) +
                            " (use -1 for the default, or 0..9)");
    }
  }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
  ~Deflater() { deflateEnd(&zs_); }

  /// Compresses n bytes (flush = Z_NO_FLUSH) or finishes the stream (Z_FINISH).
  void deflate_into(AtomicFileWriter& file, const char* data, std::size_t n, int flush) {
    do {
      const std::size_t chunk = zlib_chunk(n);
      zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
      zs_.avail_in = static_cast<uInt>(chunk);
      data += chunk;
      n -= chunk;
      const int step_flush = n == 0 ? flush : Z_NO_FLUSH;
      for (;;) {
        zs_.next_out = reinterpret_cast<Bytef*>(output_.get());
        zs_.avail_out = static_cast<uInt>(capacity_);
        const int rc = deflate(&zs_, step_flush);
        if (rc == Z_STREAM_ERROR) throw InternalError("deflate failed", {.file = file.path()});
        file.write(output_.get(), capacity_ - zs_.avail_out);
        if (step_flush == Z_FINISH ? rc == Z_STREAM_END : zs_.avail_out != 0) break;
      }
    } while (n != 0);
  }

 private:
  z_stream zs_{};
  AlignedBuffer output_;
  std::size_t capacity_;
};

/// Decompressed bytes of a file through one reused window. Readers look at
/// data()/available(), ask fill(n) for more and consume() what they used;
/// read() copies into the caller's buffer (straight from the file when the
/// request is large). With `memory_map`, a plain regular file is mapped and
/// the window is the whole file (no copy into a buffer; a file truncated in
/// place by another process while mapped raises SIGBUS); `background`, if
/// given, populates the mapping ahead of the reader (see FileMapping).
/// Errors: IoError (open, read), DataLossError (corrupt compressed data), both
/// naming the file.
class InputStream {
 public:
  InputStream(std::string path, Compression compression,
              std::size_t buffer_size = default_buffer_size, std::string_view stage = {},
              bool memory_map = false, BackgroundExecutor background = {})
      : file_(std::move(path), stage),
        capacity_(std::max<std::size_t>(buffer_size, 64)),
        compression_(compression) {
    if (compression != Compression::none) {
      inflater_ = make_inflater(compression, capacity_);
    } else if (memory_map) {
      mapping_ = FileMapping(file_, std::move(background));
    }
    if (!mapping_.empty()) {
      base_ = mapping_.data();
      end_ = capacity_ = mapping_.size();
      source_done_ = true;
    } else {
      buffer_ = make_aligned_buffer(capacity_);
      base_ = buffer_.get();
    }
  }

  const std::string& path() const noexcept { return file_.path(); }
  Compression compression() const noexcept { return compression_; }

  /// For readers that verify every byte of the data themselves (TFRecord's
  /// CRC-32C of each length and payload): zlib then does not compute a
  /// compressed stream's own checksum (on GZIP TFRecords it cost about 7% of
  /// its inflation); ISA-L checks it anyway (see Inflater::skip_checksum).
  /// Does nothing to an uncompressed stream.
  void skip_compression_checksum() {
    if (inflater_) inflater_->skip_checksum();
  }

  /// The unconsumed bytes in the window; valid until the next fill() or read().
  const char* data() const noexcept { return base_ + begin_; }
  std::size_t available() const noexcept { return end_ - begin_; }
  /// Marks n of the available bytes used.
  void consume(std::size_t n) noexcept {
    begin_ += n;
    offset_ += n;
    if (!mapping_.empty()) mapping_.advance(begin_);
  }
  /// True if the file is memory-mapped: the window holds all of it.
  bool mapped() const noexcept { return !mapping_.empty(); }
  /// Offset of data() in the (decompressed) stream.
  std::uint64_t offset() const noexcept { return offset_; }

  /// Makes at least `want` bytes available unless the stream ends first;
  /// returns available() >= want. Moves the window (data() changes) and grows
  /// it past the buffer size only when `want` exceeds it.
  bool fill(std::size_t want) {
    if (available() >= want) return true;
    if (source_done_) return false;
    if (want > capacity_) {
      grow(std::max(want, capacity_ * 2));
    } else if (begin_ + want > capacity_) {
      compact();
    }
    while (available() < want && !source_done_) {
      if (end_ == capacity_) compact();
      const std::size_t got = source_read(buffer_.get() + end_, capacity_ - end_);
      if (got == 0) source_done_ = true;
      end_ += got;
    }
    return available() >= want;
  }

  /// Reads up to n bytes into dst, consuming them; fewer only at the end.
  std::size_t read(char* dst, std::size_t n) {
    std::size_t done = std::min(n, available());
    std::memcpy(dst, data(), done);
    consume(done);
    while (done < n) {
      const std::size_t rest = n - done;
      if (rest >= capacity_ / 2) {  // large: skip the window
        const std::size_t got = source_done_ ? 0 : source_read(dst + done, rest);
        if (got == 0) {
          source_done_ = true;
          break;
        }
        done += got;
        offset_ += got;
      } else {
        fill(rest);
        const std::size_t take = std::min(rest, available());
        if (take == 0) break;
        std::memcpy(dst + done, data(), take);
        consume(take);
        done += take;
      }
    }
    return done;
  }

  /// Moves a stream that has consumed nothing yet to `offset` of its
  /// (decompressed) data, a checkpoint's position: a mapped or plain local
  /// file jumps there; a compressed or remote stream reads up to it (GZIP and
  /// ZLIB replay the file from its start). Throws DataLossError naming the
  /// file if the data ends before `offset` (the file changed since the save).
  void seek(std::uint64_t offset) {
    auto shorter = [&] {
      throw DataLossError("checkpoint: the file is shorter than the saved offset " +
                              std::to_string(offset) + " (did it change?)",
                          {.file = path(), .offset = offset});
    };
    if (offset < offset_) {
      throw InternalError("InputStream::seek backwards", {.file = path(), .offset = offset});
    }
    if (mapped()) {
      if (offset - offset_ > available()) shorter();
      mapping_.start_at(begin_ + static_cast<std::size_t>(offset - offset_));
      consume(static_cast<std::size_t>(offset - offset_));
      return;
    }
    if (compression_ == Compression::none && available() == 0 && file_.has_size()) {
      if (offset > file_.size()) shorter();
      if (file_.seek(offset)) {
        offset_ = offset;
        return;
      }
    }
    while (offset_ < offset) {
      if (!fill(1)) shorter();
      consume(static_cast<std::size_t>(std::min<std::uint64_t>(available(), offset - offset_)));
    }
  }

  /// Bytes left in the stream, when known (plain regular files).
  std::optional<std::uint64_t> remaining() const noexcept {
    if (mapped()) return available();
    if (compression_ != Compression::none || !file_.has_size()) return std::nullopt;
    const std::uint64_t read_so_far = file_.position();
    const std::uint64_t left_in_file = file_.size() > read_so_far ? file_.size() - read_so_far : 0;
    return left_in_file + available();
  }

 private:
  std::size_t source_read(char* dst, std::size_t n) {
    if (!inflater_) return file_.read(dst, n);
    return inflater_->read(file_, dst, n);
  }
  void compact() noexcept {
    if (begin_ == 0) return;
    std::memmove(buffer_.get(), base_ + begin_, available());
    end_ -= begin_;
    begin_ = 0;
  }
  void grow(std::size_t capacity) {
    AlignedBuffer bigger = make_aligned_buffer(capacity);
    std::memcpy(bigger.get(), data(), available());
    end_ -= begin_;
    begin_ = 0;
    buffer_ = std::move(bigger);
    base_ = buffer_.get();
    capacity_ = capacity;
  }

  FileReader file_;
  std::unique_ptr<Inflater> inflater_;
  FileMapping mapping_;
  AlignedBuffer buffer_;
  const char* base_ = nullptr;  // buffer_ or the mapping
  std::size_t capacity_;
  std::size_t begin_ = 0, end_ = 0;
  std::uint64_t offset_ = 0;
  Compression compression_;
  bool source_done_ = false;
};

/// Writes a file through a buffer, deflating when asked, under a temporary
/// name; close() finishes the stream and renames the file into place.
/// Destroyed without close(), it leaves nothing under the final name.
class OutputStream {
 public:
  OutputStream(std::string path, Compression compression, int level = Z_DEFAULT_COMPRESSION,
               std::size_t buffer_size = default_buffer_size, std::string_view stage = {},
               unsigned mode = AtomicFileWriter::shared_mode)
      : file_(std::move(path), stage, mode), capacity_(std::max<std::size_t>(buffer_size, 64)) {
    buffer_ = make_aligned_buffer(capacity_);
    if (compression != Compression::none) {
      deflater_ = std::make_unique<Deflater>(compression, level, capacity_);
    }
  }

  /// Appends n bytes. Throws IoError.
  void write(const void* data, std::size_t n) {
    require_open();
    const auto* p = static_cast<const char*>(data);
    if (size_ + n <= capacity_) {
      std::memcpy(buffer_.get() + size_, p, n);
      size_ += n;
      return;
    }
    drain();
    if (n >= capacity_ / 2) {
      sink(p, n, Z_NO_FLUSH);
    } else {
      std::memcpy(buffer_.get(), p, n);
      size_ = n;
    }
  }

  /// Writes the buffered bytes to the file and, when compressing, ends the
  /// compressed block (Z_SYNC_FLUSH), so that a reader of the temporary file
  /// decompresses everything written so far. Throws IoError.
  void flush() {
    require_open();
    sink(buffer_.get(), size_, Z_SYNC_FLUSH);
    size_ = 0;
  }

  /// Finishes the stream and renames the file to its final name. A second
  /// call is a no-op. If it throws, the temporary file is removed (nothing
  /// appears under the final name) and the stream is closed all the same.
  void close() {
    if (closed_) return;
    closed_ = true;
    try {
      drain();
      if (deflater_) deflater_->deflate_into(file_, nullptr, 0, Z_FINISH);
      file_.commit();
    } catch (...) {
      file_.abandon();
      throw;
    }
  }

  bool is_open() const noexcept { return !closed_ && file_.is_open(); }
  const std::string& path() const noexcept { return file_.path(); }
  const std::string& temp_path() const noexcept { return file_.temp_path(); }

 private:
  void require_open() const {
    if (!is_open()) {
      throw InvalidArgument("the file was already closed", {.file = file_.path()});
    }
  }
  void drain() {
    if (size_ == 0) return;
    sink(buffer_.get(), size_, Z_NO_FLUSH);
    size_ = 0;
  }
  void sink(const char* p, std::size_t n, int flush) {
    if (deflater_) {
      deflater_->deflate_into(file_, p, n, flush);
    } else {
      file_.write(p, n);
    }
  }

  AtomicFileWriter file_;
  std::unique_ptr<Deflater> deflater_;
  AlignedBuffer buffer_;
  std::size_t capacity_;
  std::size_t size_ = 0;
  bool closed_ = false;
};

}  // namespace detail
}  // namespace ingest
