// What the file-reading fuzz targets share: the fuzzer's bytes after the
// first (the control byte, which picks the options) are written to a scratch
// file per process, in /dev/shm when it is writable, and read back by the
// reader under test; the control byte's low bits pick the compression.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <ingest/formats/compression.hpp>

namespace ingest::fuzzing {

/// Writes data[1, size) to this process's scratch file for `target` and
/// returns its path; empty if it cannot be written (the input is skipped).
inline std::string write_scratch(const char* target, const std::uint8_t* data, std::size_t size) {
  static const std::string path =
      std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/ingest-fuzz-" +
      target + "-" + std::to_string(::getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return {};
  std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);
  return path;
}

/// Plain, GZIP or ZLIB, from the control byte.
inline Compression compression_of(std::uint8_t control) {
  constexpr Compression compressions[] = {Compression::none, Compression::gzip, Compression::zlib};
  return compressions[control % 3];
}

}  // namespace ingest::fuzzing
