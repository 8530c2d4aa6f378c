// Files for the readers and writers of formats/ and sources/: a POSIX file
// opened for large sequential reads (or memory-mapped), and an output file
// written under a temporary name and renamed into place on commit, so that a
// crash or an exception never leaves a half-written file under the final
// name. A path with a scheme ("s3://…", "https://…") is opened through the
// scheme's handler instead (storage/byte_source.hpp), with the same
// guarantees. Errors are IoErrors naming the file. No class here is
// synchronised.
// Temporaries of writers killed before they finished (SIGKILL, power loss)
// are removed by the next writer that opens their directory (see
// remove_orphaned_temporaries).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/errors.hpp"
#include "ingest/storage/byte_source.hpp"

namespace ingest::detail {

/// An IoError for `what` on `path`, with errno's text.
inline IoError io_error(std::string_view stage, const std::string& path, std::string_view what,
                        int err) {
  return IoError(std::string(what) + ": " + std::strerror(err),
                 {.stage = std::string(stage), .file = path});
}

/// Alignment of every read and write buffer: a page. read() into a
/// destination that is not 32-byte aligned runs about 5x slower on some CPUs
/// (the kernel's `rep movsb` on AMD Zen 3 here: 2.5 vs 12.2 GB/s from the
/// page cache), and glibc's new[] returns page + 16 bytes for large buffers.
inline constexpr std::size_t io_buffer_alignment = 4096;

struct AlignedBufferDelete {
  void operator()(char* p) const noexcept {
    ::operator delete[](p, std::align_val_t{io_buffer_alignment});
  }
};
/// A page-aligned byte buffer (see io_buffer_alignment).
using AlignedBuffer = std::unique_ptr<char[], AlignedBufferDelete>;

/// An uninitialised page-aligned buffer of n bytes.
inline AlignedBuffer make_aligned_buffer(std::size_t n) {
  return AlignedBuffer(
      static_cast<char*>(::operator new[](n, std::align_val_t{io_buffer_alignment})));
}

/// A file opened read-only for sequential reading; closes on destruction.
/// A URL is read through its scheme's RemoteReader (no file descriptor).
class FileReader {
 public:
  /// Opens `path` for `access` (a URL opened for Access::positional reads
  /// nothing ahead; given `size`, the size the caller knows, it may open
  /// without a request, and a read finds a missing or changed object).
  /// Throws IoError naming `stage` and the file.
  FileReader(std::string path, std::string_view stage,
             storage::Access access = storage::Access::sequential,
             std::optional<std::uint64_t> size = {})
      : path_(std::move(path)) {
    if (storage::is_url(path_)) {
      auto& scheme = *storage::scheme_for(path_, stage);
      remote_ = access == storage::Access::positional ? scheme.open_positional(path_, stage, size)
                                                      : scheme.open_read(path_, stage);
      account_ = storage::current_transfer_node();
      size_ = remote_->size();
      regular_ = true;
      return;
    }
    do {
      fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw io_error(stage, path_, "cannot open file", errno);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(fd_);
      throw io_error(stage, path_, "cannot stat file", err);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd_);
      throw io_error(stage, path_, "cannot read file", EISDIR);
    }
    size_ = S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0;
    regular_ = S_ISREG(st.st_mode);
#ifdef POSIX_FADV_SEQUENTIAL
    if (access == storage::Access::sequential) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  }
  FileReader(FileReader&& o) noexcept
      : path_(std::move(o.path_)),
        fd_(std::exchange(o.fd_, -1)),
        remote_(std::move(o.remote_)),
        account_(std::move(o.account_)),
        reported_(o.reported_),
        size_(o.size_),
        position_(o.position_),
        regular_(o.regular_) {}
  FileReader& operator=(FileReader&& o) noexcept {
    if (this != &o) {
      close();
      path_ = std::move(o.path_);
      fd_ = std::exchange(o.fd_, -1);
      remote_ = std::move(o.remote_);
      account_ = std::move(o.account_);
      reported_ = o.reported_;
      size_ = o.size_;
      position_ = o.position_;
      regular_ = o.regular_;
    }
    return *this;
  }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  ~FileReader() { close(); }

