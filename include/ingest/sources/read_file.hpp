// read_file(path): a whole file's bytes as a std::string, for use in a map
// (`paths.map(ingest::read_file)`, or on image_folder's paths before
// ingest::image::decode_image). tf counterpart: tf.io.read_file. Reads through
// storage/file.hpp's FileReader (one read loop in the library). A file larger
// than `.max_bytes` (default read_file_max_bytes, 2 GiB: a tf.string tensor's
// limit) is refused before anything is allocated. Thread-safe: each call
// opens its own descriptor.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ingest/core/errors.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

/// read_file's default bound on a file's size.
inline constexpr std::uint64_t read_file_max_bytes = std::uint64_t{2} << 30;

/// Options of read_file.
struct ReadFileOptions {
  /// A larger file raises IoError (EFBIG) without being read.
  std::uint64_t max_bytes = read_file_max_bytes;
};

namespace detail {
struct ReadFileFn {
  /// The bytes of the file at `path`. Throws IoError naming the path when it
  /// cannot be opened or read, is a directory, or is larger than
  /// options.max_bytes. A regular file is read up to its size when opened;
  /// other files (pipes, /proc) are read to their end, within the bound.
  std::string operator()(const std::string& path, ReadFileOptions options = {}) const {
    FileReader file(path, "read_file");
    std::string out;
    if (file.has_size() && file.size() > 0) {
      check_size(path, file.size(), options);
      out.resize(static_cast<std::size_t>(file.size()));
      out.resize(file.read(out.data(), out.size()));  // shorter if it shrank meanwhile
      return out;
    }
    constexpr std::size_t block = 64 * 1024;  // size unknown: grow block by block
    for (;;) {
      const std::size_t have = out.size();
      out.resize(have + block);
      const std::size_t got = file.read(out.data() + have, block);
      out.resize(have + got);
      check_size(path, out.size(), options);
      if (got < block) return out;
    }
  }

 private:
  static void check_size(const std::string& path, std::uint64_t size,
                         const ReadFileOptions& options) {
    if (size > options.max_bytes) {
      throw io_error("read_file", path,
                     "file of " + std::to_string(size) + " bytes or more exceeds max_bytes " +
                         std::to_string(options.max_bytes),
                     EFBIG);
    }
  }
};
}  // namespace detail

/// The bytes of a file (tf: tf.io.read_file); a function object, so
/// `ds.map(ingest::read_file)` works. See detail::ReadFileFn for errors.
inline constexpr detail::ReadFileFn read_file{};

}  // namespace ingest
