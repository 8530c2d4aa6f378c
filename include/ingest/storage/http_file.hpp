// Remote objects read over HTTP(S): RangedReader reads one object by ranged
// GETs in blocks, several requested ahead of the reader on pooled keep-alive
// connections, with the object's size and ETag pinned at open; HttpScheme is
// the http:// and https:// scheme of storage/byte_source.hpp built on it
// (read-only). tf.data counterpart: TensorFlow's HTTP/GCS RandomAccessFile
// with its block cache and RetryingFileSystem; AWS counterpart: the SDK's
// ranged GetObject with If-Match. A RangedReader's read() is for one thread,
// read_at() for any number; HttpScheme is thread-safe. The readahead (block
// size, blocks in flight) of the readers a pipeline stage opens is that
// stage's knobs, autotuned unless the options fix it (ReadaheadOptions).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/runtime/model.hpp"
#include "ingest/storage/byte_source.hpp"
#include "ingest/storage/http_client.hpp"
#include "ingest/storage/url.hpp"

namespace ingest::storage {

/// How a RangedReader reads ahead: blocks of `block_size` bytes, `in_flight`
/// of them requested ahead of the reader. A value left 0 (the default) is
/// autotuned for the readers a pipeline stage opens (runtime/model.hpp:
/// RemoteReadahead; within the pipeline's RAM budget), and is
/// default_block_size / default_in_flight for readers opened outside a
/// pipeline or with autotuning off. A value set is fixed, never tuned.
struct ReadaheadOptions {
  /// block_size's default outside a tuned pipeline stage: 8 MiB.
  static constexpr std::size_t default_block_size = std::size_t{8} << 20;
  /// in_flight's default outside a tuned pipeline stage.
  static constexpr std::size_t default_in_flight = 4;
  /// Bytes per ranged GET (0: autotuned, or default_block_size).
  std::size_t block_size = 0;
  /// Blocks requested ahead of the reader (0: autotuned, or default_in_flight).
  std::size_t in_flight = 0;
};

namespace detail {

/// A Content-Range value "bytes first-last/total" or "bytes */total".
struct ContentRange {
  std::optional<std::uint64_t> first{}, last{};
  std::uint64_t total{};
};

/// Parses a Content-Range value; nullopt when malformed or the total is
/// unknown ("*").
inline std::optional<ContentRange> parse_content_range(std::string_view value) {
  auto number = [](std::string_view text) -> std::optional<std::uint64_t> {
    if (text.empty() || text.size() > 19) return std::nullopt;
    std::uint64_t n = 0;
    for (const char c : text) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return n;
  };
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (value.substr(0, 6) != "bytes ") return std::nullopt;
  value.remove_prefix(6);
  const auto slash = value.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  ContentRange out;
  const auto total = number(value.substr(slash + 1));
  if (!total) return std::nullopt;
  out.total = *total;
  const auto range = value.substr(0, slash);
  if (range == "*") return out;
  const auto dash = range.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  out.first = number(range.substr(0, dash));
  out.last = number(range.substr(dash + 1));
  if (!out.first || !out.last || *out.last < *out.first || *out.last >= out.total) {
    return std::nullopt;
  }
  return out;
}

/// What all the requests of one RangedReader share with the I/O threads.
struct RangedShared {
  HttpClient* client = nullptr;  // the reader holds the client alive
  Url url{};
  std::string name{};  // url.str(), for errors
  PrepareRequest prepare{};
  std::string stage{};
  std::uint64_t size = 0;
  // Opened without a request (a positional reader given the size): the
  // ETag is pinned by the first response instead, and a 404 before then is
  // "not found", not "deleted while it was read".
  bool unopened = false;
  std::atomic<bool> cancelled{false};
  std::atomic<std::uint64_t> bytes{0}, requests{0}, retries{0}, wait_ns{0};

  /// The ETag pinned (empty: none yet, or the server sent none).
  std::string etag() const {
    std::lock_guard lock(etag_mu_);
    return etag_;
  }
  /// Pins `tag` if none is pinned yet; true if `tag` is the one pinned.
  bool pin_or_match(const std::string& tag) {
    std::lock_guard lock(etag_mu_);
    if (etag_.empty()) etag_ = tag;
    return etag_ == tag;
  }
  void pin(std::string tag) {
    std::lock_guard lock(etag_mu_);
    etag_ = std::move(tag);
  }

