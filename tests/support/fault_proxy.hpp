// A fault-injecting TCP proxy for the remote-storage tests and the W9 bench:
// it listens on 127.0.0.1 (a free port) and forwards each connection to a
// real server on 127.0.0.1, adding latency per request, throttling the
// server's bytes, resetting or truncating connections after N bytes and
// answering bursts of 503 (S3 `SlowDown`) itself. It plays the part of
// toxiproxy / tc-netem for a loopback server. Test support, not library code.
//
// Threads: one io_context on its own thread (plain forwarding on loopback
// moves GB/s, far above what the tests and W9 ask); set_faults(), faults()
// and counters() are safe from any thread at any time; the destructor closes
// every socket and joins the thread without waiting for any transfer.
// Linux only (SIOCOUTQ tells when a reset can no longer lose sent bytes).
#pragma once

#include <sys/ioctl.h>

#include <linux/sockios.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>

namespace ingest::testing {

/// A TCP proxy on 127.0.0.1 in front of an upstream server on 127.0.0.1 that
/// injects faults. A "request" is approximated as the first client bytes after
/// connect or after the server last sent bytes (true for HTTP/1.1 without
/// pipelining or `Expect: 100-continue`).
class FaultProxy {
 public:
  /// What to break. Zero / empty members mean "no fault". Byte counts for
  /// resets and truncations run per connection from its start or from the
  /// last set_faults(), whichever is later.
  struct Faults {
    /// Delay before forwarding the first byte of each request (also before a 503).
    std::chrono::milliseconds latency{};
    /// Server->client rate per connection in bytes per second (a token
    /// bucket holding 10 ms of the rate); 0 = unlimited.
    std::uint64_t bytes_per_second{};
    /// Reset (RST, the client sees ECONNRESET) a connection once it has been
    /// sent this many server bytes; applies to the next `resets` connections
    /// that get that far.
    std::uint64_t reset_after_bytes{};
    /// How many connections to reset; 0 = none.
    std::uint64_t resets{};
    /// Close cleanly (FIN) after this many server bytes, on the next
    /// `truncations` connections that get that far.
    std::uint64_t truncate_after_bytes{};
    /// How many connections to truncate; 0 = none.
    std::uint64_t truncations{};
    /// Answer the next N requests with `503 Service Unavailable` from the
    /// proxy itself, consuming each request (headers and Content-Length body)
    /// without forwarding it.
    std::uint64_t fail_requests{};
    /// The 503's `Retry-After` header in seconds, if any.
    std::optional<int> retry_after_seconds{};
    /// Give the 503 an S3 `<Error><Code>SlowDown</Code>...` XML body.
    bool slow_down_body{};
    /// Send `Connection: close` with the 503 and close (FIN) the connection;
    /// otherwise it stays open for the next request.
    bool close_after_fail{};
  };

  /// What the proxy has done so far. A count moves when the proxy's write
  /// completes, which may be just after the client has read the bytes: a
  /// test that compares right after reading should wait (bounded) for it.
  struct Counters {
    std::uint64_t connections{};      ///< connections accepted
    std::uint64_t requests{};         ///< request starts seen (forwarded or failed)
    std::uint64_t bytes_to_server{};  ///< client bytes forwarded upstream
    std::uint64_t bytes_to_client{};  ///< server bytes forwarded to clients
    std::uint64_t resets{};           ///< connections reset
    std::uint64_t truncations{};      ///< connections truncated
    std::uint64_t failed_requests{};  ///< 503s answered by the proxy
  };

  /// Starts listening on 127.0.0.1 at a free port, forwarding to
  /// 127.0.0.1:`upstream_port`. Throws boost::system::system_error if it
  /// cannot listen.
  explicit FaultProxy(std::uint16_t upstream_port) : FaultProxy(upstream_port, Faults()) {}

