// The s3:// storage scheme: "s3://bucket/key" read with ranged, read-ahead
// GETs (RangedReader) signed with SigV4, listed with ListObjectsV2 (every
// page), checked with HEAD, and written with one PUT or, above a threshold,
// a multipart upload that is completed on commit and aborted otherwise, so
// nothing appears under the key before commit. use_s3() (re)registers it.
// Part of the remote storage part (CMake target ingest::remote).
// tf.data counterpart: tensorflow-io's S3 file system; AWS counterpart: the
// SDK's S3 client (GetObject, HeadObject, ListObjectsV2, PutObject,
// CreateMultipartUpload / UploadPart / CompleteMultipartUpload /
// AbortMultipartUpload). Thread-safe: one HttpClient (keep-alive pools)
// shared by every reader and writer of the scheme. A hostile or broken
// server cannot make a listing run forever (pages and keys are capped, a
// continuation token seen before ends it with an error), nor return keys
// outside the prefix; bucket names are checked before any request, so
// none reaches another host than the endpoint.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/storage/byte_source.hpp"
#include "ingest/storage/http_client.hpp"
#include "ingest/storage/http_file.hpp"
#include "ingest/storage/s3_credentials.hpp"
#include "ingest/storage/s3_sign.hpp"
#include "ingest/storage/s3_xml.hpp"
#include "ingest/storage/url.hpp"

