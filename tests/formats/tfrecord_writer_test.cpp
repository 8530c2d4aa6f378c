#include <catch2/catch.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <ingest/formats/tfrecord_format.hpp>
#include <ingest/formats/tfrecord_writer.hpp>

#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/processes.hpp"
#include "support/records.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {
std::vector<std::string> read_all(const std::string& path, Compression c) {
  TFRecordReader reader(path, {.compression = c});
  std::vector<std::string> out;
  while (auto r = reader.read()) out.push_back(std::move(*r));
  return out;
}
}  // namespace

TEST_CASE("TFRecordWriter round-trips in every compression", "[formats][tfrecord_writer]") {
  TempDir dir;
  auto payloads = sample_payloads(400, 3);
  payloads.push_back(std::string(1 << 20, 'q'));  // larger than the buffer
  for (auto c : {Compression::none, Compression::gzip, Compression::zlib}) {
    const std::string path = dir / ("out." + std::string(compression_name(c)));
    TFRecordWriter w(path, {.compression = c, .buffer_size = 4096});
    for (const auto& p : payloads) w.write(p);
    CHECK(w.records_written() == payloads.size());
    w.close();
    CHECK_FALSE(w.is_open());
    CHECK(read_all(path, c) == payloads);
  }
  // Plain output is exactly the framing, byte for byte.
  CHECK(file_contents(dir / "out.none") == frame_records(payloads));
  // Compressed output is standard zlib / gzip of that framing.
  CHECK(gzip_bytes(frame_records(payloads)).size() > 0);
  // An empty file of records.
  {
    TFRecordWriter w(dir / "empty.gz", {.compression = Compression::gzip});
    w.close();
  }
  CHECK(read_all(dir / "empty.gz", Compression::gzip).empty());
}

TEST_CASE("TFRecordWriter reproduces TensorFlow's files byte for byte",
          "[formats][tfrecord_writer][fixtures]") {
  TempDir dir;
  for (const Fixture& f : all_fixtures()) {
    if (f.compression != Compression::none) continue;  // gzip bytes depend on the zlib build
    INFO(f.name);
    const auto records = read_all(f.path, Compression::none);
    TFRecordWriter w(dir / f.name);
    for (const auto& r : records) w.write(r);
    w.close();
    CHECK(file_contents(dir / f.name) == file_contents(f.path));
  }
  // And its gzip output carries the same stream as TensorFlow's gzip files.
  for (const Fixture& f : all_fixtures()) {
    if (f.compression != Compression::gzip) continue;
    INFO(f.name);
    const auto records = read_all(f.path, Compression::gzip);
    TFRecordWriter w(dir / f.name, {.compression = Compression::gzip});
    for (const auto& r : records) w.write(r);
    w.close();
    CHECK(read_all(dir / f.name, Compression::gzip) == records);
  }
}

TEST_CASE("TFRecordWriter: nothing under the final name until close",
          "[formats][tfrecord_writer]") {
  TempDir dir;
  const std::string path = dir / "shard-00000";
  {
    TFRecordWriter w(path);
    w.write("one");
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK(std::filesystem::exists(w.temp_path()));
    CHECK(w.path() == path);
  }  // destroyed without close
  CHECK(dir.list().empty());

  // An exception while writing unwinds the writer: no file, no temporary.
  CHECK_THROWS_AS(
      [&] {
        TFRecordWriter w(path, {.compression = Compression::gzip});
        w.write("one");
        throw std::runtime_error("the producer failed");
      }(),
      std::runtime_error);
  CHECK(dir.list().empty());

  // Closing twice is a no-op (as in tf, issue 10 item 17); writing or
  // flushing after close is an error; the file stays.
  TFRecordWriter w(path);
  w.write("one");
  w.close();
  CHECK_NOTHROW(w.close());
  CHECK_FALSE(w.is_open());
  CHECK_THROWS_AS(w.write("two"), InvalidArgument);
  CHECK_THROWS_AS(w.flush(), InvalidArgument);
  CHECK(dir.list() == std::vector<std::string>{"shard-00000"});
  CHECK(read_all(path, Compression::none) == std::vector<std::string>{"one"});
  CHECK_THROWS_AS(TFRecordWriter(dir / "missing-dir/x"), IoError);
}

TEST_CASE("TFRecordWriter::flush makes every record written so far readable",
          "[formats][tfrecord_writer]") {
  // issue 10 item 17: flush() writes the buffered records, and ends the
  // compressed block, so that a reader of the temporary file sees them all.
  TempDir dir;
  const auto payloads = sample_payloads(50, 11);
  for (Compression c : {Compression::none, Compression::gzip, Compression::zlib}) {
    INFO(static_cast<int>(c));
    const std::string path = dir / ("flushed-" + std::to_string(static_cast<int>(c)));
    TFRecordWriter w(path, {.compression = c});
    std::size_t written = 0;
    for (std::size_t round = 0; round < 3; ++round) {
      for (std::size_t i = 0; i < 10; ++i) w.write(payloads[written++]);
      w.flush();
      w.flush();  // flushing again adds nothing a reader would see
      TFRecordReader reader(w.temp_path(), {.compression = c});
      std::vector<std::string> seen;
      try {
        while (auto r = reader.read()) seen.push_back(std::move(*r));
      } catch (const DataLossError&) {
        // a compressed stream that is not finished yet ends in a truncation
        CHECK(c != Compression::none);
      }
      CHECK(seen == std::vector<std::string>(payloads.begin(),
                                             payloads.begin() + static_cast<long>(written)));
      CHECK_FALSE(std::filesystem::exists(path));
    }
    for (std::size_t i = written; i < payloads.size(); ++i) w.write(payloads[i]);
    w.close();
    CHECK(read_all(path, c) == payloads);
  }
}

TEST_CASE("TFRecordWriter removes a killed writer's temporary file, not a live one's",
          "[formats][tfrecord_writer][orphans]") {
  // issue 10 item 8: after a SIGKILL the temporary file stayed forever.
  TempDir dir;
  TFRecordWriter live(dir / "live", {.compression = Compression::gzip});
  live.write("still writing");
  std::string dead_temp;
  {
    ChildProcess child([&] {
      auto* w = new TFRecordWriter(dir / "shard-0");  // killed before close()
      w->write("one");
      w->flush();
      write_file(dir / "name.txt", w->temp_path());
    });
    dead_temp = file_contents(dir / "name.txt");
  }  // SIGKILLed
  std::filesystem::remove(dir / "name.txt");
  CHECK(std::filesystem::exists(dead_temp));
  {
    TFRecordWriter w(dir / "shard-1");
    w.write("two");
    w.close();
  }
  CHECK_FALSE(std::filesystem::exists(dead_temp));
  CHECK(std::filesystem::exists(live.temp_path()));
  live.close();
  CHECK(dir.list() == std::vector<std::string>{"live", "shard-1"});
  CHECK(read_all(dir / "live", Compression::gzip) == std::vector<std::string>{"still writing"});
}