  /// Reads up to n bytes; returns fewer only at the end of the file (0 there).
  /// Throws IoError on a read failure.
  std::size_t read(void* dst, std::size_t n) {
    if (remote_) {
      const std::size_t got = remote_->read(dst, n);
      position_ += got;
      report();
      return got;
    }
    auto* out = static_cast<char*>(dst);
    std::size_t total = 0;
    while (total < n) {
      const ::ssize_t got = ::read(fd_, out + total, n - total);
      if (got < 0) {
        if (errno == EINTR) continue;
        throw IoError(std::string("read failed: ") + std::strerror(errno),
                      {.file = path_, .offset = position_ + total});
      }
      if (got == 0) break;
      total += static_cast<std::size_t>(got);
    }
    position_ += total;
    return total;
  }

  /// Moves the read position of a local file to `offset` (a checkpoint's
  /// position); false for a URL (the caller reads up to it instead).
  bool seek(std::uint64_t offset) {
    if (remote_) return false;
    if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) {
      throw IoError(std::string("seek failed: ") + std::strerror(errno),
                    {.file = path_, .offset = offset});
    }
    position_ = offset;
    return true;
  }

  /// Reads up to n bytes at `offset` without moving the read position;
  /// returns fewer only at the end of the file. Throws IoError.
  std::size_t read_at(std::uint64_t offset, void* dst, std::size_t n) const {
    if (remote_) {
      const std::size_t got = remote_->read_at(offset, dst, n);
      report();
      return got;
    }
    auto* out = static_cast<char*>(dst);
    std::size_t total = 0;
    while (total < n) {
      const ::ssize_t got =
          ::pread(fd_, out + total, n - total, static_cast<off_t>(offset + total));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw IoError(std::string("read failed: ") + std::strerror(errno),
                      {.file = path_, .offset = offset + total});
      }
      if (got == 0) break;
      total += static_cast<std::size_t>(got);
    }
    return total;
  }

  /// A positional read started by start_read_at.
  class PendingRead {
   public:
    /// The bytes (fewer than asked only at the end of the file); throws the
    /// read's IoError or DataLossError. Call once.
    std::string get() {
      if (!remote_) return std::move(bytes_);
      std::string bytes = remote_->get();
      reader_->report();
      return bytes;
    }

   private:
    friend class FileReader;
    const FileReader* reader_ = nullptr;
    std::unique_ptr<storage::RemoteRead> remote_{};
    std::string bytes_{};
  };

  /// Starts reading up to n bytes at `offset` (into `buffer`'s storage for a
  /// local file, reusing its capacity). A URL's range request is sent now
  /// and several may be in flight; a local file is read now (pread). The
  /// reader must outlive get(). Throws IoError for a local read failure.
  PendingRead start_read_at(std::uint64_t offset, std::size_t n, std::string buffer = {}) const {
    PendingRead read;
    read.reader_ = this;
    if (remote_) {
      read.remote_ = remote_->start_read_at(offset, n);
      return read;
    }
    buffer.resize(n);
    buffer.resize(read_at(offset, buffer.data(), n));
    read.bytes_ = std::move(buffer);
    return read;
  }

  const std::string& path() const noexcept { return path_; }
  /// The file descriptor; -1 for a remote object.
  int fd() const noexcept { return fd_; }
  /// True for a local file (one that can be memory-mapped).
  bool is_local() const noexcept { return !remote_; }
  /// What a remote object's reads have transferred (zeros for a local file).
  storage::TransferCounters transfer_counters() const {
    return remote_ ? remote_->counters() : storage::TransferCounters{};
  }
  /// Bytes read so far.
  std::uint64_t position() const noexcept { return position_; }
  /// The file's size when opened, if it is a regular file.
  bool has_size() const noexcept { return regular_; }
  std::uint64_t size() const noexcept { return size_; }

 private:
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (remote_) {
      try {
        report();
      } catch (...) {  // counters() of a broken reader: nothing more to report
      }
      remote_.reset();
    }
  }
  // Adds what the remote reader transferred since the last report to the
  // stage that opened it.
  void report() const {
    if (!account_) return;
    const storage::TransferCounters now = remote_->counters();
    const auto add = [](std::atomic<std::int64_t>& total, std::uint64_t to, std::uint64_t from) {
      if (to > from)
        total.fetch_add(static_cast<std::int64_t>(to - from), std::memory_order_relaxed);
    };
    add(account_->net_bytes, now.bytes, reported_.bytes);
    add(account_->net_requests, now.requests, reported_.requests);
    add(account_->net_retries, now.retries, reported_.retries);
    add(account_->net_wait_ns, now.wait_ns, reported_.wait_ns);
    reported_ = now;
  }

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<storage::RemoteReader> remote_;
  std::shared_ptr<StageNode> account_;  // the stage its remote reads count for
  mutable storage::TransferCounters reported_{};
  std::uint64_t size_ = 0;
  std::uint64_t position_ = 0;
  bool regular_ = false;
};

