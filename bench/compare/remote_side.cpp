// W9's ingest side for scripts/compare.sh (../../shared/bench/WORKLOADS.md):
// W3's shards in SeaweedFS on loopback behind the tests' fault proxy (20 ms
// before each response, 50 MB/s per connection), as bench/w9_remote.cpp sets
// them up. Usage:
//   ingest_compare_remote serve <data-dir>
//       starts the store and the proxy, uploads <data-dir>/w3's plain shards,
//       prints {"proxy": URL, "direct": URL, "bucket": ..., "key": ..., "secret": ...}
//       on one line and serves until its standard input closes
//   ingest_compare_remote run <data-dir> <epochs>   (INGEST_COMPARE_S3: that line)
//       W3's pipeline (every knob autotuned) on s3://bucket/train-*-of-00016
//       through the proxy, one JSON line per epoch as ingest_compare prints.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/storage/remote.hpp>

#include "support/fault_proxy.hpp"
#include "support/seaweedfs.hpp"
#include "support/w3_data.hpp"

namespace {

namespace fs = std::filesystem;

// The value of "key" in a flat JSON object of strings (the line serve prints).
std::string json_field(const std::string& json, const std::string& key) {
  const std::string quoted = "\"" + key + "\": \"";
  const auto at = json.find(quoted);
  if (at == std::string::npos) throw std::runtime_error("INGEST_COMPARE_S3 has no " + key);
  const auto begin = at + quoted.size();
  return json.substr(begin, json.find('"', begin) - begin);
}

int serve(const fs::path& data) {
  using ingest::testing::SeaweedS3;
  SeaweedS3 server;
  const std::string bucket = server.make_bucket("w9");
  ingest::testing::FaultProxy proxy(
      static_cast<std::uint16_t>(server.s3_port()),
      ingest::testing::FaultProxy::Faults{.latency = std::chrono::milliseconds(20),
                                          .bytes_per_second = 50'000'000});
  ingest::storage::use_s3(
      {.region = "us-east-1",
       .endpoint = server.endpoint(),
       .credentials = ingest::storage::AwsCredentials{.access_key_id = SeaweedS3::kAccessKey,
                                                      .secret_access_key = SeaweedS3::kSecretKey}});
  std::vector<fs::path> shards;
  for (const auto& entry : fs::directory_iterator(data / "w3")) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("train-") && name.ends_with("-of-00016")) shards.push_back(entry.path());
  }
  std::sort(shards.begin(), shards.end());
  for (const fs::path& path : shards) {
    ingest::detail::AtomicFileWriter out("s3://" + bucket + "/" + path.filename().string(), "w9");
    ingest::detail::FileReader in(path.string(), "w9");
    std::vector<char> buf(1 << 20);
    while (const std::size_t got = in.read(buf.data(), buf.size())) out.write(buf.data(), got);
    out.commit();
  }
  std::printf(
      "{\"proxy\": \"http://127.0.0.1:%u\", \"direct\": \"%s\", \"bucket\": \"%s\", "
      "\"key\": \"%s\", \"secret\": \"%s\"}\n",
      static_cast<unsigned>(proxy.port()), server.endpoint().c_str(), bucket.c_str(),
      SeaweedS3::kAccessKey, SeaweedS3::kSecretKey);
  std::fflush(stdout);
  for (std::string line; std::getline(std::cin, line);) {
  }
  return 0;
}

int run(int epochs) {
  const char* s3 = std::getenv("INGEST_COMPARE_S3");
  if (!s3) throw std::runtime_error("INGEST_COMPARE_S3 is not set");
  const std::string json = s3;
  ingest::storage::use_s3({.region = "us-east-1",
                           .endpoint = json_field(json, "proxy"),
                           .credentials = ingest::storage::AwsCredentials{
                               .access_key_id = json_field(json, "key"),
                               .secret_access_key = json_field(json, "secret")}});
  const std::string pattern = "s3://" + json_field(json, "bucket") + "/train-*-of-00016";
  for (int k = 1; k <= epochs; ++k) {
    const auto start = std::chrono::steady_clock::now();
    std::int64_t records = 0, checksum = 0;
    auto it = ingest::bench::w3::pipeline_at(pattern, ingest::Compression::none, {}).iterator();
    while (auto b = it.next()) {
      for (std::int64_t v : b->second.values<std::int64_t>()) checksum += v;
      records += b->second.shape()[0];
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "{\"system\": \"ingest\", \"epoch\": %d, \"records\": %lld, \"checksum\": %lld, "
        "\"seconds\": %.6f}\n",
        k, static_cast<long long>(records), static_cast<long long>(checksum), seconds);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "serve") return serve(args[1]);
  if (args.size() == 3 && args[0] == "run") return run(std::stoi(args[2]));
  std::fprintf(stderr,
               "usage: ingest_compare_remote serve <data-dir>\n"
               "       ingest_compare_remote run <data-dir> <epochs>\n");
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ingest_compare_remote: %s\n", e.what());
  return 1;
}
