// The s3:// scheme against a real S3 server: SeaweedFS on 127.0.0.1
// (support/seaweedfs.hpp), one server per test binary, one bucket per test.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/storage/s3.hpp>

#include "support/fault_proxy.hpp"
#include "support/records.hpp"
#include "support/seaweedfs.hpp"

using namespace ingest;
using namespace ingest::storage;
using ingest::testing::SeaweedS3;

namespace {

// Options for the test server: its endpoint and key, path-style.
S3Options server_options(SeaweedS3& server) {
  S3Options o;
  o.endpoint = server.endpoint();
  o.credentials = AwsCredentials{.access_key_id = SeaweedS3::kAccessKey,
                                 .secret_access_key = SeaweedS3::kSecretKey};
  o.http.retry.initial_backoff = std::chrono::milliseconds(10);
  return o;
}

// `n` bytes of a deterministic pattern.
std::string pattern_bytes(std::size_t n, std::uint32_t seed) {
  std::string out(n, '\0');
  std::uint32_t x = seed;
  for (auto& c : out) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return out;
}

std::string read_all(RemoteReader& r) {
  std::string out;
  char buf[100000];
  for (;;) {
    const std::size_t got = r.read(buf, sizeof buf);
    if (got == 0) return out;
    out.append(buf, got);
  }
}

void put(S3Scheme& s3, const std::string& url, const std::string& bytes) {
  auto w = s3.open_write(url, "test");
  w->write(bytes.data(), bytes.size());
  w->commit();
}

// The multipart uploads in progress in `bucket` (ListMultipartUploads).
std::size_t uploads_in_progress(SeaweedS3& server, const std::string& bucket) {
  const auto r = server.request("GET", "/" + bucket + "?uploads");
  REQUIRE(r.status == 200);
  const XmlElement root = parse_xml(r.body);
  std::size_t n = 0;
  for (const auto& c : root.children) n += c.name == "Upload";
  return n;
}

}  // namespace

TEST_CASE("S3 addressing is path-style for other endpoints, virtual-hosted for AWS", "[s3]") {
  S3Options o;
  o.anonymous = true;
  o.region = "eu-west-1";
  o.endpoint = "https://s3.eu-west-1.amazonaws.com";
  {
    S3Client c(o);
    const Url u = c.url("bucket", "dir/a b+c.txt");
    CHECK(u.host == "bucket.s3.eu-west-1.amazonaws.com");
    CHECK(u.port == 443);
    CHECK(u.target == "/dir/a%20b%2Bc.txt");
    CHECK(c.url("bucket", "", "list-type=2").target == "/?list-type=2");
    CHECK_FALSE(c.signer("x"));  // anonymous: nothing to sign
  }
  o.path_style = true;
  CHECK(S3Client(o).url("bucket", "k").str() == "https://s3.eu-west-1.amazonaws.com/bucket/k");
  o.path_style.reset();
  o.endpoint = "http://127.0.0.1:9000/base/";
  {
    S3Client c(o);
    CHECK(c.url("bucket", "k/l").str() == "http://127.0.0.1:9000/base/bucket/k/l");
    CHECK(c.url("bucket", "", "uploads").str() == "http://127.0.0.1:9000/base/bucket?uploads");
  }
  o.path_style = false;
  CHECK(S3Client(o).url("bucket", "k").str() == "http://bucket.127.0.0.1:9000/base/k");

  CHECK(parse_s3_url("s3://b/k/l m").bucket == "b");
  CHECK(parse_s3_url("s3://b/k/l m").key == "k/l m");
  CHECK(parse_s3_url("s3://b").key.empty());
  CHECK_THROWS_AS(parse_s3_url("s3:///k"), InvalidArgument);
  CHECK_THROWS_AS(parse_s3_url("http://b/k"), InvalidArgument);
}