  /// Starts listening as above, with `faults` set from the start.
  FaultProxy(std::uint16_t upstream_port, Faults faults)
      : state_(std::make_shared<State>()),
        acceptor_(io_, {boost::asio::ip::address_v4::loopback(), 0}),
        upstream_({boost::asio::ip::address_v4::loopback(), upstream_port}) {
    set_faults(std::move(faults));
    port_ = acceptor_.local_endpoint().port();
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  /// Closes the listener and every connection (the clients see EOF or a
  /// reset) and joins the proxy's thread; never waits for a transfer.
  ~FaultProxy() {
    boost::asio::post(io_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      for (auto& weak : connections_) {
        if (auto c = weak.lock()) c->close();
      }
      io_.stop();
    });
    thread_.join();
  }

  /// The port the proxy listens on (127.0.0.1).
  std::uint16_t port() const noexcept { return port_; }

  /// Replaces the faults; takes effect at the next chunk on every connection,
  /// open ones included, and restarts the reset/truncation/503 budgets.
  void set_faults(Faults faults) {
    std::lock_guard lock(state_->mu);
    state_->faults = std::move(faults);
    state_->resets_left = state_->faults.resets;
    state_->truncations_left = state_->faults.truncations;
    state_->fails_left = state_->faults.fail_requests;
    ++state_->generation;
  }

  /// The faults last set.
  Faults faults() const {
    std::lock_guard lock(state_->mu);
    return state_->faults;
  }

  /// A snapshot of the counters.
  Counters counters() const {
    const State& s = *state_;
    return {s.connections.load(),     s.requests.load(), s.bytes_to_server.load(),
            s.bytes_to_client.load(), s.resets.load(),   s.truncations.load(),
            s.failed_requests.load()};
  }

 private:
  using tcp = boost::asio::ip::tcp;
  using error_code = boost::system::error_code;
  using Clock = std::chrono::steady_clock;

  struct State {
    mutable std::mutex mu;
    Faults faults;
    std::uint64_t generation = 0;
    std::uint64_t resets_left = 0;
    std::uint64_t truncations_left = 0;
    std::uint64_t fails_left = 0;
    std::atomic<std::uint64_t> connections{0}, requests{0}, bytes_to_server{0}, bytes_to_client{0},
        resets{0}, truncations{0}, failed_requests{0};

    struct Snapshot {
      Faults faults;
      std::uint64_t generation = 0;
    };
    Snapshot snapshot() const {
      std::lock_guard lock(mu);
      return {faults, generation};
    }
    /// Takes one unit of a budget if any is left (under the lock).
    bool take(std::uint64_t State::*budget) {
      std::lock_guard lock(mu);
      if (this->*budget == 0) return false;
      --(this->*budget);
      return true;
    }
  };

  // One proxied connection: two independent directions on the proxy's one
  // thread. Up (client->server) detects request starts, applies latency and
  // answers failed requests; down (server->client) throttles and cuts.
  class Connection : public std::enable_shared_from_this<Connection> {
   public:
    Connection(std::shared_ptr<State> state, tcp::socket client)
        : state_(std::move(state)),
          client_(std::move(client)),
          upstream_(client_.get_executor()),
          up_timer_(client_.get_executor()),
          down_timer_(client_.get_executor()),
          drain_timer_(client_.get_executor()) {}

    void start(const tcp::endpoint& upstream) {
      error_code ec;
      client_.set_option(tcp::no_delay(true), ec);
      upstream_.async_connect(upstream, [self = shared_from_this()](const error_code& e) {
        if (self->closed_) return;
        if (e) return self->close();
        error_code ignored;
        self->upstream_.set_option(tcp::no_delay(true), ignored);
        self->read_client();
        self->read_upstream();
      });
    }

    /// Closes both sockets and cancels the timers; pending handlers then see
    /// `closed_` and stop.
    void close() {
      closed_ = true;
      error_code ec;
      client_.close(ec);
      upstream_.close(ec);
      up_timer_.cancel();
      down_timer_.cancel();
      drain_timer_.cancel();
    }

   private:
    static constexpr std::size_t kBuffer = 64 * 1024;
    static constexpr std::size_t kMaxHead = 64 * 1024;

    // ---- client -> server ----
    void read_client() {
      reading_client_ = true;
      client_.async_read_some(boost::asio::buffer(up_buf_),
                              [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                self->reading_client_ = false;
                                self->on_client_data(ec, n);
                              });
    }