 private:
  mutable std::mutex etag_mu_{};
  std::string etag_{};  // pinned at open or by the first response; empty if the server sent none
};

/// One ranged GET of [offset, offset + length), retried with backoff and
/// resumed at the exact byte where a body broke. The opening fetch (open =
/// true) learns size and ETag instead of checking them.
struct RangedFetch : std::enable_shared_from_this<RangedFetch> {
  std::shared_ptr<RangedShared> shared{};
  std::uint64_t offset = 0;
  std::size_t length = 0;
  bool open = false;
  std::string data{};
  int attempts = 0;  // since the last attempt that made progress
  std::string last_error{};
  HttpResponse open_response{};  // open: the headers of the response that succeeded
  std::shared_ptr<Completion<std::string>> outcome = std::make_shared<Completion<std::string>>();

  void start() {
    auto self = shared_from_this();
    shared->client->with_slot(shared->url, [self] { self->attempt(); });
  }

  std::uint64_t position() const { return offset + data.size(); }

  void attempt() {
    if (shared->cancelled.load(std::memory_order_relaxed)) {
      return fail(std::make_exception_ptr(IoError("the reader was closed", context())));
    }
    ++attempts;
    HttpRequest request;
    request.target = shared->url.target;
    const std::uint64_t first = position();
    const std::uint64_t last = offset + length - 1;
    request.headers.push_back(
        {"Range", "bytes=" + std::to_string(first) + "-" + std::to_string(last)});
    // If-Match compares strongly: a weak ETag (W/"...") would never match,
    // so that version is checked on each response's ETag only.
    const std::string etag = shared->etag();
    const bool strong = !etag.empty() && etag.rfind("W/", 0) != 0;
    if (!open && strong) request.headers.push_back({"If-Match", etag});
    if (open && !data.empty()) {  // resuming the first block: the version seen so far
      const auto* tag = open_response.header("ETag");
      if (tag != nullptr && tag->rfind("W/", 0) != 0) request.headers.push_back({"If-Match", *tag});
    }
    if (auto error =
            HttpClient::prepare_attempt(shared->url, shared->prepare, request, context())) {
      return fail(std::move(error));
    }
    shared->requests.fetch_add(1, std::memory_order_relaxed);
    auto self = shared_from_this();
    shared->client->async_attempt(
        shared->url, std::move(request), length - data.size(),
        [self](HttpAttempt result) { self->on_attempt(std::move(result)); });
  }

  ErrorContext context() const {
    return {.stage = shared->stage, .file = shared->name, .offset = position()};
  }

