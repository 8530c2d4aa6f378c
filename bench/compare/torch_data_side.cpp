// libtorch's C++ torch::data on W1 and W2 for scripts/compare.sh (the C++
// peer; Debian's libtorch-dev): a Dataset whose get(i) returns the element as
// a one-value tensor, Stack<> to batch, make_data_loader with a sequential
// sampler and `workers` threads (0: the loop's thread). Usage:
//   ingest_compare_torch <W1|W2> <data-dir> <workers> [epochs]
// prints one JSON line per epoch as ingest_compare does.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <torch/data.h>
#include <torch/version.h>

extern "C" std::int64_t ingest_compare_w2(std::int64_t x);

namespace {

// W1's range(N) -> map(2x + 1), or W2's range(N) -> map(f), element by element.
class RangeDataset : public torch::data::datasets::Dataset<RangeDataset> {
 public:
  RangeDataset(std::int64_t n, bool w2) : n_(n), w2_(w2) {}
  torch::data::Example<> get(std::size_t index) override {
    const auto i = static_cast<std::int64_t>(index);
    const torch::Tensor v = torch::full({1}, w2_ ? ingest_compare_w2(i) : 2 * i + 1, torch::kInt64);
    return {v, v};
  }
  torch::optional<std::size_t> size() const override { return static_cast<std::size_t>(n_); }

 private:
  std::int64_t n_;
  bool w2_;
};

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::fprintf(stderr, "usage: ingest_compare_torch <W1|W2> <data-dir> <workers> [epochs]\n");
    return 2;
  }
  const std::string workload = argv[1];
  if (workload != "W1" && workload != "W2") {
    std::fprintf(stderr, "torch::data runs W1 and W2 only\n");
    return 3;
  }
  const bool w2 = workload == "W2";
  std::int64_t n = 0;
  std::ifstream(std::string(argv[2]) + (w2 ? "/w2/n" : "/w1/n")) >> n;
  const auto workers = static_cast<std::size_t>(std::stoul(argv[3]));
  const int epochs = argc > 4 ? std::stoi(argv[4]) : 1;
  for (int k = 1; k <= epochs; ++k) {
    const auto start = std::chrono::steady_clock::now();
    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        RangeDataset(n, w2).map(torch::data::transforms::Stack<>()),
        torch::data::DataLoaderOptions().batch_size(256).workers(workers).drop_last(!w2));
    std::int64_t records = 0, checksum = 0;
    for (auto& batch : *loader) {
      checksum += batch.data.sum().item<std::int64_t>();
      records += batch.data.size(0);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "{\"system\": \"libtorch-%zu\", \"epoch\": %d, \"records\": %lld, \"checksum\": %lld, "
        "\"seconds\": %.6f, \"version\": \"%s\"}\n",
        workers, k, static_cast<long long>(records), static_cast<long long>(checksum), seconds,
        TORCH_VERSION);
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ingest_compare_torch: %s\n", e.what());
  return 1;
}
