// ingest's demo: the tf.data performance ladder ("Better performance with
// tf.data") on an ImageNet-style image set, live, on this machine. Each rung
// feeds the same emulated training step (the host sleeps step_ms per batch,
// as the guide's time.sleep stands for an accelerator) for the same number
// of steps, and adds one of the guide's remedies: prefetch, parallel
// interleave, parallel map, cache after the decode, a vectorised map, and
// finally every knob left to ingest's autotuner. It prints a table (images/s,
// time per step, the share of the step's time the accelerator waited for
// input, speed-up over the naive pipeline) and the autotuned pipeline's
// stats, and draws a timeline per rung from the library's own trace and a
// bar chart of the ladder.
//
//   demo [--smoke] [--data DIR] [--out DIR]
//
// The data set (2,000 JPEGs of 256 x 256 in 8 TFRecord shards) is written
// once under DIR (default $INGEST_DEMO_DIR, else $XDG_CACHE_HOME/ingest-demo,
// else ~/.cache/ingest-demo) and reused; pictures go to DIR/pictures unless
// --out says otherwise. --smoke runs a tiny version (CI runs it).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/image/image.hpp>
#include <ingest/ingest.hpp>

#include "photos.hpp"
#include "svg.hpp"
#if INGEST_DEMO_CUDA
#include <ingest/cuda/device_loader.hpp>

#include "gpu_step.hpp"
#endif

