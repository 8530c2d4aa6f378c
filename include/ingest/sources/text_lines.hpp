// text_lines(paths): the lines of text files, file after file, as
// std::string. As tf.data's TextLineDataset (whose BufferedInputStream drops
// every '\r' it reads): lines end at "\n" only, and every "\r" is removed
// from the line, so "\r\n" ends a line and a bare "\r" is not a line break.
// A last line without a newline still counts, unless it is empty once its
// "\r"s are gone; a file ending in "\n" yields no extra empty line. Files may
// be gzip or zlib compressed. Each iterator opens its own files.
#pragma once

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/formats/compression.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/sources/file_dataset.hpp"

namespace ingest {

/// Options of text_lines.
struct TextLineOptions {
  /// How the files are compressed.
  Compression compression = Compression::none;
  /// Read window in bytes.
  std::size_t buffer_size = default_buffer_size;

  /// What checkpoints depend on: the compression (offsets are in its data).
  void fingerprint(Fingerprint& fp) const { fp.add(static_cast<int>(compression)); }
};

namespace detail {

/// The lines of one file.
class TextLineReader {
 public:
  TextLineReader(const std::string& path, const TextLineOptions& options)
      : stream_(path, options.compression, options.buffer_size, "text_lines") {}

  /// Offset of the next line in the (decompressed) stream.
  std::uint64_t offset() const noexcept { return stream_.offset(); }
  /// Continues at `offset`, a line's start that offset() returned.
  void seek(std::uint64_t offset) { stream_.seek(offset); }

  std::optional<std::string> read() {
    std::size_t scanned = 0;
    for (;;) {
      const char* p = stream_.data();
      const std::size_t avail = stream_.available();
      if (const void* nl = std::memchr(p + scanned, '\n', avail - scanned)) {
        const auto len = static_cast<std::size_t>(static_cast<const char*>(nl) - p);
        std::string line = take(p, len);
        stream_.consume(len + 1);
        return line;
      }
      scanned = avail;
      if (!stream_.fill(avail + 1)) {
        if (avail == 0) return std::nullopt;
        std::string line = take(stream_.data(), avail);
        stream_.consume(avail);
        if (line.empty()) return std::nullopt;  // only "\r"s after the last "\n" (tf)
        return line;
      }
    }
  }

 private:
  static std::string take(const char* p, std::size_t len) {
    std::string line(p, len);
    if (std::memchr(p, '\r', len)) std::erase(line, '\r');
    return line;
  }

  InputStream stream_;
};

}  // namespace detail

namespace detail {
inline constexpr char text_lines_stage[] = "text_lines";
}

/// The dataset of `text_lines(paths, options)`: the lines of text files as std::string.
using TextLineDataset =
    FileDataset<detail::TextLineReader, TextLineOptions, detail::text_lines_stage>;

/// The lines of the text files `paths` (one path, or a list), in order (tf: TextLineDataset).
inline TextLineDataset text_lines(FileList paths, TextLineOptions options = {}) {
  detail::check_buffer_size(options.buffer_size, detail::text_lines_stage);
  return {std::move(paths), options};
}

}  // namespace ingest
