// The http:// and https:// scheme against a real nginx on 127.0.0.1:
// parse_url, HttpClient::send, RangedReader (blocks, readahead, read_at,
// ETag pinning), HTTPS verification, retries and HttpScheme under ingest's
// readers.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/storage/http.hpp>

#include "support/files.hpp"
#include "support/nginx.hpp"

using namespace ingest;
using storage::HttpClient;
using storage::HttpOptions;
using storage::parse_url;
using storage::RangedReader;
using storage::ReadaheadOptions;

namespace {

/// `n` deterministic pseudo-random bytes.
std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

/// Reads everything from `reader` in chunks of `chunk` bytes.
std::string read_all(storage::RemoteReader& reader, std::size_t chunk) {
  std::string out;
  std::string buf(chunk, '\0');
  for (;;) {
    const std::size_t got = reader.read(buf.data(), buf.size());
    if (got == 0) break;
    out.append(buf.data(), got);
  }
  return out;
}

std::shared_ptr<HttpClient> quick_client(int attempts = 3) {
  HttpOptions options;
  options.retry.max_attempts = attempts;
  options.retry.initial_backoff = std::chrono::milliseconds(1);
  options.retry.max_backoff = std::chrono::milliseconds(5);
  options.connect_timeout = std::chrono::milliseconds(5'000);
  options.request_timeout = std::chrono::milliseconds(20'000);
  return std::make_shared<HttpClient>(options);
}

}  // namespace

TEST_CASE("parse_url splits http and https URLs", "[remote][http]") {
  auto u = parse_url("https://host:8443/a/b?x=1");
  CHECK(u.scheme == "https");
  CHECK(u.host == "host");
  CHECK(u.port == 8443);
  CHECK(u.target == "/a/b?x=1");
  CHECK(u.authority() == "host:8443");
  CHECK(u.str() == "https://host:8443/a/b?x=1");

  auto d = parse_url("HTTP://Example.com");
  CHECK(d.scheme == "http");
  CHECK(d.port == 80);
  CHECK(d.target == "/");
  CHECK(d.authority() == "Example.com");
  CHECK(parse_url("https://example.com/k").port == 443);
  CHECK(parse_url("https://example.com:443/k").authority() == "example.com");
  CHECK(parse_url("http://h?q=1").target == "/?q=1");
  CHECK(parse_url("http://h/a%20b").target == "/a%20b");

  auto v6 = parse_url("http://[::1]:9000/bucket/key");
  CHECK(v6.host == "::1");
  CHECK(v6.port == 9000);
  CHECK(v6.authority() == "[::1]:9000");
  CHECK(v6.str() == "http://[::1]:9000/bucket/key");
  CHECK(parse_url("https://[2001:db8::7]/").authority() == "[2001:db8::7]");

  for (const char* bad :
       {"", "example.com/a", "ftp://h/a", "http://", "http:///a", "http://h:/a", "http://h:0/",
        "http://h:65536/", "http://h:8x/", "http://user@h/", "http://h/a#frag", "http://[::1/",
        "http://[::1]x/", "http://h a/", "http://h/a b", "http://[zz]/"}) {
    INFO(bad);
    try {
      parse_url(bad);
      FAIL("no exception");
    } catch (const InvalidArgument& e) {
      // Named as shown anywhere: without its user information.
      CHECK(e.context().file == redact_url(bad));
      CHECK(e.context().file.find("user@") == std::string::npos);
      CHECK(std::string(e.what()).find("malformed URL") != std::string::npos);
    }
  }
}

TEST_CASE("Retry-After and Content-Range values are parsed", "[remote][http]") {
  using std::chrono::milliseconds;
  const auto now = std::chrono::system_clock::from_time_t(784111777);  // 06 Nov 1994 08:49:37 GMT
  CHECK(storage::detail::parse_retry_after("3", now) == milliseconds(3000));
  CHECK(storage::detail::parse_retry_after(" 0 ", now) == milliseconds(0));
  CHECK(storage::detail::parse_retry_after("Sun, 06 Nov 1994 08:49:39 GMT", now) ==
        milliseconds(2000));
  CHECK(storage::detail::parse_retry_after("Sun, 06 Nov 1994 08:49:30 GMT", now) ==
        milliseconds(0));
  // Dates no nanosecond clock holds (a hostile server's): past is now, future is a day.
  CHECK(storage::detail::parse_retry_after("Mon, 01 Jan 0001 00:00:00 GMT", now) ==
        milliseconds(0));
  CHECK(storage::detail::parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now) ==
        milliseconds(std::chrono::hours(24)));
  CHECK(storage::detail::parse_retry_after("Sun, 06 Nov 1994 09:49:37 GMT", now) ==
        milliseconds(3'600'000));
  CHECK_FALSE(storage::detail::parse_retry_after("soon", now));
  CHECK_FALSE(storage::detail::parse_retry_after("", now));

  auto r = storage::detail::parse_content_range("bytes 10-19/100");
  REQUIRE(r);
  CHECK(*r->first == 10);
  CHECK(*r->last == 19);
  CHECK(r->total == 100);
  auto empty = storage::detail::parse_content_range("bytes */0");
  REQUIRE(empty);
  CHECK_FALSE(empty->first);
  CHECK(empty->total == 0);
  CHECK_FALSE(storage::detail::parse_content_range("bytes 0-9/*"));
  CHECK_FALSE(storage::detail::parse_content_range("bytes 9-0/10"));
  CHECK_FALSE(storage::detail::parse_content_range("bytes 0-10/10"));
  CHECK_FALSE(storage::detail::parse_content_range("items 0-1/10"));
  CHECK_FALSE(storage::detail::parse_content_range("bytes 0-1/99999999999999999999999"));
}

TEST_CASE("a failed response's body is excerpted for its error", "[remote][http]") {
  using storage::detail::body_excerpt;
  CHECK(body_excerpt("") == "");
  CHECK(body_excerpt("<?xml version=\"1.0\"?>\n<Error><Code>SlowDown</Code><Message>Please "
                     "reduce your request rate.</Message></Error>") ==
        "SlowDown: Please reduce your request rate.");
  CHECK(body_excerpt("<Error><Code>InternalError</Code></Error>") == "InternalError");
  // Not XML: control characters and runs of spaces collapse.
  CHECK(body_excerpt("upstream\r\n  timed out\n") == "upstream timed out");
  // Long bodies are cut at 200 bytes.
  const std::string long_body(500, 'x');
  CHECK(body_excerpt(long_body) == std::string(200, 'x') + "...");
  // An unterminated <Code> is no error document.
  CHECK(body_excerpt("<Code>half") == "<Code>half");
}

TEST_CASE("backoff grows exponentially with deterministic jitter", "[remote][http]") {
  HttpOptions options;
  options.retry.initial_backoff = std::chrono::milliseconds(100);
  options.retry.max_backoff = std::chrono::milliseconds(1000);
  options.retry.jitter = 0.5;
  HttpClient a(options), b(options);
  std::vector<std::int64_t> first, second;
  for (int retry = 1; retry <= 8; ++retry) {
    first.push_back(a.backoff(retry, nullptr).count());
    second.push_back(b.backoff(retry, nullptr).count());
  }
  CHECK(first == second);
  for (int retry = 1; retry <= 8; ++retry) {
    const double base = std::min(100.0 * (1 << (retry - 1)), 1000.0);
    CHECK(static_cast<double>(first[retry - 1]) >= base * 0.5 - 1);
    CHECK(static_cast<double>(first[retry - 1]) <= base * 1.5 + 1);
  }
  storage::HttpResponse busy;
  busy.headers.push_back({"retry-after", "1"});
  CHECK(a.backoff(1, &busy) >= std::chrono::milliseconds(1000));
}

TEST_CASE("HttpClient sends GET and HEAD to nginx", "[remote][http]") {
  testing::TempDir root;
  testing::write_file(root / "small.txt", "hello over http\n");
  testing::NginxServer nginx(root.path().string());
  HttpClient client;

  auto response = client.send(parse_url(nginx.url("/small.txt")), {});
  CHECK(response.status == 200);
  CHECK(response.body == "hello over http\n");
  REQUIRE(response.header("content-length") != nullptr);
  CHECK(*response.header("CONTENT-LENGTH") == "16");
  CHECK(response.header("ETag") != nullptr);
  CHECK(response.header("X-Not-There") == nullptr);

  auto head = client.send(parse_url(nginx.url("/small.txt")), {.method = "HEAD"});
  CHECK(head.status == 200);
  CHECK(head.body.empty());

  auto missing = client.send(parse_url(nginx.url("/missing")), {});
  CHECK(missing.status == 404);

  // The request's own target wins over the URL's "/".
  auto other = client.send(parse_url(nginx.url("/")), {.target = "/small.txt"});
  CHECK(other.body == "hello over http\n");

  int prepared = 0;
  auto signed_response = client.send(parse_url(nginx.url("/small.txt")), {},
                                     [&](const storage::Url& url, storage::HttpRequest& r) {
                                       ++prepared;
                                       CHECK(url.target == "/small.txt");
                                       CHECK(r.target == "/small.txt");
                                       r.headers.push_back({"Range", "bytes=0-4"});
                                     });
  CHECK(prepared == 1);
  CHECK(signed_response.status == 206);
  CHECK(signed_response.body == "hello");

  const auto c = client.counters();
  CHECK(c.requests == 5);
  CHECK(c.retries == 0);
  CHECK(c.bytes >= 16 + 16 + 5);
}

TEST_CASE("HttpClient bounds response bodies by max_response_bytes", "[remote][http]") {
  testing::TempDir root;
  testing::write_file(root / "big.bin", std::string(10'000, 'x'));
  testing::NginxServer nginx(root.path().string());
  HttpOptions options;
  options.max_response_bytes = 1000;
  HttpClient client(options);
  const auto start = std::chrono::steady_clock::now();
  try {
    client.send(parse_url(nginx.url("/big.bin")), {});
    FAIL("no exception");
  } catch (const IoError& e) {
    CHECK(e.context().file == nginx.url("/big.bin"));
    CHECK(std::string(e.what()).find("exceeds the limit of 1000 bytes") != std::string::npos);
  }
  CHECK(client.counters().requests == 1);  // not retried
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("RangedReader reads a multi-block object byte-exactly", "[remote][http]") {
  testing::TempDir root;
  const std::string data = random_bytes((3u << 20) + 12345, 14);
  testing::write_file(root / "blob.bin", data);
  testing::write_file(root / "empty.bin", "");
  testing::write_file(root / "tiny.bin", "abc");
  testing::NginxServer nginx(root.path().string());
  auto client = quick_client();
  const ReadaheadOptions readahead{.block_size = 256 << 10, .in_flight = 4};
  const auto url = parse_url(nginx.url("/blob.bin"));

  SECTION("sequential reads in odd chunks, then the end") {
    RangedReader reader(client, url, {}, readahead, "test");
    CHECK(reader.size() == data.size());
    CHECK_FALSE(reader.etag().empty());
    CHECK(read_all(reader, 100'003) == data);
    char b = 0;
    CHECK(reader.read(&b, 1) == 0);
    const auto c = reader.counters();
    const std::uint64_t blocks = (data.size() + readahead.block_size - 1) / readahead.block_size;
    CHECK(c.requests == blocks);
    CHECK(c.bytes == data.size());
    CHECK(c.retries == 0);
  }

  SECTION("one read larger than the whole object") {
    RangedReader reader(client, url, {}, readahead, "test");
    std::string all(data.size() + 100, '\0');
    CHECK(reader.read(all.data(), all.size()) == data.size());
    all.resize(data.size());
    CHECK(all == data);
  }

  SECTION("read_at at odd offsets, across blocks and at the end") {
    RangedReader reader(client, url, {}, readahead, "test");
    for (const std::uint64_t offset :
         {std::uint64_t{1}, std::uint64_t{262'143}, std::uint64_t{262'144 * 3 - 7},
          std::uint64_t{data.size() - 10}}) {
      std::string buf(1'000, '\0');
      const auto got = reader.read_at(offset, buf.data(), buf.size());
      CHECK(got == std::min<std::uint64_t>(1'000, data.size() - offset));
      buf.resize(got);
      CHECK(buf == data.substr(offset, got));
    }
    std::string big(700'000, '\0');  // one GET spanning three blocks
    CHECK(reader.read_at(100'000, big.data(), big.size()) == big.size());
    CHECK(big == data.substr(100'000, big.size()));
    char b = 0;
    CHECK(reader.read_at(data.size(), &b, 1) == 0);
    // read_at leaves the sequential position alone.
    std::string head(10, '\0');
    CHECK(reader.read(head.data(), head.size()) == 10);
    CHECK(head == data.substr(0, 10));
  }

  SECTION("an object smaller than one block, and an empty one") {
    RangedReader tiny(client, parse_url(nginx.url("/tiny.bin")), {}, readahead, "test");
    CHECK(tiny.size() == 3);
    CHECK(read_all(tiny, 10) == "abc");
    RangedReader empty(client, parse_url(nginx.url("/empty.bin")), {}, readahead, "test");
    CHECK(empty.size() == 0);
    CHECK(read_all(empty, 10).empty());
    char b = 0;
    CHECK(empty.read_at(0, &b, 1) == 0);
  }

  SECTION("readahead changed mid-read, as an autotuner does") {
    RangedReader reader(client, url, {}, readahead, "test");
    std::string got(300'000, '\0');
    REQUIRE(reader.read(got.data(), got.size()) == got.size());
    reader.set_readahead({.block_size = 100'001, .in_flight = 7});
    CHECK(reader.readahead().block_size == 100'001);
    CHECK(reader.readahead().in_flight == 7);
    got += read_all(reader, 65'536);
    CHECK(got == data);
    reader.set_readahead({.block_size = 0, .in_flight = 0});
    CHECK(reader.readahead().block_size == 1);
    CHECK(reader.readahead().in_flight == 1);
  }

  SECTION("one block in flight, blocks of one byte more than a power of two") {
    RangedReader reader(client, url, {}, {.block_size = (64 << 10) + 1, .in_flight = 1}, "test");
    CHECK(read_all(reader, 4096) == data);
  }
}

TEST_CASE("RangedReader: 404 and 403 at open fail at once, naming the URL", "[remote][http]") {
  testing::TempDir root;
  testing::NginxServer nginx(root.path().string());
  HttpOptions options;
  options.retry.initial_backoff = std::chrono::milliseconds(2'000);
  auto client = std::make_shared<HttpClient>(options);
  const std::string url = nginx.url("/no/such/object.bin");
  const auto start = std::chrono::steady_clock::now();
  try {
    RangedReader reader(client, parse_url(url), {}, {}, "tfrecord");
    FAIL("no exception");
  } catch (const IoError& e) {
    CHECK(e.context().file == url);
    CHECK(e.context().stage == "tfrecord");
    CHECK(std::string(e.what()).find("404") != std::string::npos);
    CHECK(std::string(e.what()).find(url) != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1'000));
  CHECK(client->counters().retries == 0);
  CHECK(client->counters().requests == 1);
}

TEST_CASE("RangedReader: an object replaced mid-read raises DataLossError", "[remote][http]") {
  testing::TempDir root;
  const std::string data = random_bytes(1 << 20, 7);
  const std::string path = root / "changing.bin";
  testing::write_file(path, data);
  testing::NginxServer nginx(root.path().string());
  auto client = quick_client();
  const std::string url = nginx.url("/changing.bin");
  RangedReader reader(client, parse_url(url), {}, {.block_size = 256 << 10, .in_flight = 1},
                      "test");
  std::string buf(256 << 10, '\0');
  REQUIRE(reader.read(buf.data(), buf.size()) == buf.size());  // block 0; block 1 requested
  CHECK(buf == data.substr(0, buf.size()));
  // Block 1 was requested with block 0: let it arrive before the change (on
  // a loaded machine it may still be in flight).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (reader.counters().bytes < (512u << 10) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(reader.counters().bytes >= (512u << 10));

  // New content under the same name, with another mtime: nginx's ETag changes.
  const std::string replacement = root / "replacement.tmp";
  testing::write_file(replacement, random_bytes(1 << 20, 8));
  std::filesystem::last_write_time(
      replacement, std::filesystem::last_write_time(path) + std::chrono::seconds(10));
  std::filesystem::rename(replacement, path);

  std::uint64_t read_before_error = buf.size();
  try {
    for (;;) {
      const auto got = reader.read(buf.data(), buf.size());
      if (got == 0) break;
      read_before_error += got;
    }
    FAIL("no exception");
  } catch (const DataLossError& e) {
    CHECK(e.context().file == url);
    REQUIRE(e.context().offset);
    CHECK(*e.context().offset == 512u << 10);  // block 1 was in flight before the change
    CHECK(std::string(e.what()).find("changed") != std::string::npos);
  }
  CHECK(read_before_error == 512u << 10);
  // The reader stays failed: no block is skipped over.
  CHECK_THROWS_AS(reader.read(buf.data(), 1), DataLossError);
  // read_at checks the pinned version too.
  CHECK_THROWS_AS(reader.read_at(0, buf.data(), 10), DataLossError);
}

TEST_CASE("https verifies the server's certificate", "[remote][http]") {
  testing::TempDir root;
  const std::string data = random_bytes(300'000, 3);
  testing::write_file(root / "secure.bin", data);
  testing::NginxServer nginx(root.path().string(), /*tls=*/true);
  const std::string url = nginx.tls_url("/secure.bin");

  SECTION("without the CA file the self-signed certificate is refused, not retried") {
    auto client = quick_client(4);
    try {
      client->send(parse_url(url), {});
      FAIL("no exception");
    } catch (const IoError& e) {
      CHECK(e.context().file == url);
      CHECK(std::string(e.what()).find("certificate") != std::string::npos);
    }
    CHECK(client->counters().requests == 1);
  }

  SECTION("with the certificate as ca_file it reads over TLS") {
    HttpOptions options;
    options.ca_file = nginx.certificate_file();
    auto client = std::make_shared<HttpClient>(options);
    RangedReader reader(client, parse_url(url), {}, {.block_size = 64 << 10, .in_flight = 3},
                        "test");
    CHECK(reader.size() == data.size());
    CHECK(read_all(reader, 50'000) == data);
    CHECK(client->send(parse_url(url), {.method = "HEAD"}).status == 200);
  }

  SECTION("verify_peer = false accepts any certificate, and says so once per host") {
    std::vector<std::string> lines;
    std::mutex mu;
    set_log_sink([&](std::string_view line) {
      std::lock_guard lock(mu);
      lines.emplace_back(line);
    });
    HttpOptions options;
    options.verify_peer = false;
    HttpClient client(options);
    CHECK(client.send(parse_url(url), {}).body == data);
    CHECK(client.send(parse_url(url), {.method = "HEAD"}).status == 200);
    set_log_sink({});
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("127.0.0.1:" + std::to_string(nginx.tls_port())) != std::string::npos);
    CHECK(lines[0].find("not verified") != std::string::npos);
  }

  SECTION("TLS 1.2 is the minimum, whatever the system's default") {
    HttpClient client;
    CHECK(SSL_CTX_get_min_proto_version(client.tls_context().native_handle()) == TLS1_2_VERSION);
  }

  SECTION("a CA file that cannot be loaded is an InvalidArgument naming it") {
    HttpOptions options;
    options.ca_file = root / "no-such-ca.pem";
    CHECK_THROWS_AS(HttpClient(options), InvalidArgument);
  }
}

TEST_CASE("connection refused is retried max_attempts times, then an IoError", "[remote][http]") {
  const std::uint16_t port = testing::free_loopback_port();  // nothing listens there
  auto client = quick_client(4);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/x";
  try {
    client->send(parse_url(url), {});
    FAIL("no exception");
  } catch (const IoError& e) {
    const std::string what = e.what();
    CHECK(e.context().file == url);
    CHECK(what.find("4 attempts") != std::string::npos);
    CHECK(what.find("refused") != std::string::npos);
  }
  CHECK(client->counters().requests == 4);
  CHECK(client->counters().retries == 3);

  try {
    RangedReader reader(client, parse_url(url), {}, {}, "text_lines");
    FAIL("no exception");
  } catch (const IoError& e) {
    CHECK(e.context().file == url);
    CHECK(e.context().stage == "text_lines");
    CHECK(std::string(e.what()).find("4 attempts") != std::string::npos);
  }
}

TEST_CASE("HttpScheme opens http URLs for ingest's readers", "[remote][http]") {
  testing::TempDir root;
  {
    TFRecordWriter writer(root / "x.tfrecord");
    for (int i = 0; i < 1000; ++i) writer.write("record-" + std::to_string(i));
    writer.close();
  }
  testing::write_file(root / "lines.txt", "alpha\nbeta\ngamma\n");
  testing::NginxServer nginx(root.path().string());
  auto scheme = storage::register_http_scheme(quick_client(), {.block_size = 4096, .in_flight = 2});
  CHECK(scheme->readahead().block_size == 4096);
  CHECK(scheme->readahead().in_flight == 2);
  CHECK(storage::scheme_for("https://h/x", "test") == scheme);

  std::vector<std::string> records;
  for (auto& r : tfrecord(nginx.url("/x.tfrecord"))) records.emplace_back(r);
  REQUIRE(records.size() == 1000);
  CHECK(records.front() == "record-0");
  CHECK(records.back() == "record-999");

  std::vector<std::string> lines;
  for (auto& l : text_lines(nginx.url("/lines.txt"))) lines.push_back(l);
  CHECK(lines == std::vector<std::string>{"alpha", "beta", "gamma"});

  CHECK(scheme->exists(nginx.url("/lines.txt"), "test"));
  CHECK_FALSE(scheme->exists(nginx.url("/nothing.txt"), "test"));
  CHECK_THROWS_AS(scheme->open_write(nginx.url("/new.bin"), "test"), InvalidArgument);
  CHECK_THROWS_AS(scheme->list(nginx.url("/"), "test"), InvalidArgument);
  try {
    scheme->open_read("http://bad url", "tfrecord");
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().stage == "tfrecord");
    CHECK(e.context().file == "http://bad url");
  }
  try {
    for (auto& r : tfrecord(nginx.url("/missing.tfrecord"))) (void)r;
    FAIL("no exception");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find(nginx.url("/missing.tfrecord")) != std::string::npos);
  }
}

TEST_CASE("many threads share one client and its pool", "[remote][http]") {
  testing::TempDir root;
  const std::string data = random_bytes(200'000, 5);
  testing::write_file(root / "shared.bin", data);
  testing::NginxServer nginx(root.path().string());
  HttpOptions options;
  options.max_connections_per_host = 3;
  auto client = std::make_shared<HttpClient>(options);
  const auto url = parse_url(nginx.url("/shared.bin"));
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      RangedReader reader(client, url, {}, {.block_size = 16 << 10, .in_flight = 4}, "test");
      if (read_all(reader, 7'000) == data) ++good;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(good == 6);
}

TEST_CASE("an attempt that gets no answer times out, and is retried", "[remote][http]") {
  // A listening socket that never accepts: the kernel completes the TCP
  // handshake, so the request is sent and no response ever comes.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/slow";

  HttpOptions options;
  options.request_timeout = std::chrono::milliseconds(200);
  options.retry.max_attempts = 2;
  options.retry.initial_backoff = std::chrono::milliseconds(1);
  HttpClient client(options);
  const auto start = std::chrono::steady_clock::now();
  try {
    client.send(parse_url(url), {});
    FAIL("no exception");
  } catch (const IoError& e) {
    CHECK(e.context().file == url);
    CHECK(std::string(e.what()).find("timed out") != std::string::npos);
    CHECK(std::string(e.what()).find("2 attempts") != std::string::npos);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= std::chrono::milliseconds(400));
  CHECK(took < std::chrono::seconds(5));
  ::close(fd);
}

TEST_CASE("a body cut short by the request timeout resumes at the exact byte", "[remote][http]") {
  // nginx sends /slow/ responses at NginxServer::slow_rate bytes a second,
  // the first second's worth at once: each attempt gets that much before its
  // 300 ms timeout, and the next one asks for the rest.
  testing::TempDir root;
  const std::string data = random_bytes(5 * testing::NginxServer::slow_rate + 777, 11);
  testing::write_file(root / "resume.bin", data);
  testing::NginxServer nginx(root.path().string());
  HttpOptions options;
  options.request_timeout = std::chrono::milliseconds(300);
  options.retry.max_attempts = 2;  // below the attempts needed: progress resets the count
  options.retry.initial_backoff = std::chrono::milliseconds(1);
  auto client = std::make_shared<HttpClient>(options);
  const std::string url = nginx.url("/slow/resume.bin");
  RangedReader reader(client, parse_url(url), {}, {.block_size = 1 << 20, .in_flight = 1}, "test");
  CHECK(reader.size() == data.size());
  CHECK(read_all(reader, 10'000) == data);
  const auto c = reader.counters();
  CHECK(c.retries >= 4);
  CHECK(c.requests == c.retries + 1);
  CHECK(c.bytes == data.size());  // no byte fetched twice
}

TEST_CASE("what a PrepareRequest throws propagates, ingest errors keeping their type",
          "[remote][http]") {
  HttpClient client;
  const auto url =
      parse_url("http://127.0.0.1:" + std::to_string(testing::free_loopback_port()) + "/k");
  try {
    client.send(url, {}, [](const storage::Url&, storage::HttpRequest&) {
      throw InvalidArgument("no credentials");
    });
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(e.message() == "no credentials");
    CHECK(e.context().file == url.str());
  }
  try {
    client.send(url, {}, [](const storage::Url&, storage::HttpRequest&) {
      throw std::runtime_error("clock skew");
    });
    FAIL("no exception");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find("preparing the request failed: clock skew") !=
          std::string::npos);
  }
  CHECK(client.counters().requests == 0);
}

TEST_CASE("readers and clients destroyed with requests in flight shut down cleanly",
          "[remote][http]") {
  testing::TempDir root;
  const std::string data = random_bytes(2 << 20, 21);
  testing::write_file(root / "abandoned.bin", data);
  testing::NginxServer nginx(root.path().string());
  const auto url = parse_url(nginx.url("/slow/abandoned.bin"));  // slow: still in flight
  for (int round = 0; round < 3; ++round) {
    auto client = quick_client();
    {
      RangedReader reader(client, url, {}, {.block_size = 16 << 10, .in_flight = 8}, "test");
      char b = 0;
      CHECK(reader.read(&b, 1) == 1);
      CHECK(b == data[0]);
    }  // the reader goes with 8 blocks in flight
    if (round == 1) {
      // A second reader on the same client still works after the first was abandoned.
      RangedReader again(client, parse_url(nginx.url("/abandoned.bin")), {},
                         {.block_size = 256 << 10, .in_flight = 2}, "test");
      CHECK(read_all(again, 100'000) == data);
    }
    client.reset();  // the client goes with requests in flight (round 0, 2) or idle
  }
}

TEST_CASE("503 is retried after the server's Retry-After, 403 is not retried", "[remote][http]") {
  testing::TempDir root;
  testing::NginxServer nginx(root.path().string());
  HttpOptions options;
  options.retry.max_attempts = 2;
  options.retry.initial_backoff = std::chrono::milliseconds(1);
  options.retry.max_backoff = std::chrono::milliseconds(3'000);
  auto client = std::make_shared<HttpClient>(options);

  const std::string busy = nginx.url("/unavailable/x.bin");
  auto start = std::chrono::steady_clock::now();
  try {
    client->send(parse_url(busy), {});
    FAIL("no exception");
  } catch (const IoError& e) {
    CHECK(e.context().file == busy);
    CHECK(std::string(e.what()).find("2 attempts: HTTP 503 Service Unavailable") !=
          std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(1'000));
  CHECK(client->counters().retries == 1);

  const std::string forbidden = nginx.url("/forbidden/x.bin");
  start = std::chrono::steady_clock::now();
  CHECK(client->send(parse_url(forbidden), {}).status == 403);  // returned as is
  try {
    RangedReader reader(client, parse_url(forbidden), {}, {}, "test");
    FAIL("no exception");
  } catch (const IoError& e) {
    CHECK(e.context().file == forbidden);
    CHECK(std::string(e.what()).find("HTTP 403 Forbidden") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(900));
  CHECK(client->counters().retries == 1);
}
