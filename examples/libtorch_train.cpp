// Training a small CNN with libtorch on the demo's JPEG TFRecords, fed by
// ingest: files shuffled each epoch, a parallel interleave of the shards, a
// shuffle buffer, JPEG decode + random crop + flip + normalize (autotuned
// parallelism, normalized straight into the batch), batch, autotuned
// prefetch; each batch goes to libtorch with ingest::torch::to_tensor (no
// copy). It checkpoints the model, the optimizer and the pipeline's position
// together and, started again after a crash, resumes exactly where the last
// checkpoint was taken.
//
//   libtorch_train [--data DIR] [--work DIR] [--steps N] [--batch N] [--images N]
//                  [--size PX] [--seed N] [--checkpoint-every N] [--log-batches]
//                  [--loader ingest|torch-data] [--compare ROUNDS]
//
// The data set is the demo's (examples/demo/photos.hpp: 2,000 JPEGs of 256 x
// 256 in 8 shards, 10 classes), written once under DIR (default
// $INGEST_DEMO_DIR, else ~/.cache/ingest-demo) and reused; --images and
// --size ask for another one. Images are decoded at 64 x 64 (libjpeg-turbo's
// scaled decode) and cropped to 56 x 56. With --work, a checkpoint is
// written every --checkpoint-every steps under WORK/ckpt and a run finding
// one there resumes from it. --log-batches prints each step's loss and a hash
// of its batch. --loader torch-data feeds the same model from torch::data's
// DataLoader (a map-style dataset doing the same decode and augmentation,
// one worker a core); --compare ROUNDS alternates both loaders, --steps
// steps a round, and prints each one's images/s and their medians.
#include <fcntl.h>
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/image/image.hpp>
#include <ingest/ingest.hpp>
#include <ingest/torch/tensor.hpp>

#include "demo/photos.hpp"

namespace {

namespace fs = std::filesystem;
namespace img = ingest::image;
using Clock = std::chrono::steady_clock;

struct Config {
  fs::path data_dir;
  fs::path work_dir;  // empty: no checkpoints
  demo::DataSpec data;
  std::int64_t steps = 300;
  std::int64_t batch = 64;
  std::uint64_t seed = 7;
  std::int64_t checkpoint_every = 50;
  bool log_batches = false;
  std::string loader = "ingest";
  int compare_rounds = 0;
  std::int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  static constexpr std::int64_t decoded = 64, crop = 56;