    // After a clean close: discard the client's input until it closes.
    void drain_client() {
      if (!reading_client_) read_client();
    }

    void on_client_data(const error_code& ec, std::size_t n) {
      if (closed_) return;
      if (ec) {
        if (ec != boost::asio::error::eof || draining_) return close();
        // The client half-closed: pass the FIN on and keep forwarding the reply.
        error_code ignored;
        upstream_.shutdown(tcp::socket::shutdown_send, ignored);
        return;
      }
      if (draining_) return drain_client();
      up_data_ = std::string_view(up_buf_.data(), n);
      process_up();
    }

    void process_up() {
      if (closed_) return;
      if (draining_) return drain_client();
      if (up_data_.empty()) return read_client();
      if (failing_) return consume_failed();
      if (!request_pending_) return forward_up();
      request_pending_ = false;
      state_->requests.fetch_add(1);
      const auto snap = state_->snapshot();
      const bool fail = state_->take(&State::fails_left);
      auto after = [self = shared_from_this(), fail] {
        if (!fail) return self->forward_up();
        self->failing_ = true;
        self->head_.clear();
        self->head_done_ = false;
        self->body_left_ = 0;
        self->consume_failed();
      };
      if (snap.faults.latency.count() <= 0) return after();
      up_timer_.expires_after(snap.faults.latency);
      up_timer_.async_wait([self = shared_from_this(), after](const error_code&) {
        if (self->closed_) return;
        if (self->draining_) return self->drain_client();
        after();
      });
    }

    void forward_up() {
      boost::asio::async_write(upstream_, boost::asio::buffer(up_data_.data(), up_data_.size()),
                               [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                 if (self->closed_) return;
                                 if (self->draining_) return self->drain_client();
                                 if (ec) return self->close();
                                 self->state_->bytes_to_server.fetch_add(n);
                                 self->up_data_ = {};
                                 self->read_client();
                               });
    }

    // Reads the failed request's headers and Content-Length body off the
    // client (no allocation beyond kMaxHead), then answers the 503.
    void consume_failed() {
      if (!head_done_) {
        const std::size_t old = head_.size();
        const std::size_t take = std::min(up_data_.size(), kMaxHead + 4 - old);
        head_.append(up_data_.data(), take);
        const std::size_t from = old >= 3 ? old - 3 : 0;
        const std::size_t end = head_.find("\r\n\r\n", from);
        if (end == std::string::npos) {
          up_data_ = {};
          if (head_.size() > kMaxHead) return answer_503(true);  // absurd head: answer and close
          return read_client();
        }
        head_done_ = true;
        const std::size_t used = end + 4 - old;  // bytes of this chunk in the head
        up_data_.remove_prefix(used);
        head_.resize(end + 4);
        parse_head();
      }
      const std::size_t skip = static_cast<std::size_t>(
          std::min<std::uint64_t>(body_left_, static_cast<std::uint64_t>(up_data_.size())));
      up_data_.remove_prefix(skip);
      body_left_ -= skip;
      if (body_left_ > 0) return read_client();
      answer_503(chunked_);
    }

    static char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

    void parse_head() {
      head_request_ = head_.rfind("HEAD ", 0) == 0;
      chunked_ = false;
      body_left_ = 0;
      std::size_t pos = head_.find("\r\n");
      while (pos != std::string::npos && pos + 2 < head_.size()) {
        const std::size_t start = pos + 2;
        const std::size_t eol = head_.find("\r\n", start);
        if (eol == std::string::npos || eol == start) break;
        std::string line = head_.substr(start, eol - start);
        std::transform(line.begin(), line.end(), line.begin(), lower);
        if (line.rfind("content-length:", 0) == 0) {
          std::uint64_t v = 0;
          for (char c : line.substr(15)) {
            if (c >= '0' && c <= '9' && v < (std::uint64_t{1} << 50)) v = v * 10 + (c - '0');
          }
          body_left_ = v;
        } else if (line.rfind("transfer-encoding:", 0) == 0 &&
                   line.find("chunked") != std::string::npos) {
          chunked_ = true;  // not parsed: answer at once and close
        }
        pos = eol;
      }
    }

