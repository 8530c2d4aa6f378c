// The HTTP/1.1 client under the http://, https:// and s3:// schemes, on
// Boost.Beast and Boost.Asio with OpenSSL: keep-alive connection pools per
// host, per-attempt timeouts, and retries with exponential backoff and
// jitter. Requests run asynchronously on the client's own I/O threads (never
// the compute pool); send() blocks its caller on the result, and the ranged
// reader (storage/http_file.hpp) keeps several requests in flight at once.
// tf.data counterpart: TensorFlow's CurlHttpRequest and RetryingFileSystem;
// AWS counterpart: the SDK's HTTP client with its standard retry strategy.
// HttpClient is thread-safe; it must outlive every call into it.
// Every byte a server sends is bounded: the header, chunk extensions and
// trailers together by max_header_bytes, the body by max_response_bytes
// (or the caller's smaller limit), and a connection's read buffer by the
// header limit plus one read; a response past a limit fails at once, not
// retried, with an IoError naming the limit and the URL.
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/core/redact.hpp"
#include "ingest/storage/byte_source.hpp"
#include "ingest/storage/url.hpp"

namespace ingest::storage {

/// One header field of a request or response.
struct HttpHeader {
  /// The field name (compared case-insensitively).
  std::string name{};
  /// The field value.
  std::string value{};
};

/// A request as the caller builds it. The client adds Host (the URL's
/// authority), User-Agent and Content-Length unless they are given.
/// The target sent is `target` unless it is "/" or empty, then the URL's
/// target: either may carry the path (see HttpClient::send).
struct HttpRequest {
  /// The request method: "GET", "HEAD", "PUT", "POST", "DELETE", ...
  std::string method = "GET";
  std::string target = "/";  ///< path and query, already percent-encoded
  /// Header fields to send besides those the client adds.
  std::vector<HttpHeader> headers{};
  /// The request body (Content-Length is set from it).
  std::string body{};
};

/// A complete response: status, header fields in the order received, body.
struct HttpResponse {
  /// The HTTP status code.
  int status{};
  /// The header fields, in the order received.
  std::vector<HttpHeader> headers{};
  /// The body (at most the client's or the caller's byte limit).
  std::string body{};