namespace ingest::storage {

/// Settings of the s3:// scheme. Empty strings mean "from the environment"
/// (s3_credentials.hpp).
struct S3Options {
  std::string region{};    ///< else AWS_REGION, AWS_DEFAULT_REGION, "us-east-1"
  std::string endpoint{};  ///< else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS's
  std::string profile{};   ///< shared credentials profile, else AWS_PROFILE, "default"
  /// Path-style (endpoint/bucket/key) or virtual-hosted (bucket.host/key)
  /// addressing; unset: path-style when the endpoint is not AWS's (local
  /// stores), virtual-hosted otherwise.
  std::optional<bool> path_style{};
  bool anonymous = false;  ///< send requests unsigned, whatever credentials exist
  /// Credentials to sign with instead of the environment's and the shared
  /// credentials file's.
  std::optional<AwsCredentials> credentials{};
  /// The HTTP client's settings (timeouts, retries, TLS, limits).
  HttpOptions http{};
  /// Bytes per ranged GET and blocks in flight per reader; a value left 0
  /// (the default) is autotuned for the readers of a pipeline stage, within
  /// the RAM budget (see ReadaheadOptions).
  ReadaheadOptions readahead{};
  /// Objects up to this size are written with one PUT on commit; larger
  /// ones with a multipart upload.
  std::size_t multipart_threshold = std::size_t{16} << 20;
  /// Size of each part of a multipart upload (S3: at least 5 MiB).
  std::size_t part_size = std::size_t{16} << 20;
  /// Keys per ListObjectsV2 page (S3's max-keys, at most 1000).
  std::size_t list_page_size = 1000;
  /// The most keys one list() returns: more is an IoError naming the
  /// prefix (the largest real buckets listed under one prefix stay below).
  std::size_t max_list_keys = 10'000'000;
  /// The most ListObjectsV2 pages one list() requests: more is an IoError
  /// (a server handing out fresh continuation tokens for empty pages).
  std::size_t max_list_pages = 100'000;
};

/// An s3:// URL split into bucket and key (the key may be empty).
struct S3Location {
  /// The bucket.
  std::string bucket{};
  /// The key within the bucket (empty: the bucket itself).
  std::string key{};
};

/// Splits "s3://bucket/key". Throws InvalidArgument naming the URL when the
/// scheme is not s3:// or the bucket is empty (the bucket name is checked
/// by S3Client::url, before any request).
inline S3Location parse_s3_url(std::string_view url, std::string_view stage = {}) {
  if (url_scheme(url) != "s3") {
    throw InvalidArgument("not an s3:// URL",
                          {.stage = std::string(stage), .file = std::string(url)});
  }
  const std::string_view rest = url.substr(url.find("://") + 3);
  const auto slash = rest.find('/');
  S3Location loc{
      .bucket = std::string(rest.substr(0, slash)),
      .key = slash == std::string_view::npos ? std::string{} : std::string(rest.substr(slash + 1))};
  if (loc.bucket.empty()) {
    throw InvalidArgument("an s3:// URL without a bucket",
                          {.stage = std::string(stage), .file = std::string(url)});
  }
  return loc;
}

/// How a bucket name can be addressed.
enum class BucketAddressing {
  virtual_host,  ///< a DNS label: bucket.endpoint-host works
  path_only,     ///< valid, but not as a host name label (dots break TLS wildcards)
};

/// Checks `bucket` against S3's naming rules: 3 to 63 characters, lower-case
/// letters, digits, dots and hyphens, starting and ending with a letter or
/// digit, no two adjacent dots, not an IPv4 address. Names with a dot (or a
/// dot next to a hyphen) are valid but addressed path-style, as the AWS
/// SDKs do. Throws InvalidArgument naming the bucket (control characters
/// escaped) and why, so that no request is made with it.
inline BucketAddressing check_bucket_name(std::string_view bucket) {
  auto printable = [&] {
    std::string out;
    for (const char c : bucket.substr(0, 80)) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) {
        static constexpr char hex[] = "0123456789abcdef";
        out += "\\x";
        out += hex[u >> 4];
        out += hex[u & 15];
      } else {
        out += c;
      }
    }
    return out + (bucket.size() > 80 ? "..." : "");
  };
  auto fail = [&](const std::string& why) {
    return InvalidArgument("'" + printable() + "' is not a valid S3 bucket name: " + why +
                           " (names are 3 to 63 lower-case letters, digits, dots and hyphens)");
  };
  if (bucket.size() < 3 || bucket.size() > 63) {
    throw fail("it has " + std::to_string(bucket.size()) + " characters");
  }
  bool dotted = false, digits_and_dots = true;
  for (std::size_t i = 0; i < bucket.size(); ++i) {
    const char c = bucket[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && c != '.' && c != '-') {
      throw fail("character " + std::to_string(i) + " is not allowed");
    }
    if ((i == 0 || i + 1 == bucket.size()) && !alnum) {
      throw fail("it must start and end with a letter or digit");
    }
    if (c == '.' && bucket[i - 1] == '.') throw fail("it has two adjacent dots");
    if (c == '.' && (bucket[i - 1] == '-' || bucket[i + 1] == '-')) dotted = true;
    dotted = dotted || c == '.';
    digits_and_dots = digits_and_dots && (c == '.' || (c >= '0' && c <= '9'));
  }
  if (digits_and_dots && std::count(bucket.begin(), bucket.end(), '.') == 3) {
    throw fail("it is formatted as an IP address");
  }
  return dotted ? BucketAddressing::path_only : BucketAddressing::virtual_host;
}

