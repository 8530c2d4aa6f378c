// Built against the installed package with nothing but pkg-config:
//   g++ -std=c++20 main.cpp $(pkg-config --cflags --libs ingest)
// Writes a GZIP TFRecord file (zlib's deflate), reads it back through a
// pipeline (zlib's or ISA-L's inflate) and checks what came back.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include <ingest/ingest.hpp>

int main() {
  const std::string path =
      (std::filesystem::temp_directory_path() / "ingest-pkgconfig-consumer.tfrecord.gz").string();
  {
    ingest::TFRecordWriter out(path, {.compression = ingest::Compression::gzip});
    for (std::int64_t i = 0; i < 100; ++i) {
      out.write(ingest::ExampleBuilder().add_int64s("x", {i}).serialize());
    }
    out.close();
  }
  const ingest::ExampleSpec spec(
      {{"x", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}}});
  std::int64_t sum = 0, records = 0;
  for (const std::string& record :
       ingest::tfrecord(path, {.compression = ingest::Compression::gzip})) {
    sum += ingest::parse_example(record, spec)["x"].values.data<std::int64_t>()[0];
    ++records;
  }
  std::filesystem::remove(path);
  std::printf("pkgconfig consumer: %lld records, sum %lld\n", static_cast<long long>(records),
              static_cast<long long>(sum));
  return records == 100 && sum == 4950 ? 0 : 1;
}
