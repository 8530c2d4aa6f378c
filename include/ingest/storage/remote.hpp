// The remote storage part in one include: `http://`, `https://` and
// `s3://` paths for every API that takes a path (list_files, tfrecord,
// text_lines, csv, fixed_length_records, read_file, TFRecordWriter,
// cache(path)). Include it in one source file of a program and link the
// CMake target ingest::remote (Boost.Beast and OpenSSL): the schemes are
// registered at start-up, so URLs then work in every translation unit,
// including those that never include this header. Each scheme's client
// (its I/O threads, connection pools, credentials) is built when the first
// URL of that scheme is opened. Options: use_http() and use_s3(), at any
// time; what is opened afterwards uses them. tf.data counterpart:
// TensorFlow's registered file systems (gs://, s3:// through
// tensorflow-io, http://), which it reads synchronously per file.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/storage/byte_source.hpp"
#include "ingest/storage/http.hpp"
#include "ingest/storage/s3.hpp"

namespace ingest::storage {

/// Makes http:// and https:// use `http` (timeouts, retries, CA bundle, ...)
/// and `readahead` (block size, blocks in flight per reader; values left 0
/// are autotuned, see ReadaheadOptions) for the
/// objects opened from now on. Throws InvalidArgument naming a CA bundle
/// that cannot be loaded.
inline void use_http(HttpOptions http = {}, ReadaheadOptions readahead = {}) {
  register_http_scheme(std::make_shared<HttpClient>(std::move(http)), readahead);
}

namespace detail {

/// A scheme built on its first use by `make`: including the remote part
/// starts no thread and reads no credentials until a URL is opened. A
/// failed build (a bad credentials file) throws from that call and is tried
/// again on the next.
class LazyScheme final : public Scheme {
 public:
  explicit LazyScheme(std::function<std::shared_ptr<Scheme>()> make) : make_(std::move(make)) {}

  std::unique_ptr<RemoteReader> open_read(const std::string& url, std::string_view stage) override {
    return get().open_read(url, stage);
  }
  std::unique_ptr<RemoteReader> open_positional(const std::string& url, std::string_view stage,
                                                std::optional<std::uint64_t> size) override {
    return get().open_positional(url, stage, size);
  }
  std::unique_ptr<RemoteWriter> open_write(const std::string& url,
                                           std::string_view stage) override {
    return get().open_write(url, stage);
  }
  bool exists(const std::string& url, std::string_view stage) override {
    return get().exists(url, stage);
  }
  std::vector<std::string> list(const std::string& prefix, std::string_view stage) override {
    return get().list(prefix, stage);
  }

 private:
  Scheme& get() {
    std::lock_guard lock(mu_);
    if (!scheme_) scheme_ = make_();
    return *scheme_;
  }

  std::function<std::shared_ptr<Scheme>()> make_;
  std::mutex mu_;
  std::shared_ptr<Scheme> scheme_;
};

/// Registers `handler` for `scheme` unless one is registered already (so a
/// use_s3() that ran first, from another start-up, is kept).
inline void register_scheme_if_absent(const std::string& scheme, std::shared_ptr<Scheme> handler) {
  auto& registry = scheme_registry();
  std::lock_guard lock(registry.mu);
  registry.schemes.try_emplace(scheme, std::move(handler));
}

/// The default schemes: http and https share one client, s3 takes its
/// settings from the environment (see S3Options).
inline bool register_remote_schemes() {
  auto http = std::make_shared<LazyScheme>(
      [] { return std::make_shared<HttpScheme>(std::make_shared<HttpClient>()); });
  register_scheme_if_absent("http", http);
  register_scheme_if_absent("https", http);
  register_scheme_if_absent(
      "s3", std::make_shared<LazyScheme>([] { return std::make_shared<S3Scheme>(S3Options{}); }));
  return true;
}

/// Registers the default schemes when a program that includes this header
/// starts.
inline const bool remote_schemes_registered = register_remote_schemes();

}  // namespace detail
}  // namespace ingest::storage