namespace detail {

/// parse_s3_url, then check_bucket_name, its errors naming `url` and
/// `stage`: every s3:// operation starts here, before any request.
inline S3Location parse_checked_s3_url(const std::string& url, std::string_view stage) {
  S3Location loc = parse_s3_url(url, stage);
  try {
    check_bucket_name(loc.bucket);
  } catch (Error& e) {
    e.add_context({.stage = std::string(stage), .file = url});
    throw;
  }
  return loc;
}

/// Whether a listed key is safe to name a path with: not empty, no leading
/// '/', no empty segment inside ("a//b"; a trailing '/', a console's
/// "folder", is kept), no ".." segment. Keys that are not are legal in S3
/// but list() skips them, counted in one log line.
inline bool safe_listed_key(std::string_view key) {
  if (key.empty() || key.front() == '/') return false;
  std::size_t start = 0;
  for (;;) {
    const auto slash = key.find('/', start);
    const std::string_view segment = key.substr(start, slash - start);
    if (slash != std::string_view::npos && segment.empty()) return false;
    if (segment == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

// Runs `f`, rethrowing its ingest I/O errors (which name the HTTP URL) with
// the s3:// URL `url` as their file; same kind and offset, the HTTP URL kept
// in the message.
template <typename F>
auto with_s3_url(const std::string& url, std::string_view stage, F&& f) -> decltype(f()) {
  auto message = [](const Error& e) {
    const std::string& http_url = e.context().file;
    return http_url.empty() || http_url == e.message() ? e.message()
                                                       : e.message() + " (" + http_url + ")";
  };
  auto context = [&](const Error& e) {
    ErrorContext c = e.context();
    c.file = url;
    if (c.stage.empty()) c.stage = std::string(stage);
    return c;
  };
  try {
    return f();
  } catch (const DataLossError& e) {
    if (e.context().file == url) throw;
    throw DataLossError(message(e), context(e));
  } catch (const IoError& e) {
    if (e.context().file == url) throw;
    throw IoError(message(e), context(e));
  }
}

}  // namespace detail

/// The S3 REST calls the scheme makes: addressing, signing, errors.
/// Thread-safe.
class S3Client {
 public:
  /// A client for `options`' region and endpoint; throws InvalidArgument for an endpoint with a
  /// query or a part_size below 5 MiB.
  explicit S3Client(S3Options options)
      : options_(std::move(options)),
        http_(std::make_shared<HttpClient>(options_.http)),
        region_(resolve_region(options_.region)) {
    const std::string aws_default = "https://s3." + region_ + ".amazonaws.com";
    const std::string endpoint = resolve_endpoint(options_.endpoint, region_);
    endpoint_ = parse_url(endpoint);
    if (endpoint_.target == "/") endpoint_.target.clear();
    if (endpoint_.target.find('?') != std::string::npos) {
      throw InvalidArgument("an S3 endpoint with a query", {.file = endpoint});
    }
    path_style_ = options_.path_style.value_or(endpoint != aws_default);
    if (options_.part_size < (std::size_t{5} << 20)) {
      throw InvalidArgument("S3 multipart parts are at least 5 MiB (S3Options::part_size is " +
                            std::to_string(options_.part_size) + ")");
    }
    options_.list_page_size = std::clamp<std::size_t>(options_.list_page_size, 1, 1000);
  }

  /// Its options (list_page_size clamped to [1, 1000]).
  const S3Options& options() const noexcept { return options_; }
  /// The HTTP client its requests go through (shared with its readers).
  const std::shared_ptr<HttpClient>& http() const noexcept { return http_; }
  /// The credentials requests are signed with, resolved on first use (so
  /// registering the scheme never throws for a bad credentials file; the
  /// first request does, naming the file). Thread-safe.
  const AwsCredentials& credentials() const {
    std::call_once(credentials_once_, [this] {
      credentials_ = options_.anonymous     ? AwsCredentials{}
                     : options_.credentials ? *options_.credentials
                                            : resolve_credentials(options_.profile);
    });
    return credentials_;
  }
  /// The region requests are signed for.
  const std::string& region() const noexcept { return region_; }

  /// The HTTP URL of `key` in `bucket` (empty key: the bucket), with
  /// `query` (already encoded, without '?') appended.
  /// Throws InvalidArgument for a bucket name S3 does not allow
  /// (check_bucket_name); a valid name that is no DNS label (it has a dot)
  /// is addressed path-style even where virtual-hosted is the default.
  Url url(const std::string& bucket, const std::string& key, const std::string& query = {}) const {
    const BucketAddressing addressing = check_bucket_name(bucket);
    Url u = endpoint_;
    std::string path = endpoint_.target;
    if (path_style_ || addressing == BucketAddressing::path_only) {
      path += "/" + uri_encode(bucket, false);
      if (!key.empty()) path += "/" + uri_encode(key, true);
    } else {
      u.host = bucket + "." + u.host;
      path += "/" + uri_encode(key, true);
    }
    if (path.empty()) path = "/";
    u.target = query.empty() ? path : path + "?" + query;
    return u;
  }

  /// A PrepareRequest that signs each attempt (fresh x-amz-date) with the
  /// payload hash `payload_hash`; for anonymous credentials it adds nothing.
  PrepareRequest signer(std::string payload_hash) const {
    if (credentials().anonymous()) return {};
    return [credentials = credentials(), region = region_, hash = std::move(payload_hash)](
               const Url& u, HttpRequest& request) {
      SigV4Request r{.method = request.method, .target = request.target, .payload_hash = hash};
      if (r.target.empty() || r.target == "/") r.target = u.target;
      bool has_host = false;
      std::vector<HttpHeader> kept;
      for (const auto& h : request.headers) {
        std::string lower;
        for (const char c : h.name) lower.push_back(detail::lower_ascii(c));
        if (lower == "authorization" || lower == "x-amz-date" || lower == "x-amz-content-sha256" ||
            lower == "x-amz-security-token") {
          continue;  // a previous attempt's signature
        }
        has_host = has_host || lower == "host";
        r.headers.emplace_back(h.name, h.value);
        kept.push_back(h);
      }
      if (!has_host) {
        r.headers.emplace_back("Host", u.authority());
        kept.push_back({"Host", u.authority()});
      }
      const auto signature = sign_v4(r, credentials, region, amz_date(std::time(nullptr)));
      for (const auto& [name, value] : signature.headers) kept.push_back({name, value});
      request.headers = std::move(kept);
    };
  }

  /// Sends one signed request for the object `s3_url` (retried by the
  /// client on 5xx, 429, resets and timeouts) and returns the response,
  /// whatever its status. Throws IoError naming `s3_url` when retries run
  /// out.
  HttpResponse send(const std::string& s3_url, std::string_view stage, const std::string& method,
                    const Url& u, std::string body = {},
                    std::vector<HttpHeader> headers = {}) const {
    HttpRequest request{.method = method,
                        .target = u.target,
                        .headers = std::move(headers),
                        .body = std::move(body)};
    const PrepareRequest prepare = signer(sha256_hex(request.body));
    return detail::with_s3_url(s3_url, stage,
                               [&] { return http_->send(u, std::move(request), prepare); });
  }

  /// Throws IoError for a response that is not 2xx: "<what> failed: HTTP
  /// 403 AccessDenied: <message>", naming `s3_url` and `stage`.
  static void check(const HttpResponse& response, std::string_view what, const std::string& s3_url,
                    std::string_view stage) {
    if (response.status >= 200 && response.status < 300) return;
    throw error(response, what, s3_url, stage);
  }

  /// The IoError for a failed response (see check()).
  static IoError error(const HttpResponse& response, std::string_view what,
                       const std::string& s3_url, std::string_view stage) {
    std::string message =
        "S3 " + std::string(what) + " failed: HTTP " + std::to_string(response.status);
    if (auto e = parse_s3_error(response.body)) {
      if (!e->code.empty()) message += " " + e->code;
      if (!e->message.empty()) message += ": " + e->message;
    } else if (response.status == 404) {
      message += " (no such object or bucket)";
    } else if (response.status == 403) {
      message += " (access denied: check the credentials)";
    }
    return IoError(message, {.stage = std::string(stage), .file = s3_url});
  }

 private:
  S3Options options_;
  std::shared_ptr<HttpClient> http_;
  std::string region_;
  mutable std::once_flag credentials_once_{};
  mutable AwsCredentials credentials_{};
  Url endpoint_{};
  bool path_style_ = true;
};

namespace detail {

// Names the s3:// URL in the errors of the ranged reader (which knows only
// the HTTP URL).
class S3Reader final : public RemoteReader {
 public:
  S3Reader(std::unique_ptr<RemoteReader> inner, std::string url, std::string stage)
      : inner_(std::move(inner)), url_(std::move(url)), stage_(std::move(stage)) {}
  std::uint64_t size() const override { return inner_->size(); }
  std::size_t read(void* dst, std::size_t n) override {
    return with_s3_url(url_, stage_, [&] { return inner_->read(dst, n); });
  }
  std::size_t read_at(std::uint64_t offset, void* dst, std::size_t n) override {
    return with_s3_url(url_, stage_, [&] { return inner_->read_at(offset, dst, n); });
  }
  std::unique_ptr<RemoteRead> start_read_at(std::uint64_t offset, std::size_t n) override {
    class Read final : public RemoteRead {
     public:
      Read(std::unique_ptr<RemoteRead> inner, const S3Reader& reader)
          : inner_(std::move(inner)), reader_(reader) {}
      std::string get() override {
        return with_s3_url(reader_.url_, reader_.stage_, [&] { return inner_->get(); });
      }

     private:
      std::unique_ptr<RemoteRead> inner_;
      const S3Reader& reader_;
    };
    return std::make_unique<Read>(
        with_s3_url(url_, stage_, [&] { return inner_->start_read_at(offset, n); }), *this);
  }
  TransferCounters counters() const override { return inner_->counters(); }

 private:
  std::unique_ptr<RemoteReader> inner_;
  std::string url_;
  std::string stage_;
};

inline std::string xml_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// One object being written: buffered and PUT on commit, or (past the
// threshold) uploaded in parts as they fill and completed on commit.
class S3Writer final : public RemoteWriter {
 public:
  S3Writer(std::shared_ptr<S3Client> client, std::string url, std::string stage)
      : client_(std::move(client)), url_(std::move(url)), stage_(std::move(stage)) {
    loc_ = parse_checked_s3_url(url_, stage_);
    if (loc_.key.empty()) {
      throw InvalidArgument("an s3:// URL without a key cannot be written",
                            {.stage = stage_, .file = url_});
    }
  }
  S3Writer(const S3Writer&) = delete;
  S3Writer& operator=(const S3Writer&) = delete;
  ~S3Writer() override { abandon(); }

  void write(const void* data, std::size_t n) override {
    if (done_) {
      throw InvalidArgument("write after commit or abandon", {.stage = stage_, .file = url_});
    }
    buffer_.append(static_cast<const char*>(data), n);
    const auto& o = client_->options();
    if (upload_id_.empty() && buffer_.size() > o.multipart_threshold) start_upload();
    if (upload_id_.empty()) return;
    std::size_t sent = 0;
    try {
      while (buffer_.size() - sent >= o.part_size) {
        upload_part(std::string_view(buffer_).substr(sent, o.part_size));
        sent += o.part_size;
      }
    } catch (...) {
      abandon();
      throw;
    }
    buffer_.erase(0, sent);
  }

  void commit() override {
    if (done_) {
      throw InvalidArgument("commit after commit or abandon", {.stage = stage_, .file = url_});
    }
    try {
      if (upload_id_.empty()) {
        const auto r = client_->send(url_, stage_, "PUT", client_->url(loc_.bucket, loc_.key),
                                     std::move(buffer_));
        S3Client::check(r, "PutObject", url_, stage_);
      } else {
        if (!buffer_.empty() || etags_.empty()) upload_part(buffer_);
        complete();
      }
    } catch (...) {
      abandon();
      throw;
    }
    buffer_.clear();
    upload_id_.clear();
    done_ = true;
  }

  void abandon() noexcept override {
    done_ = true;
    buffer_.clear();
    buffer_.shrink_to_fit();
    if (upload_id_.empty()) return;
    const std::string id = std::move(upload_id_);
    upload_id_.clear();
    try {
      const auto r =
          client_->send(url_, stage_, "DELETE",
                        client_->url(loc_.bucket, loc_.key, "uploadId=" + uri_encode(id, false)));
      (void)r;  // best effort: a bucket lifecycle rule cleans what remains
    } catch (...) {
    }
  }

 private:
  void start_upload() {
    const auto r =
        client_->send(url_, stage_, "POST", client_->url(loc_.bucket, loc_.key, "uploads"));
    S3Client::check(r, "CreateMultipartUpload", url_, stage_);
    const ErrorContext where{.stage = stage_, .file = url_};
    const XmlElement root = parse_xml(r.body, where);
    std::string id = root.child_text("UploadId");
    if (root.name != "InitiateMultipartUploadResult" || id.empty()) {
      throw IoError("S3 CreateMultipartUpload answered without an UploadId", where);
    }
    upload_id_ = std::move(id);
  }

  void upload_part(std::string_view part) {
    const std::size_t number = etags_.size() + 1;
    if (number > 10000) {
      throw IoError("an S3 multipart upload has at most 10000 parts: raise S3Options::part_size",
                    {.stage = stage_, .file = url_});
    }
    const auto r = client_->send(url_, stage_, "PUT",
                                 client_->url(loc_.bucket, loc_.key,
                                              "partNumber=" + std::to_string(number) +
                                                  "&uploadId=" + uri_encode(upload_id_, false)),
                                 std::string(part));
    S3Client::check(r, "UploadPart", url_, stage_);
    const std::string* etag = r.header("ETag");
    if (etag == nullptr || etag->empty()) {
      throw IoError("S3 UploadPart answered without an ETag", {.stage = stage_, .file = url_});
    }
    etags_.push_back(*etag);
  }

  void complete() {
    std::string xml = "<CompleteMultipartUpload>";
    for (std::size_t i = 0; i < etags_.size(); ++i) {
      xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
             xml_escape(etags_[i]) + "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    const auto r = client_->send(
        url_, stage_, "POST",
        client_->url(loc_.bucket, loc_.key, "uploadId=" + uri_encode(upload_id_, false)),
        std::move(xml));
    S3Client::check(r, "CompleteMultipartUpload", url_, stage_);
    // S3 may answer 200 and report the failure in the body.
    if (auto e = parse_s3_error(r.body)) {
      throw IoError("S3 CompleteMultipartUpload failed: " + e->code + ": " + e->message,
                    {.stage = stage_, .file = url_});
    }
  }

  std::shared_ptr<S3Client> client_;
  std::string url_;
  std::string stage_;
  S3Location loc_{};
  std::string buffer_{};
  std::string upload_id_{};
  std::vector<std::string> etags_{};
  bool done_ = false;
};

}  // namespace detail

/// The s3:// scheme over one S3Client.
class S3Scheme final : public Scheme {
 public:
  /// The s3:// scheme over a new S3Client for `options`.
  explicit S3Scheme(S3Options options = {})
      : client_(std::make_shared<S3Client>(std::move(options))) {}

  /// The client its readers and writers share.
  const std::shared_ptr<S3Client>& client() const noexcept { return client_; }

  /// A ranged, read-ahead reader of the object; a missing object or denied
  /// access throws IoError naming the URL at once.
  std::unique_ptr<RemoteReader> open_read(const std::string& url, std::string_view stage) override {
    return open(url, stage, Access::sequential, std::nullopt);
  }
  /// The same, for positional reads (nothing read ahead).
  std::unique_ptr<RemoteReader> open_positional(const std::string& url, std::string_view stage,
                                                std::optional<std::uint64_t> size) override {
    return open(url, stage, Access::positional, size);
  }

  /// A writer that makes the object appear only on commit (single PUT up
  /// to multipart_threshold, else a multipart upload aborted on abandon).
  std::unique_ptr<RemoteWriter> open_write(const std::string& url,
                                           std::string_view stage) override {
    return std::make_unique<detail::S3Writer>(client_, url, std::string(stage));
  }

  /// HEAD of the object: 200 true, 404 false, anything else IoError.
  bool exists(const std::string& url, std::string_view stage) override {
    const S3Location loc = detail::parse_checked_s3_url(url, stage);
    if (loc.key.empty()) return false;
    const auto r = client_->send(url, stage, "HEAD", client_->url(loc.bucket, loc.key));
    if (r.status == 404) return false;
    S3Client::check(r, "HeadObject", url, stage);
    return true;
  }

  /// Every object whose URL starts with `prefix` ("s3://bucket/some/pre"),
  /// as "s3://bucket/key", sorted: ListObjectsV2, every page.
  std::vector<std::string> list(const std::string& prefix, std::string_view stage) override {
    const S3Location loc = detail::parse_checked_s3_url(prefix, stage);
    const std::string st(stage);
    const ErrorContext where{.stage = st, .file = prefix};
    const auto& o = client_->options();
    std::vector<std::string> urls;
    std::string token;
    // Every token seen, by its SHA-256: a server cycling through tokens
    // (A, B, A, ...) is caught at the first repeat, in 32 bytes a page.
    std::unordered_set<std::string> tokens;
    std::size_t pages = 0, skipped = 0;
    std::string first_skipped;
    for (;;) {
      if (++pages > o.max_list_pages) {
        throw IoError("S3 ListObjectsV2 returned more than " + std::to_string(o.max_list_pages) +
                          " pages (S3Options::max_list_pages)",
                      where);
      }
      std::string query = "list-type=2";
      if (!token.empty()) query += "&continuation-token=" + uri_encode(token, false);
      query += "&max-keys=" + std::to_string(client_->options().list_page_size);
      query += "&prefix=" + uri_encode(loc.key, false);
      const auto r = client_->send(prefix, stage, "GET", client_->url(loc.bucket, {}, query));
      S3Client::check(r, "ListObjectsV2", prefix, stage);
      const ListObjectsPage p = parse_list_objects_v2(r.body, where);
      for (const auto& key : p.keys) {
        // A key outside the prefix is the server answering another question.
        if (key.compare(0, loc.key.size(), loc.key) != 0) {
          throw IoError("S3 ListObjectsV2 returned the key '" + key.substr(0, 200) +
                            "', which is outside the prefix listed",
                        where);
        }
        if (!detail::safe_listed_key(key)) {
          if (skipped++ == 0) first_skipped = key.substr(0, 200);
          continue;
        }
        if (urls.size() >= o.max_list_keys) {
          throw IoError("S3 ListObjectsV2 returned more than " + std::to_string(o.max_list_keys) +
                            " keys (S3Options::max_list_keys)",
                        where);
        }
        urls.push_back("s3://" + loc.bucket + "/" + key);
      }
      if (!p.truncated) break;
      if (!tokens.insert(sha256_hex(p.next_token)).second) {
        throw IoError(
            "S3 ListObjectsV2 returned a continuation token it had returned before (page " +
                std::to_string(pages) + "): the listing would never end",
            where);
      }
      token = p.next_token;
    }
    if (skipped > 0) {
      log_line("s3: list of '" + prefix + "' skipped " + std::to_string(skipped) +
               (skipped == 1 ? " key" : " keys") +
               " with a leading '/', an empty path segment or a '..' segment (first: '" +
               first_skipped + "')");
    }
    std::sort(urls.begin(), urls.end());
    return urls;
  }

 private:
  std::unique_ptr<RemoteReader> open(const std::string& url, std::string_view stage, Access access,
                                     std::optional<std::uint64_t> size) {
    const S3Location loc = detail::parse_checked_s3_url(url, stage);
    const std::string st(stage);
    if (loc.key.empty()) {
      throw InvalidArgument("an s3:// URL without a key cannot be read",
                            {.stage = st, .file = url});
    }
    const Url http_url = client_->url(loc.bucket, loc.key);
    std::unique_ptr<RemoteReader> inner;
    try {
      inner = detail::with_s3_url(url, st, [&] {
        return std::make_unique<RangedReader>(client_->http(), http_url,
                                              client_->signer(sha256_hex({})),
                                              client_->options().readahead, stage, access, size);
      });
    } catch (const IoError&) {
      // The reader reports the status only; S3's error body says more
      // (NoSuchBucket or NoSuchKey, SignatureDoesNotMatch or AccessDenied):
      // one more request, on the failure path only.
      std::optional<HttpResponse> r;
      try {
        r = client_->send(url, stage, "GET", http_url, {}, {{"Range", "bytes=0-0"}});
      } catch (const Error&) {
      }
      if (r && r->status >= 400 && r->status < 500 && parse_s3_error(r->body)) {
        IoError e = S3Client::error(*r, "GetObject", url, stage);
        e.add_context({.offset = 0});
        throw e;
      }
      throw;
    }
    return std::make_unique<detail::S3Reader>(std::move(inner), url, st);
  }
  std::shared_ptr<S3Client> client_;
};

/// Registers (or replaces) the s3:// scheme with `options`: every path
/// "s3://…" opened after this call uses them. Region and endpoint are
/// resolved now, credentials on the first request. Throws InvalidArgument
/// for bad options (a malformed endpoint, parts under 5 MiB).
inline void use_s3(S3Options options = {}) {
  register_scheme("s3", std::make_shared<S3Scheme>(std::move(options)));
}

}  // namespace ingest::storage
