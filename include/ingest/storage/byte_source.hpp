// The one byte-source interface under every reader and writer that takes a
// path: a path with a scheme ("http://…", "https://…", "s3://bucket/key") is
// opened through the Scheme registered for that scheme; any other path is a
// local file (storage/file.hpp). Schemes are registered at run time by the
// part that implements them (<ingest/storage/remote.hpp>, CMake target
// ingest::remote, registers http, https and s3), so the core needs neither
// Boost.Beast nor OpenSSL, and one translation unit that includes the remote
// part makes URLs work in every other one. tf.data counterpart: TensorFlow's
// FileSystem registry (Env::GetFileSystemForFile), without the plug-in
// loading.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/runtime/model.hpp"

/// Byte sources under every path a reader or writer takes: local files, and URLs through the
/// scheme registered for them (http, https and s3: <ingest/storage/remote.hpp>).
namespace ingest::storage {

/// What one open remote object has cost so far (stats: bytes fetched,
/// requests, retries, time the reader waited on the network).
struct TransferCounters {
  /// Bytes fetched.
  std::uint64_t bytes{};
  /// Requests sent (retries included).
  std::uint64_t requests{};
  /// Requests that were retries.
  std::uint64_t retries{};
  /// Nanoseconds the reader waited on the network.
  std::uint64_t wait_ns{};
};

/// How an object will be read: sequentially from its start (the reader
/// reads ahead), or by position (read_at / start_read_at only: nothing is
/// read ahead, and opening fetches only what pins the object's size and
/// version).
enum class Access { sequential, positional };

/// A positional read in flight (RemoteReader::start_read_at).
class RemoteRead {
 public:
  virtual ~RemoteRead() = default;
  /// Waits for the bytes (fewer than asked only at the end of the object)
  /// or throws the read's error (IoError / DataLossError naming the URL and
  /// offset). Call once.
  virtual std::string get() = 0;
};

/// One remote object opened for reading. Its size and version (ETag) are
/// pinned at open: an object replaced while it is read raises DataLossError
/// naming the URL and offset. Reads throw IoError (after the scheme's
/// retries) naming the URL and offset. read() is for one thread; read_at()
/// may be called from several threads at once.
class RemoteReader {
 public:
  virtual ~RemoteReader() = default;
  /// The object's size in bytes.
  virtual std::uint64_t size() const = 0;
  /// Reads up to n bytes at the sequential position and advances it;
  /// returns fewer only at the end of the object (0 there).
  virtual std::size_t read(void* dst, std::size_t n) = 0;
  /// Reads up to n bytes at `offset` without moving the sequential position;
  /// returns fewer only at the end of the object.
  virtual std::size_t read_at(std::uint64_t offset, void* dst, std::size_t n) = 0;
  /// Starts reading up to n bytes at `offset`; several reads may be in
  /// flight at once, their get() in any order. The reader must outlive
  /// get(). This default reads in get(), one read at a time; a reader that
  /// can overlap requests overrides it.
  virtual std::unique_ptr<RemoteRead> start_read_at(std::uint64_t offset, std::size_t n) {
    class Deferred final : public RemoteRead {
     public:
      Deferred(RemoteReader& reader, std::uint64_t offset, std::size_t n)
          : reader_(reader), offset_(offset), n_(n) {}
      std::string get() override {
        const std::uint64_t size = reader_.size();
        const std::size_t n =
            offset_ >= size ? 0
                            : static_cast<std::size_t>(std::min<std::uint64_t>(n_, size - offset_));
        std::string bytes(n, '\0');
        bytes.resize(reader_.read_at(offset_, bytes.data(), n));
        return bytes;
      }

     private:
      RemoteReader& reader_;
      std::uint64_t offset_;
      std::size_t n_;
    };
    return std::make_unique<Deferred>(*this, offset, n);
  }
  /// What this reader has transferred so far.
  virtual TransferCounters counters() const = 0;
};

/// One remote object being written. Nothing appears under its URL until
/// commit() returns; destroyed (or abandon()ed) before that, it leaves
/// nothing behind (an S3 multipart upload is aborted).
class RemoteWriter {
 public:
  virtual ~RemoteWriter() = default;
  /// Appends `n` bytes at `data` to the object. Throws IoError on failure.
  virtual void write(const void* data, std::size_t n) = 0;
  /// Makes the object visible under its URL. Throws IoError on failure.
  virtual void commit() = 0;
  /// Drops what was written. Never throws.
  virtual void abandon() noexcept = 0;
};

/// The operations of one URL scheme. Implementations are thread-safe.
class Scheme {
 public:
  virtual ~Scheme() = default;
  /// Opens `url` for reading. `stage` names the caller in errors.
  virtual std::unique_ptr<RemoteReader> open_read(const std::string& url,
                                                  std::string_view stage) = 0;
  /// Opens `url` for positional reads (Access::positional: nothing is read
  /// ahead). With `size`, the object's size known to the caller (an
  /// index), a scheme may open without a request; a read then finds a
  /// missing or changed object. This default opens as open_read does.
  virtual std::unique_ptr<RemoteReader> open_positional(const std::string& url,
                                                        std::string_view stage,
                                                        std::optional<std::uint64_t> size) {
    (void)size;
    return open_read(url, stage);
  }
  /// Opens `url` for writing; InvalidArgument if the scheme is read-only.
  virtual std::unique_ptr<RemoteWriter> open_write(const std::string& url,
                                                   std::string_view stage) = 0;
  /// True if the object `url` exists (a HEAD request); 404 is false, other
  /// failures throw IoError naming the URL.
  virtual bool exists(const std::string& url, std::string_view stage) = 0;
  /// The URLs of the objects whose URL starts with `prefix` (itself a URL),
  /// sorted; InvalidArgument if the scheme cannot list.
  virtual std::vector<std::string> list(const std::string& prefix, std::string_view stage) = 0;
};

namespace detail {
inline thread_local const std::shared_ptr<ingest::detail::StageNode>* transfer_node = nullptr;
}  // namespace detail

/// While alive, the remote readers opened on this thread report what they
/// fetch to `node` (the stage opening them; stats() shows it per stage).
/// A null node leaves the readers unaccounted.
class ScopedTransferAccount {
 public:
  /// Accounts this thread's remote readers to `node` until destroyed (a null node: to none).
  explicit ScopedTransferAccount(const std::shared_ptr<ingest::detail::StageNode>& node) noexcept
      : previous_(std::exchange(detail::transfer_node, node ? &node : nullptr)) {}
  ScopedTransferAccount(const ScopedTransferAccount&) = delete;
  ScopedTransferAccount& operator=(const ScopedTransferAccount&) = delete;
  ~ScopedTransferAccount() { detail::transfer_node = previous_; }

