// libFuzzer target: the text_lines reader over arbitrary bytes, plain, GZIP
// or ZLIB (chosen by the first byte, which also picks the buffer size). Any
// input must end in lines or an ingest::Error: never a crash, a hang, a read
// out of bounds or an allocation beyond the data. Every line must be free of
// '\n' and '\r' (TextLineDataset's rules).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <ingest/sources/text_lines.hpp>

#include "fuzz_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string path = ingest::fuzzing::write_scratch("text-lines", data, size);
  if (path.empty()) return 0;
  const std::uint8_t control = data[0];
  const ingest::TextLineOptions options{
      .compression = ingest::fuzzing::compression_of(control),
      .buffer_size = (control & 0x10) ? std::size_t{64} : std::size_t{4096},
  };
  std::size_t bytes = 0;
  try {
    auto it = ingest::text_lines(path, options).iterator();
    for (int i = 0; i < 1000000; ++i) {
      auto line = it.next();
      if (!line) break;
      if (line->find_first_of("\r\n") != std::string::npos) std::abort();
      bytes += line->size();
    }
  } catch (const ingest::Error&) {
  }
  // Plain input: the lines hold every byte but the line breaks.
  if (options.compression == ingest::Compression::none && bytes > size) std::abort();
  return 0;
}