  void on_attempt(HttpAttempt result) {
    shared->bytes.fetch_add(result.response.body.size(), std::memory_order_relaxed);
    const int status = result.response.status;
    if (result.transport_failed && !result.retryable) {
      return fail(std::make_exception_ptr(IoError(result.error, context())));
    }
    if (result.headers_received && status == 206) {
      // Check the range before keeping any byte of the body, even a partial one.
      const auto* range_text = result.response.header("Content-Range");
      const auto range = range_text ? parse_content_range(*range_text) : std::nullopt;
      if (!range || !range->first || *range->first != position()) {
        return fail(std::make_exception_ptr(DataLossError(
            "the server answered a range request for byte " + std::to_string(position()) +
                " with Content-Range '" + (range_text ? *range_text : std::string("(none)")) + "'",
            context())));
      }
      if (!open && (range->total != shared->size || !etag_matches(result.response))) {
        return changed(result.response);
      }
      if (open && data.empty()) open_response = result.response;
      if (!result.transport_failed &&
          *range->last - *range->first + 1 != result.response.body.size()) {
        return fail(std::make_exception_ptr(DataLossError(
            "the body of a range response holds " + std::to_string(result.response.body.size()) +
                " bytes where Content-Range says " + *range_text,
            context())));
      }
      if (!result.response.body.empty()) {
        attempts = 0;  // progress: the retry budget starts again at the byte where it broke
        if (data.empty()) {
          data = std::move(result.response.body);
        } else {
          data += result.response.body;
        }
      }
      if (!result.transport_failed) {
        // At open the object may end before the block does.
        if (data.size() == length || (open && *range->last + 1 == range->total)) return succeed();
        // A complete but shorter range than asked: ask for the rest.
        return retry("the server sent a shorter range than requested", nullptr);
      }
      return retry(result.error, nullptr);
    }
    if (result.transport_failed) {
      return retry(result.error, result.headers_received ? &result.response : nullptr);
    }
    if (retryable_status(status)) return retry(status_text(status), &result.response);
    if (status == 200) {
      // The server ignored Range: usable only when the whole object was asked for.
      if (!open && !etag_matches(result.response)) return changed(result.response);
      const auto whole = result.response.body.size();
      if (position() == 0 && (open || whole == shared->size) && whole <= length) {
        if (open) open_response = result.response;
        data = std::move(result.response.body);
        return succeed();
      }
      return fail(std::make_exception_ptr(IoError(
          "the server ignored the Range header (HTTP 200 with " + std::to_string(whole) + " bytes)",
          context())));
    }
    if (status == 416 && open && data.empty()) {  // an empty object has no byte 0
      open_response = result.response;
      return succeed();
    }
    if (status == 412) return changed(result.response);
    // A range inside the size pinned (or indexed) is past the object's end:
    // it shrank.
    if (status == 416 && !open) return changed(result.response);
    if (!open && !shared->unopened && (status == 404 || status == 410)) {
      return fail(std::make_exception_ptr(DataLossError(
          "the object was deleted while it was read (" + status_text(status) + ")", context())));
    }
    return fail(std::make_exception_ptr(IoError("GET failed: " + status_text(status), context())));
  }

  bool etag_matches(const HttpResponse& response) const {
    const auto* tag = response.header("ETag");
    return tag == nullptr || shared->pin_or_match(*tag);
  }

  void changed(const HttpResponse& response) {
    const auto* tag = response.header("ETag");
    fail(std::make_exception_ptr(DataLossError(
        "the object changed while it was read (ETag " + shared->etag() + " at open, " +
            (response.status == 412 ? std::string("412 Precondition Failed to If-Match")
                                    : "now " + (tag ? *tag : std::string("none"))) +
            ")",
        context())));
  }

  void retry(const std::string& error, const HttpResponse* response) {
    last_error = error;
    const int max = shared->client->options().retry.max_attempts;
    if (attempts >= max || shared->cancelled.load(std::memory_order_relaxed)) {
      return fail(std::make_exception_ptr(
          IoError("GET failed after " + std::to_string(attempts) +
                      (attempts == 1 ? " attempt: " : " attempts: ") + error,
                  context())));
    }
    shared->retries.fetch_add(1, std::memory_order_relaxed);
    shared->client->count_retry();
    auto self = shared_from_this();
    shared->client->after(shared->client->backoff(std::max(attempts, 1), response),
                          [self] { self->attempt(); });
  }

  void succeed() {
    shared->client->release_slot(shared->url);
    outcome->set_value(std::move(data));
  }