  /// The value of the first field named `name` (case-insensitive); nullptr
  /// if there is none.
  const std::string* header(std::string_view name) const {
    for (const auto& h : headers) {
      if (h.name.size() != name.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i) {
        auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
        same = lower(h.name[i]) == lower(name[i]);
      }
      if (same) return &h.value;
    }
    return nullptr;
  }
};

/// How failed attempts are retried: exponential backoff with jitter. The
/// n-th retry waits min(max_backoff, initial_backoff * 2^(n-1)), scaled by
/// a factor drawn uniformly from [1 - jitter, 1 + jitter].
struct RetryPolicy {
  int max_attempts = 6;  ///< attempts in all, the first included
  /// The wait before the second attempt (doubled for each later one).
  std::chrono::milliseconds initial_backoff{100};
  /// The longest wait between attempts.
  std::chrono::milliseconds max_backoff{10'000};
  double jitter = 0.5;                         ///< +- fraction of each wait
  std::uint64_t seed = 0x1e57'6a7e'5eed'0001;  ///< of the jitter's generator, one per client
};

/// Settings of an HttpClient.
struct HttpOptions {
  std::chrono::milliseconds connect_timeout{10'000};  ///< resolve + connect + TLS handshake
  std::chrono::milliseconds request_timeout{60'000};  ///< per attempt: request and whole response
  /// How failed attempts are retried.
  RetryPolicy retry{};
  std::string ca_file{};  ///< extra CA bundle (PEM) for https, beside the system store
  /// Verify https certificates and host names. Turned off, the client logs
  /// one warning per host it connects to; TLS 1.2 stays the minimum.
  bool verify_peer = true;
  std::size_t max_connections_per_host = 16;  ///< requests in flight per host (keep-alive pool)
  std::size_t max_response_bytes = std::size_t{1} << 30;  ///< bound on a body read into memory
  /// Bound on a response's status line and header fields, its chunk
  /// extensions and its trailers, together (a connection's read buffer
  /// holds at most this plus one 64 KiB read).
  std::size_t max_header_bytes = std::size_t{64} << 10;
  std::size_t io_threads = 2;  ///< threads running the client's io_context
  /// Query parameters whose values errors and logs show as REDACTED, beside
  /// the signing ones that always are (X-Amz-*, Signature, AWSAccessKeyId,
  /// token, ...: see add_redacted_parameters in core/redact.hpp).
  std::vector<std::string> redact_query_parameters{};
};

/// Signs or decorates each attempt just before it is sent (S3 SigV4 signs
/// here). Called again on every retry, on one of the client's I/O threads,
/// possibly on several at once (a reader's blocks in flight): it must be
/// thread-safe and must not block on the client (no send() inside).
using PrepareRequest = std::function<void(const Url&, HttpRequest&)>;

namespace detail {

/// What one attempt (one request on one connection) produced.
struct HttpAttempt {
  bool transport_failed = false;  ///< no complete response arrived
  bool retryable = false;         ///< worth another attempt
  bool headers_received = false;  ///< `response` has its status and headers
  std::string error{};            ///< what went wrong, for messages
  HttpResponse response{};        ///< body partial when transport_failed
};

/// Adds the time from its construction to its destruction to `total` (ns):
/// the time a caller waited for the network, also when the wait threw.
class CountWait {
 public:
  explicit CountWait(std::atomic<std::uint64_t>& total) noexcept
      : total_(total), start_(std::chrono::steady_clock::now()) {}
  CountWait(const CountWait&) = delete;
  CountWait& operator=(const CountWait&) = delete;
  ~CountWait() {
    total_.fetch_add(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - start_)
                                       .count()),
        std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t>& total_;
  std::chrono::steady_clock::time_point start_;
};

inline char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

/// "HTTP 404 Not Found".
inline std::string status_text(int status) {
  namespace http = boost::beast::http;
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return "HTTP " + std::to_string(status) + (reason.empty() ? "" : " " + std::string(reason));
}

/// What a failed response's body says, for an error message: an XML error
/// document's <Code> and <Message> (S3 and the services that copy its error
/// format: "SlowDown: Please reduce your request rate."), else the body's
/// first 200 bytes with control characters and runs of spaces collapsed; ""
/// for an empty body.
inline std::string body_excerpt(std::string_view body) {
  const auto element = [&](std::string_view tag) -> std::string_view {
    const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
    const std::size_t b = body.find(open);
    if (b == std::string_view::npos) return {};
    const std::size_t start = b + open.size();
    const std::size_t e = body.find(close, start);
    if (e == std::string_view::npos) return {};
    return body.substr(start, std::min<std::size_t>(e - start, 200));
  };
  const std::string_view code = element("Code");
  if (!code.empty()) {
    const std::string_view message = element("Message");
    return std::string(code) + (message.empty() ? "" : ": " + std::string(message));
  }
  std::string out;
  for (const char c : body.substr(0, 200)) {
    const bool space = static_cast<unsigned char>(c) < 0x20 || c == ' ';
    if (space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (body.size() > 200 && !out.empty()) out += "...";
  return out;
}

/// True for statuses worth retrying: 5xx, 429 Too Many Requests, 408.
inline bool retryable_status(int status) { return status >= 500 || status == 429 || status == 408; }

/// Seconds from a Retry-After value: delta-seconds or an HTTP date
/// (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"), relative to `now`.
inline std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (value.find_first_not_of("0123456789") == std::string_view::npos) {
    if (value.size() > 9) return std::chrono::milliseconds(std::chrono::hours(24));
    long long seconds = 0;
    for (const char c : value) seconds = seconds * 10 + (c - '0');
    return std::chrono::milliseconds(seconds * 1000);
  }
  std::tm tm{};
  const std::string text(value);
  const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  // In seconds, not as a time_point: a server's date in year 1 or 9999 is
  // outside what a nanosecond clock holds (from_time_t would overflow).
  const std::time_t when = ::timegm(&tm);
  const std::time_t at = std::chrono::system_clock::to_time_t(now);
  if (when <= at) return std::chrono::milliseconds(0);
  if (when - at > 24 * 3600) return std::chrono::milliseconds(std::chrono::hours(24));
  return std::chrono::milliseconds(std::chrono::seconds(when - at));
}

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

/// One keep-alive connection to one host, plain or TLS. All its operations
/// run on its own strand, so the client may run several I/O threads.
struct HttpConnection {
  std::string key{};  ///< scheme://host:port, the pool it belongs to
  std::unique_ptr<beast::tcp_stream> plain{};
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls{};
  beast::flat_buffer buffer{};
  bool reused = false;  ///< taken from the pool (may have been closed by the server)

  /// What one read from the socket may fill. Beast reads at most the
  /// buffer's free capacity (at least 512 bytes, at most 64 KiB), and a
  /// buffer that never held more than a response header stays that small:
  /// unreserved, a body arrived 512 bytes per system call and per Asio
  /// operation (W9's client spent more time in the executor than on the
  /// data).
  static constexpr std::size_t read_capacity = std::size_t{64} << 10;
  /// The buffer holds at most the header limit plus one read: a server
  /// cannot grow it by never ending a header line, a chunk's size line (its
  /// extensions) or the trailers (Beast waits for each whole in the buffer,
  /// and fails with buffer_overflow when it cannot grow).
  explicit HttpConnection(std::size_t max_header_bytes) : buffer(max_header_bytes + read_capacity) {
    buffer.reserve(read_capacity);
  }

  beast::tcp_stream& lowest() { return plain ? *plain : beast::get_lowest_layer(*tls); }
  void close() {
    beast::error_code ignored;
    lowest().socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    lowest().socket().close(ignored);
  }
};

/// A result handed from an I/O thread to a thread that blocks on it (a
/// std::promise without its catch: libstdc++'s exception_ptr counts
/// references in code ThreadSanitizer cannot see, so an exception must be
/// moved, never shared, between the threads, and end on the waiting one).
template <class T>
class Completion {
 public:
  /// Stores the value and wakes the waiter.
  void set_value(T value) {
    {
      std::lock_guard lock(mu_);
      value_.emplace(std::move(value));
      done_ = true;
    }
    cv_.notify_all();
  }
  /// Stores the error (moved in: the caller keeps no reference) and wakes the waiter.
  void set_exception(std::exception_ptr&& error) {
    {
      std::lock_guard lock(mu_);
      error_ = std::move(error);
      done_ = true;
    }
    cv_.notify_all();
  }
  /// Blocks until a result is stored; returns the value or rethrows the
  /// error. Call once.
  T get() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    if (error_) {
      std::exception_ptr error = std::move(error_);
      lock.unlock();
      std::rethrow_exception(std::move(error));
    }
    return std::move(*value_);
  }

 private:
  std::mutex mu_{};
  std::condition_variable cv_{};
  bool done_ = false;
  std::optional<T> value_{};
  std::exception_ptr error_{};
};

}  // namespace detail

/// An HTTP/1.1 client with keep-alive pools, timeouts and retries. Thread-
/// safe: any number of threads may call send() at once. Owns its I/O
/// threads; destroying it stops them (every call must have returned).
class HttpClient {
 public:
  /// Starts the I/O threads. Throws InvalidArgument naming options.ca_file
  /// when that bundle cannot be loaded.
  explicit HttpClient(HttpOptions options = {})
      : options_(std::move(options)),
        tls_(boost::asio::ssl::context::tls_client),
        rng_(options_.retry.seed) {
    if (options_.retry.max_attempts < 1) options_.retry.max_attempts = 1;
    if (options_.max_connections_per_host == 0) options_.max_connections_per_host = 1;
    if (options_.io_threads == 0) options_.io_threads = 1;
    if (options_.max_header_bytes < 1024) options_.max_header_bytes = 1024;
    options_.retry.jitter = std::clamp(options_.retry.jitter, 0.0, 1.0);
    add_redacted_parameters(options_.redact_query_parameters);
    tls_.set_options(boost::asio::ssl::context::default_workarounds |
                     boost::asio::ssl::context::no_sslv2 | boost::asio::ssl::context::no_sslv3 |
                     boost::asio::ssl::context::no_tlsv1 | boost::asio::ssl::context::no_tlsv1_1);
    // TLS 1.2 at least, whatever the system's OpenSSL configuration allows.
    SSL_CTX_set_min_proto_version(tls_.native_handle(), TLS1_2_VERSION);
    boost::system::error_code ec;
    tls_.set_default_verify_paths(ec);  // an empty system store only makes verification fail
    if (!options_.ca_file.empty()) {
      tls_.load_verify_file(options_.ca_file, ec);
      if (ec) {
        throw InvalidArgument("cannot load the CA bundle: " + ec.message(),
                              {.file = options_.ca_file});
      }
    }
    tls_.set_verify_mode(options_.verify_peer ? boost::asio::ssl::verify_peer
                                              : boost::asio::ssl::verify_none);
    threads_.reserve(options_.io_threads);
    for (std::size_t i = 0; i < options_.io_threads; ++i) {
      threads_.emplace_back([this] { io_.run(); });
    }
  }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  ~HttpClient() {
    work_.reset();
    io_.stop();
    for (auto& t : threads_) t.join();
    std::lock_guard lock(mu_);
    idle_.clear();
  }

  /// The options in force (after clamping nonsensical values).
  const HttpOptions& options() const noexcept { return options_; }

  /// The TLS context of every https connection (TLS 1.2 at least), for
  /// what the options do not cover (a client certificate). Change it only
  /// before the first request.
  boost::asio::ssl::context& tls_context() noexcept { return tls_; }

  /// One request with retries. The request's target is the URL's unless the
  /// request names another than "/" (so `prepare` sees the final target).
  /// 5xx, 429, connection reset/refused, timeouts
  /// and truncated bodies are retried with backoff (Retry-After honoured,
  /// seconds or HTTP date, up to max_backoff); any other status is returned
  /// as is. `prepare` runs before every attempt. Throws IoError naming the
  /// URL, the attempts and the last error when retries run out, or at once
  /// for errors no retry can fix (a certificate that fails verification, a
  /// body over max_response_bytes). What `prepare` throws propagates (an
  /// ingest::Error keeps its type). Blocks the calling thread: never call
  /// it from an I/O thread of this client (a PrepareRequest, a handler).
  HttpResponse send(const Url& url, HttpRequest request, const PrepareRequest& prepare = {}) {
    auto result = std::make_shared<detail::Completion<HttpResponse>>();
    async_send(url, std::move(request), prepare, options_.max_response_bytes,
               [result](std::exception_ptr error, HttpResponse response) {
                 if (error) {
                   result->set_exception(std::move(error));
                 } else {
                   result->set_value(std::move(response));
                 }
               });
    const detail::CountWait count(wait_ns_);  // also when get() throws
    return result->get();
  }

  /// Counters over the client's life: requests (attempts sent), retries,
  /// body bytes received, and the time send() callers waited.
  TransferCounters counters() const {
    TransferCounters c;
    c.requests = requests_.load(std::memory_order_relaxed);
    c.retries = retries_.load(std::memory_order_relaxed);
    c.bytes = bytes_.load(std::memory_order_relaxed);
    c.wait_ns = wait_ns_.load(std::memory_order_relaxed);
    return c;
  }

  // ---- The asynchronous layer, for the schemes built on the client. ----

  /// Completion of async_send: an exception (IoError) or the response.
  using SendHandler = std::function<void(std::exception_ptr, HttpResponse)>;
  /// Completion of one attempt.
  using AttemptHandler = std::function<void(detail::HttpAttempt)>;

  /// send() without blocking: `done` runs on an I/O thread. `body_limit`
  /// bounds the response body (at most max_response_bytes).
  void async_send(const Url& url, HttpRequest request, PrepareRequest prepare,
                  std::size_t body_limit, SendHandler done) {
    auto state = std::make_shared<SendState>();
    if (request.target.empty() || request.target == "/") request.target = url.target;
    state->url = url;
    state->request = std::move(request);
    state->prepare = std::move(prepare);
    state->body_limit = std::min(body_limit, options_.max_response_bytes);
    state->done = std::move(done);
    with_slot(url, [this, state] { send_attempt(state); });
  }

  /// Runs `start` once a request slot for `url`'s host is free (at most
  /// max_connections_per_host at once); the caller must call release_slot
  /// exactly once when the work started is over.
  void with_slot(const Url& url, std::function<void()> start) {
    const std::string key = pool_key(url);
    {
      std::lock_guard lock(mu_);
      auto& host = hosts_[key];
      if (host.active >= options_.max_connections_per_host) {
        host.waiting.push_back(std::move(start));
        return;
      }
      ++host.active;
    }
    boost::asio::post(io_, std::move(start));
  }

  /// Frees the slot taken by with_slot for `url`, starting a waiter if any.
  void release_slot(const Url& url) {
    const std::string key = pool_key(url);
    std::function<void()> next;
    {
      std::lock_guard lock(mu_);
      auto& host = hosts_[key];
      if (!host.waiting.empty()) {
        next = std::move(host.waiting.front());
        host.waiting.pop_front();
      } else if (host.active > 0) {
        --host.active;
      }
    }
    if (next) boost::asio::post(io_, std::move(next));
  }

  /// One attempt: `request` (already prepared) goes to `url` on a pooled or
  /// new connection; the response body may hold at most `body_limit` bytes.
  /// A pooled connection the server had closed is replaced transparently.
  /// `done` runs on an I/O thread. Counts one request.
  void async_attempt(const Url& url, HttpRequest request, std::size_t body_limit,
                     AttemptHandler done) {
    auto op = std::make_shared<AttemptOp>();
    op->client = this;
    op->url = url;
    op->body_limit = body_limit;
    op->done = std::move(done);
    op->build(request);
    requests_.fetch_add(1, std::memory_order_relaxed);
    if (auto conn = take_idle(pool_key(url))) {
      op->conn = std::move(conn);
      op->conn->reused = true;
      op->write();
    } else {
      op->connect();
    }
  }

  /// Runs `then` on an I/O thread after `wait`.
  void after(std::chrono::milliseconds wait, std::function<void()> then) {
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, wait);
    timer->async_wait(
        [timer, then = std::move(then)](const boost::system::error_code&) { then(); });
  }

  /// The wait before retry number `retry` (1-based), jittered, at least the
  /// server's Retry-After (capped at max_backoff) when `response` has one.
  std::chrono::milliseconds backoff(int retry, const HttpResponse* response) {
    const auto& p = options_.retry;
    double wait = static_cast<double>(p.initial_backoff.count()) *
                  std::pow(2.0, static_cast<double>(std::max(retry, 1) - 1));
    wait = std::min(wait, static_cast<double>(p.max_backoff.count()));
    double factor = 1.0;
    {
      std::lock_guard lock(rng_mu_);
      factor += p.jitter * (std::uniform_real_distribution<double>(-1.0, 1.0)(rng_));
    }
    auto ms = std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(wait * factor)));
    if (response != nullptr) {
      if (const auto* value = response->header("Retry-After")) {
        if (auto server = detail::parse_retry_after(*value, std::chrono::system_clock::now())) {
          ms = std::max(ms, std::min(*server, p.max_backoff));
        }
      }
    }
    return ms;
  }

