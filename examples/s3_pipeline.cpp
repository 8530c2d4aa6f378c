// An input pipeline on S3: list the shards of a bucket, read them with a
// parallel interleave (several files and several ranged requests per file
// in flight, so the network's latency is hidden), parse, batch.
//
//   ./build/release/examples/s3_pipeline s3://my-bucket/some/prefix
//
// Credentials, region and endpoint come from the environment as for the AWS
// CLI (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
// AWS_ENDPOINT_URL for a store other than AWS, or ~/.aws/credentials). To
// have something to read, the program first writes 4 shards under the
// prefix, as a preprocessing job would: each appears only once complete.
// CI runs it against SeaweedFS on 127.0.0.1 (tests/support/with_s3_server.cpp).
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <ingest/ingest.hpp>
#include <ingest/storage/remote.hpp>  // once per program: http://, https:// and s3:// paths

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s s3://bucket/prefix\n", argv[0]);
    return 2;
  }
  const std::string prefix = argv[1];

  // 1. Write 4 shards of 250 tf.Examples (an 8x8 RGB image and a label).
  constexpr int shards = 4, per_shard = 250;
  for (int s = 0; s < shards; ++s) {
    ingest::TFRecordWriter writer(prefix + "/train-" + std::to_string(s) + "-of-4.tfrecord");
    for (int i = 0; i < per_shard; ++i) {
      const int id = s * per_shard + i;
      std::string pixels(8 * 8 * 3, '\0');
      for (std::size_t k = 0; k < pixels.size(); ++k) pixels[k] = static_cast<char>((id + k) % 256);
      writer.write(ingest::ExampleBuilder()
                       .add_bytes("image", {pixels})
                       .add_int64s("label", {id % 10})
                       .serialize());
    }
    writer.close();  // the object appears now (one PUT; multipart above 16 MiB)
  }

  // 2. The pipeline: list_files on the bucket (ListObjectsV2) -> parallel
  //    interleave of tfrecord readers -> parse -> batch -> prefetch.
  const ingest::ExampleSpec spec{
      {"image", ingest::FixedLenFeature{.dtype = ingest::FeatureType::bytes}},
      {"label", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
  };
  auto ds = ingest::list_files(prefix + "/train-*-of-4.tfrecord")
                .interleave([](std::string url) { return ingest::tfrecord(url); },
                            {.cycle_length = 4, .parallelism = ingest::autotune})
                .map(
                    [spec](const std::string& record) {
                      const ingest::ParsedExample ex = ingest::parse_example(record, spec);
                      ingest::Tensor image = ingest::decode_raw(
                          ex.bytes("image")[0], ingest::DType::uint8, ingest::Shape{8, 8, 3});
                      return std::pair{std::move(image), ex.tensor("label").item<std::int64_t>()};
                    },
                    {.parallelism = ingest::autotune})
                .batch(64)
                .prefetch(ingest::autotune);

  auto it = ds.iterator();
  std::int64_t examples = 0, label_sum = 0, batches = 0;
  while (auto batch = it.next()) {
    const auto& [images, labels] = *batch;
    if (batches++ == 0) {
      std::printf("first batch: images %s, labels %s\n", images.shape().to_string().c_str(),
                  labels.shape().to_string().c_str());
    }
    examples += labels.dim(0);
    for (std::int64_t l : labels.values<std::int64_t>()) label_sum += l;
  }
  std::printf("read %lld examples from %d objects in %lld batches, label sum %lld\n",
              static_cast<long long>(examples), shards, static_cast<long long>(batches),
              static_cast<long long>(label_sum));
  std::printf("%s", it.stats().to_string().c_str());  // with a network line per reading stage
  return examples == shards * per_shard ? 0 : 1;
}
