// libFuzzer target: the TFRecord reader over arbitrary bytes, plain, GZIP or
// ZLIB (chosen by the first byte, which also picks the buffer size, the CRC
// check and whether max_record_bytes limits lengths). Any input must end in
// records or an ingest::Error: never a crash, a hang, a read out of bounds or
// an allocation beyond the data.
#include <cstddef>
#include <cstdint>
#include <string>

#include <ingest/formats/tfrecord_format.hpp>

#include "fuzz_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string path = ingest::fuzzing::write_scratch("tfrecord", data, size);
  if (path.empty()) return 0;
  const std::uint8_t control = data[0];
  const ingest::TFRecordOptions options{
      .compression = ingest::fuzzing::compression_of(control),
      .buffer_size = (control & 0x10) ? std::size_t{64} : std::size_t{4096},
      // 0x80: no limit, so lengths near 2^64 reach the bounds checks (issue 10 item 2)
      .max_record_bytes = (control & 0x80) ? UINT64_MAX : std::uint64_t{16} << 20,
      .verify_crc = (control & 0x20) == 0,
  };
  try {
    ingest::TFRecordReader reader(path, options);
    std::size_t total = 0;
    for (int i = 0; i < 100000; ++i) {
      if (control & 0x40) {
        auto view = reader.read_view();
        if (!view) break;
        for (char c : *view) total += static_cast<unsigned char>(c);
      } else {
        auto record = reader.read();
        if (!record) break;
        total += record->size();
      }
    }
    if (total == 0xdeadbeef) std::puts("");  // keep the reads
  } catch (const ingest::Error&) {
  }
  return 0;
}