  void fail(std::exception_ptr error) {
    shared->client->release_slot(shared->url);
    outcome->set_exception(std::move(error));
  }
};

}  // namespace detail

/// Reads one object by ranged GETs in blocks, `in_flight` blocks requested
/// ahead of the reader, each on a pooled keep-alive connection. Opening
/// issues a first ranged GET (its block is kept) that pins size and ETag;
/// every later range carries `If-Match: <etag>`, and a 412 (or an ETag or
/// Content-Range total that changed) raises DataLossError naming the URL and
/// offset. 404/403 at open raise IoError at once, naming the URL, without
/// retrying. A body that breaks mid-block is resumed from the exact byte
/// where it broke. Blocks still in flight when the reader is destroyed are
/// abandoned (their connections finish or time out on the I/O threads).
class RangedReader final : public RemoteReader {
 public:
  /// Opens `url` (blocking until the first block arrives). `prepare` signs
  /// or decorates every request; `stage` names the caller in errors.
  /// Opened by a pipeline stage (storage::current_transfer_node() is set),
  /// the reader declares itself to that stage's readahead knobs: with a
  /// value of `readahead` left 0 and the pipeline autotuned, it follows the
  /// knobs, which the autotuner tunes, reading them each time it requests
  /// a block; with both set, the knobs show them, fixed. Opened for
  /// Access::positional, it reads nothing ahead (read_at / start_read_at
  /// fetch exactly their ranges), its opening request fetches at most
  /// positional_open_bytes, and it leaves the stage's readahead knobs alone;
  /// given the object's `size` too, it sends no request at all until the
  /// first read, whose response pins the ETag (and a missing object is an
  /// IoError from that read).
  RangedReader(std::shared_ptr<HttpClient> client, Url url, PrepareRequest prepare,
               ReadaheadOptions readahead, std::string_view stage,
               Access access = Access::sequential, std::optional<std::uint64_t> size = {})
      : client_(std::move(client)) {
    if (!client_) {
      throw InvalidArgument("RangedReader: no HttpClient", {.stage = std::string(stage)});
    }
    const bool positional = access == Access::positional;
    std::shared_ptr<ingest::detail::StageNode> node =
        positional ? nullptr : current_transfer_node();
    const bool autotune = node && node->model() &&
                          node->model()->autotune.load(std::memory_order_relaxed) &&
                          (readahead.block_size == 0 || readahead.in_flight == 0);
    if (autotune) {  // the knobs left 0 are tuned, the others fixed; the reader follows them
      using ingest::detail::RemoteReadahead;
      auto& knobs = node->readahead;
      ingest::detail::configure_knob(
          knobs.in_flight,
          readahead.in_flight == 0 ? -1 : static_cast<std::int64_t>(readahead.in_flight),
          RemoteReadahead::min_in_flight, RemoteReadahead::max_in_flight,
          RemoteReadahead::initial_in_flight);
      ingest::detail::configure_knob(
          knobs.block_bytes,
          readahead.block_size == 0 ? -1 : static_cast<std::int64_t>(readahead.block_size),
          RemoteReadahead::min_block_bytes, RemoteReadahead::max_block_bytes,
          RemoteReadahead::initial_block_bytes);
      node->model()->tunable_added.store(true, std::memory_order_relaxed);
      tuned_.store(&knobs, std::memory_order_relaxed);
    } else {
      if (readahead.block_size == 0) readahead.block_size = ReadaheadOptions::default_block_size;
      if (readahead.in_flight == 0) readahead.in_flight = ReadaheadOptions::default_in_flight;
      set_readahead(readahead);
      if (node) {  // fixed: the stage's knobs show it
        const ReadaheadOptions fixed = this->readahead();
        ingest::detail::configure_knob(node->readahead.in_flight,
                                       static_cast<std::int64_t>(fixed.in_flight), 1, 1, 1);
        ingest::detail::configure_knob(node->readahead.block_bytes,
                                       static_cast<std::int64_t>(fixed.block_size), 1, 1, 1);
      }
    }
    shared_ = std::make_shared<detail::RangedShared>();
    shared_->client = client_.get();
    shared_->name = url.str();
    shared_->url = std::move(url);
    shared_->prepare = std::move(prepare);
    shared_->stage = std::string(stage);

    if (positional && size) {
      // The size is known (an index): no request until the first read,
      // whose response pins the ETag.
      shared_->size = *size;
      shared_->unopened = true;
    } else {
      auto fetch = std::make_shared<detail::RangedFetch>();
      fetch->shared = shared_;
      fetch->offset = 0;
      fetch->length = positional ? std::min(this->readahead().block_size, positional_open_bytes)
                                 : this->readahead().block_size;
      fetch->open = true;
      auto result = fetch->outcome;
      fetch->start();
      block_ = wait(*result);
      const HttpResponse& response = fetch->open_response;
      if (response.status == 206 || response.status == 416) {
        const auto* range_text = response.header("Content-Range");
        const auto range = range_text ? detail::parse_content_range(*range_text) : std::nullopt;
        if (!range) {
          throw DataLossError("the response at open has no valid Content-Range (" +
                                  (range_text ? *range_text : std::string("none")) + ")",
                              {.stage = shared_->stage, .file = shared_->name, .offset = 0});
        }
        shared_->size = range->total;
      } else {
        shared_->size = block_.size();  // 200: the whole object
      }
      if (const auto* tag = response.header("ETag")) shared_->pin(*tag);
      if (block_.size() > shared_->size) block_.resize(static_cast<std::size_t>(shared_->size));
    }
    next_launch_ = block_.size();
    if (!positional) top_up();  // a sequential read() tops up when it needs a block
    if (node) {                 // open: its blocks count against the stage's RAM budget
      node_ = std::move(node);
      node_->readahead.open_readers.fetch_add(1, std::memory_order_relaxed);
    }
  }

