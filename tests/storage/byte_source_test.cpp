#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/storage/byte_source.hpp>

#include "support/files.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {

// A user-defined scheme "mem://" over a map: what a user registering their
// own store (a scheme the library does not ship) writes.
struct MemStore {
  std::mutex mu;
  std::map<std::string, std::string> objects;
  int aborted = 0;
};

class MemReader : public storage::RemoteReader {
 public:
  explicit MemReader(std::string bytes) : bytes_(std::move(bytes)) {}
  std::uint64_t size() const override { return bytes_.size(); }
  std::size_t read(void* dst, std::size_t n) override {
    const std::size_t got = read_at(pos_, dst, n);
    pos_ += got;
    return got;
  }
  std::size_t read_at(std::uint64_t offset, void* dst, std::size_t n) override {
    if (offset >= bytes_.size()) return 0;
    const std::size_t got = std::min<std::size_t>(n, bytes_.size() - offset);
    std::memcpy(dst, bytes_.data() + offset, got);
    counters_.bytes += got;
    ++counters_.requests;
    return got;
  }
  storage::TransferCounters counters() const override { return counters_; }

 private:
  std::string bytes_;
  std::uint64_t pos_ = 0;
  storage::TransferCounters counters_;
};

class MemWriter : public storage::RemoteWriter {
 public:
  MemWriter(std::shared_ptr<MemStore> store, std::string url)
      : store_(std::move(store)), url_(std::move(url)) {}
  ~MemWriter() override { abandon(); }
  void write(const void* data, std::size_t n) override {
    bytes_.append(static_cast<const char*>(data), n);
  }
  void commit() override {
    std::lock_guard lock(store_->mu);
    store_->objects[url_] = std::move(bytes_);
    done_ = true;
  }
  void abandon() noexcept override {
    if (done_) return;
    done_ = true;
    std::lock_guard lock(store_->mu);
    ++store_->aborted;
  }

 private:
  std::shared_ptr<MemStore> store_;
  std::string url_;
  std::string bytes_;
  bool done_ = false;
};

class MemScheme : public storage::Scheme {
 public:
  explicit MemScheme(std::shared_ptr<MemStore> store) : store_(std::move(store)) {}
  std::unique_ptr<storage::RemoteReader> open_read(const std::string& url,
                                                   std::string_view stage) override {
    std::lock_guard lock(store_->mu);
    auto it = store_->objects.find(url);
    if (it == store_->objects.end())
      throw IoError("not found", {.stage = std::string(stage), .file = url});
    return std::make_unique<MemReader>(it->second);
  }
  std::unique_ptr<storage::RemoteWriter> open_write(const std::string& url,
                                                    std::string_view) override {
    return std::make_unique<MemWriter>(store_, url);
  }
  bool exists(const std::string& url, std::string_view) override {
    std::lock_guard lock(store_->mu);
    return store_->objects.count(url) != 0;
  }
  std::vector<std::string> list(const std::string& prefix, std::string_view) override {
    std::lock_guard lock(store_->mu);
    std::vector<std::string> out;
    for (const auto& [url, bytes] : store_->objects)
      if (url.compare(0, prefix.size(), prefix) == 0) out.push_back(url);
    return out;
  }

 private:
  std::shared_ptr<MemStore> store_;
};

std::shared_ptr<MemStore> register_mem() {
  auto store = std::make_shared<MemStore>();
  storage::register_scheme("mem", std::make_shared<MemScheme>(store));
  return store;
}

}  // namespace

TEST_CASE("url_scheme finds the scheme of URLs and none in local paths", "[storage]") {
  CHECK(storage::url_scheme("s3://bucket/key") == "s3");
  CHECK(storage::url_scheme("HTTPS://host/a") == "https");
  CHECK(storage::url_scheme("git+ssh://x") == "git+ssh");
  CHECK(storage::url_scheme("/data/train-0.tfrecord").empty());
  CHECK(storage::url_scheme("relative/path").empty());
  CHECK(storage::url_scheme("://no-scheme").empty());
  CHECK(storage::url_scheme("1http://digit-first").empty());
  CHECK(storage::url_scheme("dir/s3://not-at-start").empty());
  CHECK(storage::is_url("http://127.0.0.1:8080/a"));
  CHECK_FALSE(storage::is_url("C:/windows"));
}

TEST_CASE("a URL of an unregistered scheme names the URL and what to link", "[storage]") {
  try {
    detail::FileReader reader("s3x://bucket/key", "tfrecord");
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().file == "s3x://bucket/key");
    CHECK(e.context().stage == "tfrecord");
    CHECK_THAT(e.what(), Catch::Contains("no storage is registered for the scheme 's3x://'"));
  }
  if (!storage::detail::scheme_registry().schemes.count("gs")) {
    CHECK_THROWS_WITH(detail::FileReader("gs://b/k", "t"), Catch::Contains("'gs://'"));
  }
}

