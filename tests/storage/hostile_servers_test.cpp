// Hostile servers: scripted servers on 127.0.0.1 (support/scripted_server.hpp)
// send what no real server does (endless chunk framing, listings that
// loop, keys outside the prefix, XML built to swell a parser), and what
// they may not reach: the client's memory past its limits, a request that
// never ends or is retried, a secret in an error or log line, a request to
// another host. See docs/reliability.md, "Hostile servers and files".
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/storage/http.hpp>
#include <ingest/storage/s3.hpp>

#include "support/memory.hpp"
#include "support/scripted_server.hpp"

using namespace ingest;
using ingest::testing::ScriptedServer;
using storage::AwsCredentials;
using storage::BucketAddressing;
using storage::check_bucket_name;
using storage::HttpClient;
using storage::HttpOptions;
using storage::HttpScheme;
using storage::parse_list_objects_v2;
using storage::parse_url;
using storage::parse_xml;
using storage::S3Client;
using storage::S3Options;
using storage::S3Scheme;

namespace {

using Reply = ScriptedServer::Reply;

HttpOptions hostile_http_options() {
  HttpOptions o;
  o.retry.max_attempts = 4;
  o.retry.initial_backoff = std::chrono::milliseconds(1);
  o.retry.max_backoff = std::chrono::milliseconds(5);
  o.connect_timeout = std::chrono::milliseconds(5'000);
  o.request_timeout = std::chrono::milliseconds(60'000);
  o.max_response_bytes = std::size_t{1} << 20;
  return o;
}

const std::string chunked_head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

// The request's target ("/a?b") from its head.
std::string target_of(const std::string& head) {
  const auto sp = head.find(' ');
  return head.substr(sp + 1, head.find(' ', sp + 1) - sp - 1);
}

std::string hostile_seconds(std::chrono::steady_clock::time_point t0) {
  return std::to_string(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// Log lines, captured while alive.
class CapturedLog {
 public:
  CapturedLog() {
    set_log_sink([this](std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    });
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  ~CapturedLog() { set_log_sink({}); }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// What one response-limit probe did: the error and what it cost.
struct Probe {
  std::string error;
  double seconds = 0;
  std::uint64_t requests = 0;
  std::uint64_t peak_growth = 0;
};

// Sends one GET to a server answering `reply`, measuring peak RSS growth.
Probe probe(const Reply& reply) {
  ScriptedServer server([&](const std::string&, const std::string&) { return reply; });
  HttpClient client(hostile_http_options());
  const std::uint64_t before = ingest::testing::rss_bytes();
  REQUIRE(ingest::testing::reset_peak_rss());
  const auto t0 = std::chrono::steady_clock::now();
  Probe p;
  try {
    client.send(parse_url(server.url("/object")), {});
    p.error = "(no error)";
  } catch (const IoError& e) {
    p.error = e.what();
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::uint64_t peak = ingest::testing::peak_rss_bytes();
  p.peak_growth = peak > before ? peak - before : 0;
  p.requests = client.counters().requests;
  CHECK(p.error.find(server.url("/object")) != std::string::npos);
  return p;
}

}  // namespace

TEST_CASE("hostile: an endless chunk extension fails at once, unretried, in bounded memory",
          "[remote][hostile]") {
  // 200 MiB of one chunk extension that never ends its line.
  const Probe p = probe({.bytes = chunked_head + "1;ext=",
                         .repeat = std::string(64 << 10, 'a'),
                         .repeat_bytes = std::uint64_t{200} << 20,
                         .close = true});
  INFO(p.error << " after " << p.seconds << " s, peak RSS +" << p.peak_growth << " bytes");
  CHECK(p.error.find("max_header_bytes") != std::string::npos);
  CHECK(p.requests == 1);
  CHECK(p.seconds < 10);
  // Under twice the limits: 1 MiB of body and 64 KiB of header.
  if (ingest::testing::memory_is_measured) {
    CHECK(p.peak_growth < 2 * ((std::size_t{1} << 20) + (std::size_t{64} << 10)));
  }
}

TEST_CASE("hostile: endless trailers fail at the header limit", "[remote][hostile]") {
  const Probe p = probe({.bytes = chunked_head + "1\r\na\r\n0\r\nX-Trailer: ",
                         .repeat = std::string(64 << 10, 't'),
                         .repeat_bytes = std::uint64_t{100} << 20,
                         .close = true});
  INFO(p.error << " after " << p.seconds << " s");
  CHECK(p.error.find("max_header_bytes") != std::string::npos);
  CHECK(p.requests == 1);
  CHECK(p.seconds < 10);
}

TEST_CASE("hostile: chunk extensions of many chunks share the header limit", "[remote][hostile]") {
  // Each chunk is small and well formed; their extensions add up.
  const Probe p = probe({.bytes = chunked_head,
                         .repeat = "1;" + std::string(1000, 'e') + "\r\nx\r\n",
                         .repeat_bytes = std::uint64_t{20} << 20,
                         .close = true});
  INFO(p.error << " after " << p.seconds << " s");
  CHECK(p.error.find("max_header_bytes") != std::string::npos);
  CHECK(p.requests == 1);
}

TEST_CASE("hostile: a body over the limit fails at once without retries", "[remote][hostile]") {
  const Probe p = probe({.bytes = chunked_head,
                         .repeat = "10000\r\n" + std::string(0x10000, 'b') + "\r\n",
                         .repeat_bytes = std::uint64_t{50} << 20,
                         .close = true});
  INFO(p.error);
  CHECK(p.error.find("exceeds the limit of 1048576 bytes") != std::string::npos);
  CHECK(p.requests == 1);
}

TEST_CASE("hostile: presigned URLs and passwords never appear in errors or logs",
          "[remote][hostile][redact]") {
  // Every error path of the http scheme, taken with a presigned URL.
  ScriptedServer server([](const std::string& head, const std::string&) -> Reply {
    const std::string target = target_of(head);
    const std::string path = target.substr(0, target.find('?'));
    const bool conditional = head.find("If-Match") != std::string::npos;
    if (path == "/404") return {.bytes = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"};
    if (path == "/403") {
      const std::string body =
          "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>";
      return {.bytes = "HTTP/1.1 403 Forbidden\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n" + body};
    }
    if (path == "/503") {
      return {.bytes = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"};
    }
    if (path == "/framing") {
      return {.bytes = chunked_head + "1;",
              .repeat = std::string(64 << 10, 'a'),
              .repeat_bytes = 8 << 20,
              .close = true};
    }
    if (path == "/big") {
      return {.bytes = "HTTP/1.1 200 OK\r\nContent-Length: 5000000\r\n\r\n", .close = true};
    }
    if (path == "/badrange") {
      return {.bytes =
                  "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 5-9/100\r\n"
                  "Content-Length: 5\r\n\r\nhello"};
    }
    if (path == "/changed") {
      if (conditional) {
        return {.bytes = "HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n"};
      }
      const std::string range = head.substr(head.find("bytes=") + 6);
      const std::size_t first = std::stoul(range);
      const std::size_t last = std::min<std::size_t>(first + 9, 99);
      return {.bytes = "HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\nContent-Range: bytes " +
                       std::to_string(first) + "-" + std::to_string(last) +
                       "/100\r\nContent-Length: " + std::to_string(last - first + 1) + "\r\n\r\n" +
                       std::string(last - first + 1, 'c')};
    }
    return {.bytes = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"};
  });
  const std::string query =
      "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIASECRETID%2F20240101%2Fus-east-1"
      "%2Fs3%2Faws4_request&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders="
      "host&X-Amz-Security-Token=TOKENSECRET&X-Amz-Signature=SIGNATURESECRET&session=USERSECRET"
      "&Signature=V2SECRET&AWSAccessKeyId=V2IDSECRET&token=PLAINSECRET&part=7";
  const std::vector<std::string> secrets = {"SECRET", "hunter2"};
  HttpOptions o = hostile_http_options();
  o.redact_query_parameters = {"Session"};
  auto client = std::make_shared<HttpClient>(o);
  HttpScheme scheme(client, {.block_size = 10, .in_flight = 2});
  CapturedLog log;

  std::vector<std::string> shown;  // every what(), message() and file
  auto expect_error = [&](const std::string& where, auto&& f) {
    INFO(where);
    try {
      f();
      FAIL("no error");
    } catch (const Error& e) {
      shown.push_back(e.what());
      shown.push_back(e.message());
      shown.push_back(e.context().file);
      // The object is still named: host, port and path.
      CHECK(std::string(e.what()).find(where) != std::string::npos);
    }
  };
  // Which calls fail on which path (send() returns a 404 as a response;
  // HEAD reads no body, and 404 is exists() == false).
  struct Path {
    std::string path;
    bool send, exists;
  };
  const std::vector<Path> paths = {{"/404", false, false},     {"/403", false, true},
                                   {"/503", true, true},       {"/500", true, true},
                                   {"/framing", true, false},  {"/big", true, false},
                                   {"/badrange", false, false}};
  for (const auto& [path, send, exists] : paths) {
    const std::string url = server.url(path) + query;
    if (send) expect_error(server.url(path), [&] { client->send(parse_url(url), {}); });
    expect_error(server.url(path), [&] { scheme.open_read(url, "tfrecord"); });
    if (exists) expect_error(server.url(path), [&] { scheme.exists(url, "list_files"); });
    expect_error(server.url(path), [&] {
      auto r = scheme.open_positional(url, "indexed_tfrecord", 100);
      char buf[10];
      r->read_at(0, buf, sizeof buf);
    });
  }
  // Changed while read: the second block's If-Match fails.
  expect_error(server.url("/changed"), [&] {
    auto reader = scheme.open_read(server.url("/changed") + query, "tfrecord");
    std::string out(100, '\0');
    reader->read(out.data(), out.size());
  });
  // Nothing listens: connection refused.
  {
    const std::string dead = "http://127.0.0.1:" + std::to_string(server.port() == 1 ? 2 : 1);
    expect_error(dead + "/obj", [&] { client->send(parse_url(dead + "/obj" + query), {}); });
  }
  // Malformed URLs: a password, a space, a fragment.
  expect_error("127.0.0.1", [&] {
    scheme.open_read("http://user:hunter2@127.0.0.1:1/obj" + query, "tfrecord");
  });
  expect_error("/obj", [&] { scheme.open_read(server.url("/obj") + query + " x", "tfrecord"); });
  expect_error("/obj", [&] { parse_url(server.url("/obj") + query + "#frag"); });
  // Read-only and unlistable.
  expect_error("/obj", [&] { scheme.open_write(server.url("/obj") + query, "TFRecordWriter"); });
  expect_error("/obj", [&] { scheme.list(server.url("/obj") + query, "list_files"); });
  // Context added on the way out, as a pipeline stage does.
  expect_error("/wrapped", [&] {
    try {
      throw IoError("wrapped");
    } catch (Error& e) {
      e.add_context({.file = server.url("/wrapped") + query});
      throw;
    }
  });
  // A log line naming the URL.
  log_line("cache: rebuilding '" + server.url("/log") + query + "' because it is stale");

  for (const auto& line : log.lines()) shown.push_back(line);
  REQUIRE(shown.size() > 80);
  bool redacted = false;
  for (const auto& text : shown) {
    INFO(text);
    for (const auto& secret : secrets) CHECK(text.find(secret) == std::string::npos);
    redacted = redacted || text.find("X-Amz-Signature=REDACTED") != std::string::npos;
  }
  CHECK(redacted);
  const auto lines = log.lines();
  REQUIRE_FALSE(lines.empty());
  CHECK(lines.back().find(server.url("/log") + "?X-Amz-Algorithm=REDACTED") != std::string::npos);
  CHECK(lines.back().find("&part=7'") != std::string::npos);  // other parameters stay
}

namespace {

// An S3 scheme whose endpoint is the scripted server.
S3Options scripted_s3(const ScriptedServer& server) {
  S3Options o;
  o.endpoint = server.url();
  o.region = "us-east-1";
  o.credentials = AwsCredentials{.access_key_id = "AKIDTEST", .secret_access_key = "SKTEST"};
  o.http = hostile_http_options();
  return o;
}

// A ListObjectsV2 page of `keys`, truncated with `token` unless it is empty.
Reply list_page(const std::vector<std::string>& keys, const std::string& token) {
  std::string body = "<?xml version=\"1.0\"?><ListBucketResult><Name>bucket</Name>";
  for (const auto& k : keys) body += "<Contents><Key>" + k + "</Key><Size>1</Size></Contents>";
  body += token.empty() ? "<IsTruncated>false</IsTruncated>"
                        : "<IsTruncated>true</IsTruncated><NextContinuationToken>" + token +
                              "</NextContinuationToken>";
  body += "</ListBucketResult>";
  return {.bytes = "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body};
}

}  // namespace

TEST_CASE("hostile: an S3 listing whose tokens cycle ends at the first repeat",
          "[remote][hostile][s3]") {
  // Tokens A, B, A, B, ...: never the same twice in a row. The server gives
  // up after 50 pages, so that a client that loops still ends.
  std::atomic<int> pages{0};
  ScriptedServer server([&](const std::string& head, const std::string&) {
    const int n = ++pages;
    const bool at_a = target_of(head).find("continuation-token=A") != std::string::npos;
    return list_page({"p/k" + std::to_string(n)}, n > 50 ? "" : at_a ? "B" : "A");
  });
  S3Scheme s3(scripted_s3(server));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const auto urls = s3.list("s3://bucket/p/", "list_files");
    FAIL("listed " << urls.size() << " URLs in " << server.requests() << " requests");
  } catch (const IoError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("continuation token it had returned before") !=
          std::string::npos);
    CHECK(std::string(e.what()).find("s3://bucket/p/") != std::string::npos);
  }
  INFO("after " << hostile_seconds(t0) << " s");
  CHECK(server.requests() == 3);  // A, B, then A again
}

TEST_CASE("hostile: S3 listings are capped in pages and keys", "[remote][hostile][s3]") {
  std::atomic<int> page{0};
  ScriptedServer server([&](const std::string&, const std::string&) {
    const int n = page.fetch_add(1);
    return list_page({"p/a" + std::to_string(n), "p/b" + std::to_string(n)},
                     "t" + std::to_string(n));  // fresh tokens forever
  });
  SECTION("pages") {
    S3Options o = scripted_s3(server);
    o.max_list_pages = 5;
    o.max_list_keys = 1000;
    S3Scheme s3(o);
    CHECK_THROWS_WITH(s3.list("s3://bucket/p", "list_files"),
                      Catch::Contains("more than 5 pages (S3Options::max_list_pages)") &&
                          Catch::Contains("s3://bucket/p"));
    CHECK(server.requests() == 5);
  }
  SECTION("keys") {
    S3Options o = scripted_s3(server);
    o.max_list_keys = 7;
    S3Scheme s3(o);
    CHECK_THROWS_WITH(s3.list("s3://bucket/p", "list_files"),
                      Catch::Contains("more than 7 keys (S3Options::max_list_keys)"));
    CHECK(server.requests() == 4);
  }
  S3Options defaults;
  CHECK(defaults.max_list_keys == 10'000'000);
  CHECK(defaults.max_list_pages == 100'000);
}

TEST_CASE("hostile: listed keys outside the prefix are an error, unsafe ones skipped and logged",
          "[remote][hostile][s3]") {
  std::vector<std::string> keys;
  ScriptedServer server(
      [&](const std::string&, const std::string&) { return list_page(keys, ""); });
  S3Scheme s3(scripted_s3(server));
  keys = {"data/a", "other/b"};
  CHECK_THROWS_WITH(s3.list("s3://bucket/data/", "list_files"),
                    Catch::Contains("'other/b', which is outside the prefix listed") &&
                        Catch::Contains("s3://bucket/data/"));
  keys = {"ok", "a/../x", "a//y", "/lead", "..", "dir/", "a..b/c"};
  CapturedLog log;
  const auto urls = s3.list("s3://bucket/", "list_files");
  CHECK(urls ==
        std::vector<std::string>{"s3://bucket/a..b/c", "s3://bucket/dir/", "s3://bucket/ok"});
  const auto lines = log.lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("skipped 4 keys") != std::string::npos);
  CHECK(lines[0].find("'a/../x'") != std::string::npos);
}

TEST_CASE("hostile: XML is parsed in memory proportional to the response",
          "[remote][hostile][s3][xml]") {
  const std::size_t size = std::size_t{8} << 20;
  auto document = [&](const std::string& element) {
    std::string xml = "<ListBucketResult>";
    xml.reserve(size + 64);
    while (xml.size() < size) xml += element;
    xml += "<IsTruncated>false</IsTruncated></ListBucketResult>";
    return xml;
  };
  auto peak_growth = [](auto&& f) {
    const std::uint64_t before = ingest::testing::rss_bytes();
    REQUIRE(ingest::testing::reset_peak_rss());
    f();
    const std::uint64_t peak = ingest::testing::peak_rss_bytes();
    return peak > before ? peak - before : 0;
  };
  {
    const std::string empty = document("<a/>");
    std::size_t keys = 1;
    const auto grew = peak_growth([&] { keys = parse_list_objects_v2(empty).keys.size(); });
    INFO("empty elements: +" << grew << " bytes");
    CHECK(keys == 0);
    if (ingest::testing::memory_is_measured) CHECK(grew <= 4 * empty.size());
    // The tree refuses what it cannot hold in 4 times the size.
    const auto tree =
        peak_growth([&] { CHECK_THROWS_WITH(parse_xml(empty), Catch::Contains("bytes to hold")); });
    if (ingest::testing::memory_is_measured)
      CHECK(tree <= 4 * empty.size() + (std::size_t{1} << 20));
  }
  {
    const std::string contents = document("<Contents><Key>k</Key></Contents>");
    std::size_t keys = 0;
    const auto grew = peak_growth([&] { keys = parse_list_objects_v2(contents).keys.size(); });
    INFO("one-letter keys: +" << grew << " bytes");
    CHECK(keys > 200'000);
    if (ingest::testing::memory_is_measured) CHECK(grew <= 4 * contents.size());
  }
}

TEST_CASE("hostile: bucket names are checked before any request", "[remote][hostile][s3]") {
  ScriptedServer server([](const std::string&, const std::string&) { return list_page({}, ""); });
  S3Options o = scripted_s3(server);
  o.endpoint = "http://localhost:" + std::to_string(server.port());
  o.path_style = false;  // virtual-hosted: the bucket goes into the host name
  S3Scheme s3(o);
  const std::vector<std::string> bad = {std::string("s3://127.0.0.1\0zz/key", 21),
                                        "s3://Upper/key",
                                        "s3://under_score/key",
                                        "s3://ab/key",
                                        "s3://" + std::string(64, 'a') + "/key",
                                        "s3://-lead/key",
                                        "s3://trail-/key",
                                        "s3://two..dots/key",
                                        "s3://192.168.1.1/key",
                                        "s3://spa ce/key"};
  for (const auto& url : bad) {
    INFO(url);
    CHECK_THROWS_AS(s3.open_read(url, "tfrecord"), InvalidArgument);
    CHECK_THROWS_AS(s3.exists(url, "list_files"), InvalidArgument);
    CHECK_THROWS_AS(s3.list(url, "list_files"), InvalidArgument);
    CHECK_THROWS_AS(s3.open_write(url, "TFRecordWriter")->commit(), InvalidArgument);
  }
  CHECK_THROWS_WITH(s3.exists(bad[0], "x"), Catch::Contains("127.0.0.1\\x00zz"));
  CHECK(server.requests() == 0);
  // Dotted names are valid and go path-style, as the AWS SDKs address them.
  const S3Client& c = *s3.client();
  CHECK(c.url("my.bucket", "k").str() == o.endpoint + "/my.bucket/k");
  CHECK(c.url("my-bucket", "k").host == "my-bucket.localhost");
  CHECK(check_bucket_name("a.b-c") == BucketAddressing::path_only);
  CHECK(check_bucket_name("abc") == BucketAddressing::virtual_host);
  CHECK(check_bucket_name("1.2.3") == BucketAddressing::path_only);
}