  /// The most a positional reader's opening request fetches.
  static constexpr std::size_t positional_open_bytes = std::size_t{64} << 10;

  RangedReader(const RangedReader&) = delete;
  RangedReader& operator=(const RangedReader&) = delete;
  ~RangedReader() override {
    shared_->cancelled.store(true, std::memory_order_relaxed);
    if (node_) node_->readahead.open_readers.fetch_sub(1, std::memory_order_relaxed);
  }

  /// The object's size in bytes, pinned at open.
  std::uint64_t size() const override { return shared_->size; }

  /// The ETag pinned at open (empty if the server sent none).
  std::string etag() const { return shared_->etag(); }

  /// The URL read.
  const Url& url() const noexcept { return shared_->url; }

  /// Changes the readahead for the blocks requested from now on (the reader
  /// holds up to in_flight + 1 blocks in memory). Values below 1 count as 1.
  /// A reader that followed its stage's autotuned knobs keeps these values
  /// instead from now on. Thread-safe.
  void set_readahead(ReadaheadOptions readahead) noexcept {
    block_size_.store(std::max<std::size_t>(readahead.block_size, 1), std::memory_order_relaxed);
    in_flight_.store(std::max<std::size_t>(readahead.in_flight, 1), std::memory_order_relaxed);
    tuned_.store(nullptr, std::memory_order_relaxed);
  }

  /// The readahead in force (the stage's knobs, when it follows them).
  ReadaheadOptions readahead() const noexcept {
    if (const auto* tuned = tuned_.load(std::memory_order_relaxed)) {
      return {
          .block_size =
              static_cast<std::size_t>(std::max<std::int64_t>(tuned->block_bytes.get(), 1)),
          .in_flight = static_cast<std::size_t>(std::max<std::int64_t>(tuned->in_flight.get(), 1))};
    }
    return {.block_size = block_size_.load(std::memory_order_relaxed),
            .in_flight = in_flight_.load(std::memory_order_relaxed)};
  }

  /// True while the reader follows its stage's autotuned readahead.
  bool autotuned() const noexcept { return tuned_.load(std::memory_order_relaxed) != nullptr; }

  /// Reads up to n bytes at the sequential position from the read-ahead
  /// blocks; fewer only at the end (0 there). Throws IoError /
  /// DataLossError naming the URL and offset.
  std::size_t read(void* dst, std::size_t n) override {
    if (failed_) std::rethrow_exception(failed_);
    try {
      return read_blocks(dst, n);
    } catch (...) {
      failed_ = std::current_exception();  // a lost block is never skipped over
      throw;
    }
  }

  /// Reads up to n bytes at `offset` with one ranged GET (not cached, not
  /// read ahead); fewer only at the end. Thread-safe.
  std::size_t read_at(std::uint64_t offset, void* dst, std::size_t n) override {
    const std::string data = start_read_at(offset, n)->get();
    if (!data.empty()) std::memcpy(dst, data.data(), data.size());
    return data.size();
  }

