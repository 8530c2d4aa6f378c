// W9, remote storage (../shared/bench/WORKLOADS.md): W3's shards in an
// S3-compatible object store on loopback (SeaweedFS, started here), reached
// through the tests' fault proxy set to add 20 ms before each response and to
// limit each connection to 50 MB/s. The pipeline is W3's (list_files ->
// parallel interleave of tfrecord readers -> decode -> shuffle -> batch ->
// prefetch, every knob autotuned), reading s3:// URLs.
//   W9/local                  the same pipeline on the same files, local page cache: the reference
//   W9/s3/autotuned           remote, readahead left to the autotuner too (W9 itself)
//   W9/s3/readahead_4x8MiB    remote, readahead fixed at 4 ranged requests of 8 MiB in
//                             flight per file (the scheme's default before it was tuned)
//   W9/s3/one_request         remote, one request in flight at all (one file at a time, no
//                             readahead): what latency hiding buys
//   W9/s3/no_proxy            remote straight from the store (no added latency, no bandwidth
//                             limit): the store's own rate on this machine
//   W9/s3/no_proxy_4x8MiB     the same with 4 ranged requests of 8 MiB in flight per file
//                             (large ranges cost SeaweedFS half the CPU per byte of 1-2 MiB ones)
//   W9-indexed/local          W3's records read by position (indexed_tfrecord with a global
//                             shuffle, `take` of them per pass: one record per random read),
//                             local files: the reference of the two below
//   W9-indexed/s3             the same through the proxy: 16 range requests in flight
//                             (indexed_tfrecord's default for URLs)
//   W9-indexed/s3/one_in_flight  the same, one record's request at a time
// Peak resident memory of the process is printed against the pipeline's RAM budget.
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>
#include <ingest/storage/remote.hpp>

#include "support/bench.hpp"
#include "support/fault_proxy.hpp"
#include "support/seaweedfs.hpp"
#include "support/w3_data.hpp"

namespace {

using namespace ingest::bench::w3;

struct Remote {
  std::unique_ptr<ingest::testing::SeaweedS3> server;
  std::unique_ptr<ingest::testing::FaultProxy> proxy;
  std::string bucket;
};

Remote& remote() {
  static Remote r;
  return r;
}

// Points s3:// at the proxy (or straight at the server) with `readahead`
// (values left 0: autotuned).
void use_remote(ingest::storage::ReadaheadOptions readahead, bool through_proxy = true) {
  ingest::storage::use_s3(
      {.region = "us-east-1",
       .endpoint = through_proxy ? "http://127.0.0.1:" + std::to_string(remote().proxy->port())
                                 : remote().server->endpoint(),
       .credentials =
           ingest::storage::AwsCredentials{
               .access_key_id = ingest::testing::SeaweedS3::kAccessKey,
               .secret_access_key = ingest::testing::SeaweedS3::kSecretKey},
       .readahead = readahead});
}

// Runs `ds` once per iteration; each pass yields `records` records (all of W3's by default).
template <class Pipeline>
void consume(benchmark::State& state, const Pipeline& ds,
             std::int64_t records = data().num_records) {
  for (auto _ : state) {
    std::int64_t labels = 0;
    for (const auto& [images, batch_labels] : ds)
      labels += batch_labels.template data<std::int64_t>()[0];
    benchmark::DoNotOptimize(labels);
  }
  if (records == data().num_records)
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(data().plain_bytes));
  state.SetItemsProcessed(state.iterations() * records);
}

void local(benchmark::State& state) { consume(state, pipeline(false, Knobs{})); }

// The pipeline on s3:// with `in_flight` requests of 8 MiB per file (0:
// the readahead autotuned).
void s3(benchmark::State& state, std::size_t in_flight, Knobs knobs, bool through_proxy) {
  use_remote(in_flight == 0 ? ingest::storage::ReadaheadOptions{}
                            : ingest::storage::ReadaheadOptions{.block_size = std::size_t{8} << 20,
                                                                .in_flight = in_flight},
             through_proxy);
  const std::string pattern = "s3://" + remote().bucket + "/train-*-of-00016";
  consume(state, pipeline_at(pattern, ingest::Compression::none, knobs));
}

// W3's records by position: a global shuffle over `index`, the first
// `records` of each pass, decoded, batched and prefetched.
void indexed(benchmark::State& state, const ingest::TFRecordIndex* index, std::size_t in_flight,
             std::int64_t records) {
  use_remote({});
  const auto ds = ingest::indexed_tfrecord(*index, {.in_flight = in_flight})
                      .global_shuffle({.seed = 7})
                      .take(records)
                      .map(Decode{}, {.parallelism = ingest::autotune})
                      .batch(batch_size)
                      .prefetch(ingest::autotune);
  consume(state, ds, records);
}