  int scale_denom() const { return std::max(1, data.size / static_cast<int>(decoded)); }
};

// ---- the input: one record to (normalized CHW float crop, label) ----

constexpr float mean[] = {0.485f, 0.456f, 0.406f};
constexpr float stddev[] = {0.229f, 0.224f, 0.225f};

const ingest::ExampleSpec& example_spec() {
  static const ingest::ExampleSpec spec{
      {"image/encoded", ingest::FixedLenFeature{.dtype = ingest::FeatureType::bytes}},
      {"image/class/label", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
  };
  return spec;
}

// Decode (at 1/scale_denom of the size), random 56 x 56 crop, random flip.
std::pair<ingest::Tensor, std::int64_t> decode_crop_flip(const std::string& record, int scale_denom,
                                                         ingest::Rng& rng) {
  thread_local ingest::ParsedExample parsed;
  ingest::parse_example(record, example_spec(), parsed);
  const ingest::Tensor image =
      img::decode_jpeg(parsed.at(0).bytes[0], {.channels = 3, .scale_denom = scale_denom});
  const img::Size crop{Config::crop, Config::crop};
  return {img::random_flip_left_right(img::random_crop(image, crop, rng), rng),
          parsed.at(1).values.data<std::int64_t>()[0]};
}

// ingest's element: the normalize is left to batch(), which writes it
// straight into the batch's float tensor.
struct DecodeAugment {
  int scale_denom;
  std::pair<img::PendingNormalize, std::int64_t> operator()(const std::string& record,
                                                            ingest::Rng& rng) const {
    auto [image, label] = decode_crop_flip(record, scale_denom, rng);
    return {img::normalize_in_batch(image, mean, stddev, {.layout = img::Layout::chw}), label};
  }
};

auto make_pipeline(const Config& c, const std::vector<std::string>& files) {
  const auto autotune = ingest::autotune;
  // The shards in a new order each epoch, four read at a time.
  return ingest::from_vector(files)
      .shuffle(static_cast<std::int64_t>(files.size()), {.seed = c.seed})
      .repeat()
      .interleave([](const std::string& f) { return ingest::tfrecord(f); },
                  {.cycle_length = 4, .parallelism = autotune})
      .shuffle(512, {.seed = c.seed + 1})
      .random_map(DecodeAugment{c.scale_denom()},
                  {.seed = c.seed + 2, .parallelism = autotune, .name = "decode + augment"})
      .batch(c.batch, {.drop_remainder = true})
      .prefetch(autotune);
}

// ---- the same input through torch::data ----

// A map-style data set over the records (read into memory once): get(i)
// does what DecodeAugment and batch() do for one image, with its own draw of
// randomness per call.
class JpegRecords : public torch::data::datasets::Dataset<JpegRecords> {
 public:
  JpegRecords(std::shared_ptr<const std::vector<std::string>> records, int scale_denom,
              std::uint64_t seed)
      : records_(std::move(records)), scale_denom_(scale_denom), seed_(seed) {}

  torch::data::Example<> get(std::size_t index) override {
    ingest::Rng rng(ingest::element_seed(seed_, draws_->fetch_add(1), index));
    auto [image, label] = decode_crop_flip((*records_)[index], scale_denom_, rng);
    const ingest::Tensor chw = img::normalize(image, mean, stddev, {.layout = img::Layout::chw});
    return {ingest::torch::to_tensor(chw), torch::tensor(label)};
  }
  torch::optional<std::size_t> size() const override { return records_->size(); }

 private:
  std::shared_ptr<const std::vector<std::string>> records_;
  int scale_denom_;
  std::uint64_t seed_;
  std::shared_ptr<std::atomic<std::uint64_t>> draws_ =
      std::make_shared<std::atomic<std::uint64_t>>();
};

// ---- the model ----

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(register_module("conv1",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3).padding(1)))),
        conv2(register_module("conv2",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)))),
        fc(register_module("fc", torch::nn::Linear(32, demo::num_classes))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
    return fc->forward(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

struct Trainer {
  explicit Trainer(std::uint64_t seed)
      : net((torch::manual_seed(seed), Net())),
        optimizer(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9)) {}

  double step(const torch::Tensor& images, const torch::Tensor& labels) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(images), labels);
    loss.backward();
    optimizer.step();
    return loss.item<double>();
  }

  Net net;
  torch::optim::SGD optimizer;
};

// ---- checkpoints ----

// FNV-1a over a batch's bytes, 8 at a time: what a step trained on.
std::uint64_t hash_bytes(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (std::size_t i = n - n % 8; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Temporary file, fsync, rename: the old file or the new one, never a torn one.
void write_atomically(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp.string());
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + tmp.string());
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw std::runtime_error("cannot sync " + tmp.string());
  fs::rename(tmp, path);
}

template <class T>
std::string serialized(const T& value) {
  std::ostringstream out;
  torch::save(value, out);
  return std::move(out).str();
}

// A checkpoint of step N is four files: the pipeline's state, the model, the
// optimizer (its momentum), then `latest`, naming N and the losses so far.
// `latest` is written last: until it names N, a restart takes the previous
// checkpoint, whose files are removed only after.
fs::path ckpt_file(const fs::path& ckpt, std::int64_t step, const char* what) {
  return ckpt / ("step-" + std::to_string(step) + "." + what);
}

void save_checkpoint(const fs::path& ckpt, std::int64_t step, const ingest::IteratorState& state,
                     Trainer& t, const std::vector<double>& losses, std::int64_t previous) {
  ingest::write_state(ckpt_file(ckpt, step, "state").string(), state);
  write_atomically(ckpt_file(ckpt, step, "model"), serialized(t.net));
  write_atomically(ckpt_file(ckpt, step, "optimizer"), serialized(t.optimizer));
  std::string latest = std::to_string(step);
  char buf[32];
  for (const double l : losses) {
    std::snprintf(buf, sizeof buf, " %a", l);
    latest += buf;
  }
  write_atomically(ckpt / "latest", latest + "\n");
  if (previous >= 0 && previous != step) {
    for (const char* what : {"state", "model", "optimizer"})
      fs::remove(ckpt_file(ckpt, previous, what));
  }
}

