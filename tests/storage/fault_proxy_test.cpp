// Tests of the fault-injecting proxy (tests/support/fault_proxy.hpp) against a
// small real HTTP/1.1 server on loopback (Asio, keep-alive, Content-Length),
// with a plain blocking client.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <boost/asio.hpp>

#include "support/fault_proxy.hpp"

using namespace ingest::testing;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// Byte i of every body the server sends: deterministic, not periodic in 256.
char body_byte(std::size_t i) { return static_cast<char>((i * 131 + i / 251) & 0xff); }

std::string expected_body(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = body_byte(i);
  return s;
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A keep-alive HTTP/1.1 server: `GET /bytes/N` (or HEAD) answers N body bytes;
// request bodies (Content-Length) are read and dropped. One thread.
class TinyHttpServer {
 public:
  TinyHttpServer() : acceptor_(io_, {asio::ip::address_v4::loopback(), 0}) {
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  TinyHttpServer(const TinyHttpServer&) = delete;
  TinyHttpServer& operator=(const TinyHttpServer&) = delete;
  ~TinyHttpServer() {
    io_.stop();
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int requests() const { return requests_.load(); }

 private:
  struct Session : std::enable_shared_from_this<Session> {
    Session(tcp::socket s, std::atomic<int>& n) : socket(std::move(s)), requests(n) {}
    tcp::socket socket;
    asio::streambuf buf;
    std::string reply;
    std::atomic<int>& requests;

    void read_head() {
      asio::async_read_until(
          socket, buf, "\r\n\r\n",
          [self = shared_from_this()](boost::system::error_code ec, std::size_t head) {
            if (!ec) self->on_head(head);
          });
    }
    void on_head(std::size_t head_size) {
      std::string head(asio::buffers_begin(buf.data()),
                       asio::buffers_begin(buf.data()) + static_cast<std::ptrdiff_t>(head_size));
      buf.consume(head_size);
      ++requests;
      const bool is_head = head.rfind("HEAD ", 0) == 0;
      std::size_t n = 0;
      const auto at = head.find("/bytes/");
      if (at != std::string::npos) n = std::stoul(head.substr(at + 7));
      std::size_t content_length = 0;
      const std::string lower = lowercase(head);
      const auto cl = lower.find("\r\ncontent-length:");
      if (cl != std::string::npos) content_length = std::stoul(lower.substr(cl + 17));
      reply = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(n) +
              "\r\nConnection: keep-alive\r\n\r\n";
      if (!is_head) reply += expected_body(n);
      const std::size_t have = std::min(buf.size(), content_length);
      buf.consume(have);
      const std::size_t left = content_length - have;
      if (left == 0) return write_reply();
      asio::async_read(
          socket, buf, asio::transfer_exactly(left),
          [self = shared_from_this(), left](boost::system::error_code ec, std::size_t) {
            if (ec) return;
            self->buf.consume(left);
            self->write_reply();
          });
    }
    void write_reply() {
      asio::async_write(socket, asio::buffer(reply),
                        [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                          if (!ec) self->read_head();
                        });
    }
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      std::make_shared<Session>(std::move(s), requests_)->read_head();
      accept();
    });
  }

  asio::io_context io_;  // first: destroyed last
  tcp::acceptor acceptor_;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
};

// A blocking keep-alive client that counts the bytes it moves.
class Client {
 public:
  explicit Client(std::uint16_t port) : socket_(io_) {
    socket_.connect({asio::ip::address_v4::loopback(), port});
    socket_.set_option(tcp::no_delay(true));
  }

  void send(const std::string& method, const std::string& path, const std::string& body = {}) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!body.empty()) req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    asio::write(socket_, asio::buffer(req));
    sent_ += req.size();
  }

  /// Reads one whole response (throws on a broken connection).
  Response receive(bool head_request = false) {
    const std::size_t head_size = asio::read_until(socket_, buf_, "\r\n\r\n");
    std::string head(asio::buffers_begin(buf_.data()),
                     asio::buffers_begin(buf_.data()) + static_cast<std::ptrdiff_t>(head_size));
    buf_.consume(head_size);
    received_ += head_size;
    Response r;
    r.status = std::stoi(head.substr(9, 3));
    std::size_t pos = head.find("\r\n");
    while (pos + 2 < head.size()) {
      const std::size_t eol = head.find("\r\n", pos + 2);
      const std::string line = head.substr(pos + 2, eol - pos - 2);
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[lowercase(line.substr(0, colon))] = value;
      }
      pos = eol;
    }
    const std::size_t n = head_request ? 0 : std::stoul(r.headers.at("content-length"));
    if (buf_.size() < n) asio::read(socket_, buf_, asio::transfer_exactly(n - buf_.size()));
    r.body.assign(asio::buffers_begin(buf_.data()),
                  asio::buffers_begin(buf_.data()) + static_cast<std::ptrdiff_t>(n));
    buf_.consume(n);
    received_ += n;
    return r;
  }

  Response get(const std::string& path) {
    send("GET", path);
    return receive();
  }

  /// Reads until the connection ends: the bytes that came and how it ended.
  std::pair<std::size_t, boost::system::error_code> read_to_end() {
    std::size_t total = buf_.size();
    buf_.consume(buf_.size());
    std::array<char, 65536> chunk;
    boost::system::error_code ec;
    for (;;) {
      const std::size_t n = socket_.read_some(asio::buffer(chunk), ec);
      total += n;
      if (ec) break;
    }
    received_ += total;
    return {total, ec};
  }

  std::size_t sent() const { return sent_; }
  std::size_t received() const { return received_; }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  asio::streambuf buf_;
  std::size_t sent_ = 0;
  std::size_t received_ = 0;
};

