// The HTTP client (storage/http_client.hpp) under injected faults: nginx on
// loopback serves a file, the fault proxy (support/fault_proxy.hpp) sits
// between it and the client and resets, truncates, delays, throttles and
// answers 503 bursts. Every byte must arrive exactly once; errors only when
// the retries are spent, naming the URL.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <ingest/storage/http.hpp>

#include "support/fault_proxy.hpp"
#include "support/files.hpp"

using namespace ingest;
using namespace ingest::testing;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// A free port on 127.0.0.1 (bound and released; nginx binds it next).
std::uint16_t free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::address_v4::loopback(), 0});
  return a.local_endpoint().port();
}

bool can_connect(std::uint16_t port) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({boost::asio::ip::address_v4::loopback(), port}, ec);
  return !ec;
}

std::string find_nginx() {
  for (const char* dir : {"/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin"}) {
    const std::string path = std::string(dir) + "/nginx";
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return {};
}

// nginx (one process, no daemon) serving `root` on 127.0.0.1 at a free port;
// killed and reaped on destruction. A minimal stand-in until the shared
// launcher (tests/support/nginx.hpp) is on this branch.
class LocalNginx {
 public:
  explicit LocalNginx(const std::filesystem::path& root) {
    const std::string nginx = find_nginx();
    if (nginx.empty()) {
      throw std::runtime_error("nginx is not installed: run scripts/install-deps.sh");
    }
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
      port_ = free_port();
      const std::string conf = dir_ / "nginx.conf";
      std::ofstream(conf) << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
                          << "error_log " << (dir_ / "error.log") << " warn;\n"
                          << "pid " << (dir_ / "nginx.pid") << ";\n"
                          << "events { worker_connections 512; }\n"
                          << "http {\n  access_log off;\n"
                          << "  client_body_temp_path " << (dir_ / "body") << ";\n"
                          << "  proxy_temp_path " << (dir_ / "proxy") << ";\n"
                          << "  fastcgi_temp_path " << (dir_ / "fastcgi") << ";\n"
                          << "  uwsgi_temp_path " << (dir_ / "uwsgi") << ";\n"
                          << "  scgi_temp_path " << (dir_ / "scgi") << ";\n"
                          << "  keepalive_requests 100000;\n"
                          << "  server {\n    listen 127.0.0.1:" << port_ << ";\n"
                          << "    root " << root << ";\n  }\n}\n";
      // Everything the child needs is built before fork: it may only exec.
      const std::string prefix = dir_.path().string() + "/";
      const std::string error_log = dir_ / "error.log";
      const pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 1);
        ::dup2(null, 2);
        ::execl(nginx.c_str(), "nginx", "-p", prefix.c_str(), "-c", conf.c_str(), "-e",
                error_log.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
      }
      const auto deadline = Clock::now() + 10s;
      while (Clock::now() < deadline) {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) break;  // exited: port taken? try again
        if (can_connect(port_)) {
          pid_ = pid;
          break;
        }
        std::this_thread::sleep_for(5ms);
      }
      if (pid_ <= 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    if (pid_ <= 0) {
      std::ifstream log(dir_ / "error.log");
      const std::string text((std::istreambuf_iterator<char>(log)), {});
      throw std::runtime_error("nginx did not start: " + text);
    }
  }
  LocalNginx(const LocalNginx&) = delete;
  LocalNginx& operator=(const LocalNginx&) = delete;
  ~LocalNginx() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::uint16_t port() const { return port_; }

 private:
  TempDir dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

std::string object_bytes(std::size_t n) {
  std::string s(n, '\0');
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;  // deterministic
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s[i] = static_cast<char>(x);
  }
  return s;
}

// nginx serving one object, the proxy in front of it, and a client with fast
// backoff pointed at the proxy.
struct Fixture {
  static constexpr std::size_t kSize = 3 * 1024 * 1024 + 17;
  TempDir www;
  std::string bytes = object_bytes(kSize);
  std::unique_ptr<LocalNginx> nginx;
  std::unique_ptr<FaultProxy> proxy;
  storage::Url url;

  Fixture() {
    std::ofstream(www / "data.bin", std::ios::binary) << bytes;
    ::chmod(www.path().c_str(), 0755);
    nginx = std::make_unique<LocalNginx>(www.path());
    proxy = std::make_unique<FaultProxy>(nginx->port());
    url = storage::parse_url("http://127.0.0.1:" + std::to_string(proxy->port()) + "/data.bin");
  }

  static storage::HttpOptions options(int max_attempts = 6) {
    storage::HttpOptions o;
    o.retry.max_attempts = max_attempts;
    o.retry.initial_backoff = 1ms;
    o.retry.max_backoff = 20ms;
    o.request_timeout = 20s;
    return o;
  }

