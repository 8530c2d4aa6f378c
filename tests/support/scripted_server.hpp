// A scripted HTTP server on 127.0.0.1 for the tests of hostile servers: for
// each request it reads (request line, header fields, a Content-Length
// body), a handler says what to send back: fixed bytes, then, if asked, one
// piece repeated up to a byte count, as a server that never ends a chunk
// extension would. So a test plays a server that sends what no real server
// does (endless framing, listing pages that loop, hostile XML). It also
// records what it sent (seeds for the fuzzers). Test support, not library
// code. One thread accepts, one thread serves each connection; the
// destructor closes every socket and joins them all.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace ingest::testing {

class ScriptedServer {
 public:
  /// What to send for one request.
  struct Reply {
    std::string bytes{};             ///< sent first
    std::string repeat{};            ///< then sent again and again ...
    std::uint64_t repeat_bytes = 0;  ///< ... up to this many bytes in all
    bool close = false;              ///< close the connection after the reply
  };
  /// Gets the request's head (request line and fields, up to the blank
  /// line) and its body; runs on a connection's thread.
  using Handler = std::function<Reply(const std::string& head, const std::string& body)>;

  explicit ScriptedServer(Handler handler) : handler_(std::move(handler)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw std::runtime_error("ScriptedServer: socket failed");
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 64) != 0) {
      ::close(listener_);
      throw std::runtime_error("ScriptedServer: cannot listen on 127.0.0.1");
    }
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;
  ~ScriptedServer() {
    stop_.store(true);
    acceptor_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      for (const int fd : open_) ::shutdown(fd, SHUT_RDWR);
      threads = std::move(threads_);
    }
    for (auto& t : threads) t.join();
    ::close(listener_);
  }

  std::uint16_t port() const noexcept { return port_; }
  /// "http://127.0.0.1:<port>" + target.
  std::string url(std::string_view target = "") const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(target);
  }
  /// Requests read so far.
  std::uint64_t requests() const noexcept { return requests_.load(); }
  /// Bytes sent so far, over every connection.
  std::uint64_t bytes_sent() const noexcept { return sent_.load(); }
  /// Connections accepted so far.
  std::uint64_t connections() const noexcept { return connections_.load(); }

 private:
  void accept_loop() {
    while (!stop_.load()) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      connections_.fetch_add(1);
      std::lock_guard lock(mu_);
      open_.push_back(fd);
      threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  // Waits for `events` on fd; false when the server stops or the peer is gone.
  bool wait(int fd, short events) {
    while (!stop_.load()) {
      pollfd p{fd, events, 0};
      const int r = ::poll(&p, 1, 20);
      if (r < 0 && errno != EINTR) return false;
      if (r > 0) return (p.revents & (POLLERR | POLLNVAL)) == 0 || (p.revents & events) != 0;
    }
    return false;
  }

  bool send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      if (!wait(fd, POLLOUT)) return false;
      const ::ssize_t put = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (put < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return false;
      }
      sent_.fetch_add(static_cast<std::uint64_t>(put));
      bytes.remove_prefix(static_cast<std::size_t>(put));
    }
    return true;
  }

  // Appends what the client sent next to `in`; false when it closed, failed
  // or the server is stopping.
  bool receive(int fd, std::string& in, char* chunk, std::size_t size) {
    for (;;) {
      if (!wait(fd, POLLIN)) return false;
      const ::ssize_t got = ::recv(fd, chunk, size, MSG_DONTWAIT);
      if (got == 0) return false;
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return false;
      }
      in.append(chunk, static_cast<std::size_t>(got));
      return true;
    }
  }

  void serve(int fd) {
    std::string in;
    char chunk[16 * 1024];
    for (;;) {
      std::size_t head_end;
      while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
        if (!receive(fd, in, chunk, sizeof chunk)) return finish(fd);
      }
      const std::string head = in.substr(0, head_end + 4);
      std::size_t length = 0;
      for (std::size_t at = 0; (at = lower(head).find("content-length:", at)) != std::string::npos;
           ++at) {
        length = std::stoul(head.substr(at + 15));
      }
      while (in.size() < head.size() + length) {
        if (!receive(fd, in, chunk, sizeof chunk)) return finish(fd);
      }
      const std::string body = in.substr(head.size(), length);
      in.erase(0, head.size() + length);
      requests_.fetch_add(1);
      const Reply reply = handler_(head, body);
      if (!send_all(fd, reply.bytes)) return finish(fd);
      for (std::uint64_t sent = 0; !reply.repeat.empty() && sent < reply.repeat_bytes;
           sent += reply.repeat.size()) {
        if (!send_all(fd, reply.repeat)) return finish(fd);
      }
      if (reply.close) return finish(fd);
    }
  }

  void finish(int fd) {
    std::lock_guard lock(mu_);
    for (auto& open : open_) {
      if (open == fd) {
        open = open_.back();
        open_.pop_back();
        break;
      }
    }
    ::close(fd);
  }

  static std::string lower(std::string s) {
    for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    return s;
  }

  Handler handler_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> requests_{0}, sent_{0}, connections_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> threads_;
};

}  // namespace ingest::testing