  /// Counts one retry in counters() (for retry loops built on async_attempt).
  void count_retry() { retries_.fetch_add(1, std::memory_order_relaxed); }

  /// Applies `prepare` (if any) to `request` for one attempt. Returns null,
  /// or what it threw: an ingest::Error as is with `context` added (a
  /// signer's InvalidArgument stays one), anything else as an IoError.
  static std::exception_ptr prepare_attempt(const Url& url, const PrepareRequest& prepare,
                                            HttpRequest& request, const ErrorContext& context) {
    if (!prepare) return nullptr;
    try {
      prepare(url, request);
    } catch (Error& e) {
      e.add_context(context);
      return std::current_exception();
    } catch (const std::exception& e) {
      return std::make_exception_ptr(
          IoError(std::string("preparing the request failed: ") + e.what(), context));
    } catch (...) {
      return std::make_exception_ptr(IoError("preparing the request failed", context));
    }
    return nullptr;
  }

 private:
  struct HostSlots {
    std::size_t active = 0;
    std::deque<std::function<void()>> waiting{};
  };

  struct SendState {
    Url url{};
    HttpRequest request{};
    PrepareRequest prepare{};
    std::size_t body_limit = 0;
    SendHandler done{};
    int attempts = 0;
  };

  static std::string pool_key(const Url& url) {
    return url.scheme + "://" + url.host + ":" + std::to_string(url.port);
  }