/// Runs a short job on another thread (in a pipeline: its runtime's pool).
/// Readers use one to prepare data ahead of their consumer; empty means no
/// help. Jobs must not block and must catch their own exceptions.
using BackgroundExecutor = std::function<void(std::function<void()>)>;

/// A read-only shared mapping of a whole regular file, unmapped when the
/// mapping and its background job are gone.
///
/// Reading a mapped file costs a page fault per 16 pages, which on a virtual
/// machine costs as much as checksumming the bytes. Given a
/// BackgroundExecutor, the mapping has the pages ahead of the reader entered
/// into the page tables by one job at a time on another thread
/// (MADV_POPULATE_READ, Linux 5.14+; without it the reader takes the faults
/// itself), populate_ahead bytes ahead, and unmaps there too. The reader
/// faults its first chunk in itself (from where it starts: start_at), and
/// the first job comes once it has read half of it: a job holds the
/// process's mapping lock, which every mmap waits for, so files opened
/// together (an interleave's cycle, a restore) open without waiting on each
/// other's jobs, and a reader that stops early populates nothing. Behind the
/// reader it lets the kernel drop the pages from this process (they stay in
/// the page cache), so a long file does not pile up in resident memory.
class FileMapping {
 public:
  FileMapping() = default;
  /// Maps the file; empty() afterwards if it cannot be mapped (the caller
  /// then reads it instead).
  /// `sequential`: the reader goes through the file in order (the kernel
  /// reads ahead); false: it reads records here and there (a global
  /// shuffle), and the kernel's default applies.
  explicit FileMapping(const FileReader& file, BackgroundExecutor background = {},
                       bool sequential = true) {
    if (!file.is_local() || !file.has_size() || file.size() == 0 || file.size() > SIZE_MAX) return;
    const auto size = static_cast<std::size_t>(file.size());
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, file.fd(), 0);
    if (p == MAP_FAILED) return;
    region_ = std::make_shared<Region>(static_cast<const char*>(p), size);
    if (sequential) ::madvise(p, size, MADV_SEQUENTIAL);
    if (background && size > populate_chunk + populate_chunk) background_ = std::move(background);
    start_at(0);
  }

  FileMapping(FileMapping&&) noexcept = default;
  FileMapping& operator=(FileMapping&& o) noexcept {
    if (this != &o) {
      unmap();
      region_ = std::move(o.region_);
      background_ = std::move(o.background_);
      released_ = o.released_;
      requested_ = o.requested_;
      next_step_ = o.next_step_;
    }
    return *this;
  }
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping() { unmap(); }

  bool empty() const noexcept { return region_ == nullptr; }
  const char* data() const noexcept { return region_ ? region_->data : nullptr; }
  /// Enters the whole file into the page tables now, in one call
  /// (MADV_POPULATE_READ, Linux 5.14+; elsewhere nothing): for a reader that
  /// jumps around the file (a global shuffle), which would otherwise take a
  /// page fault for most records, and whose software prefetches a page not
  /// yet mapped would drop.
  void populate() noexcept {
#ifdef MADV_POPULATE_READ
    if (region_) ::madvise(const_cast<char*>(region_->data), region_->size, MADV_POPULATE_READ);
#endif
  }
  std::size_t size() const noexcept { return region_ ? region_->size : 0; }
  /// How far the background job has populated the mapping (bytes from the start).
  std::size_t populated() const noexcept {
    return region_ ? region_->populated.load(std::memory_order_relaxed) : 0;
  }

  /// The reader starts at `offset` (before reading anything: a restore's
  /// seek): it faults the chunk from there in itself, and population starts
  /// when it has read half of it.
  void start_at(std::size_t offset) noexcept {
    if (!region_) return;
    Region& r = *region_;
    offset = std::min(offset, r.size);
    r.reader_at.store(offset, std::memory_order_relaxed);
    released_ = offset / page_size() * page_size();
    next_step_ = released_ + release_step;
    if (!background_) return;
    requested_ = std::min(r.size, released_ + populate_chunk);  // page-aligned, as the job's calls
    if (r.populated.load(std::memory_order_relaxed) < requested_)
      r.populated.store(requested_, std::memory_order_relaxed);
    next_step_ = std::min(next_step_, offset + populate_chunk / 2);
  }

  /// Tells the mapping that the reader is at `offset`: pages far behind are
  /// released, pages ahead are populated. Cheap unless it crosses a step.
  void advance(std::size_t offset) noexcept {
    if (offset < next_step_) return;
    step(offset);
  }

  /// Bytes populated per system call, how far ahead, and between releases.
  static constexpr std::size_t populate_chunk = std::size_t{2} << 20;
  static constexpr std::size_t populate_ahead = std::size_t{8} << 20;
  static constexpr std::size_t release_step = std::size_t{64} << 20;

 private:
  struct Region {
    Region(const char* d, std::size_t n) : data(d), size(n) {}
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;
    ~Region() { ::munmap(const_cast<char*>(data), size); }
    const char* data;
    std::size_t size;
    std::atomic<std::size_t> reader_at{0};  // where the reader was at its last step
    std::atomic<std::size_t> wanted{0};     // populate up to here
    std::atomic<std::size_t> populated{0};  // the job got this far
    std::atomic<bool> job_queued{false};    // a job is queued or running
    std::atomic<bool> abandoned{false};     // the reader is gone
  };

  static std::size_t page_size() noexcept {
    static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return page;
  }

  void step(std::size_t offset) noexcept {
    Region& r = *region_;
    r.reader_at.store(offset, std::memory_order_relaxed);
    if (offset >= released_ + release_step) {
      const std::size_t end = offset / page_size() * page_size();
      ::madvise(const_cast<char*>(r.data) + released_, end - released_, MADV_DONTNEED);
      released_ = end;
    }
    next_step_ = released_ + release_step;
    if (!background_) return;
    const std::size_t target =
        std::min(r.size, (offset + populate_ahead) / populate_chunk * populate_chunk);
    if (target > requested_) {
      requested_ = target;
      r.wanted.store(target, std::memory_order_seq_cst);
      if (!r.job_queued.exchange(true, std::memory_order_seq_cst)) {
        try {
          background_([region = std::weak_ptr<Region>(region_)] { populate(region); });
        } catch (...) {  // no memory for the job: read without help
          r.job_queued.store(false, std::memory_order_relaxed);
          background_ = nullptr;
          return;
        }
      }
    }
    if (requested_ < r.size)
      next_step_ = std::min(next_step_, requested_ + populate_chunk - populate_ahead);
  }

  // The background job: populates chunk by chunk up to `wanted`, skipping
  // what the reader has passed, until it catches up or the reader is gone.
  static void populate(const std::weak_ptr<Region>& weak) noexcept {
    const std::shared_ptr<Region> r = weak.lock();
    if (!r) return;
    for (;;) {
      const std::size_t reader = r->reader_at.load(std::memory_order_relaxed);
      const std::size_t from = std::max(r->populated.load(std::memory_order_relaxed),
                                        reader / page_size() * page_size());
      if (r->abandoned.load(std::memory_order_relaxed) ||
          from >= r->wanted.load(std::memory_order_seq_cst)) {
        // Done; but the reader may have asked for more after that check and
        // seen this job still queued: then continue (Dekker, seq_cst pairs).
        r->job_queued.store(false, std::memory_order_seq_cst);
        if (r->abandoned.load(std::memory_order_relaxed) ||
            from >= r->wanted.load(std::memory_order_seq_cst) ||
            r->job_queued.exchange(true, std::memory_order_seq_cst)) {
          return;
        }
        continue;
      }
      const std::size_t n =
          std::min(populate_chunk, r->wanted.load(std::memory_order_relaxed) - from);
#ifdef MADV_POPULATE_READ
      const bool ok = ::madvise(const_cast<char*>(r->data) + from, n, MADV_POPULATE_READ) == 0;
#else
      const bool ok = false;
#endif
      // A kernel without it (EINVAL) or a file that shrank (EFAULT): stop helping.
      r->populated.store(ok ? from + n : r->size, std::memory_order_relaxed);
    }
  }

  void unmap() noexcept {
    if (region_ && background_) {
      region_->abandoned.store(true, std::memory_order_relaxed);
      try {
        background_([region = std::move(region_)]() mutable { region.reset(); });
      } catch (...) {  // the job could not be queued (its captures are gone with it)
      }
    }
    region_.reset();
  }

  std::shared_ptr<Region> region_;
  BackgroundExecutor background_;
  std::size_t released_ = 0;   // pages before this were released
  std::size_t requested_ = 0;  // population was requested up to here
  std::size_t next_step_ = 0;  // advance() acts from here on
};

