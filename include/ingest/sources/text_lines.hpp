// text_lines(paths): the lines of text files, file after file, as
// std::string without the "\n" (or "\r\n"); a last line without a newline
// still counts, and a file ending in "\n" yields no extra empty line. tf.data
// counterpart: TextLineDataset. Files may be gzip or zlib compressed. Each
// iterator opens its own files.
#pragma once

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/formats/compression.hpp"
#include "ingest/formats/file_sequence.hpp"

namespace ingest {

/// Options of text_lines.
struct TextLineOptions {
  Compression compression = Compression::none;
  std::size_t buffer_size = default_buffer_size;
};

namespace detail {

/// The lines of one file.
class TextLineReader {
 public:
  TextLineReader(const std::string& path, const TextLineOptions& options)
      : stream_(path, options.compression, options.buffer_size, "text_lines") {}

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
        return line;
      }
    }
  }

 private:
  static std::string take(const char* p, std::size_t len) {
    if (len && p[len - 1] == '\r') --len;
    return std::string(p, len);
  }

  InputStream stream_;
};

}  // namespace detail

namespace detail {
inline constexpr char text_lines_stage[] = "text_lines";
}

using TextLineDataset =
    FileDataset<detail::TextLineReader, TextLineOptions, detail::text_lines_stage>;

/// The lines of the text files `paths` (one path, or a list), in order (tf: TextLineDataset).
inline TextLineDataset text_lines(FileList paths, TextLineOptions options = {}) {
  detail::check_buffer_size(options.buffer_size, detail::text_lines_stage);
  return {std::move(paths), options};
}

}  // namespace ingest
