// libFuzzer target: the CSV reader over arbitrary bytes, plain, GZIP or ZLIB
// (chosen by the first byte, which also picks the buffer size, the
// delimiter, quoting, the header and a column selection). Any input must end
// in records or an ingest::Error: never a crash, a hang, a read out of
// bounds or an allocation beyond the data. Both layers are exercised: the
// record splitter (formats/csv.hpp) and the typed reader (sources/csv.hpp).
#include <cstddef>
#include <cstdint>
#include <string>

#include <ingest/formats/csv.hpp>
#include <ingest/sources/csv.hpp>

#include "fuzz_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string path = ingest::fuzzing::write_scratch("csv", data, size);
  if (path.empty()) return 0;
  const std::uint8_t control = data[0];
  const ingest::Compression compression = ingest::fuzzing::compression_of(control);
  const std::size_t buffer = (control & 0x10) ? std::size_t{64} : std::size_t{4096};
  const char delimiter = (control & 0x20) ? ';' : ',';
  const bool quoting = (control & 0x40) == 0;
  std::size_t total = 0;
  try {
    ingest::detail::CsvRecordReader records(path, compression, buffer, {delimiter, quoting});
    for (int i = 0; i < 100000; ++i) {
      try {
        if (!records.next()) break;
      } catch (const ingest::InvalidArgument&) {
        continue;  // a malformed record is consumed; the next one follows
      }
      for (std::size_t k = 0; k < records.size(); ++k) {
        total += records.field(k).size() + static_cast<std::size_t>(records.field_line(k));
      }
    }
  } catch (const ingest::Error&) {
  }
  try {
    ingest::CsvOptions<std::int64_t, std::string, double> options{
        .defaults = {std::int64_t{0}, std::string("-"), std::nullopt},
        .header = (control & 0x80) != 0,
        .delimiter = delimiter,
        .quoting = quoting,
        .na_value = "NA",
        .compression = compression,
        .buffer_size = buffer};
    if (control & 0x08) options.exclude_cols = {1};
    if (control & 0x04) options.select_cols = {0, 2, 3};
    if ((control & 0x0c) == 0x0c) options.exclude_cols.clear();
    auto it = ingest::csv<std::int64_t, std::string, double>(path, options).iterator();
    for (int i = 0; i < 100000; ++i) {
      try {
        auto row = it.next();
        if (!row) break;
        total += std::get<1>(*row).size();
      } catch (const ingest::Error&) {
        // a bad record: the next call goes on with the next one
      }
    }
  } catch (const ingest::Error&) {
  }
  if (total == 0xdeadbeef) std::puts("");  // keep the reads
  return 0;
}