/// True if `path` names an existing file or (for a URL) object.
inline bool file_exists(const std::string& path, std::string_view stage) {
  if (storage::is_url(path)) return storage::scheme_for(path, stage)->exists(path, stage);
  return ::access(path.c_str(), F_OK) == 0;
}

/// The directory part of `path` ("." when it has none).
inline std::string parent_directory(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

/// Whether `name` is an ingest temporary file's name:
/// ".<base>.tmp-<pid>-<counter>-<stamp>" (see AtomicFileWriter). Sets `pid`.
inline bool parse_temporary_name(std::string_view name, long long& pid) noexcept {
  constexpr std::string_view tag = ".tmp-";
  if (name.size() < 2 || name.front() != '.') return false;
  const auto at = name.rfind(tag);
  if (at == std::string_view::npos || at < 2) return false;
  std::string_view rest = name.substr(at + tag.size());
  long long fields[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    std::size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits == 0 || digits > 18) return false;
    for (std::size_t k = 0; k < digits; ++k) fields[i] = fields[i] * 10 + (rest[k] - '0');
    rest.remove_prefix(digits);
    if (i < 2) {
      if (rest.empty() || rest.front() != '-') return false;
      rest.remove_prefix(1);
    }
  }
  if (!rest.empty()) return false;
  pid = fields[0];
  return true;
}

