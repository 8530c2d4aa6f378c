// A real nginx for the remote storage tests: serves a directory over HTTP on
// 127.0.0.1 (and optionally HTTPS, with a self-signed certificate for
// 127.0.0.1/localhost made with the openssl CLI) on free ports, as a child
// process that the destructor kills and reaps. Range requests, ETags and
// If-Match are nginx defaults for static files. A missing nginx or openssl
// binary fails the test, naming scripts/install-deps.sh.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/files.hpp"
#include "support/ports.hpp"

namespace ingest::testing {

/// The path of `name` in PATH or one of `extra` directories; empty if none.
inline std::string find_program(const std::string& name,
                                const std::vector<std::string>& extra = {"/usr/sbin", "/sbin"}) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string all = path;
    std::size_t start = 0;
    while (start <= all.size()) {
      const auto end = all.find(':', start);
      dirs.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  dirs.insert(dirs.end(), extra.begin(), extra.end());
  for (const auto& dir : dirs) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

/// Runs `argv` to completion with stdout/stderr to `log`; its exit status.
inline int run_program(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;  // built before fork: the child of a threaded process may not allocate
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// A self-signed certificate and key (PEM) for CN=localhost with the
/// subjectAltNames IP:127.0.0.1 and DNS:localhost, made with `openssl req`.
struct SelfSignedCertificate {
  std::string certificate{};  ///< path of the certificate (also the CA file that trusts it)
  std::string key{};          ///< path of the private key
};

/// Makes a SelfSignedCertificate in `dir`. Throws std::runtime_error naming
/// scripts/install-deps.sh if the openssl CLI is missing.
inline SelfSignedCertificate make_self_signed_certificate(const TempDir& dir) {
  const std::string openssl = find_program("openssl");
  if (openssl.empty()) {
    throw std::runtime_error(
        "the openssl command is not installed: run scripts/install-deps.sh (package openssl)");
  }
  SelfSignedCertificate out{dir / "cert.pem", dir / "key.pem"};
  const int rc =
      run_program({openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                   "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                   "-keyout", out.key, "-out", out.certificate},
                  dir / "openssl.log");
  if (rc != 0) {
    throw std::runtime_error("openssl req failed: " + file_contents(dir / "openssl.log"));
  }
  return out;
}

/// A real nginx serving `root` on 127.0.0.1, plain HTTP on port() (and the
/// same files rate-limited under /slow/, see slow_rate; 503 with
/// Retry-After: 1 under /unavailable/, 403 under /forbidden/), and with
/// `tls` also HTTPS on tls_port() with a fresh self-signed certificate
/// (certificate_file()). Stopped (SIGKILL) and reaped on destruction.
class NginxServer {
 public:
  /// Starts nginx and waits until its ports accept connections. Throws
  /// std::runtime_error naming scripts/install-deps.sh when nginx is not
  /// installed, with nginx's error log when it does not start.
  explicit NginxServer(const std::string& root, bool tls = false) {
    const std::string nginx = find_program("nginx");
    if (nginx.empty()) {
      throw std::runtime_error(
          "nginx is not installed: run scripts/install-deps.sh (package nginx-light)");
    }
    if (tls) certificate_ = make_self_signed_certificate(dir_);
    // Another test may take a chosen port before nginx binds it (see
    // support/ports.hpp): such a start is retried with new ports.
    for (int attempt = 1;; ++attempt) {
      const auto ports = free_loopback_ports(tls ? 2 : 1);
      port_ = ports[0];
      tls_port_ = tls ? ports[1] : 0;
      if (start(nginx, root)) break;
      if (attempt == 3 || log().find("Address already in use") == std::string::npos) {
        throw std::runtime_error("nginx exited at start: " + log());
      }
    }
  }
  /// Bytes a second of one response under /slow/.
  static constexpr std::size_t slow_rate = 32 * 1024;

  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;
  ~NginxServer() { stop(); }

  /// The plain HTTP port.
  std::uint16_t port() const noexcept { return port_; }
  /// The HTTPS port (0 without tls).
  std::uint16_t tls_port() const noexcept { return tls_port_; }
  /// "http://127.0.0.1:<port>" + path (path starts with '/').
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  /// "https://127.0.0.1:<tls_port>" + path.
  std::string tls_url(const std::string& path) const {
    return "https://127.0.0.1:" + std::to_string(tls_port_) + path;
  }
  /// The self-signed certificate (PEM) of the HTTPS port: the CA file that trusts it.
  const std::string& certificate_file() const noexcept { return certificate_.certificate; }
  /// nginx's error log so far.
  std::string log() const {
    try {
      return file_contents(dir_ / "error.log");
    } catch (const std::exception&) {
      return "(no error log)";
    }
  }

  /// Kills nginx and waits until it is gone (no-op the second time).
  void stop() noexcept {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

 private:
  // Writes the configuration for port_ (and tls_port_), starts nginx and
  // waits until it listens: false if it exited first (its log says why).
  bool start(const std::string& nginx, const std::string& root) {
    // /slow/<name> serves <name> at `slow_rate` bytes a second (nginx
    // sends each request's first second's worth at once); /unavailable/…
    // answers 503 with Retry-After: 1, /forbidden/… 403.
    std::string servers = "  server {\n    listen 127.0.0.1:" + std::to_string(port_) +
                          ";\n    root " + root + ";\n    location /slow/ {\n      alias " + root +
                          "/;\n      limit_rate " + std::to_string(slow_rate) + ";\n    }\n" +
                          "    location /unavailable/ {\n      add_header Retry-After 1 always;\n  "
                          "    return 503;\n    }\n" +
                          "    location /forbidden/ {\n      return 403;\n    }\n  }\n";
    const bool tls = tls_port_ != 0;
    if (tls) {
      servers += "  server {\n    listen 127.0.0.1:" + std::to_string(tls_port_) +
                 " ssl;\n    ssl_certificate " + certificate_.certificate +
                 ";\n    ssl_certificate_key " + certificate_.key + ";\n    root " + root +
                 ";\n  }\n";
    }
    const std::string d = dir_.path().string();
    const std::string conf =
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid " + d +
        "/nginx.pid;\nerror_log " + d + "/error.log warn;\nevents { worker_connections 512; }\n" +
        "http {\n  access_log off;\n  client_body_temp_path " + d + "/body;\n  proxy_temp_path " +
        d + "/proxy;\n  fastcgi_temp_path " + d + "/fastcgi;\n  uwsgi_temp_path " + d +
        "/uwsgi;\n  scgi_temp_path " + d + "/scgi;\n  default_type application/octet-stream;\n" +
        "  keepalive_requests 100000;\n  open_file_cache off;\n" + servers + "}\n";
    write_file(dir_ / "nginx.conf", conf);
    const std::string error_log = dir_ / "error.log";
    std::filesystem::remove(error_log);  // the log of this attempt only
    const std::string conf_path = dir_ / "nginx.conf";
    const std::string prefix = d + "/";
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      // Dies with the test process even when it ends without destructors
      // (a crash, a sanitizer's halt_on_error).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int fd = ::open(error_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execl(nginx.c_str(), nginx.c_str(), "-p", prefix.c_str(), "-c", conf_path.c_str(), "-e",
              error_log.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (loopback_port_accepts(port_) && (!tls || loopback_port_accepts(tls_port_))) break;
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        throw std::runtime_error("nginx did not listen within 20 s: " + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  TempDir dir_{};
  SelfSignedCertificate certificate_{};
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace ingest::testing