TEST_CASE("S3 credentials resolve on the first request, not at registration", "[s3]") {
  ingest::testing::TempDir dir;
  ingest::testing::write_file(dir / "credentials",
                              "[default]\naws_access_key_id = K\naws_secret_access_key = S\n");
  const char* saved_file = std::getenv("AWS_SHARED_CREDENTIALS_FILE");
  const std::string saved = saved_file ? saved_file : "";
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").c_str(), 1);
  const char* id = std::getenv("AWS_ACCESS_KEY_ID");
  if (id == nullptr) {  // the environment would win over the file
    S3Options o;
    o.endpoint = "http://127.0.0.1:9";
    o.profile = "no-such-profile";
    CHECK_NOTHROW(use_s3(o));
    S3Client c(o);
    CHECK_THROWS_AS(c.credentials(), InvalidArgument);
    o.profile.clear();
    CHECK(S3Client(o).credentials().access_key_id == "K");
  }
  if (saved_file) {
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", saved.c_str(), 1);
  } else {
    ::unsetenv("AWS_SHARED_CREDENTIALS_FILE");
  }
}

TEST_CASE("S3 error bodies name the code, the message and the URL", "[s3]") {
  HttpResponse r{.status = 503,
                 .body =
                     "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                     "<Message>Please reduce your request rate.</Message></Error>"};
  const IoError e = S3Client::error(r, "GetObject", "s3://b/k", "reader");
  CHECK(e.message() == "S3 GetObject failed: HTTP 503 SlowDown: Please reduce your request rate.");
  CHECK(e.context().file == "s3://b/k");
  CHECK(e.context().stage == "reader");
  r = {.status = 404};
  CHECK_THROWS_WITH(S3Client::check(r, "HeadObject", "s3://b/k", "x"),
                    Catch::Contains("HTTP 404") && Catch::Contains("s3://b/k"));
  r = {.status = 206};
  CHECK_NOTHROW(S3Client::check(r, "GetObject", "s3://b/k", "x"));
}

TEST_CASE("S3 put and get round trip, exists and ranged read_at", "[s3][remote]") {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket("roundtrip");
  S3Scheme s3(server_options(server));
  const std::string url = "s3://" + bucket + "/dir/hello world+1.bin";
  const std::string bytes = pattern_bytes(300000, 7);

  CHECK_FALSE(s3.exists(url, "test"));
  put(s3, url, bytes);
  CHECK(s3.exists(url, "test"));
  CHECK_FALSE(s3.exists("s3://" + bucket + "/dir/hello", "test"));

  auto r = s3.open_read(url, "test");
  CHECK(r->size() == bytes.size());
  CHECK(read_all(*r) == bytes);

  std::string buf(1000, '\0');
  CHECK(r->read_at(123457, buf.data(), buf.size()) == 1000);
  CHECK(buf == bytes.substr(123457, 1000));
  CHECK(r->read_at(bytes.size() - 10, buf.data(), buf.size()) == 10);
  CHECK(buf.substr(0, 10) == bytes.substr(bytes.size() - 10));
  CHECK(r->read_at(bytes.size(), buf.data(), buf.size()) == 0);
  CHECK(r->counters().requests > 0);

  // An empty object.
  put(s3, "s3://" + bucket + "/empty", "");
  CHECK(s3.open_read("s3://" + bucket + "/empty", "test")->size() == 0);

  // Through the registry: FileReader and read_file-style use of the URL.
  use_s3(server_options(server));
  ingest::detail::FileReader f(url, "test");
  CHECK(f.size() == bytes.size());
}

TEST_CASE("S3 wrong secret raises IoError 403 naming the URL", "[s3][remote]") {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket("denied");
  S3Scheme good(server_options(server));
  const std::string url = "s3://" + bucket + "/object";
  put(good, url, "data");

  S3Options o = server_options(server);
  o.credentials->secret_access_key = "not-the-secret";
  S3Scheme bad(o);
  auto expect_403 = [&](auto&& f) {
    try {
      f();
      FAIL("no error");
    } catch (const IoError& e) {
      INFO(e.what());
      CHECK(e.context().file.rfind("s3://" + bucket, 0) == 0);
      CHECK(std::string(e.what()).find("403") != std::string::npos);
    }
  };
  expect_403([&] { bad.open_read(url, "test"); });
  CHECK_THROWS_WITH(bad.open_read(url, "test"), Catch::Contains("SignatureDoesNotMatch"));
  expect_403([&] { bad.exists(url, "test"); });
  expect_403([&] { bad.list("s3://" + bucket + "/", "test"); });
  expect_403([&] { put(bad, url, "other"); });
  // Anonymous requests to a bucket that is not public are denied too.
  S3Options anonymous = server_options(server);
  anonymous.anonymous = true;
  S3Scheme anon(anonymous);
  expect_403([&] { anon.exists(url, "test"); });
  // Nothing was retried: a 403 is final.
  CHECK(bad.client()->http()->counters().retries == 0);
  auto r = good.open_read(url, "test");
  CHECK(read_all(*r) == "data");
}

TEST_CASE("S3 missing key raises IoError 404 at once", "[s3][remote]") {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket("missing");
  S3Scheme s3(server_options(server));
  const std::string url = "s3://" + bucket + "/no/such/key";
  const auto start = std::chrono::steady_clock::now();
  try {
    s3.open_read(url, "reader");
    FAIL("no error");
  } catch (const IoError& e) {
    INFO(e.what());
    CHECK(e.context().file == url);
    CHECK(std::string(e.what()).find("404") != std::string::npos);
    CHECK(std::string(e.what()).find("NoSuchKey") != std::string::npos);
    CHECK(e.context().offset == 0);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(s3.client()->http()->counters().retries == 0);
  CHECK_THROWS_AS(s3.open_read("s3://" + bucket + "-nobucket/key", "reader"), IoError);
  CHECK_THROWS_AS(s3.open_read("s3:///key", "reader"), InvalidArgument);
  CHECK_THROWS_AS(s3.open_read("s3://" + bucket, "reader"), InvalidArgument);
}

TEST_CASE("S3 list reads every page and list_files matches globs", "[s3][remote]") {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket("listing");
  S3Options o = server_options(server);
  o.list_page_size = 2;
  S3Scheme s3(o);
  const std::string base = "s3://" + bucket + "/";
  std::vector<std::string> train;
  for (int i = 0; i < 7; ++i) {
    train.push_back(base + "prefix/train-" + std::to_string(i) + ".tfrecord");
    put(s3, train.back(), "x");
  }
  put(s3, base + "prefix/eval-0.tfrecord", "x");
  put(s3, base + "prefix/sub/train-9.tfrecord", "x");
  put(s3, base + "prefix/train-a&b.txt", "x");
  put(s3, base + "other/train-0.tfrecord", "x");

  auto listed = s3.list(base + "prefix/train-", "test");
  std::vector<std::string> want = train;
  want.push_back(base + "prefix/train-a&b.txt");
  std::sort(want.begin(), want.end());
  CHECK(listed == want);
  CHECK(s3.list(base + "prefix/", "test").size() == 10);
  CHECK(s3.list(base, "test").size() == 11);
  CHECK(s3.list(base + "nothing", "test").empty());
  // More than one page each: 11 keys at 2 per page.
  CHECK(s3.client()->http()->counters().requests >= 6 + 11);

  use_s3(o);
  CHECK(list_files(base + "prefix/train-*.tfrecord").matched() == train);
  CHECK(list_files(base + "prefix/*/train-?.tfrecord").matched() ==
        std::vector<std::string>{base + "prefix/sub/train-9.tfrecord"});
  CHECK_THROWS_AS(list_files(base + "prefix/none-*"), InvalidArgument);
}

TEST_CASE("S3 TFRecordWriter output reads back through tfrecord", "[s3][remote]") {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket("tfrecord");
  use_s3(server_options(server));
  const std::string url = "s3://" + bucket + "/data/part-0.tfrecord";
  const auto payloads = ingest::testing::sample_payloads(500, 3);
  {
    TFRecordWriter w(url);
    for (const auto& p : payloads) w.write(p);
    CHECK_FALSE(S3Scheme(server_options(server)).exists(url, "test"));
    w.close();
  }
  std::vector<std::string> got;
  for (auto& r : tfrecord(url)) got.emplace_back(r);
  CHECK(got == payloads);
}

TEST_CASE("S3 multipart upload round trip", "[s3][remote]") {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket("multipart");
  S3Options o = server_options(server);
  o.multipart_threshold = std::size_t{5} << 20;
  o.part_size = std::size_t{5} << 20;
  S3Scheme s3(o);
  const std::string url = "s3://" + bucket + "/big.bin";
  const std::string bytes = pattern_bytes((std::size_t{12} << 20) + 12345, 11);
  {
    auto w = s3.open_write(url, "test");
    // Odd-sized writes across the part boundaries.
    for (std::size_t at = 0; at < bytes.size(); at += 777777) {
      const std::size_t n = std::min<std::size_t>(777777, bytes.size() - at);
      w->write(bytes.data() + at, n);
    }
    CHECK(uploads_in_progress(server, bucket) == 1);
    CHECK_FALSE(s3.exists(url, "test"));
    w->commit();
  }
  CHECK(uploads_in_progress(server, bucket) == 0);
  auto r = s3.open_read(url, "test");
  CHECK(r->size() == bytes.size());
  CHECK(read_all(*r) == bytes);
  std::string buf(100, '\0');
  CHECK(r->read_at((std::size_t{5} << 20) - 50, buf.data(), 100) == 100);
  CHECK(buf == bytes.substr((std::size_t{5} << 20) - 50, 100));

  CHECK_THROWS_AS(
      [&] {
        S3Options tiny = o;
        tiny.part_size = 1 << 20;
        S3Scheme s(tiny);
      }(),
      InvalidArgument);
}

TEST_CASE("S3 writer destroyed before commit leaves nothing and no upload", "[s3][remote]") {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket("abandon");
  S3Options o = server_options(server);
  o.multipart_threshold = std::size_t{5} << 20;
  o.part_size = std::size_t{5} << 20;
  S3Scheme s3(o);
  const std::string big = pattern_bytes(std::size_t{11} << 20, 5);
  {
    auto w = s3.open_write("s3://" + bucket + "/lost-big", "test");
    w->write(big.data(), big.size());
    CHECK(uploads_in_progress(server, bucket) == 1);
  }
  CHECK_FALSE(s3.exists("s3://" + bucket + "/lost-big", "test"));
  CHECK(uploads_in_progress(server, bucket) == 0);
  {
    auto w = s3.open_write("s3://" + bucket + "/lost-small", "test");
    w->write("abc", 3);
  }
  CHECK_FALSE(s3.exists("s3://" + bucket + "/lost-small", "test"));
  {
    auto w = s3.open_write("s3://" + bucket + "/abandoned", "test");
    w->write(big.data(), big.size());
    w->abandon();
    CHECK_THROWS_AS(w->write("x", 1), InvalidArgument);
  }
  CHECK_FALSE(s3.exists("s3://" + bucket + "/abandoned", "test"));
  CHECK(uploads_in_progress(server, bucket) == 0);
  CHECK(s3.list("s3://" + bucket + "/", "test").empty());

  // A TFRecordWriter destroyed before close, through the registry.
  use_s3(o);
  {
    TFRecordWriter w("s3://" + bucket + "/lost.tfrecord");
    w.write("x");
  }
  CHECK_FALSE(s3.exists("s3://" + bucket + "/lost.tfrecord", "test"));

  // A denied multipart start raises IoError naming the URL and leaves nothing.
  S3Options denied = o;
  denied.credentials->secret_access_key = "not-the-secret";
  S3Scheme bad(denied);
  const std::string url = "s3://" + bucket + "/denied";
  try {
    auto w = bad.open_write(url, "test");
    w->write(big.data(), big.size());
    w->commit();
    FAIL("no error");
  } catch (const IoError& e) {
    INFO(e.what());
    CHECK(e.context().file == url);
    CHECK(std::string(e.what()).find("403") != std::string::npos);
  }
  CHECK_FALSE(s3.exists(url, "test"));
  CHECK(uploads_in_progress(server, bucket) == 0);
}

namespace {

// Objects in SeaweedFS read through the fault proxy adding `latency` (20 ms
// unless given) before each response, by pipelines of fixed_length_records
// over their URLs.
struct LatencyStore {
  static constexpr std::size_t kObjects = 4, kObjectBytes = std::size_t{8} << 20;
  static constexpr std::size_t kRecordBytes = 64 << 10;
  SeaweedS3& server = SeaweedS3::shared();
  std::string bucket;
  std::unique_ptr<ingest::testing::FaultProxy> proxy;
  std::vector<std::string> urls;
  std::string bytes;  // every object's bytes, in order

  explicit LatencyStore(const std::string& name,
                        std::chrono::milliseconds latency = std::chrono::milliseconds(20))
      : bucket(server.make_bucket(name)) {
    S3Scheme direct(server_options(server));
    for (std::size_t i = 0; i < kObjects; ++i) {
      urls.push_back("s3://" + bucket + "/part-" + std::to_string(i));
      const std::string object = pattern_bytes(kObjectBytes, static_cast<std::uint32_t>(i + 1));
      put(direct, urls.back(), object);
      bytes += object;
    }
    proxy = std::make_unique<ingest::testing::FaultProxy>(
        static_cast<std::uint16_t>(server.s3_port()),
        ingest::testing::FaultProxy::Faults{.latency = latency});
  }

  // s3:// through the proxy, with `readahead` (values left 0: autotuned).
  void use(ReadaheadOptions readahead) const {
    S3Options o = server_options(server);
    o.endpoint = "http://127.0.0.1:" + std::to_string(proxy->port());
    o.readahead = readahead;
    use_s3(o);
  }

  // Reads the objects `epochs` times with one iterator (stopping early once
  // `done(stats)` after an epoch); checks every epoch's bytes and returns the
  // source's stats row at the end. `watch(row)` sees the source's row every
  // 16 records (1 MiB), so that knob values between epochs are seen too.
  template <class Done, class Watch = void (*)(const StageStats&)>
  StageStats read(
      std::optional<std::size_t> ram_budget, int epochs, Done done,
      Watch watch = [](const StageStats&) {}) const {
    PipelineOptions options;
    options.ram_budget_bytes = ram_budget;
    auto it =
        fixed_length_records(urls, kRecordBytes).repeat(epochs).with_options(options).iterator();
    StageStats row;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      std::string got;
      got.reserve(bytes.size());
      while (got.size() < bytes.size()) {
        auto r = it.next();
        if (!r) break;
        got.append(r->data(), r->size());
        if (got.size() % (16 * kRecordBytes) == 0) watch(source_row(it.stats()));
      }
      REQUIRE(got.size() == bytes.size());
      REQUIRE(got == bytes);  // every byte once, in order
      row = source_row(it.stats());
      if (done(row)) break;
    }
    return row;
  }

  // The row of the stage reading the objects (the one with a readahead).
  static StageStats source_row(const PipelineStats& stats) {
    INFO(stats.to_string());
    const auto source = std::find_if(stats.stages.begin(), stats.stages.end(),
                                     [](const StageStats& s) { return s.readahead_in_flight > 0; });
    REQUIRE(source != stats.stages.end());
    return *source;
  }
};

}  // namespace

TEST_CASE("S3 readahead left unset is autotuned up under latency", "[s3][remote][autotune]") {
  // 100 ms before each response: the readers' rate is the latency's (about
  // 20 MiB/s with 2 blocks of 1 MiB in flight), far under what the store
  // serves even on a loaded 2-core machine, so that a growth shows up in the
  // measured rate as the economy rule asks (with 20 ms, a store short of CPU
  // capped the rate whatever the readahead).
  LatencyStore store("readahead-auto", std::chrono::milliseconds(100));
  store.use({});
  using ingest::detail::RemoteReadahead;
  const auto initial = RemoteReadahead::initial_in_flight * RemoteReadahead::initial_block_bytes;
  // The tuner's steps come 20, 60, 140, 300, 620 ms in and then every
  // second. It grows a knob while the readers wait on the network and keeps
  // the growth only if the next window's rate shows the gain; on a machine
  // short of CPU (ThreadSanitizer, the suite in parallel) the store's rate
  // can hide the gain and the growth is undone, so what must hold is that a
  // growth was made: read until one is seen (at most twelve passes).
  std::size_t peak = initial;
  const auto grown = [&](const StageStats& r) {
    peak = std::max<std::size_t>(peak, r.readahead_in_flight * r.readahead_block_bytes);
  };
  const StageStats row = store.read(
      std::nullopt, 12,
      [&](const StageStats& r) {
        grown(r);
        return peak > initial;
      },
      grown);
  INFO("readahead at the end " << row.readahead_in_flight << " x " << row.readahead_block_bytes
                               << ", at most " << peak << " bytes in flight per reader");
  CHECK(row.readahead_autotuned);
  CHECK(peak > initial);
  CHECK(row.readahead_in_flight <= RemoteReadahead::max_in_flight);
  CHECK(row.readahead_block_bytes >= RemoteReadahead::min_block_bytes);
  CHECK(row.readahead_block_bytes <= RemoteReadahead::max_block_bytes);
  CHECK(row.net_requests > 0);

  // The same data with one request in flight (what the autotuning is
  // compared with in bench W9): identical bytes, the knobs fixed.
  store.use({.block_size = std::size_t{1} << 20, .in_flight = 1});
  const StageStats one = store.read(std::nullopt, 1, [](const StageStats&) { return true; });
  CHECK_FALSE(one.readahead_autotuned);
  CHECK(one.readahead_in_flight == 1);
}

TEST_CASE("S3 autotuned readahead stays at its minimum in a tiny RAM budget",
          "[s3][remote][autotune]") {
  LatencyStore store("readahead-tiny");
  store.use({});
  using ingest::detail::RemoteReadahead;
  // Two epochs at least: the tuner's first steps come 20 and 60 ms in.
  int epochs = 0;
  const StageStats row =
      store.read(std::size_t{1}, 3, [&](const StageStats&) { return ++epochs >= 2; });
  CHECK(row.readahead_autotuned);
  CHECK(row.readahead_in_flight == RemoteReadahead::min_in_flight);
  CHECK(row.readahead_block_bytes == RemoteReadahead::min_block_bytes);
  const PipelineStats shown{.stages = {row}};
  CHECK_THAT(shown.to_string(), Catch::Contains("readahead 1 x 1 MiB (autotuned)"));
}

TEST_CASE("S3 readahead set explicitly is never tuned", "[s3][remote][autotune]") {
  LatencyStore store("readahead-fixed");
  store.use({.block_size = 512 << 10, .in_flight = 3});
  int epochs = 0;
  const StageStats row =
      store.read(std::nullopt, 3, [&](const StageStats&) { return ++epochs >= 3; });
  CHECK_FALSE(row.readahead_autotuned);
  CHECK(row.readahead_in_flight == 3);
  CHECK(row.readahead_block_bytes == 512 << 10);
  const PipelineStats shown{.stages = {row}};
  CHECK_THAT(shown.to_string(), Catch::Contains("readahead 3 x 512 KiB\n"));
  // Stats' network line, by hand: no "(autotuned)".
  CHECK_THAT(shown.to_string(), !Catch::Contains("(autotuned)"));
}