  /// Sends the ranged GET for up to n bytes at `offset` now; get() waits for
  /// it (the wait counts in counters()). Any number may be in flight, each
  /// on its own pooled connection. Thread-safe.
  std::unique_ptr<RemoteRead> start_read_at(std::uint64_t offset, std::size_t n) override {
    class Read final : public RemoteRead {
     public:
      Read(RangedReader& reader, std::uint64_t offset, std::size_t length)
          : reader_(reader),
            offset_(offset),
            length_(length),
            result_(length == 0 ? nullptr : reader.launch(offset, length)) {}
      std::string get() override {
        if (!result_) return {};
        std::string data = reader_.wait(*result_);
        if (data.size() != length_) throw reader_.internal_error("a short range", offset_);
        return data;
      }

     private:
      RangedReader& reader_;
      std::uint64_t offset_;
      std::size_t length_;
      std::shared_ptr<detail::Completion<std::string>> result_;
    };
    const std::size_t length =
        offset >= shared_->size
            ? 0
            : static_cast<std::size_t>(std::min<std::uint64_t>(n, shared_->size - offset));
    return std::make_unique<Read>(*this, offset, length);
  }

  /// Bytes fetched, requests and retries sent, and the time read calls
  /// waited for the network.
  TransferCounters counters() const override {
    TransferCounters c;
    c.bytes = shared_->bytes.load(std::memory_order_relaxed);
    c.requests = shared_->requests.load(std::memory_order_relaxed);
    c.retries = shared_->retries.load(std::memory_order_relaxed);
    c.wait_ns = shared_->wait_ns.load(std::memory_order_relaxed);
    return c;
  }

 private:
  std::size_t read_blocks(void* dst, std::size_t n) {
    auto* out = static_cast<char*>(dst);
    std::size_t total = 0;
    while (total < n && position_ < shared_->size) {
      if (block_pos_ == block_.size()) {
        if (pending_.empty()) top_up();
        auto next = std::move(pending_.front());
        pending_.pop_front();
        block_ = wait(*next);
        block_pos_ = 0;
        top_up();
        if (block_.empty()) {
          throw internal_error("an empty block");
        }
      }
      const std::size_t take = std::min(n - total, block_.size() - block_pos_);
      std::memcpy(out + total, block_.data() + block_pos_, take);
      block_pos_ += take;
      total += take;
      position_ += take;
    }
    return total;
  }

  std::shared_ptr<detail::Completion<std::string>> launch(std::uint64_t offset,
                                                          std::size_t length) {
    auto fetch = std::make_shared<detail::RangedFetch>();
    fetch->shared = shared_;
    fetch->offset = offset;
    fetch->length = length;
    auto result = fetch->outcome;
    fetch->start();
    return result;
  }

  /// Requests blocks until `in_flight` are pending or the object is covered.
  void top_up() {
    const ReadaheadOptions now = readahead();  // per block: the autotuner may have moved the knobs
    const std::size_t in_flight = now.in_flight;
    const std::size_t block_size = now.block_size;
    while (pending_.size() < in_flight && next_launch_ < shared_->size) {
      const auto length = static_cast<std::size_t>(
          std::min<std::uint64_t>(block_size, shared_->size - next_launch_));
      pending_.push_back(launch(next_launch_, length));
      next_launch_ += length;
    }
  }

  /// The result of a fetch, counting the time waited (also when it threw).
  std::string wait(detail::Completion<std::string>& result) {
    const detail::CountWait count(shared_->wait_ns);
    return result.get();
  }

  InternalError internal_error(std::string_view what) const {
    return internal_error(what, position_);
  }
  InternalError internal_error(std::string_view what, std::uint64_t offset) const {
    return InternalError("RangedReader: " + std::string(what),
                         {.stage = shared_->stage, .file = shared_->name, .offset = offset});
  }