// The step of the last complete checkpoint (and its losses), if any.
std::optional<std::int64_t> load_checkpoint(const fs::path& ckpt, Trainer& t,
                                            std::vector<double>& losses) {
  std::ifstream in(ckpt / "latest");
  std::string word;
  if (!(in >> word)) return std::nullopt;
  const std::int64_t step = std::stoll(word);
  while (in >> word) losses.push_back(std::strtod(word.c_str(), nullptr));
  std::ifstream model(ckpt_file(ckpt, step, "model"), std::ios::binary);
  std::ifstream optimizer(ckpt_file(ckpt, step, "optimizer"), std::ios::binary);
  torch::load(t.net, model);
  torch::load(t.optimizer, optimizer);
  return step;
}

// ---- training ----

struct RunResult {
  std::vector<double> losses;  // of every step since step 0 (a resumed run: the saved ones too)
  double images_per_s = 0;     // after the first `warmup` steps of this process
};

constexpr std::int64_t warmup = 10;

double mean_of(std::span<const double> v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// One step's bookkeeping: the loss, the log line, and the clock.
struct StepLog {
  const Config& c;
  RunResult& r;
  std::int64_t started = 0;  // steps this process ran
  Clock::time_point warm{};

  void record(std::int64_t step, double loss, std::uint64_t hash) {
    r.losses.push_back(loss);
    if (c.log_batches) {
      std::printf("step %lld loss %.6f batch %016llx\n", static_cast<long long>(step + 1), loss,
                  static_cast<unsigned long long>(hash));
    } else if ((step + 1) % 50 == 0 || step == 0) {
      std::printf("step %lld: loss %.4f\n", static_cast<long long>(step + 1), loss);
    }
    std::fflush(stdout);
    if (++started == warmup) warm = Clock::now();
  }
  void finish(std::int64_t images_per_step) {
    if (started <= warmup) return;
    const double s = std::chrono::duration<double>(Clock::now() - warm).count();
    r.images_per_s = static_cast<double>((started - warmup) * images_per_step) / s;
  }
};

RunResult train_ingest(const Config& c, const std::vector<std::string>& files, Trainer& t) {
  RunResult r;
  const auto pipeline = make_pipeline(c, files);
  const fs::path ckpt = c.work_dir / "ckpt";
  std::optional<std::int64_t> resumed;
  if (!c.work_dir.empty()) {
    fs::create_directories(ckpt);
    resumed = load_checkpoint(ckpt, t, r.losses);
  }
  auto it = resumed
                ? pipeline.iterator(ingest::read_state(ckpt_file(ckpt, *resumed, "state").string()))
                : pipeline.iterator();
  std::int64_t step = resumed.value_or(0), last_checkpoint = resumed.value_or(-1);
  if (resumed) std::printf("resumed at step %lld\n", static_cast<long long>(step));
  StepLog log{c, r};
  for (; step < c.steps; ++step) {
    std::optional<std::pair<ingest::Tensor, ingest::Tensor>> batch = it.next();
    if (!batch) throw std::runtime_error("the pipeline ended");  // it repeats forever
    std::uint64_t hash = 14695981039346656037ull;
    if (c.log_batches) {
      hash = hash_bytes(hash, batch->first.raw_data(), batch->first.nbytes());
      hash = hash_bytes(hash, batch->second.raw_data(), batch->second.nbytes());
    }
    auto [images, labels] = ingest::torch::to_tensor(std::move(*batch));  // no copy
    log.record(step, t.step(images, labels), hash);
    if (!c.work_dir.empty() && (step + 1) % c.checkpoint_every == 0) {
      save_checkpoint(ckpt, step + 1, it.save(), t, r.losses, last_checkpoint);
      last_checkpoint = step + 1;
    }
  }
  log.finish(c.batch);
  if (c.compare_rounds == 0) std::printf("pipeline stats:\n%s\n", it.stats().to_string().c_str());
  return r;
}

RunResult train_torch_data(const Config& c, const std::vector<std::string>& files, Trainer& t) {
  static std::shared_ptr<const std::vector<std::string>> records;
  if (!records) {
    auto all = std::make_shared<std::vector<std::string>>();
    for (const std::string& record : ingest::tfrecord(files)) all->push_back(record);
    records = std::move(all);
  }
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      JpegRecords(records, c.scale_denom(), c.seed).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions()
          .batch_size(static_cast<std::size_t>(c.batch))
          .workers(static_cast<std::size_t>(c.cores))
          .drop_last(true));
  RunResult r;
  StepLog log{c, r};
  std::int64_t step = 0;
  while (step < c.steps) {
    for (auto& batch : *loader) {
      std::uint64_t hash = 0;
      if (c.log_batches) {
        hash = hash_bytes(14695981039346656037ull, batch.data.data_ptr(), batch.data.nbytes());
      }
      log.record(step, t.step(batch.data, batch.target), hash);
      if (++step == c.steps) break;
    }
  }
  log.finish(c.batch);
  return r;
}