    void answer_503(bool force_close) {
      const auto snap = state_->snapshot();
      const bool close_after = force_close || snap.faults.close_after_fail;
      std::string body;
      if (snap.faults.slow_down_body) {
        body =
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
            "<Message>Please reduce your request rate.</Message>"
            "<RequestId>ingest-fault-proxy</RequestId></Error>";
      }
      reply_ = "HTTP/1.1 503 Service Unavailable\r\n";
      reply_ += snap.faults.slow_down_body ? "Content-Type: application/xml\r\n"
                                           : "Content-Type: text/plain\r\n";
      reply_ += "Content-Length: " + std::to_string(body.size()) + "\r\n";
      if (snap.faults.retry_after_seconds) {
        reply_ += "Retry-After: " + std::to_string(*snap.faults.retry_after_seconds) + "\r\n";
      }
      reply_ += close_after ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
      if (!head_request_) reply_ += body;
      failing_ = false;
      boost::asio::async_write(
          client_, boost::asio::buffer(reply_),
          [self = shared_from_this(), close_after](const error_code& ec, std::size_t) {
            if (self->closed_) return;
            if (ec) return self->close();
            self->state_->failed_requests.fetch_add(1);
            if (self->draining_) return self->drain_client();
            if (close_after) return self->finish_cleanly();
            self->request_pending_ = true;
            self->process_up();  // a pipelined request may follow
          });
    }

    // ---- server -> client ----
    void read_upstream() {
      std::size_t want = kBuffer;
      const auto snap = state_->snapshot();
      if (snap.faults.bytes_per_second > 0) {
        // Chunks of ~10 ms of the rate keep the pacing smooth.
        want = static_cast<std::size_t>(
            std::clamp<std::uint64_t>(snap.faults.bytes_per_second / 100, 1, kBuffer));
      }
      upstream_.async_read_some(boost::asio::buffer(down_buf_.data(), want),
                                [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                  self->on_upstream_data(ec, n);
                                });
    }

    void on_upstream_data(const error_code& ec, std::size_t n) {
      if (closed_ || draining_) return;
      if (ec) {
        if (ec == boost::asio::error::eof) return finish_cleanly();
        return reset_client();  // the server reset: so does the proxy
      }
      request_pending_ = true;
      const auto snap = state_->snapshot();
      if (snap.generation != generation_) {
        generation_ = snap.generation;
        fault_bytes_ = 0;
      }
      cut_ = Cut::none;
      down_size_ = n;
      const Faults& f = snap.faults;
      if (f.resets > 0 && fault_bytes_ + n > f.reset_after_bytes &&
          state_->take(&State::resets_left)) {
        cut_ = Cut::reset;
        down_size_ = static_cast<std::size_t>(
            f.reset_after_bytes > fault_bytes_ ? f.reset_after_bytes - fault_bytes_ : 0);
      } else if (f.truncations > 0 && fault_bytes_ + n > f.truncate_after_bytes &&
                 state_->take(&State::truncations_left)) {
        cut_ = Cut::truncate;
        down_size_ = static_cast<std::size_t>(
            f.truncate_after_bytes > fault_bytes_ ? f.truncate_after_bytes - fault_bytes_ : 0);
      }
      if (f.bytes_per_second == 0 || down_size_ == 0) return write_down();
      // A token bucket holding 10 ms of the rate: each chunk has a slot on a
      // schedule at the rate; a late timer is made up for, but an idle
      // connection saves up no more than 10 ms.
      const auto now = Clock::now();
      const auto start =
          std::max<Clock::time_point>(next_send_, now - std::chrono::milliseconds(10));
      next_send_ =
          start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                      static_cast<double>(down_size_) / static_cast<double>(f.bytes_per_second)));
      if (start <= now) return write_down();
      down_timer_.expires_at(start);
      down_timer_.async_wait([self = shared_from_this()](const error_code&) {
        if (!self->closed_) self->write_down();
      });
    }