  void send_attempt(const std::shared_ptr<SendState>& state) {
    ++state->attempts;
    HttpRequest request = state->request;
    if (auto error =
            prepare_attempt(state->url, state->prepare, request, {.file = state->url.str()})) {
      finish_send(state, std::move(error), {});
      return;
    }
    const std::string method = request.method;
    async_attempt(
        state->url, std::move(request), state->body_limit,
        [this, state, method](detail::HttpAttempt attempt) {
          const bool failed =
              attempt.transport_failed || detail::retryable_status(attempt.response.status);
          if (!failed) {
            finish_send(state, nullptr, std::move(attempt.response));
            return;
          }
          const bool retryable = attempt.transport_failed ? attempt.retryable : true;
          std::string error = attempt.transport_failed
                                  ? attempt.error
                                  : detail::status_text(attempt.response.status);
          if (!attempt.transport_failed) {
            // The server's own words (S3's SlowDown and its message).
            const std::string said = detail::body_excerpt(attempt.response.body);
            if (!said.empty()) error += " (" + said + ")";
          }
          if (!retryable || state->attempts >= options_.retry.max_attempts) {
            // Retries exhausted, or an error no retry fixes.
            finish_send(state,
                        std::make_exception_ptr(IoError(
                            method + " " + state->url.str() + " failed after " +
                                std::to_string(state->attempts) +
                                (state->attempts == 1 ? " attempt: " : " attempts: ") + error,
                            {.file = state->url.str()})),
                        {});
            return;
          }
          count_retry();
          const auto wait =
              backoff(state->attempts, attempt.headers_received ? &attempt.response : nullptr);
          after(wait, [this, state] { send_attempt(state); });
        });
  }