  // GET bytes [offset, offset + n) with a Range header.
  static storage::HttpResponse get_range(storage::HttpClient& client, const storage::Url& u,
                                         std::uint64_t offset, std::uint64_t n) {
    storage::HttpRequest r;
    r.headers.push_back(
        {"Range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + n - 1)});
    return client.send(u, r);
  }
};

}  // namespace

TEST_CASE("http faults: a whole object arrives exactly through resets mid-body",
          "[remote][http][faults]") {
  Fixture f;
  storage::HttpClient client(Fixture::options());
  f.proxy->set_faults({.reset_after_bytes = 300'000, .resets = 4});
  const auto r = client.send(f.url, {});
  CHECK(r.status == 200);
  CHECK(r.body.size() == f.bytes.size());
  CHECK(r.body == f.bytes);
  CHECK(f.proxy->counters().resets == 4);
  CHECK(client.counters().retries == 4);
}

TEST_CASE("http faults: ranged reads arrive exactly through truncated bodies",
          "[remote][http][faults]") {
  Fixture f;
  storage::HttpClient client(Fixture::options());
  f.proxy->set_faults({.truncate_after_bytes = 50'000, .truncations = 5});
  constexpr std::uint64_t block = 256 * 1024;
  std::string got;
  for (std::uint64_t off = 0; off < f.bytes.size(); off += block) {
    const auto n = std::min<std::uint64_t>(block, f.bytes.size() - off);
    const auto r = Fixture::get_range(client, f.url, off, n);
    REQUIRE(r.status == 206);
    REQUIRE(r.body.size() == n);
    got += r.body;
  }
  CHECK(got == f.bytes);
  CHECK(f.proxy->counters().truncations == 5);
  CHECK(client.counters().retries == 5);
}

TEST_CASE("http faults: 503 bursts are retried, honouring Retry-After", "[remote][http][faults]") {
  Fixture f;
  storage::HttpClient client(Fixture::options());

  SECTION("Retry-After 0 with an S3 SlowDown body, connection kept") {
    f.proxy->set_faults({.fail_requests = 4, .retry_after_seconds = 0, .slow_down_body = true});
    const auto r = Fixture::get_range(client, f.url, 1000, 5000);
    CHECK(r.status == 206);
    CHECK(r.body == f.bytes.substr(1000, 5000));
    CHECK(client.counters().retries == 4);
  }
  SECTION("Retry-After 1 waits a second (within max_backoff), connection closed") {
    storage::HttpOptions o = Fixture::options();
    o.retry.max_backoff = 5s;  // Retry-After is honoured up to max_backoff
    storage::HttpClient patient(o);
    f.proxy->set_faults({.fail_requests = 1, .retry_after_seconds = 1, .close_after_fail = true});
    const auto t0 = Clock::now();
    const auto r = Fixture::get_range(patient, f.url, 0, 100);
    CHECK(std::chrono::duration<double>(Clock::now() - t0).count() >= 0.95);
    CHECK(r.status == 206);
    CHECK(r.body == f.bytes.substr(0, 100));
    CHECK(patient.counters().retries == 1);
  }
  CHECK(f.proxy->counters().failed_requests >= 1);
}

TEST_CASE("http faults: latency and throttling change nothing in the bytes",
          "[remote][http][faults]") {
  Fixture f;
  storage::HttpClient client(Fixture::options());
  f.proxy->set_faults({.latency = 5ms, .bytes_per_second = 20'000'000});
  const auto t0 = Clock::now();
  const auto r = client.send(f.url, {});
  CHECK(r.body == f.bytes);
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() >= 0.1);  // 3 MiB at 20 MB/s
  CHECK(client.counters().retries == 0);
}

TEST_CASE("http faults: more failures than attempts raise IoError naming the URL",
          "[remote][http][faults]") {
  Fixture f;
  storage::HttpClient client(Fixture::options(3));
  SECTION("503s") {
    f.proxy->set_faults({.fail_requests = 3, .retry_after_seconds = 0});
    try {
      (void)Fixture::get_range(client, f.url, 0, 10);
      FAIL("no error");
    } catch (const IoError& e) {
      CHECK(e.context().file == f.url.str());
      CHECK_THAT(std::string(e.what()), Catch::Contains(f.url.str()) &&
                                            Catch::Contains("3 attempts") &&
                                            Catch::Contains("503"));
    }
    // The burst is over: the next request goes through.
    CHECK(Fixture::get_range(client, f.url, 0, 10).body == f.bytes.substr(0, 10));
  }
  SECTION("resets") {
    f.proxy->set_faults({.reset_after_bytes = 1000, .resets = 3});
    CHECK_THROWS_AS(client.send(f.url, {}), IoError);
    CHECK(f.proxy->counters().resets == 3);
    CHECK(client.send(f.url, {}).body == f.bytes);
  }
  SECTION("timeouts") {
    storage::HttpOptions o = Fixture::options(2);
    o.request_timeout = 100ms;
    storage::HttpClient impatient(o);
    f.proxy->set_faults({.latency = 400ms});
    try {
      (void)Fixture::get_range(impatient, f.url, 0, 10);
      FAIL("no error");
    } catch (const IoError& e) {
      CHECK(e.context().file == f.url.str());
      CHECK_THAT(std::string(e.what()), Catch::Contains("timed out"));
    }
  }
}