TEST_CASE("readers and writers of every format go through a registered scheme", "[storage]") {
  auto store = register_mem();

  SECTION("FileReader reads sequentially and at offsets, and reports transfers") {
    store->objects["mem://b/a.txt"] = "hello, remote world";
    detail::FileReader f("mem://b/a.txt", "test");
    CHECK_FALSE(f.is_local());
    CHECK(f.fd() == -1);
    CHECK(f.has_size());
    CHECK(f.size() == 19);
    char buf[8];
    CHECK(f.read(buf, 5) == 5);
    CHECK(std::string(buf, 5) == "hello");
    CHECK(f.read_at(14, buf, 8) == 5);
    CHECK(std::string(buf, 5) == "world");
    CHECK(f.position() == 5);
    CHECK(f.transfer_counters().bytes == 10);
    CHECK(f.transfer_counters().requests == 2);
  }

  SECTION("positional reads started together, through a scheme with the defaults") {
    // MemScheme overrides neither open_positional nor start_read_at: each
    // read happens in get(), in the order the caller asks.
    store->objects["mem://b/p.txt"] = "0123456789";
    detail::FileReader f("mem://b/p.txt", "test", storage::Access::positional);
    auto second = f.start_read_at(6, 3);
    auto first = f.start_read_at(0, 4);
    auto past_end = f.start_read_at(8, 100);
    auto beyond = f.start_read_at(20, 5);
    CHECK(first.get() == "0123");
    CHECK(second.get() == "678");
    CHECK(past_end.get() == "89");
    CHECK(beyond.get().empty());
    CHECK(f.transfer_counters().bytes == 9);
    CHECK(f.position() == 0);
  }

  SECTION("indexed_tfrecord reads a scheme's objects with reads planned ahead") {
    std::vector<std::string> records, urls;
    for (int f = 0; f < 2; ++f) {
      const std::string url = "mem://b/indexed-" + std::to_string(f) + ".tfrecord";
      TFRecordWriter writer(url);
      for (int r = 0; r < 30; ++r) {
        records.push_back(std::to_string(f) + ":" + std::string(static_cast<std::size_t>(r), 'y'));
        writer.write(records.back());
      }
      writer.close();
      urls.push_back(url);
    }
    const auto ds = indexed_tfrecord(urls, {.block_bytes = 64});
    std::vector<std::string> got;
    for (auto& r : ds) got.push_back(r);
    CHECK(got == records);
    got.clear();
    for (auto& r : indexed_tfrecord(ds.index()).global_shuffle({.seed = 1})) got.push_back(r);
    std::sort(got.begin(), got.end());
    std::sort(records.begin(), records.end());
    CHECK(got == records);
  }

  SECTION("TFRecordWriter writes an object only on close, and tfrecord reads it back") {
    {
      TFRecordWriter writer("mem://b/data/part-0.tfrecord");
      writer.write("one");
      writer.write("two");
      CHECK(store->objects.count("mem://b/data/part-0.tfrecord") == 0);
      writer.close();
    }
    CHECK(store->objects.count("mem://b/data/part-0.tfrecord") == 1);
    std::vector<std::string> got;
    for (auto& r : tfrecord("mem://b/data/part-0.tfrecord")) got.emplace_back(r);
    CHECK(got == std::vector<std::string>{"one", "two"});
  }

  SECTION("stats() shows what a source fetched from remote objects") {
    {
      TFRecordWriter writer("mem://b/stats.tfrecord");
      for (int i = 0; i < 10; ++i) writer.write(std::string(100, 'x'));
      writer.close();
    }
    auto it = tfrecord("mem://b/stats.tfrecord").iterator();
    int n = 0;
    while (it.next()) ++n;
    CHECK(n == 10);
    const PipelineStats s = it.stats();
    REQUIRE(s.stages.size() == 1);
    CHECK(s.stages[0].name == "tfrecord");
    CHECK(s.stages[0].net_megabytes == Approx(10 * (100 + 16) / 1e6));
    CHECK(s.stages[0].net_requests >= 1);
    CHECK(s.stages[0].net_retries == 0);
    CHECK_THAT(s.to_string(), Catch::Contains("network: tfrecord fetched 0.00 MB in"));
  }

  SECTION("a writer destroyed before close leaves nothing and aborts") {
    {
      TFRecordWriter writer("mem://b/lost.tfrecord");
      writer.write("x");
    }
    CHECK(store->objects.count("mem://b/lost.tfrecord") == 0);
    CHECK(store->aborted == 1);
  }

  SECTION("list_files matches URL globs component by component") {
    for (const char* name : {"mem://b/train-0.rec", "mem://b/train-1.rec", "mem://b/eval-0.rec",
                             "mem://b/train-2.txt", "mem://b/sub/train-3.rec"}) {
      store->objects[name] = "";
    }
    auto ds = list_files("mem://b/train-*.rec");
    CHECK(ds.matched() == std::vector<std::string>{"mem://b/train-0.rec", "mem://b/train-1.rec"});
    CHECK(list_files("mem://b/*/train-?.rec").matched() ==
          std::vector<std::string>{"mem://b/sub/train-3.rec"});
    CHECK_THROWS_AS(list_files("mem://b/none-*"), InvalidArgument);
  }

  SECTION("text_lines, read_file and cache(url) work on objects") {
    store->objects["mem://b/lines.txt"] = "a\nbb\nccc\n";
    std::vector<std::string> lines;
    for (auto& l : text_lines("mem://b/lines.txt")) lines.push_back(l);
    CHECK(lines == std::vector<std::string>{"a", "bb", "ccc"});
    CHECK(read_file(std::string("mem://b/lines.txt")) == "a\nbb\nccc\n");

    auto cached = range(0, 5).cache("mem://b/cache/range");
    std::vector<std::int64_t> first, second;
    for (auto v : cached) first.push_back(v);
    CHECK(store->objects.count("mem://b/cache/range") == 1);
    for (auto v : cached) second.push_back(v);
    CHECK(first == std::vector<std::int64_t>{0, 1, 2, 3, 4});
    CHECK(second == first);
  }
}