  void finish_send(const std::shared_ptr<SendState>& state, std::exception_ptr error,
                   HttpResponse response) {
    release_slot(state->url);
    auto done = std::move(state->done);
    done(std::move(error), std::move(response));  // moved: this thread keeps no reference
  }

  std::shared_ptr<detail::HttpConnection> take_idle(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = idle_.find(key);
    if (it == idle_.end() || it->second.empty()) return nullptr;
    auto conn = std::move(it->second.back());
    it->second.pop_back();
    return conn;
  }

  /// verify_peer = false: one warning per host, the first time it is
  /// connected to, so that turning verification off is never silent.
  void warn_unverified(const Url& url) {
    {
      std::lock_guard lock(mu_);
      if (!unverified_warned_.insert(url.authority()).second) return;
    }
    log_line("http: TLS certificates and host names of " + url.authority() +
             " are not verified (HttpOptions::verify_peer = false)");
  }

  void put_idle(std::shared_ptr<detail::HttpConnection> conn) {
    std::lock_guard lock(mu_);
    auto& list = idle_[conn->key];
    if (list.size() >= options_.max_connections_per_host) {
      list.erase(list.begin());  // the oldest is the likeliest to be closed by the server
    }
    list.push_back(std::move(conn));
  }

  /// One request/response exchange on one connection (a state machine of
  /// completion handlers: resolve, connect, handshake, write, read).
  struct AttemptOp : std::enable_shared_from_this<AttemptOp> {
    HttpClient* client = nullptr;
    Url url{};
    std::size_t body_limit = 0;
    AttemptHandler done{};
    detail::http::request<detail::http::string_body> req{};
    std::optional<detail::http::response_parser<detail::http::string_body>> parser{};
    // Chunk extensions (and size lines) seen so far in this response.
    std::size_t framing_bytes = 0;
    std::function<void(std::uint64_t, boost::beast::string_view, boost::system::error_code&)>
        on_chunk{};
    std::shared_ptr<detail::HttpConnection> conn{};
    std::unique_ptr<detail::net::ip::tcp::resolver> resolver{};
    bool head = false;
    bool replaced_stale = false;
    static constexpr std::size_t error_body_limit = std::size_t{1} << 20;