// Counters are bumped when the proxy's write completes, which may be just
// after the client has read the bytes: wait (bounded) for them to settle.
bool eventually(const std::function<bool()>& pred) {
  const auto deadline = Clock::now() + 5s;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

TEST_CASE("fault proxy: passes bodies through byte for byte and counts", "[remote][proxy]") {
  TinyHttpServer server;
  FaultProxy proxy(server.port());
  REQUIRE(proxy.port() != 0);
  REQUIRE(proxy.port() != server.port());

  std::size_t sent = 0, received = 0;
  for (int c = 0; c < 2; ++c) {
    Client client(proxy.port());
    Response big = client.get("/bytes/1048576");
    CHECK(big.status == 200);
    CHECK(big.body == expected_body(1048576));
    Response small = client.get("/bytes/10");
    CHECK(small.body == expected_body(10));
    sent += client.sent();
    received += client.received();
  }
  CHECK(server.requests() == 4);
  CHECK(eventually([&] { return proxy.counters().bytes_to_client == received; }));
  const auto n = proxy.counters();
  CHECK(n.connections == 2);
  CHECK(n.requests == 4);
  CHECK(n.bytes_to_server == sent);
  CHECK(n.bytes_to_client == received);
  CHECK(n.resets == 0);
  CHECK(n.truncations == 0);
  CHECK(n.failed_requests == 0);
}

TEST_CASE("fault proxy: latency delays every request", "[remote][proxy]") {
  TinyHttpServer server;
  FaultProxy proxy(server.port(), {.latency = 80ms});
  CHECK(proxy.faults().latency == 80ms);
  Client client(proxy.port());
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    Response r = client.get("/bytes/1000");
    CHECK(seconds_since(t0) >= 0.08);
    CHECK(r.body == expected_body(1000));
  }
  CHECK(proxy.counters().requests == 3);
}

TEST_CASE("fault proxy: throttles the server's bytes per connection", "[remote][proxy]") {
  TinyHttpServer server;
  FaultProxy proxy(server.port(), {.bytes_per_second = 1'000'000});
  Client client(proxy.port());
  const auto t0 = Clock::now();
  Response r = client.get("/bytes/200000");
  CHECK(seconds_since(t0) >= 0.15);
  CHECK(r.body == expected_body(200000));

  proxy.set_faults({});  // unlimited again, on the open connection too
  CHECK(client.get("/bytes/300000").body == expected_body(300000));
}

