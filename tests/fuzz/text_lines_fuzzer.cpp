// libFuzzer target: the text_lines reader over arbitrary bytes, plain, GZIP
// or ZLIB (chosen by the first byte, which also picks the buffer size). Any
// input must end in lines or an ingest::Error: never a crash, a hang, a read
// out of bounds or an allocation beyond the data. Every line must be free of
// '\n' and '\r' (TextLineDataset's rules).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <ingest/sources/text_lines.hpp>

namespace {
std::string scratch_path() {
  const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/ingest-fuzz-text-lines-" + std::to_string(::getpid());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const std::string path = scratch_path();
  const std::uint8_t control = data[0];
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);
  } else {
    return 0;
  }
  const ingest::Compression compressions[] = {ingest::Compression::none, ingest::Compression::gzip,
                                              ingest::Compression::zlib};
  const ingest::TextLineOptions options{
      .compression = compressions[control % 3],
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