 private:
  const std::shared_ptr<ingest::detail::StageNode>* previous_;
};

/// The node that readers opened now on this thread report to, or null.
inline std::shared_ptr<ingest::detail::StageNode> current_transfer_node() {
  return detail::transfer_node ? *detail::transfer_node : nullptr;
}

/// The scheme of `path`: the letters, digits, '+', '-' and '.' before "://"
/// (starting with a letter), lower-cased; empty for a local path.
inline std::string url_scheme(std::string_view path) {
  const auto sep = path.find("://");
  if (sep == std::string_view::npos || sep == 0) return {};
  std::string scheme;
  scheme.reserve(sep);
  for (std::size_t i = 0; i < sep; ++i) {
    char c = path[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool other = (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    if (!letter && !(i > 0 && other)) return {};
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    scheme.push_back(c);
  }
  return scheme;
}

/// True if `path` names a remote object (it has a scheme).
inline bool is_url(std::string_view path) { return !url_scheme(path).empty(); }

namespace detail {
struct SchemeRegistry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Scheme>, std::less<>> schemes;
};
inline SchemeRegistry& scheme_registry() {
  static auto* registry = new SchemeRegistry;  // immortal: readers may outlive main's locals
  return *registry;
}
}  // namespace detail

/// Makes `scheme` ("s3") open the paths "s3://…", replacing any handler
/// registered before. Thread-safe.
inline void register_scheme(const std::string& scheme, std::shared_ptr<Scheme> handler) {
  auto& registry = detail::scheme_registry();
  std::lock_guard lock(registry.mu);
  registry.schemes[scheme] = std::move(handler);
}

/// The handler of `url`'s scheme. Throws InvalidArgument naming the URL (and
/// `stage`) when none is registered.
inline std::shared_ptr<Scheme> scheme_for(const std::string& url, std::string_view stage) {
  const std::string scheme = url_scheme(url);
  auto& registry = detail::scheme_registry();
  {
    std::lock_guard lock(registry.mu);
    if (auto it = registry.schemes.find(scheme); it != registry.schemes.end()) return it->second;
  }
  const bool known = scheme == "http" || scheme == "https" || scheme == "s3";
  throw InvalidArgument(
      known ? "the scheme '" + scheme +
                  "://' needs the remote storage part: include <ingest/storage/remote.hpp> in "
                  "one source file and link the CMake target ingest::remote"
            : "no storage is registered for the scheme '" + scheme + "://'",
      {.stage = std::string(stage), .file = url});
}

}  // namespace ingest::storage