Config parse_args(int argc, char** argv) {
  Config c;
  std::optional<fs::path> data;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    auto number = [&] { return std::stoll(argv[++i]); };
    if (a == "--data" && has_value) {
      data = argv[++i];
    } else if (a == "--work" && has_value) {
      c.work_dir = argv[++i];
    } else if (a == "--steps" && has_value) {
      c.steps = number();
    } else if (a == "--batch" && has_value) {
      c.batch = number();
    } else if (a == "--images" && has_value) {
      c.data.images = number();
    } else if (a == "--size" && has_value) {
      c.data.size = static_cast<int>(number());
    } else if (a == "--seed" && has_value) {
      c.seed = static_cast<std::uint64_t>(number());
    } else if (a == "--checkpoint-every" && has_value) {
      c.checkpoint_every = number();
    } else if (a == "--log-batches") {
      c.log_batches = true;
    } else if (a == "--loader" && has_value) {
      c.loader = argv[++i];
    } else if (a == "--compare" && has_value) {
      c.compare_rounds = static_cast<int>(number());
    } else {
      throw std::invalid_argument("unknown argument '" + a +
                                  "' (see the top of libtorch_train.cpp)");
    }
  }
  if (c.loader != "ingest" && c.loader != "torch-data") {
    throw std::invalid_argument("--loader is ingest or torch-data, not '" + c.loader + "'");
  }
  if (c.loader != "ingest" && !c.work_dir.empty()) {
    throw std::invalid_argument("checkpoints (--work) need --loader ingest");
  }
  if (c.data.size < Config::decoded) throw std::invalid_argument("--size is at least 64");
  if (const char* d = std::getenv("INGEST_DEMO_DIR"); !data && d && *d) data = d;
  if (const char* h = std::getenv("HOME"); !data && h && *h)
    data = fs::path(h) / ".cache" / "ingest-demo";
  c.data_dir = data ? *data : fs::temp_directory_path() / "ingest-demo";
  return c;
}

int run(const Config& c) {
  const demo::DataSet data = demo::ensure_data(c.data_dir, c.data, false);
  std::printf(
      "libtorch_train: %lld steps of %lld images (%lld x %lld crops of %lld JPEGs of %d x %d, "
      "decoded at 1/%d) on %lld cores, loader %s\n",
      static_cast<long long>(c.steps), static_cast<long long>(c.batch),
      static_cast<long long>(Config::crop), static_cast<long long>(Config::crop),
      static_cast<long long>(c.data.images), c.data.size, c.data.size, c.scale_denom(),
      static_cast<long long>(c.cores),
      c.compare_rounds ? "ingest and torch-data in turn" : c.loader.c_str());
  std::fflush(stdout);
  if (c.compare_rounds > 0) {
    std::vector<double> rates[2];
    const char* names[2] = {"ingest", "torch-data"};
    for (int round = 1; round <= c.compare_rounds; ++round) {
      for (int k = 0; k < 2; ++k) {
        Trainer t(c.seed);
        const RunResult r =
            k == 0 ? train_ingest(c, data.shards, t) : train_torch_data(c, data.shards, t);
        rates[k].push_back(r.images_per_s);
        std::printf("round %d: %-10s %7.0f images/s\n", round, names[k], r.images_per_s);
        std::fflush(stdout);
      }
    }
    for (auto& v : rates) std::sort(v.begin(), v.end());
    const double a = rates[0][rates[0].size() / 2], b = rates[1][rates[1].size() / 2];
    std::printf("median of %d rounds: ingest %.0f images/s, torch-data %.0f images/s (%.2fx)\n",
                c.compare_rounds, a, b, a / b);
    return 0;
  }
  Trainer t(c.seed);
  const RunResult r =
      c.loader == "ingest" ? train_ingest(c, data.shards, t) : train_torch_data(c, data.shards, t);
  if (r.losses.size() >= 40) {
    const std::span<const double> l(r.losses);
    std::printf("loss: mean of the first 20 steps %.4f, of the last 20 steps %.4f\n",
                mean_of(l.first(20)), mean_of(l.last(20)));
  }
  std::printf("throughput: %.0f images/s (model and input, after %lld warm-up steps)\n",
              r.images_per_s, static_cast<long long>(warmup));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libtorch_train: %s\n", e.what());
    return 1;
  }
}