    void build(HttpRequest& r) {
      namespace http = detail::http;
      req.version(11);
      const auto verb = http::string_to_verb(r.method);
      if (verb == http::verb::unknown) {
        req.method_string(r.method);
      } else {
        req.method(verb);
      }
      head = verb == http::verb::head;
      req.target(r.target);
      bool has_host = false, has_agent = false, has_length = false;
      for (const auto& h : r.headers) {
        has_host = has_host || detail::iequals(h.name, "host");
        has_agent = has_agent || detail::iequals(h.name, "user-agent");
        has_length = has_length || detail::iequals(h.name, "content-length");
        req.insert(h.name, h.value);
      }
      if (!has_host) req.set(http::field::host, url.authority());
      if (!has_agent) req.set(http::field::user_agent, "ingest");
      const bool sends_body = !r.body.empty() || verb == http::verb::put ||
                              verb == http::verb::post || verb == http::verb::patch;
      if (!has_length && sends_body) req.content_length(r.body.size());
      req.body() = std::move(r.body);
      req.keep_alive(true);
    }

    void connect() {
      namespace net = detail::net;
      auto self = this->shared_from_this();
      conn = std::make_shared<detail::HttpConnection>(client->options_.max_header_bytes);
      conn->key = pool_key(url);
      auto strand = net::make_strand(client->io_);
      if (url.scheme == "https") {
        conn->tls = std::make_unique<detail::beast::ssl_stream<detail::beast::tcp_stream>>(
            strand, client->tls_);
      } else {
        conn->plain = std::make_unique<detail::beast::tcp_stream>(strand);
      }
      resolver = std::make_unique<net::ip::tcp::resolver>(strand);
      resolver->async_resolve(
          url.host, std::to_string(url.port),
          [self](const boost::system::error_code& ec,
                 net::ip::tcp::resolver::results_type results) {
            if (ec)
              return self->fail("cannot resolve " + self->url.host + ": " + ec.message(), true);
            self->conn->lowest().expires_after(self->client->options_.connect_timeout);
            self->conn->lowest().async_connect(
                results, [self](const boost::system::error_code& ec2,
                                const net::ip::tcp::endpoint&) { self->on_connect(ec2); });
          });
    }