namespace {

namespace fs = std::filesystem;
namespace img = ingest::image;
using Clock = std::chrono::steady_clock;
using Example = std::pair<ingest::Tensor, std::int64_t>;
using Batch = std::pair<ingest::Tensor, ingest::Tensor>;

struct Config {
  bool smoke = false;
  fs::path data_dir;
  fs::path out_dir;
  demo::DataSpec data;
  std::int64_t batch_size = 64;
  std::int64_t epochs = 2;
  std::chrono::microseconds step{15'000};
  img::Size crop{224, 224};
  std::uint64_t seed = 42;
  std::int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  std::string gpu;  // the CUDA device that runs the step; empty: the host emulates it

  std::int64_t steps_per_epoch() const { return data.images / batch_size; }
  std::int64_t steps() const { return epochs * steps_per_epoch(); }
};

// ---- the model's input: parse, decode, augment ----

const ingest::ExampleSpec& example_spec() {
  static const ingest::ExampleSpec spec{
      {"image/encoded", ingest::FixedLenFeature{.dtype = ingest::FeatureType::bytes}},
      {"image/class/label", ingest::FixedLenFeature{.dtype = ingest::FeatureType::int64}},
  };
  return spec;
}

// A record to (the JPEG decoded to uint8 [256, 256, 3], its label).
struct Decode {
  Example operator()(const std::string& record) const {
    thread_local ingest::ParsedExample parsed;
    ingest::parse_example(record, example_spec(), parsed);
    return {img::decode_jpeg(parsed.at(0).bytes[0], {.channels = 3}),
            parsed.at(1).values.data<std::int64_t>()[0]};
  }
};

constexpr float mean[] = {0.485f, 0.456f, 0.406f};
constexpr float stddev[] = {0.229f, 0.224f, 0.225f};

// torchvision's training transform after the decode: random crop, random
// horizontal flip, ToTensor + Normalize (CHW float32).
struct Augment {
  img::Size crop;
  Example operator()(Example x, ingest::Rng& rng) const {
    const ingest::Tensor flipped =
        img::random_flip_left_right(img::random_crop(x.first, crop, rng), rng);
    return {img::normalize(flipped, mean, stddev, {.layout = img::Layout::chw}), x.second};
  }
};

// Both, per element: what the first rungs run.
struct DecodeAugment {
  img::Size crop;
  Example operator()(const std::string& record, ingest::Rng& rng) const {
    return Augment{crop}(Decode{}(record), rng);
  }
};

// The vectorised form: one call per batch of decoded images, each crop
// normalised straight into its slot of the batch (no per-image result to
// stack afterwards).
struct AugmentBatch {
  img::Size crop;
  Batch operator()(Batch batch, ingest::Rng& rng) const {
    const std::int64_t n = batch.first.shape()[0];
    ingest::Tensor out(ingest::DType::float32, ingest::Shape{n, 3, crop.height, crop.width});
    for (std::int64_t i = 0; i < n; ++i) {
      const ingest::Tensor flipped =
          img::random_flip_left_right(img::random_crop(batch.first.slice(i), crop, rng), rng);
      img::normalize_into(flipped, mean, stddev, out.slice(i), img::Layout::chw);
    }
    return {std::move(out), std::move(batch.second)};
  }
};

// ---- running a rung ----

struct Result {
  std::string name{};
  std::string tf_equivalent{};
  std::int64_t steps = 0;
  std::int64_t images = 0;
  double seconds = 0;
  double wait_seconds = 0;
  std::string stats{};
  std::string timeline{};
  std::string trace{};
  double images_per_s() const { return static_cast<double>(images) / seconds; }
  double ms_per_step() const { return 1e3 * seconds / static_cast<double>(steps); }
  double idle_percent() const { return 100 * wait_seconds / seconds; }
};

// What a traced stage's span shows in the timeline (empty: not drawn;
// enclosing calls like repeat's are covered by what they call anyway).
std::string role_of(const std::string& name) {
  if (name == "prefetch" || name == "device_loader") return "wait";
  if (name.starts_with("tfrecord") || name.starts_with("interleave")) return "read";
  if (name == "map" || name == "decode + augment + batch (work)") return "decode+augment";
  if (name.starts_with("decode +")) return "batch";
  if (name.starts_with("decode")) return "decode";
  if (name == "augment + batch") return "batch";
  if (name.starts_with("augment")) return "augment";
  if (name == "cache") return "cache";
  if (name == "batch") return "batch";
  return {};
}

std::int64_t ns(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// Feeds the emulated step (the host sleeps c.step per batch) from
// `pipeline`, traced; returns the trace.
template <class Pipeline>
std::vector<ingest::TraceEvent> feed_host(const Config& c, Result& r, const Pipeline& pipeline) {
  auto it = pipeline.with_options({.trace_path = r.trace}).iterator();
  const auto start = Clock::now();
  auto end = start;
  Clock::duration waited{};
  for (;;) {
    const auto ask = Clock::now();
    std::optional<Batch> batch = it.next();
    const auto got = Clock::now();
    if (!batch) break;
    waited += got - ask;
    r.images += batch->first.shape()[0];
    ++r.steps;
    std::this_thread::sleep_until(got + c.step);  // the accelerator's step
    end = Clock::now();
  }
  r.seconds = std::chrono::duration<double>(end - start).count();
  r.wait_seconds = std::chrono::duration<double>(waited).count();
  r.stats = it.stats().to_string();
  return it.trace_events();
}

#if INGEST_DEMO_CUDA
constexpr std::uint64_t gpu_row = ~std::uint64_t{0};

// Feeds a real step on the GPU through cuda::DeviceLoader; the time the GPU
// was not running a step is its idle time. The GPU's steps join the trace
// as spans of their own row.
template <class Pipeline>
std::vector<ingest::TraceEvent> feed_gpu(const Config& c, Result& r, const Pipeline& pipeline) {
  demo::gpu::Trainer gpu(c.step, c.steps());  // outlives the loader's batches
  const auto created = Clock::now();
  auto it = ingest::cuda::DeviceLoader(pipeline, {.depth = 2})
                .with_options({.trace_path = r.trace})
                .iterator();
  const auto start = Clock::now();
  gpu.start(ns(start - created));
  for (;;) {
    std::optional<ingest::cuda::DeviceBatch> batch = it.next();
    if (!batch) break;
    batch->wait(gpu.stream());
    gpu.step(batch->data<float>(0), static_cast<std::int64_t>(batch->nbytes(0) / sizeof(float)));
    r.images += batch->shape(0)[0];
    ++r.steps;
  }
  const auto spans = gpu.finish();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::int64_t busy_ns = 0;
  for (const auto& span : spans) busy_ns += span.second;
  r.wait_seconds = std::max(0.0, r.seconds - 1e-9 * static_cast<double>(busy_ns));
  r.stats = it.stats().to_string();
  std::vector<ingest::TraceEvent> events = it.trace_events();
  for (const auto& [at, took] : spans) events.push_back({"gpu step", 'X', at, took, gpu_row, {}});
  return events;
}
#endif

// Runs `pipeline` against the training step for c.steps() steps, traced,
// and draws its timeline.
template <class Pipeline>
Result run_rung(const Config& c, int number, std::string name, std::string tf_equivalent,
                const Pipeline& pipeline) {
  Result r{.name = std::move(name), .tf_equivalent = std::move(tf_equivalent)};
  r.trace = (c.out_dir / ("rung-" + std::to_string(number) + ".trace.json")).string();
  std::vector<ingest::TraceEvent> events;
#if INGEST_DEMO_CUDA
  if (!c.gpu.empty()) {
    events = feed_gpu(c, r, pipeline);
  } else
#endif
  {
    events = feed_host(c, r, pipeline);
  }
  if (r.steps != c.steps()) {
    throw std::runtime_error(r.name + ": " + std::to_string(r.steps) + " steps instead of " +
                             std::to_string(c.steps()));
  }
  // The timeline: a window of 20 steps' worth of time from the first step of
  // the last epoch (after a cache has filled), the step spans of the trace
  // marking where steps begin; moved back where the run ends sooner (a short
  // run, or a pipeline that finished its last epoch ahead of a GPU's queued
  // steps), so that the window still shows the pipeline's work.
  const std::string step_span = c.gpu.empty() ? "consumer" : "gpu step";
  std::vector<std::int64_t> step_starts;
  std::map<std::string, std::string> roles;
  for (const ingest::TraceEvent& e : events) {
    if (e.phase != 'X') continue;
    if (e.name == step_span) step_starts.push_back(e.ts_ns);
    if (e.name == "consumer" || e.name == "gpu step") continue;
    if (const std::string role = role_of(e.name); !role.empty()) roles.emplace(e.name, role);
  }
  roles.emplace(step_span, "step");
  std::sort(step_starts.begin(), step_starts.end());
  const auto first = static_cast<std::size_t>((c.epochs - 1) * c.steps_per_epoch());
  std::int64_t run_begin_ns = std::numeric_limits<std::int64_t>::max(), run_end_ns = 0;
  for (const ingest::TraceEvent& e : events) {
    if (e.phase != 'X') continue;
    run_begin_ns = std::min(run_begin_ns, e.ts_ns);
    run_end_ns = std::max(run_end_ns, e.ts_ns + e.dur_ns);
  }
  const std::int64_t window_ns = 20 * ns(c.step);
  std::int64_t begin_ns =
      step_starts.empty() ? 0 : step_starts[std::min(first, step_starts.size() - 1)];
  if (run_end_ns > 0) begin_ns = std::max(run_begin_ns, std::min(begin_ns, run_end_ns - window_ns));
  r.timeline = (c.out_dir / ("timeline-" + std::to_string(number) + ".svg")).string();
  char title[256];
  std::snprintf(title, sizeof title, "%d. %s: %.0f images/s, accelerator idle %.0f%%", number,
                r.name.c_str(), r.images_per_s(), r.idle_percent());
  demo::svg::write_timeline(r.timeline, title, events, begin_ns, begin_ns + window_ns, roles);
  return r;
}

fs::path default_data_dir() {
  if (const char* d = std::getenv("INGEST_DEMO_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "ingest-demo";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "ingest-demo";
  return fs::temp_directory_path() / "ingest-demo";
}

Config parse_args(int argc, char** argv) {
  Config c;
  std::optional<fs::path> data, out;
  bool host_step = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      c.smoke = true;
    } else if (a == "--host-step") {
      host_step = true;
    } else if ((a == "--data" || a == "--out") && i + 1 < argc) {
      (a == "--data" ? data : out) = argv[++i];
    } else {
      throw std::invalid_argument("unknown argument '" + a +
                                  "'; usage: demo [--smoke] [--data DIR] [--out DIR]");
    }
  }
  if (c.smoke) {
    c.data.images = 192;
    c.batch_size = 32;
    c.step = std::chrono::microseconds(5'000);
  }
#if INGEST_DEMO_CUDA
  if (!host_step) c.gpu = demo::gpu::device_name();
#else
  (void)host_step;  // the host emulates the step in any case
#endif
  c.data_dir = data ? *data : default_data_dir();
  c.out_dir = out ? *out : c.data_dir / (c.smoke ? "pictures-smoke" : "pictures");
  return c;
}

std::string json_string(const std::string& s) { return "\"" + demo::svg::escape(s) + "\""; }

void write_summary(const Config& c, const std::vector<Result>& results, const std::string& path) {
  std::string s = "{\"images\": " + std::to_string(c.data.images) +
                  ", \"batch_size\": " + std::to_string(c.batch_size) +
                  ", \"step_ms\": " + std::to_string(c.step.count() / 1000.0) + ", \"rungs\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    char nums[256];
    std::snprintf(nums, sizeof nums,
                  "\"steps\": %lld, \"images_per_s\": %.1f, \"ms_per_step\": %.2f, "
                  "\"idle_percent\": %.1f, \"speedup\": %.2f",
                  static_cast<long long>(r.steps), r.images_per_s(), r.ms_per_step(),
                  r.idle_percent(), r.images_per_s() / results.front().images_per_s());
    s += "  {\"name\": " + json_string(r.name) + ", " + nums +
         ", \"timeline\": " + json_string(r.timeline) + "}" +
         (i + 1 < results.size() ? ",\n" : "\n");
  }
  s += "]}\n";
  demo::svg::write_file(path, s);
}

int run(const Config& c) {
  const auto t0 = Clock::now();
  const demo::DataSet data = demo::ensure_data(c.data_dir, c.data, false);
  const std::vector<std::string>& files = data.shards;
  const double data_s = std::chrono::duration<double>(Clock::now() - t0).count();
  fs::create_directories(c.out_dir);
  std::printf(
      "ingest demo: the tf.data performance ladder on %lld JPEGs (256 x 256, %lld "
      "TFRecord shards in %s)\n",
      static_cast<long long>(c.data.images), static_cast<long long>(c.data.shards),
      fs::path(files.front()).parent_path().c_str());
  std::printf(
      "each rung: %lld steps of a %.0f ms training step on batches of %lld, "
      "%s; the pipeline on %lld cores\n\n",
      static_cast<long long>(c.steps()), c.step.count() / 1000.0,
      static_cast<long long>(c.batch_size),
      c.gpu.empty() ? "emulated by the host sleeping (no CUDA device in use)"
                    : ("a kernel on " + c.gpu + " fed by cuda::DeviceLoader").c_str(),
      static_cast<long long>(c.cores));
  std::fflush(stdout);

  const std::int64_t B = c.batch_size, E = c.epochs, P = c.cores;
  const ingest::BatchOptions whole{.drop_remainder = true};
  const img::Size crop = c.crop;
  auto sequential_read = [&] { return ingest::tfrecord(files); };
  auto parallel_read = [&](std::int64_t cycle, std::int64_t parallelism) {
    return ingest::from_vector(files).interleave(
        [](const std::string& f) { return ingest::tfrecord(f); },
        {.cycle_length = cycle, .parallelism = parallelism});
  };
  std::vector<Result> results;
  auto report = [&](Result r) {
    std::printf("  %d. %-22s %8.0f images/s\n", static_cast<int>(results.size() + 1),
                r.name.c_str(), r.images_per_s());
    std::fflush(stdout);
    results.push_back(std::move(r));
  };
  report(run_rung(
      c, 1, "naive", "TFRecordDataset(files).map(decode_augment).batch(64)",
      sequential_read().random_map(DecodeAugment{crop}, c.seed).batch(B, whole).repeat(E)));
  report(run_rung(c, 2, "+ prefetch", "... .prefetch(2)",
                  sequential_read()
                      .random_map(DecodeAugment{crop}, c.seed)
                      .batch(B, whole)
                      .repeat(E)
                      .prefetch(2)));
  report(run_rung(c, 3, "+ parallel interleave",
                  "files.interleave(TFRecordDataset, cycle_length=4, num_parallel_calls=2)",
                  parallel_read(4, 2)
                      .random_map(DecodeAugment{crop}, c.seed)
                      .batch(B, whole)
                      .repeat(E)
                      .prefetch(2)));
  report(run_rung(c, 4, "+ parallel map", ".map(decode_augment, num_parallel_calls=cores)",
                  parallel_read(4, 2)
                      .random_map(DecodeAugment{crop},
                                  {.seed = c.seed, .parallelism = P, .name = "decode + augment"})
                      .batch(B, whole)
                      .repeat(E)
                      .prefetch(2)));
  report(
      run_rung(c, 5, "+ cache after decode",
               ".map(decode, num_parallel_calls=cores).cache().map(augment, ...)",
               parallel_read(4, 2)
                   .map(Decode{}, {.parallelism = P, .name = "decode"})
                   .cache()
                   .random_map(Augment{crop}, {.seed = c.seed, .parallelism = P, .name = "augment"})
                   .batch(B, whole)
                   .repeat(E)
                   .prefetch(2)));
  // Rungs 6 and 7: the same pipeline, with fixed knobs and then autotuned.
  auto vectorised = [&](std::int64_t cycle, std::int64_t readers, std::int64_t parallelism,
                        std::int64_t buffer) {
    return parallel_read(cycle, readers)
        .map(Decode{}, {.parallelism = parallelism, .name = "decode"})
        .cache()
        .batch(B, whole)
        .random_map(AugmentBatch{crop},
                    {.seed = c.seed, .parallelism = parallelism, .name = "augment batch"})
        .repeat(E)
        .prefetch(buffer);
  };
  report(run_rung(c, 6, "+ vectorised map", ".cache().batch(64).map(augment_batch, ...)",
                  vectorised(4, 2, P, 2)));
  const auto autotune = ingest::autotune;
  report(run_rung(c, 7, "everything autotuned", "every knob tf.data.AUTOTUNE",
                  vectorised(autotune, autotune, autotune, autotune)));

  // ---- the table ----
  std::printf("\n%-3s %-22s %10s %10s %17s %9s\n", "", "rung", "images/s", "ms/step",
              "accelerator idle", "speed-up");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::printf("%-3zu %-22s %10.0f %10.1f %16.0f%% %8.1fx\n", i + 1, r.name.c_str(),
                r.images_per_s(), r.ms_per_step(), r.idle_percent(),
                r.images_per_s() / results.front().images_per_s());
  }
  std::printf("\nthe tf.data equivalent of each rung:\n");
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::printf("  %zu. %-22s %s\n", i + 1, results[i].name.c_str(),
                results[i].tf_equivalent.c_str());
  }
  std::printf("\nthe autotuned pipeline's stats():\n%s\n", results.back().stats.c_str());
  std::printf("trace of the autotuned pipeline (open in https://ui.perfetto.dev): %s\n",
              results.back().trace.c_str());