  std::shared_ptr<HttpClient> client_;
  std::atomic<std::size_t> block_size_{1};
  std::atomic<std::size_t> in_flight_{1};
  // The stage that opened the reader (its open readers count it), and its
  // readahead knobs while the reader follows them.
  std::shared_ptr<ingest::detail::StageNode> node_{};
  std::atomic<const ingest::detail::RemoteReadahead*> tuned_{nullptr};
  std::shared_ptr<detail::RangedShared> shared_{};
  std::string block_{};  // the block being read
  std::size_t block_pos_ = 0;
  std::uint64_t position_ = 0;
  std::uint64_t next_launch_ = 0;  // start of the next block to request
  std::deque<std::shared_ptr<detail::Completion<std::string>>> pending_{};
  std::exception_ptr failed_{};  // read() failed: every later read() rethrows
};

/// The http:// and https:// scheme: open_read gives a RangedReader, exists
/// sends HEAD (404 and 410 are false); open_write and list throw
/// InvalidArgument (plain HTTP has no atomic upload and no listing).
class HttpScheme final : public Scheme {
 public:
  /// Reads through `client` (shared by every object opened) with
  /// `readahead` (values left 0: autotuned, see ReadaheadOptions).
  explicit HttpScheme(std::shared_ptr<HttpClient> client, ReadaheadOptions readahead = {})
      : client_(std::move(client)) {
    if (!client_) throw InvalidArgument("HttpScheme: no HttpClient");
    set_readahead(readahead);
  }

  /// The client requests go through.
  const std::shared_ptr<HttpClient>& client() const noexcept { return client_; }

  /// Sets the readahead of the readers opened from now on. Thread-safe.
  void set_readahead(ReadaheadOptions readahead) noexcept {
    block_size_.store(readahead.block_size, std::memory_order_relaxed);
    in_flight_.store(readahead.in_flight, std::memory_order_relaxed);
  }

  /// The readahead new readers get.
  ReadaheadOptions readahead() const noexcept {
    return {.block_size = block_size_.load(std::memory_order_relaxed),
            .in_flight = in_flight_.load(std::memory_order_relaxed)};
  }

  /// A RangedReader on `url`; InvalidArgument (with `stage`) for a
  /// malformed URL, IoError naming the URL if it cannot be opened.
  std::unique_ptr<RemoteReader> open_read(const std::string& url, std::string_view stage) override {
    return std::make_unique<RangedReader>(client_, parse(url, stage), PrepareRequest{}, readahead(),
                                          stage);
  }
  /// The same, for positional reads (nothing read ahead; no request before
  /// the first read when the size is given).
  std::unique_ptr<RemoteReader> open_positional(const std::string& url, std::string_view stage,
                                                std::optional<std::uint64_t> size) override {
    return std::make_unique<RangedReader>(client_, parse(url, stage), PrepareRequest{}, readahead(),
                                          stage, Access::positional, size);
  }

  std::unique_ptr<RemoteWriter> open_write(const std::string& url,
                                           std::string_view stage) override {
    throw InvalidArgument("http(s):// is read-only: write to a local path or s3:// instead",
                          {.stage = std::string(stage), .file = url});
  }

  bool exists(const std::string& url, std::string_view stage) override {
    const Url parsed = parse(url, stage);
    HttpResponse response;
    try {
      response = client_->send(parsed, HttpRequest{.method = "HEAD", .target = parsed.target});
    } catch (Error& e) {
      e.add_context({.stage = std::string(stage), .file = url});
      throw;
    }
    if (response.status >= 200 && response.status < 300) return true;
    if (response.status == 404 || response.status == 410) return false;
    throw IoError("HEAD failed: HTTP " + std::to_string(response.status),
                  {.stage = std::string(stage), .file = url});
  }

  std::vector<std::string> list(const std::string& prefix, std::string_view stage) override {
    throw InvalidArgument("http(s):// cannot list: name the files, or use s3:// to list a prefix",
                          {.stage = std::string(stage), .file = prefix});
  }

 private:
  static Url parse(const std::string& url, std::string_view stage) {
    try {
      return parse_url(url);
    } catch (Error& e) {
      e.add_context({.stage = std::string(stage)});
      throw;
    }
  }

  std::shared_ptr<HttpClient> client_;
  std::atomic<std::size_t> block_size_{};
  std::atomic<std::size_t> in_flight_{};
};

/// Registers one HttpScheme for both "http" and "https" (replacing any
/// handler registered before) and returns it.
inline std::shared_ptr<HttpScheme> register_http_scheme(std::shared_ptr<HttpClient> client,
                                                        ReadaheadOptions readahead = {}) {
  auto scheme = std::make_shared<HttpScheme>(std::move(client), readahead);
  register_scheme("http", scheme);
  register_scheme("https", scheme);
  return scheme;
}

}  // namespace ingest::storage