    void on_connect(const boost::system::error_code& ec) {
      if (ec) {
        return fail("cannot connect to " + url.authority() + ": " + timeout_text(ec), true);
      }
      if (!conn->tls) return write();
      auto& stream = *conn->tls;
      boost::system::error_code ip_ec;
      detail::net::ip::make_address(url.host, ip_ec);
      if (ip_ec) {  // SNI only for names (RFC 6066)
        SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str());
      }
      if (client->options_.verify_peer) {
        stream.set_verify_callback(detail::net::ssl::host_name_verification(url.host));
      } else {
        client->warn_unverified(url);
      }
      auto self = this->shared_from_this();
      conn->lowest().expires_after(client->options_.connect_timeout);
      stream.async_handshake(
          detail::net::ssl::stream_base::client,
          [self](const boost::system::error_code& ec2) { self->on_handshake(ec2); });
    }

    void on_handshake(const boost::system::error_code& ec) {
      if (!ec) return write();
      std::string text = "TLS handshake with " + url.authority() + " failed: " + timeout_text(ec);
      const long verify = SSL_get_verify_result(conn->tls->native_handle());
      bool certificate = verify != X509_V_OK;
      if (ec.category() == detail::net::error::get_ssl_category() &&
          ERR_GET_REASON(static_cast<unsigned long>(ec.value())) ==
              SSL_R_CERTIFICATE_VERIFY_FAILED) {
        certificate = true;
      }
      if (verify != X509_V_OK) {
        text += std::string(" (certificate: ") + X509_verify_cert_error_string(verify) + ")";
      } else if (certificate) {
        text += " (certificate verification failed)";
      }
      fail(text, !certificate);
    }

    void write() {
      auto self = this->shared_from_this();
      conn->lowest().expires_after(client->options_.request_timeout);
      auto on_write = [self](const boost::system::error_code& ec, std::size_t) {
        self->on_write(ec);
      };
      if (conn->tls) {
        detail::http::async_write(*conn->tls, req, std::move(on_write));
      } else {
        detail::http::async_write(*conn->plain, req, std::move(on_write));
      }
    }