  // ---- the pictures ----
  std::vector<demo::svg::Bar> bars;
  for (const Result& r : results) bars.push_back({r.name, r.images_per_s(), r.idle_percent()});
  char title[160];
  std::snprintf(title, sizeof title,
                "ingest: the tf.data ladder, %lld JPEGs, %.0f ms step per batch of %lld, %lld "
                "cores",
                static_cast<long long>(c.data.images), c.step.count() / 1000.0,
                static_cast<long long>(B), static_cast<long long>(P));
  const std::string chart = (c.out_dir / "ladder.svg").string();
  const double limit = static_cast<double>(B) / (1e-6 * static_cast<double>(c.step.count()));
  char limit_label[96];
  std::snprintf(limit_label, sizeof limit_label, "the step's limit: %lld images / %.0f ms",
                static_cast<long long>(B), c.step.count() / 1000.0);
  demo::svg::write_ladder_chart(chart, title, bars, limit, limit_label);
  write_summary(c, results, (c.out_dir / "ladder.json").string());
  std::printf("pictures: %s (the ladder), %s ... timeline-%zu.svg (one per rung)\n", chart.c_str(),
              results.front().timeline.c_str(), results.size());
  std::printf("data %s in %.1f s; the whole demo took %.1f s\n",
              data.written ? "written" : "reused", data_s,
              std::chrono::duration<double>(Clock::now() - t0).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "demo: %s\n", e.what());
    return 1;
  }
}
