#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/storage/remote.hpp>

#include "support/files.hpp"
#include "support/nginx.hpp"
#include "support/seaweedfs.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {

// Sets environment variables for the scope of a test, restoring them after.
class ScopedEnv {
 public:
  void set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    remember(name);
    ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (const auto& [name, value, had] : saved_) {
      if (had) {
        ::setenv(name.c_str(), value.c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  struct Saved {
    std::string name, value;
    bool had{};
  };
  void remember(const char* name) {
    const char* v = std::getenv(name);
    saved_.push_back({name, v ? v : "", v != nullptr});
  }
  std::vector<Saved> saved_;
};

// Drops the registered http, https and s3 handlers and registers the
// defaults again, as at the start of a program that includes remote.hpp.
void reset_to_defaults() {
  auto& registry = storage::detail::scheme_registry();
  {
    std::lock_guard lock(registry.mu);
    for (const char* s : {"http", "https", "s3"}) registry.schemes.erase(s);
  }
  storage::detail::register_remote_schemes();
}

// Points the s3 scheme at the shared SeaweedFS server and returns a new
// bucket whose name starts with `prefix`.
std::string use_test_s3(const std::string& prefix) {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket(prefix);
  storage::use_s3(
      {.region = "us-east-1",
       .endpoint = server.endpoint(),
       .credentials = storage::AwsCredentials{.access_key_id = SeaweedS3::kAccessKey,
                                              .secret_access_key = SeaweedS3::kSecretKey}});
  return bucket;
}

}  // namespace

TEST_CASE("including remote.hpp registers http, https and s3", "[remote][registration]") {
  CHECK(storage::detail::remote_schemes_registered);
  auto& registry = storage::detail::scheme_registry();
  std::lock_guard lock(registry.mu);
  for (const char* s : {"http", "https", "s3"}) CHECK(registry.schemes.count(s) == 1);
}

TEST_CASE("the default http scheme reads a URL with no set-up", "[remote][registration]") {
  reset_to_defaults();
  TempDir dir;
  write_file(dir / "lines.txt", "alpha\nbeta\n");
  NginxServer nginx(dir.path().string());
  std::vector<std::string> lines;
  for (auto& l : text_lines(nginx.url("/lines.txt"))) lines.push_back(l);
  CHECK(lines == std::vector<std::string>{"alpha", "beta"});
  CHECK(read_file(nginx.url("/lines.txt")) == "alpha\nbeta\n");
  CHECK(detail::file_exists(nginx.url("/lines.txt"), "test"));
  CHECK_FALSE(detail::file_exists(nginx.url("/missing.txt"), "test"));
  CHECK_THROWS_AS(TFRecordWriter(nginx.url("/out.tfrecord")), InvalidArgument);
}

TEST_CASE("use_http sets the options of http and https", "[remote][registration]") {
  TempDir dir;
  write_file(dir / "a.txt", "secret\n");
  NginxServer nginx(dir.path().string(), /*tls=*/true);
  // The default trusts the system store only: the self-signed certificate fails.
  reset_to_defaults();
  CHECK_THROWS_AS(read_file(nginx.tls_url("/a.txt")), IoError);
  storage::use_http({.ca_file = nginx.certificate_file()});
  CHECK(read_file(nginx.tls_url("/a.txt")) == "secret\n");
  CHECK_THROWS_WITH(storage::use_http({.ca_file = dir / "no-such-ca.pem"}),
                    Catch::Contains("no-such-ca.pem"));
  reset_to_defaults();
}

TEST_CASE("the default s3 scheme takes endpoint and credentials from the environment",
          "[remote][registration]") {
  auto& server = SeaweedS3::shared();
  const std::string bucket = server.make_bucket("remote");
  ScopedEnv env;
  env.set("AWS_ENDPOINT_URL", server.endpoint());
  env.set("AWS_REGION", "us-east-1");
  env.set("AWS_ACCESS_KEY_ID", SeaweedS3::kAccessKey);
  env.set("AWS_SECRET_ACCESS_KEY", SeaweedS3::kSecretKey);
  env.unset("AWS_SESSION_TOKEN");
  env.unset("AWS_ENDPOINT_URL_S3");
  reset_to_defaults();  // built when the first s3:// URL is opened, after the variables are set
  {
    TFRecordWriter writer("s3://" + bucket + "/data/part-0.tfrecord");
    writer.write("one");
    writer.write("two");
    writer.close();
  }
  const auto files = list_files("s3://" + bucket + "/data/part-*.tfrecord");
  REQUIRE(files.matched() == std::vector<std::string>{"s3://" + bucket + "/data/part-0.tfrecord"});
  std::vector<std::string> records;
  for (auto& r : tfrecord(files.matched())) records.emplace_back(r);
  CHECK(records == std::vector<std::string>{"one", "two"});
}

TEST_CASE("use_s3 before the defaults are registered is kept", "[remote][registration]") {
  storage::use_s3({.endpoint = "http://127.0.0.1:9", .credentials = storage::AwsCredentials{}});
  std::shared_ptr<storage::Scheme> before = storage::scheme_for("s3://b/k", "test");
  storage::detail::register_remote_schemes();
  CHECK(storage::scheme_for("s3://b/k", "test") == before);
  reset_to_defaults();
}

TEST_CASE("image_folder and cache take s3:// URLs", "[remote][registration]") {
  const std::string bucket = use_test_s3("folder");
  const std::string root = "s3://" + bucket + "/images";
  const auto put = [](const std::string& url, const std::string& bytes) {
    detail::AtomicFileWriter out(url, "test");
    out.write(bytes.data(), bytes.size());
    out.commit();
  };
  for (const char* key : {"/cat/1.jpg", "/cat/sub/0.png", "/cat/0.jpeg", "/dog/a.JPG",
                          "/dog/readme.txt", "/stray.jpg"}) {
    put(root + key, key);
  }
  SECTION("classes are the first components, samples in the walk's order") {
    const auto ds = image_folder(root);
    CHECK(ds.class_names() == std::vector<std::string>{"cat", "dog"});
    std::vector<std::pair<std::string, std::int64_t>> got;
    for (auto& s : ds) got.push_back(s);
    CHECK(got == std::vector<std::pair<std::string, std::int64_t>>{{root + "/cat/0.jpeg", 0},
                                                                   {root + "/cat/1.jpg", 0},
                                                                   {root + "/cat/sub/0.png", 0},
                                                                   {root + "/dog/a.JPG", 1}});
    CHECK(read_file(got[2].first) == "/cat/sub/0.png");
  }
  SECTION("a class without an image names it") {
    put(root + "/fish/notes.txt", "x");
    CHECK_THROWS_WITH(image_folder(root), Catch::Contains(root + "/fish"));
  }
  SECTION("cache(url) writes the cache as an object and reads it back") {
    const std::string cache = "s3://" + bucket + "/cache/range";
    auto cached = range(0, 100).cache(cache);
    std::vector<std::int64_t> first, second;
    for (auto v : cached) first.push_back(v);
    CHECK(detail::file_exists(cache, "test"));
    for (auto v : cached) second.push_back(v);
    CHECK(first.size() == 100);
    CHECK(second == first);
  }
}

TEST_CASE("indexed_tfrecord reads s3:// objects by position", "[remote][registration]") {
  const std::string bucket = use_test_s3("indexed");
  std::vector<std::string> urls, records;
  for (int f = 0; f < 3; ++f) {
    const std::string url = "s3://" + bucket + "/shard-" + std::to_string(f) + ".tfrecord";
    TFRecordWriter out(url);
    for (int r = 0; r < 40; ++r) {
      records.push_back("file " + std::to_string(f) + " record " + std::to_string(r) +
                        std::string(static_cast<std::size_t>(r * 37), 'x'));
      out.write(records.back());
    }
    out.close();
    urls.push_back(url);
  }
  const auto ds = indexed_tfrecord(list_files("s3://" + bucket + "/shard-*.tfrecord").matched());
  CHECK(ds.index().size() == 120);
  std::vector<std::string> in_order, shuffled;
  for (auto& r : ds) in_order.push_back(r);
  CHECK(in_order == records);
  // Small blocks: many range requests, the same records.
  std::vector<std::string> small;
  for (auto& r : indexed_tfrecord(ds.index(), {.block_bytes = 100})) small.push_back(r);
  CHECK(small == records);
  // Shuffled: one range request per record, every record once; a restore
  // continues where the save was.
  const auto shuffled_ds = indexed_tfrecord(ds.index()).global_shuffle({.seed = 3});
  auto it = shuffled_ds.iterator();
  for (int i = 0; i < 50; ++i) shuffled.push_back(*it.next());
  const IteratorState state = it.save();
  auto resumed = indexed_tfrecord(ds.index()).global_shuffle({.seed = 3}).iterator(state);
  while (auto r = resumed.next()) shuffled.push_back(*r);
  CHECK(shuffled != records);
  std::sort(shuffled.begin(), shuffled.end());
  std::vector<std::string> expected = records;
  std::sort(expected.begin(), expected.end());
  CHECK(shuffled == expected);

  // The files are opened for positional reads with their indexed sizes: no
  // request at open, then exactly one range per record, 16 planned ahead of
  // the consumer (or 3 here), nothing read ahead; the stage's stats count it.
  std::uint64_t file_bytes = 0;
  for (std::size_t f = 0; f < ds.index().num_files(); ++f) file_bytes += ds.index().file_size(f);
  for (const std::size_t ahead : {std::size_t{0}, std::size_t{3}}) {
    CAPTURE(ahead);
    auto full =
        indexed_tfrecord(ds.index(), {.in_flight = ahead}).global_shuffle({.seed = 4}).iterator();
    std::vector<std::string> pass;
    while (auto r = full.next()) pass.push_back(*r);
    std::sort(pass.begin(), pass.end());
    CHECK(pass == expected);
    const PipelineStats stats = full.stats();
    const StageStats* source = testing::find_stage(stats, "indexed_tfrecord");
    REQUIRE(source != nullptr);
    CHECK(source->net_requests - source->net_retries == 120);
    // Exactly the files' bytes, unless a retried attempt brought a body
    // too (an error page, or a body that broke and was resumed).
    if (source->net_retries == 0) {
      CHECK(source->net_megabytes * 1e6 == Approx(static_cast<double>(file_bytes)));
    } else {
      CHECK(source->net_megabytes * 1e6 >= static_cast<double>(file_bytes) - 1);
    }
  }

  // Objects that changed since they were indexed: the reads find them.
  {
    TFRecordWriter out(urls[1]);  // replaced, another size
    out.write("something else");
    out.close();
  }
  {
    TFRecordWriter out(urls[2]);  // replaced by an empty one: every range is past its end
    out.close();
  }
  const auto outcomes = testing::collect_outcomes(indexed_tfrecord(ds.index()));
  REQUIRE(outcomes.size() == 120);
  for (std::size_t i = 0; i < 40; ++i) CHECK(outcomes[i].value == records[i]);
  for (std::size_t i = 40; i < 120; ++i) {
    CAPTURE(i);
    CHECK_THAT(outcomes[i].error, Catch::Contains("changed while it was read") &&
                                      Catch::Contains(i < 80 ? urls[1] : urls[2]));
  }
  // A key that is not there: the first read's 404, naming the URL.
  TFRecordIndex missing;
  missing.add_file("s3://" + bucket + "/never-written.tfrecord", 20, {0});
  const auto gone = testing::collect_outcomes(indexed_tfrecord(missing));
  REQUIRE(gone.size() == 1);
  CHECK_THAT(gone[0].error, Catch::Contains("404") &&
                                Catch::Contains("s3://" + bucket + "/never-written.tfrecord"));
}
