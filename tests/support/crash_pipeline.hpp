// The checkpoint crash test's data and pipeline (issue 13 item 6), shared by
// the driver (stages/checkpoint_crash_test.cpp) and the child it kills
// (stages/checkpoint_crash_child.cpp):
//
//   list_files (shuffled each epoch) -> repeat(3) -> parallel interleave of
//   TFRecord files, plain and GZIP -> parallel map -> filter -> shuffle ->
//   batch -> prefetch
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>

namespace ingest::testing {

inline constexpr int crash_files = 6;
inline constexpr int crash_records_per_file = 150;

/// Writes the data set into `dir`: files 0, 2, 4 plain, 1, 3, 5 GZIP, each
/// holding records "f<file>-r<record>-" padded to varied lengths.
inline void write_crash_data(const std::string& dir) {
  for (int f = 0; f < crash_files; ++f) {
    const bool gzip = f % 2 == 1;
    TFRecordWriter out(dir + "/part-" + std::to_string(f) + (gzip ? ".tfrecord.gz" : ".tfrecord"),
                       {.compression = gzip ? Compression::gzip : Compression::none});
    for (int r = 0; r < crash_records_per_file; ++r) {
      std::string record = "f" + std::to_string(f) + "-r" + std::to_string(r) + "-";
      record.append(static_cast<std::size_t>((f * 31 + r * 17) % 90), 'x');
      out.write(record);
    }
    out.close();
  }
}

/// The pipeline over `dir`'s data: 3 epochs, deterministic, seeded.
inline auto crash_pipeline(const std::string& dir) {
  return list_files(dir + "/part-*", {.shuffle = true, .seed = 5})
      .repeat(3)
      .interleave(
          [](const std::string& path) {
            const bool gzip = path.ends_with(".gz");
            return tfrecord(path, {.compression = gzip ? Compression::gzip : Compression::none});
          },
          {.cycle_length = 3, .block_length = 2, .parallelism = 2})
      .map(
          [](std::string record) {
            // "f<file>-r<record>-xxx" -> file * 1000 + record
            const std::size_t dash = record.find('-');
            const std::int64_t file = std::stoll(record.substr(1, dash - 1));
            const std::int64_t r = std::stoll(record.substr(dash + 2));
            return file * 1000 + r;
          },
          {.parallelism = 2})
      .filter([](std::int64_t x) { return x % 7 != 3; })
      .shuffle(40, {.seed = 9})
      .batch(8)
      .prefetch(2);
}

/// A batch as one line of the output file.
inline std::string crash_line(const Tensor& batch) {
  std::string line;
  for (const std::int64_t x : batch.values<std::int64_t>()) line += std::to_string(x) + " ";
  line += "\n";
  return line;
}

}  // namespace ingest::testing
