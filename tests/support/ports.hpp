// Free TCP ports on 127.0.0.1 for the servers the tests start (nginx,
// SeaweedFS), chosen below the kernel's ephemeral range.
//
// A port the kernel hands out for bind(port 0) comes from the ephemeral
// range, the same range outgoing connections take their local ports from.
// Released for a server to take, such a port can meanwhile become the local
// end of any connection on the machine, the server's own included: SeaweedFS
// connects to its master before its filer binds, and its filer then died
// with "bind: address already in use" in about 1 start in 24 (2026-11-30).
// No connection ever gets a port below the ephemeral range unless bound
// there, so only another test choosing the same port at the same moment can
// collide; callers retry a start-up that failed that way with new ports.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ingest::testing {

// An IPv4 TCP socket bound to 127.0.0.1:port (0: any), without
// SO_REUSEADDR so that a port in TIME_WAIT is not taken; -1 if it cannot.
inline int bind_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The first port of the kernel's ephemeral range (32768 when unreadable).
inline std::uint16_t ephemeral_port_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  unsigned low = 0;
  if (!(in >> low) || low <= 1024 || low > 65535) low = 32768;
  return static_cast<std::uint16_t>(low);
}

/// `n` distinct ports on 127.0.0.1 that nothing held when chosen, from the
/// 16384 ports below the ephemeral range (starting at a random one, so that
/// test processes running together choose apart), each checked by binding
/// it. Where too few of those are free, the rest come from bind(port 0).
/// Throws std::runtime_error if no port can be bound at all.
inline std::vector<std::uint16_t> free_loopback_ports(std::size_t n) {
  const unsigned high = ephemeral_port_low();  // exclusive
  const unsigned low = high > 16384 + 1024 ? high - 16384 : 1024;
  const unsigned span = high - low;
  std::vector<int> held;
  std::vector<std::uint16_t> ports;
  const auto release = [&] {
    for (const int fd : held) ::close(fd);
  };
  unsigned next = std::random_device{}() % span;
  for (unsigned tried = 0; tried < span && ports.size() < n; ++tried, next = (next + 1) % span) {
    const auto port = static_cast<std::uint16_t>(low + next);
    if (const int fd = bind_loopback(port); fd >= 0) {
      held.push_back(fd);
      ports.push_back(port);
    }
  }
  while (ports.size() < n) {
    const int fd = bind_loopback(0);
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (fd >= 0) ::close(fd);
      release();
      throw std::runtime_error("cannot bind a free port on 127.0.0.1");
    }
    held.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  release();
  return ports;
}

/// One port of free_loopback_ports.
inline std::uint16_t free_loopback_port() { return free_loopback_ports(1).front(); }

/// True if something accepts connections on 127.0.0.1:port.
inline bool loopback_port_accepts(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace ingest::testing