    void on_write(const boost::system::error_code& ec) {
      if (ec) {
        if (retry_stale()) return;
        return fail("sending the request to " + url.authority() + " failed: " + timeout_text(ec),
                    true);
      }
      parser.emplace();
      // Set once the status is known (on_header). Not boost::none: Beast 1.74
      // takes that as 0 when the header arrives alone.
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      parser->header_limit(static_cast<std::uint32_t>(
          std::min<std::size_t>(client->options_.max_header_bytes, 0xffff'ffffu)));
      // Beast bounds neither chunk extensions nor trailers: they count here
      // against the header limit, with the header (the buffer's bound keeps
      // each one small; this keeps their sum so).
      framing_bytes = 0;
      on_chunk = [this](std::uint64_t, boost::beast::string_view extensions,
                        boost::system::error_code& error) {
        framing_bytes += extensions.size() + 16;  // the size line's digits and CRLFs too
        if (header_bytes() + framing_bytes > client->options_.max_header_bytes) {
          error = detail::http::error::header_limit;
        }
      };
      parser->on_chunk_header(on_chunk);
      if (head) parser->skip(true);
      // The header first, then the body limit, which depends on the status.
      // Beast 1.74 checks a Content-Length against body_limit only when the
      // header and body arrive in one read, so that check is done here
      // (chunked and unbounded bodies are held to the parser's limit).
      auto self = this->shared_from_this();
      auto on_header = [self](const boost::system::error_code& ec2, std::size_t) {
        self->on_header(ec2);
      };
      if (conn->tls) {
        detail::http::async_read_header(*conn->tls, conn->buffer, *parser, std::move(on_header));
      } else {
        detail::http::async_read_header(*conn->plain, conn->buffer, *parser, std::move(on_header));
      }
    }

    void on_header(const boost::system::error_code& ec) {
      if (ec) return on_read(ec);
      // The limit bounds what the caller asked for; an error response
      // (a 412's or S3's explanation) may be read up to error_body_limit.
      const unsigned status = parser->get().result_int();
      if (status < 200 || status >= 300) body_limit = std::max(body_limit, error_body_limit);
      if (const auto length = parser->content_length(); length && *length > body_limit && !head) {
        return on_read(detail::http::error::body_limit);
      }
      parser->body_limit(body_limit);
      if (parser->is_done()) return on_read({});
      auto self = this->shared_from_this();
      auto on_read_body = [self](const boost::system::error_code& ec2, std::size_t) {
        self->on_read(ec2);
      };
      if (conn->tls) {
        detail::http::async_read(*conn->tls, conn->buffer, *parser, std::move(on_read_body));
      } else {
        detail::http::async_read(*conn->plain, conn->buffer, *parser, std::move(on_read_body));
      }
    }

    /// The header's size as received, near enough (fields and their
    /// separators; with trailers, once they are parsed).
    std::size_t header_bytes() const {
      std::size_t n = 16;  // the status line
      for (const auto& field : parser->get()) {
        n += field.name_string().size() + field.value().size() + 4;
      }
      return n;
    }

    void on_read(boost::system::error_code ec) {
      namespace http = detail::http;
      // Trailers, complete now, count with the header and chunk framing.
      if (!ec && parser->chunked() &&
          header_bytes() + framing_bytes > client->options_.max_header_bytes) {
        ec = http::error::header_limit;
      }
      detail::HttpAttempt attempt;
      auto& msg = parser->get();
      const bool headers = parser->is_header_done();
      if (headers) {
        attempt.headers_received = true;
        attempt.response.status = static_cast<int>(msg.result_int());
        for (const auto& field : msg) {
          attempt.response.headers.push_back(
              {std::string(field.name_string()), std::string(field.value())});
        }
      }
      attempt.response.body = std::move(msg.body());
      client->bytes_.fetch_add(attempt.response.body.size(), std::memory_order_relaxed);
      if (ec) {
        if (!headers && attempt.response.body.empty() && conn->buffer.size() == 0 &&
            retry_stale()) {
          return;
        }
        conn->close();
        attempt.transport_failed = true;
        // A limit is the server's doing, the same on every attempt: no retry.
        const bool header_limit =
            ec == http::error::header_limit || ec == http::error::buffer_overflow;
        attempt.retryable = ec != http::error::body_limit && !header_limit;
        if (ec == http::error::body_limit) {
          attempt.error = "the response body from " + url.authority() + " exceeds the limit of " +
                          std::to_string(body_limit) + " bytes";
        } else if (header_limit) {
          attempt.error = "the response from " + url.authority() + " exceeds the limit of " +
                          std::to_string(client->options_.max_header_bytes) +
                          " bytes of header, chunk extensions and trailers "
                          "(HttpOptions::max_header_bytes)";
        } else if (headers) {
          attempt.error = "the response body from " + url.authority() + " broke after " +
                          std::to_string(attempt.response.body.size()) +
                          " bytes: " + timeout_text(ec);
        } else {
          attempt.error =
              "reading the response from " + url.authority() + " failed: " + timeout_text(ec);
        }
        return finish(std::move(attempt));
      }
      if (parser->keep_alive() && !parser->need_eof()) {
        conn->lowest().expires_never();
        conn->reused = false;
        client->put_idle(conn);
      } else {
        conn->close();
      }
      finish(std::move(attempt));
    }

    /// A pooled connection that the server closed while idle fails on its
    /// first write or read: try once more on a new connection, uncounted.
    bool retry_stale() {
      if (!conn->reused || replaced_stale) return false;
      replaced_stale = true;
      conn->close();
      conn.reset();
      connect();
      return true;
    }

    static std::string timeout_text(const boost::system::error_code& ec) {
      if (ec == detail::beast::error::timeout) return "timed out";
      return ec.message();
    }

    void fail(std::string text, bool retryable) {
      if (conn) conn->close();
      detail::HttpAttempt attempt;
      attempt.transport_failed = true;
      attempt.retryable = retryable;
      attempt.error = std::move(text);
      finish(std::move(attempt));
    }

    void finish(detail::HttpAttempt attempt) {
      auto handler = std::move(done);
      conn.reset();
      handler(std::move(attempt));
    }
  };

  HttpOptions options_;
  boost::asio::io_context io_{};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  boost::asio::ssl::context tls_;
  std::vector<std::thread> threads_{};

  std::mutex mu_{};
  std::map<std::string, HostSlots, std::less<>> hosts_{};
  std::map<std::string, std::vector<std::shared_ptr<detail::HttpConnection>>, std::less<>> idle_{};
  std::set<std::string, std::less<>> unverified_warned_{};

  std::mutex rng_mu_{};
  std::mt19937_64 rng_;

  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> retries_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> wait_ns_{0};
};

}  // namespace ingest::storage