/// Removes the temporary files that ingest writers (AtomicFileWriter: the
/// TFRecordWriter, cache(path)) left in `dir` when their process died before
/// committing or abandoning them (SIGKILL, a crash, power loss). A writer
/// holds an exclusive flock() on its temporary file for the file's whole
/// life, so a temporary whose lock can be taken has no live writer: it is
/// unlinked. Files of a live writer (in this process or another), files
/// that are not ingest temporaries, and files on file systems without
/// flock() are left alone, as are temporaries named with this process's id
/// (flock emulated by POSIX locks, as on some NFS mounts, does not exclude
/// this process's own descriptors). Never throws; returns how many files it
/// removed.
inline std::size_t remove_orphaned_temporaries(const std::string& dir) noexcept {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  std::size_t removed = 0;
  const long long self = ::getpid();
  while (const struct dirent* e = ::readdir(d)) {
    long long pid = 0;
    if (!parse_temporary_name(e->d_name, pid) || pid == self) continue;
    const int fd =
        ::openat(::dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) continue;
    struct stat held {
    }, named{};
    // Locked: its writer is dead. Still the same file under that name (not
    // renamed into place by a writer that just committed): remove it.
    if (::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::fstatat(::dirfd(d), e->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        named.st_dev == held.st_dev && named.st_ino == held.st_ino &&
        ::unlinkat(::dirfd(d), e->d_name, 0) == 0) {
      ++removed;
    }
    ::close(fd);
  }
  ::closedir(d);
  return removed;
}

/// A file written under a hidden temporary name beside `path` (".name.tmp-…")
/// and renamed to `path` by commit(). Destroyed without commit(), it removes
/// the temporary file and leaves nothing under `path`. The writer holds an
/// exclusive flock() on the temporary file until it is committed or
/// abandoned, and on construction removes the temporaries that dead writers
/// left in the directory (remove_orphaned_temporaries); so a process killed
/// while writing leaves its temporary only until the next writer opens the
/// directory. A URL is written through its scheme's RemoteWriter, which
/// makes the object appear only on commit() (temp_path() is then empty).
class AtomicFileWriter {
 public:
  /// Files that only their owner should read (checkpoints, caches): the
  /// default of write_state and cache(path).
  static constexpr unsigned private_mode = 0600;
  /// Data files (TFRecordWriter's shards), readable by all under the umask.
  static constexpr unsigned shared_mode = 0644;

  /// Creates the temporary file with permissions `mode` (masked by the
  /// umask, as open(2) does); the committed file keeps them.
  AtomicFileWriter(std::string path, std::string_view stage, unsigned mode = shared_mode)
      : path_(std::move(path)), stage_(stage) {
    if (storage::is_url(path_)) {
      remote_ = storage::scheme_for(path_, stage)->open_write(path_, stage);
      return;
    }
    remove_orphaned_temporaries(parent_directory(path_));
    for (;;) {
      temp_path_ = temporary_name(path_);
      do {
        fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                     static_cast<mode_t>(mode & 07777));
      } while (fd_ < 0 && errno == EINTR);
      if (fd_ < 0) throw io_error(stage_, path_, "cannot create file", errno);
      // Another process's sweep may have locked the new file before we did
      // and removed it: then start again under a new name. A file system
      // without flock() leaves the file unlocked, which sweeps skip too.
      int rc;
      do {
        rc = ::flock(fd_, LOCK_EX);
      } while (rc != 0 && errno == EINTR);
      struct stat st {};
      if (rc == 0 && ::fstat(fd_, &st) == 0 && st.st_nlink == 0) {
        ::close(fd_);
        fd_ = -1;
        continue;
      }
      break;
    }
  }
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter() { abandon(); }

  /// Writes all n bytes. Throws IoError.
  void write(const void* data, std::size_t n) {
    require_open("write");
    if (remote_) {
      remote_->write(data, n);
      written_ += n;
      return;
    }
    const auto* p = static_cast<const char*>(data);
    while (n) {
      const ::ssize_t put = ::write(fd_, p, n);
      if (put < 0) {
        if (errno == EINTR) continue;
        throw io_error(stage_, path_, "write failed", errno);
      }
      p += put;
      n -= static_cast<std::size_t>(put);
      written_ += static_cast<std::uint64_t>(put);
    }
  }

  /// Flushes to disk, closes, and renames the file to its final name.
  void commit() {
    require_open("commit");
    if (remote_) {
      auto remote = std::move(remote_);
      try {
        remote->commit();
      } catch (...) {
        remote->abandon();
        throw;
      }
      committed_ = true;
      return;
    }
    if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS) {
      throw io_error(stage_, path_, "fsync failed", errno);
    }
    // Renamed while still open: closing first would drop the lock, and a
    // sweep could take the file for a dead writer's before the rename.
    if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      abandon();
      throw io_error(stage_, path_, "cannot rename the temporary file into place", err);
    }
    const int fd = std::exchange(fd_, -1);
    committed_ = true;
    if (::close(fd) != 0) {
      const int err = errno;
      throw io_error(stage_, path_, "close failed", err);
    }
  }

  /// Closes and removes the temporary file (no-op after commit()).
  void abandon() noexcept {
    if (remote_) {
      remote_->abandon();
      remote_.reset();
    }
    if (fd_ >= 0) {
      ::unlink(temp_path_.c_str());  // before close: the lock covers it until gone
      ::close(fd_);
      fd_ = -1;
    }
  }

  bool is_open() const noexcept { return fd_ >= 0 || remote_ != nullptr; }
  bool committed() const noexcept { return committed_; }
  const std::string& path() const noexcept { return path_; }
  const std::string& temp_path() const noexcept { return temp_path_; }
  std::uint64_t bytes_written() const noexcept { return written_; }

 private:
  static std::string temporary_name(const std::string& path) {
    static std::atomic<std::uint64_t> counter{0};
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    const auto now =
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return dir + "." + base + ".tmp-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter.fetch_add(1, std::memory_order_relaxed)) + "-" +
           std::to_string(now % 1000000007u);
  }
  void require_open(const char* what) const {
    if (!is_open()) {
      throw InvalidArgument(std::string(what) + " on a file that is already closed",
                            {.stage = stage_, .file = path_});
    }
  }

  std::string path_;
  std::string stage_;
  std::string temp_path_;
  int fd_ = -1;
  std::unique_ptr<storage::RemoteWriter> remote_;
  std::uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace ingest::detail
