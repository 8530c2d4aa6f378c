// Files for the readers and writers of formats/ and sources/: a POSIX file
// opened for large sequential reads (or memory-mapped), and an output file
// written under a temporary name and renamed into place on commit, so that a
// crash or an exception never leaves a half-written file under the final
// name. Errors are IoErrors naming the file. No class here is synchronised.
#pragma once

#include <fcntl.h>
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
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/errors.hpp"

namespace ingest::detail {

/// An IoError for `what` on `path`, with errno's text.
inline IoError io_error(std::string_view stage, const std::string& path, std::string_view what,
                        int err) {
  return IoError(std::string(what) + ": " + std::strerror(err),
                 {.stage = std::string(stage), .file = path});
}

/// A file opened read-only for sequential reading; closes on destruction.
class FileReader {
 public:
  /// Opens `path`. Throws IoError naming `stage` and the file.
  FileReader(std::string path, std::string_view stage) : path_(std::move(path)) {
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
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  }
  FileReader(FileReader&& o) noexcept
      : path_(std::move(o.path_)),
        fd_(std::exchange(o.fd_, -1)),
        size_(o.size_),
        position_(o.position_),
        regular_(o.regular_) {}
  FileReader& operator=(FileReader&& o) noexcept {
    if (this != &o) {
      close();
      path_ = std::move(o.path_);
      fd_ = std::exchange(o.fd_, -1);
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

  const std::string& path() const noexcept { return path_; }
  int fd() const noexcept { return fd_; }
  /// Bytes read so far.
  std::uint64_t position() const noexcept { return position_; }
  /// The file's size when opened, if it is a regular file.
  bool has_size() const noexcept { return regular_; }
  std::uint64_t size() const noexcept { return size_; }

 private:
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t position_ = 0;
  bool regular_ = false;
};

/// A read-only shared mapping of a whole regular file, unmapped on destruction.
class FileMapping {
 public:
  FileMapping() = default;
  /// Maps the file; empty() afterwards if it cannot be mapped (the caller
  /// then reads it instead).
  explicit FileMapping(const FileReader& file) {
    if (!file.has_size() || file.size() == 0 || file.size() > SIZE_MAX) return;
    void* p =
        ::mmap(nullptr, static_cast<std::size_t>(file.size()), PROT_READ, MAP_SHARED, file.fd(), 0);
    if (p == MAP_FAILED) return;
    data_ = static_cast<const char*>(p);
    size_ = static_cast<std::size_t>(file.size());
    ::madvise(p, size_, MADV_SEQUENTIAL);
  }
  FileMapping(FileMapping&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        released_(std::exchange(o.released_, 0)) {}
  FileMapping& operator=(FileMapping&& o) noexcept {
    if (this != &o) {
      unmap();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      released_ = std::exchange(o.released_, 0);
    }
    return *this;
  }
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping() { unmap(); }

  bool empty() const noexcept { return data_ == nullptr; }
  const char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

  /// Lets the kernel drop the pages before `offset` from this process (they
  /// stay in the page cache and fault back in if touched), so a long file
  /// does not pile up in the reader's resident memory.
  void release_before(std::size_t offset) noexcept {
    constexpr std::size_t step = std::size_t{64} << 20;
    if (offset < released_ + step) return;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t end = offset / page * page;
    ::madvise(const_cast<char*>(data_) + released_, end - released_, MADV_DONTNEED);
    released_ = end;
  }

 private:
  void unmap() noexcept {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
    data_ = nullptr;
  }

  const char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t released_ = 0;
};

/// A file written under a hidden temporary name beside `path` (".name.tmp-…")
/// and renamed to `path` by commit(). Destroyed without commit(), it removes
/// the temporary file and leaves nothing under `path`.
class AtomicFileWriter {
 public:
  AtomicFileWriter(std::string path, std::string_view stage)
      : path_(std::move(path)), stage_(stage) {
    temp_path_ = temporary_name(path_);
    do {
      fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) throw io_error(stage_, path_, "cannot create file", errno);
  }
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter() { abandon(); }

  /// Writes all n bytes. Throws IoError.
  void write(const void* data, std::size_t n) {
    require_open("write");
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
    if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS) {
      throw io_error(stage_, path_, "fsync failed", errno);
    }
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) {
      const int err = errno;
      ::unlink(temp_path_.c_str());
      throw io_error(stage_, path_, "close failed", err);
    }
    if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      ::unlink(temp_path_.c_str());
      throw io_error(stage_, path_, "cannot rename the temporary file into place", err);
    }
    committed_ = true;
  }

  /// Closes and removes the temporary file (no-op after commit()).
  void abandon() noexcept {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
      ::unlink(temp_path_.c_str());
    }
  }

  bool is_open() const noexcept { return fd_ >= 0; }
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
    if (fd_ < 0) {
      throw InvalidArgument(std::string(what) + " on a file that is already closed",
                            {.stage = stage_, .file = path_});
    }
  }

  std::string path_;
  std::string stage_;
  std::string temp_path_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace ingest::detail