TEST_CASE("fault proxy: resets N connections after exactly the given bytes, then none",
          "[remote][proxy]") {
  TinyHttpServer server;
  FaultProxy proxy(server.port(), {.reset_after_bytes = 100'000, .resets = 2});
  for (int i = 0; i < 2; ++i) {
    Client client(proxy.port());
    client.send("GET", "/bytes/1048576");
    const auto [bytes, ec] = client.read_to_end();
    CHECK(bytes == 100'000);
    CHECK(ec == asio::error::connection_reset);
  }
  Client clean(proxy.port());
  CHECK(clean.get("/bytes/1048576").body == expected_body(1048576));
  CHECK(proxy.counters().resets == 2);
  CHECK(proxy.counters().connections == 3);

  // A reset before the first byte.
  proxy.set_faults({.reset_after_bytes = 0, .resets = 1});
  Client early(proxy.port());
  early.send("GET", "/bytes/10");
  const auto [bytes, ec] = early.read_to_end();
  CHECK(bytes == 0);
  CHECK(ec == asio::error::connection_reset);
  CHECK(proxy.counters().resets == 3);
}

TEST_CASE("fault proxy: truncates N connections with a clean close after exactly the bytes",
          "[remote][proxy]") {
  TinyHttpServer server;
  FaultProxy proxy(server.port(), {.truncate_after_bytes = 70'001, .truncations = 1});
  Client cut(proxy.port());
  cut.send("GET", "/bytes/1048576");
  const auto [bytes, ec] = cut.read_to_end();
  CHECK(bytes == 70'001);
  CHECK(ec == asio::error::eof);
  CHECK(eventually([&] { return proxy.counters().truncations == 1; }));

  Client clean(proxy.port());
  CHECK(clean.get("/bytes/1048576").body == expected_body(1048576));
  CHECK(clean.get("/bytes/5").body == expected_body(5));
  CHECK(proxy.counters().truncations == 1);
}

TEST_CASE("fault proxy: faults set on an open connection count bytes from then on",
          "[remote][proxy]") {
  TinyHttpServer server;
  FaultProxy proxy(server.port());
  Client client(proxy.port());
  CHECK(client.get("/bytes/100000").body == expected_body(100000));
  proxy.set_faults({.truncate_after_bytes = 500, .truncations = 1});
  client.send("GET", "/bytes/100000");
  const auto [bytes, ec] = client.read_to_end();
  CHECK(bytes == 500);
  CHECK(ec == asio::error::eof);
}

TEST_CASE("fault proxy: answers a 503 burst itself, then forwards", "[remote][proxy]") {
  TinyHttpServer server;
  FaultProxy proxy(server.port(),
                   {.fail_requests = 2, .retry_after_seconds = 3, .slow_down_body = true});
  Client client(proxy.port());
  Response first = client.get("/bytes/1000");
  CHECK(first.status == 503);
  CHECK(first.headers["retry-after"] == "3");
  CHECK(first.headers["connection"] == "keep-alive");
  CHECK(first.body.find("<Code>SlowDown</Code>") != std::string::npos);
  // A request with a body: the proxy consumes all of it (70,000 bytes, more
  // than one read) before answering, so the connection stays in step.
  client.send("PUT", "/bytes/0", expected_body(70000));
  Response second = client.receive();
  CHECK(second.status == 503);
  CHECK(second.headers["retry-after"] == "3");
  Response third = client.get("/bytes/1000");
  CHECK(third.status == 200);
  CHECK(third.body == expected_body(1000));
  CHECK(server.requests() == 1);  // the failed ones never reached the server
  CHECK(eventually([&] { return proxy.counters().failed_requests == 2; }));
  CHECK(proxy.counters().requests == 3);

  SECTION("a HEAD gets no body, and Connection: close closes") {
    proxy.set_faults({.fail_requests = 1, .slow_down_body = true});
    client.send("HEAD", "/bytes/10");
    Response head = client.receive(/*head_request=*/true);
    CHECK(head.status == 503);
    CHECK(head.headers.count("retry-after") == 0);
    CHECK(std::stoul(head.headers["content-length"]) > 0);
    CHECK(client.get("/bytes/10").body == expected_body(10));  // no stray body in between

    proxy.set_faults({.fail_requests = 1, .retry_after_seconds = 0, .close_after_fail = true});
    Response closing = client.get("/bytes/10");
    CHECK(closing.status == 503);
    CHECK(closing.headers["connection"] == "close");
    CHECK(closing.headers["retry-after"] == "0");
    CHECK(closing.body.empty());
    CHECK(client.read_to_end().second == asio::error::eof);
    Client next(proxy.port());
    CHECK(next.get("/bytes/10").body == expected_body(10));
  }
}

TEST_CASE("fault proxy: the destructor returns at once with connections open", "[remote][proxy]") {
  TinyHttpServer server;
  std::optional<FaultProxy> proxy(std::in_place, server.port(),
                                  FaultProxy::Faults{.bytes_per_second = 10'000});
  Client idle(proxy->port());
  Client slow(proxy->port());
  slow.send("GET", "/bytes/1048576");
  REQUIRE(eventually([&] { return server.requests() == 1; }));  // in flight, throttled
  proxy->set_faults({.latency = 60s, .bytes_per_second = 10'000});
  Client waiting(proxy->port());
  waiting.send("GET", "/bytes/10");
  CHECK(eventually([&] { return proxy->counters().requests == 2; }));

  const auto t0 = Clock::now();
  proxy.reset();
  CHECK(seconds_since(t0) < 5.0);  // a hang check, not a timing
  // Every client sees its connection end (rather than blocking forever).
  CHECK(idle.read_to_end().second);
  CHECK(slow.read_to_end().second);
  CHECK(waiting.read_to_end().second);
  CHECK(eventually([&] { return server.requests() == 1; }));
}

TEST_CASE("fault proxy: a client is closed at once when the upstream refuses", "[remote][proxy]") {
  std::uint16_t closed_port = 0;
  {
    asio::io_context io;
    tcp::acceptor a(io, {asio::ip::address_v4::loopback(), 0});
    closed_port = a.local_endpoint().port();
  }  // nothing listens there now
  FaultProxy proxy(closed_port);
  Client client(proxy.port());  // sends nothing: a write could race with the close
  const auto [bytes, ec] = client.read_to_end();
  CHECK(bytes == 0);
  CHECK(ec);
  CHECK(proxy.counters().connections == 1);
}
