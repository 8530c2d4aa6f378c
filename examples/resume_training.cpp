// Resumable training. Every 25 steps the job checkpoints its model and the
// input pipeline's position; started again after a crash, it resumes at its
// last checkpoint, sees exactly the batches an uninterrupted run would have
// seen from there, and ends with the same weights, bit for bit.
//
//   resume_training WORK_DIR [--crash-at STEP]
//
// --crash-at kills the process with SIGKILL at that step, as the OOM killer
// or a preemption would. The data (CSV files of y = 3 x - 2 + noise) is
// written to WORK_DIR/data on the first run; checkpoints go to WORK_DIR/ckpt.
//
// The checkpoint is two files, committed in order: the pipeline's state
// `step-<N>.state` (ingest::write_state: temporary file, fsync, rename),
// then `model`, naming step N (written the same way). A crash between the
// two leaves `model` naming the previous state file, which is removed only
// after the new `model` is in place.
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <tuple>

#include <ingest/ingest.hpp>

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t checkpoint_every = 25;

// What the training job keeps: its weights, its step, and a digest of every
// batch it trained on (to show a resumed run saw the same batches).
struct Model {
  std::int64_t step = 0;
  float w = 0, b = 0;
  std::uint64_t digest = 14695981039346656037ull;  // FNV-1a over the batches' bytes
};

void write_data(const fs::path& dir) {
  fs::create_directories(dir);
  for (int f = 0; f < 4; ++f) {
    std::ofstream out(dir / ("part-" + std::to_string(f) + ".csv"));
    out << "x,y\n";
    for (int i = 0; i < 500; ++i) {
      const float x = static_cast<float>((f * 500 + i) * 37 % 1000) / 1000.0f;
      const float noise = static_cast<float>((i * 7919 + f) % 101 - 50) / 5000.0f;
      out << x << ',' << 3.0f * x - 2.0f + noise << '\n';
    }
  }
}

// list_files (reshuffled each epoch) -> 5 epochs -> parallel interleave of
// the CSV files -> random_map (jitter, its randomness per element) ->
// shuffle -> batch -> prefetch.
auto make_pipeline(const fs::path& data) {
  return ingest::list_files((data / "part-*.csv").string(), {.shuffle = true, .seed = 1})
      .repeat(5)
      .interleave(
          [](const std::string& path) { return ingest::csv<float, float>(path, {.header = true}); },
          {.cycle_length = 2, .parallelism = 2})
      .random_map(
          [](std::tuple<float, float> xy, ingest::Rng& rng) {
            auto [x, y] = xy;
            x += static_cast<float>(rng.uniform01() - 0.5) * 1e-3f;
            return std::make_tuple(x, y);
          },
          {.seed = 3, .parallelism = 2})
      .shuffle(256, {.seed = 4})
      .batch(32)
      .prefetch(2);
}

void save_model(const fs::path& path, const Model& m) {
  const std::string tmp = path.string() + ".tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%lld %a %a %llu\n", static_cast<long long>(m.step), m.w, m.b,
                 static_cast<unsigned long long>(m.digest));
    std::fflush(f);
    ::fsync(::fileno(f));
    std::fclose(f);
  }
  fs::rename(tmp, path);  // atomic: the old model or the new one
}

bool load_model(const fs::path& path, Model& m) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  long long step = 0;
  unsigned long long digest = 0;
  const bool ok = std::fscanf(f, "%lld %a %a %llu", &step, &m.w, &m.b, &digest) == 4;
  std::fclose(f);
  m.step = step;
  m.digest = digest;
  return ok;
}

fs::path state_path(const fs::path& ckpt, std::int64_t step) {
  return ckpt / ("step-" + std::to_string(step) + ".state");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s WORK_DIR [--crash-at STEP]\n", argv[0]);
    return 2;
  }
  const fs::path work = argv[1];
  const std::int64_t crash_at =
      argc >= 4 && std::string(argv[2]) == "--crash-at" ? std::atoll(argv[3]) : -1;
  if (!fs::exists(work / "data")) write_data(work / "data");
  const fs::path ckpt = work / "ckpt";
  fs::create_directories(ckpt);

  const auto pipeline = make_pipeline(work / "data");
  Model model;
  const bool resume = load_model(ckpt / "model", model);
  auto it = resume ? pipeline.iterator(ingest::read_state(state_path(ckpt, model.step).string()))
                   : pipeline.iterator();
  if (resume) std::printf("resumed from step %lld\n", static_cast<long long>(model.step));
  if (!resume) {
    // A first checkpoint at step 0. From a pipeline's first save on, its
    // stages keep what makes states quick to restore (a shuffle buffer's
    // serialized elements), so every later state restores with a short
    // replay; a state is also there should the job die before step 25.
    ingest::write_state(state_path(ckpt, 0).string(), it.save());
    save_model(ckpt / "model", model);
  }

  while (auto batch = it.next()) {
    if (model.step == crash_at) std::raise(SIGKILL);  // a crash: nothing is flushed or saved
    const auto& [xt, yt] = *batch;
    const auto xs = xt.values<float>();
    const auto ys = yt.values<float>();
    float gw = 0, gb = 0;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      const float err = model.w * xs[k] + model.b - ys[k];
      gw += err * xs[k];
      gb += err;
    }
    model.w -= 0.5f * gw / static_cast<float>(xs.size());
    model.b -= 0.5f * gb / static_cast<float>(xs.size());
    for (const auto values : {xs, ys}) {
      for (const std::byte c : std::as_bytes(values)) {
        model.digest = (model.digest ^ static_cast<std::uint64_t>(c)) * 1099511628211ull;
      }
    }
    ++model.step;
    if (model.step % checkpoint_every == 0) {
      ingest::write_state(state_path(ckpt, model.step).string(), it.save());
      save_model(ckpt / "model", model);
      fs::remove(state_path(ckpt, model.step - checkpoint_every));  // the previous one
    }
  }
  std::printf("trained %lld steps: w = %.2f, b = %.2f (exactly %a %a), batches digest %016llx\n",
              static_cast<long long>(model.step), model.w, model.b, model.w, model.b,
              static_cast<unsigned long long>(model.digest));
  std::printf("%s\n", it.stats().to_string().c_str());
  return 0;
}