    void write_down() {
      boost::asio::async_write(client_, boost::asio::buffer(down_buf_.data(), down_size_),
                               [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                 if (self->closed_) return;
                                 if (ec) return self->close();
                                 self->state_->bytes_to_client.fetch_add(n);
                                 self->fault_bytes_ += n;
                                 switch (self->cut_) {
                                   case Cut::reset:
                                     self->state_->resets.fetch_add(1);
                                     self->reset_deadline_ = Clock::now() + std::chrono::seconds(2);
                                     return self->reset_when_delivered();
                                   case Cut::truncate:
                                     self->state_->truncations.fetch_add(1);
                                     return self->finish_cleanly();
                                   case Cut::none: return self->read_upstream();
                                 }
                               });
    }

    // An RST discards whatever the client's kernel has not acknowledged, so
    // wait (up to 2 s) until every byte sent is acknowledged: the client then
    // reads exactly reset_after_bytes before ECONNRESET.
    void reset_when_delivered() {
      int unacked = 0;
      if (::ioctl(client_.native_handle(), SIOCOUTQ, &unacked) == 0 && unacked > 0 &&
          Clock::now() < reset_deadline_) {
        down_timer_.expires_after(std::chrono::milliseconds(1));
        down_timer_.async_wait([self = shared_from_this()](const error_code&) {
          if (!self->closed_) self->reset_when_delivered();
        });
        return;
      }
      reset_client();
    }

    void reset_client() {
      error_code ec;
      client_.set_option(boost::asio::socket_base::linger(true, 0), ec);
      close();
    }

    // FIN to the client after what was sent; the upstream connection is
    // dropped. The client's socket stays open, its input discarded, until the
    // client closes (or 10 s pass): closing a socket with unread input would
    // send an RST instead of the FIN.
    void finish_cleanly() {
      draining_ = true;
      error_code ec;
      client_.shutdown(tcp::socket::shutdown_send, ec);
      upstream_.close(ec);
      up_timer_.cancel();
      down_timer_.cancel();
      drain_timer_.expires_after(std::chrono::seconds(10));
      drain_timer_.async_wait([self = shared_from_this()](const error_code&) {
        if (!self->closed_) self->close();
      });
      drain_client();
    }

    enum class Cut { none, reset, truncate };

    std::shared_ptr<State> state_;
    tcp::socket client_;
    tcp::socket upstream_;
    boost::asio::steady_timer up_timer_;
    boost::asio::steady_timer down_timer_;
    boost::asio::steady_timer drain_timer_;
    std::array<char, kBuffer> up_buf_{};
    std::array<char, kBuffer> down_buf_{};
    std::string_view up_data_{};
    std::size_t down_size_{};
    Cut cut_{Cut::none};
    bool closed_{};
    bool draining_{};
    bool reading_client_{};
    bool request_pending_{true};
    // The failed request being consumed.
    bool failing_{};
    bool head_done_{};
    bool head_request_{};
    bool chunked_{};
    std::string head_{};
    std::uint64_t body_left_{};
    std::string reply_{};
    // Faults bookkeeping.
    std::uint64_t generation_{};
    std::uint64_t fault_bytes_{};
    Clock::time_point next_send_{};
    Clock::time_point reset_deadline_{};
  };

  void accept() {
    acceptor_.async_accept([this](const error_code& ec, tcp::socket socket) {
      if (ec) {
        if (ec == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
        return accept();
      }
      state_->connections.fetch_add(1);
      auto c = std::make_shared<Connection>(state_, std::move(socket));
      std::erase_if(connections_, [](const std::weak_ptr<Connection>& w) { return w.expired(); });
      connections_.push_back(c);
      c->start(upstream_);
      accept();
    });
  }

  // io_ first: destroyed last, after everything that refers to it.
  boost::asio::io_context io_;
  std::shared_ptr<State> state_;
  tcp::acceptor acceptor_;
  tcp::endpoint upstream_;
  std::uint16_t port_ = 0;
  std::vector<std::weak_ptr<Connection>> connections_;  // the proxy's thread only
  std::thread thread_;
};

}  // namespace ingest::testing
