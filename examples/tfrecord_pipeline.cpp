// TFRecord pipeline: write a few shards of tf.Examples, then read them back
// the way a training input pipeline does:
//   list_files -> tfrecord -> parse_example -> decode image -> batch.
// Build with the project and run: ./build/release/examples/tfrecord_pipeline
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <ingest/ingest.hpp>

int main() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ingest-example-" + std::to_string(::getpid()));
  fs::create_directories(dir);

  // 1. Write 4 shards of 250 Examples: an 8x8 RGB "image" and a label. The
  //    writer renames each shard into place only when it is complete.
  constexpr int shards = 4, per_shard = 250;
  for (int s = 0; s < shards; ++s) {
    const std::string path = (dir / ("train-" + std::to_string(s) + ".tfrecord")).string();
    ingest::TFRecordWriter writer(path, {.compression = ingest::Compression::gzip});
    for (int i = 0; i < per_shard; ++i) {
      const int id = s * per_shard + i;
      std::string pixels(8 * 8 * 3, '\0');
      for (std::size_t k = 0; k < pixels.size(); ++k) pixels[k] = static_cast<char>((id + k) % 256);
      writer.write(ingest::ExampleBuilder()
                       .add_bytes("image", {pixels})
                       .add_int64s("label", {id % 10})
                       .serialize());
    }
    writer.close();
  }

  // 2. Read them back. The spec says what to parse, as tf.io.parse_example's would.
  const ingest::ExampleSpec spec{
      {"image", ingest::FixedLenFeature{.dtype = ingest::FeatureType::bytes}},
      {"label", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
  };
  auto files = ingest::list_files((dir / "train-*.tfrecord").string());
  std::vector<std::string> paths;
  for (const std::string& p : files) paths.push_back(p);
  auto batches = ingest::tfrecord(paths, {.compression = ingest::Compression::gzip})
                     .map([spec](const std::string& record) {
                       const ingest::ParsedExample ex = ingest::parse_example(record, spec);
                       ingest::Tensor pixels = ingest::decode_raw(
                           ex.bytes("image")[0], ingest::DType::uint8, ingest::Shape{8, 8, 3});
                       ingest::Tensor image(ingest::DType::float32, ingest::Shape{8, 8, 3});
                       for (std::int64_t k = 0; k < image.num_elements(); ++k) {
                         image.data<float>()[k] =
                             (pixels.data<std::uint8_t>()[k] - 127.5f) / 127.5f;
                       }
                       return std::pair{std::move(image), ex.tensor("label").item<std::int64_t>()};
                     })
                     .batch(64);

  std::int64_t examples = 0, label_sum = 0, num_batches = 0;
  for (const auto& [images, labels] : batches) {
    ++num_batches;
    examples += labels.dim(0);
    for (std::int64_t l : labels.values<std::int64_t>()) label_sum += l;
    if (num_batches == 1) {
      std::printf("first batch: images %s, labels %s\n", images.shape().to_string().c_str(),
                  labels.shape().to_string().c_str());
    }
  }
  std::printf("read %lld examples from %zu files in %lld batches, label sum %lld\n",
              static_cast<long long>(examples), paths.size(), static_cast<long long>(num_batches),
              static_cast<long long>(label_sum));
  fs::remove_all(dir);
  return examples == shards * per_shard ? 0 : 1;
}