// The index of the local shards with each file named by its URL in the bucket.
ingest::TFRecordIndex at_urls(const ingest::TFRecordIndex& local, const std::string& bucket) {
  ingest::TFRecordIndex out;
  std::vector<std::uint64_t> offsets;
  for (std::size_t f = 0; f < local.num_files(); ++f) {
    offsets.clear();
    for (std::uint64_t i = local.first_record(f); i < local.first_record(f + 1); ++i)
      offsets.push_back(local.locate(i).offset);
    const std::string& path = local.file(f);
    out.add_file("s3://" + bucket + "/" + path.substr(path.find_last_of('/') + 1),
                 local.file_size(f), offsets);
  }
  return out;
}

}  // namespace

void ingest::bench::register_benchmarks(const Config& config) {
  const std::int64_t n = config.smoke ? 2'000 : 100'000;
  generate(n, false);
  Remote& r = remote();
  r.server = std::make_unique<ingest::testing::SeaweedS3>();
  r.bucket = r.server->make_bucket("w9");
  r.proxy = std::make_unique<ingest::testing::FaultProxy>(
      static_cast<std::uint16_t>(r.server->s3_port()),
      ingest::testing::FaultProxy::Faults{.latency = std::chrono::milliseconds(20),
                                          .bytes_per_second = 50'000'000});
  // Upload the shards (straight to the server, not through the proxy).
  ingest::storage::use_s3({.region = "us-east-1",
                           .endpoint = r.server->endpoint(),
                           .credentials = ingest::storage::AwsCredentials{
                               .access_key_id = ingest::testing::SeaweedS3::kAccessKey,
                               .secret_access_key = ingest::testing::SeaweedS3::kSecretKey}});
  for (const std::string& path : data().plain) {
    const std::string name = path.substr(path.find_last_of('/') + 1);
    ingest::detail::AtomicFileWriter out("s3://" + r.bucket + "/" + name, "w9");
    ingest::detail::FileReader in(path, "w9");
    std::vector<char> buf(1 << 20);
    while (const std::size_t got = in.read(buf.data(), buf.size())) out.write(buf.data(), got);
    out.commit();
  }
  note("W9 data: " + std::to_string(n) + " records in " + std::to_string(num_shards) + " shards, " +
       std::to_string(data().plain_bytes >> 20) +
       " MiB, in SeaweedFS behind a proxy adding 20 ms per request and 50 MB/s per connection");

  auto ms = [](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  ms(benchmark::RegisterBenchmark("W9/local", local));
  ms(benchmark::RegisterBenchmark("W9/s3/autotuned", s3, std::size_t{0}, Knobs{}, true));
  ms(benchmark::RegisterBenchmark("W9/s3/readahead_4x8MiB", s3, std::size_t{4}, Knobs{}, true));
  ms(benchmark::RegisterBenchmark("W9/s3/one_request", s3, std::size_t{1},
                                  Knobs{.interleave_parallelism = 1, .cycle_length = 1}, true));
  // The store itself on this machine, without the proxy's latency and
  // bandwidth limit: how fast SeaweedFS serves W3 here (it shares the cores).
  ms(benchmark::RegisterBenchmark("W9/s3/no_proxy", s3, std::size_t{0}, Knobs{}, false));
  ms(benchmark::RegisterBenchmark("W9/s3/no_proxy_4x8MiB", s3, std::size_t{4}, Knobs{}, false));
  set_reference("W9/", "W9/local");

  // Random reads: one record per range request, so the round trip, not the
  // bandwidth, sets the rate.
  static const ingest::TFRecordIndex local_index = ingest::build_tfrecord_index(data().plain);
  static const ingest::TFRecordIndex remote_index = at_urls(local_index, r.bucket);
  const std::int64_t records = config.smoke ? 128 : 2'048;
  ms(benchmark::RegisterBenchmark("W9-indexed/local", indexed, &local_index, std::size_t{0},
                                  records));
  ms(benchmark::RegisterBenchmark("W9-indexed/s3", indexed, &remote_index, std::size_t{0},
                                  records));
  ms(benchmark::RegisterBenchmark("W9-indexed/s3/one_in_flight", indexed, &remote_index,
                                  std::size_t{1}, records));
  set_reference("W9-indexed/", "W9-indexed/local");
  // What the requests planned ahead buy over one at a time.
  set_reference("W9-indexed/s3/real", "W9-indexed/s3/one_in_flight", 1.0, "x one");
}

namespace {
// Printed at exit, after every benchmark ran: the process's peak resident
// memory against the default RAM budget (half the machine's memory).
struct PeakMemory {
  ~PeakMemory() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    const double budget_mb = static_cast<double>(ingest::detail::default_ram_budget()) / (1 << 20);
    std::printf("W9 peak resident memory: %.0f MiB (RAM budget %.0f MiB)\n",
                static_cast<double>(usage.ru_maxrss) / 1024, budget_mb);
  }
} peak_memory;
}  // namespace
