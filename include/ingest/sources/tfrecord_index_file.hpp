// Sidecar index files of TFRecord files: `FILE.idx` beside each file, one
// text line "OFFSET SIZE" per record (where its length field starts, and its
// framed size: 12 header bytes, the payload and 4 CRC bytes), the format of
// DALI's tfrecord2idx, so DALI's TFRecord reader takes the same files.
// `ingest index FILES...` (tools/ingest) writes them with
// write_tfrecord_index_file; read_tfrecord_index(paths) loads them for
// indexed_tfrecord without reading the data files. tf.data has no
// counterpart (TFRecordDataset reads in order only). Functions, no state.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/formats/tfrecord_format.hpp"
#include "ingest/sources/file_dataset.hpp"
#include "ingest/sources/indexed_tfrecord.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

/// Where the sidecar index of the TFRecord file `path` lives: `path` + ".idx".
inline std::string tfrecord_index_path(const std::string& path) { return path + ".idx"; }

/// Writes the sidecar index of file `f` of `index` to `index_path`
/// (tfrecord_index_path of the file by default) atomically: a temporary
/// file, fsync, rename. Throws IoError naming the index file.
inline void write_tfrecord_index_file(const TFRecordIndex& index, std::size_t f,
                                      std::string index_path = {}) {
  if (index_path.empty()) index_path = tfrecord_index_path(index.file(f));
  detail::AtomicFileWriter out(index_path, "indexed_tfrecord",
                               detail::AtomicFileWriter::shared_mode);
  std::string text;
  for (std::uint64_t i = index.first_record(f); i < index.first_record(f + 1); ++i) {
    const TFRecordIndex::Location at = index.locate(i);
    const std::uint64_t framed =
        at.length + detail::tfrecord_header_bytes + detail::tfrecord_footer_bytes;
    text += std::to_string(at.offset);
    text += ' ';
    text += std::to_string(framed);
    text += '\n';
    if (text.size() >= (std::size_t{1} << 16)) {
      out.write(text.data(), text.size());
      text.clear();
    }
  }
  out.write(text.data(), text.size());
  out.commit();
}

namespace detail {

// The records of one sidecar index: each record's start, checked to follow
// one another from offset 0; `size` becomes the file's indexed size.
inline std::vector<std::uint64_t> parse_tfrecord_index_file(const std::string& index_path,
                                                            std::string_view text,
                                                            std::uint64_t& size) {
  std::vector<std::uint64_t> offsets;
  std::uint64_t next = 0;
  std::int64_t line = 0;
  auto bad = [&](const std::string& why) {
    return DataLossError("bad TFRecord index: " + why + " (rebuild it with `ingest index`)",
                         {.stage = "indexed_tfrecord", .file = index_path, .line = line});
  };
  while (!text.empty()) {
    ++line;
    const std::size_t eol = text.find('\n');
    std::string_view row = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.empty()) continue;
    std::uint64_t offset = 0, framed = 0;
    const char* end = row.data() + row.size();
    auto [p, ec] = std::from_chars(row.data(), end, offset);
    if (ec != std::errc() || p == end || *p != ' ') throw bad("expected 'OFFSET SIZE'");
    auto [q, ec2] = std::from_chars(p + 1, end, framed);
    if (ec2 != std::errc() || q != end) throw bad("expected 'OFFSET SIZE'");
    if (offset != next) {
      throw bad("record at " + std::to_string(offset) + " where the previous one ends at " +
                std::to_string(next));
    }
    if (framed < tfrecord_header_bytes + tfrecord_footer_bytes || framed > UINT64_MAX - offset) {
      throw bad("record size " + std::to_string(framed) + " is impossible");
    }
    offsets.push_back(offset);
    next = offset + framed;
  }
  size = next;
  return offsets;
}

}  // namespace detail

/// Loads the sidecar indexes of the TFRecord files `paths` (each file's
/// tfrecord_index_path; local files or URLs) without reading the data
/// files: `indexed_tfrecord(read_tfrecord_index(paths))`. The records must
/// follow one another from offset 0; a data file whose size differs from
/// its index's end raises DataLossError when indexed_tfrecord reads it.
/// Throws IoError when an index cannot be read (missing: build it with
/// `ingest index` or build_tfrecord_index) and DataLossError naming the
/// index file and line for one that is malformed.
inline TFRecordIndex read_tfrecord_index(const FileList& paths) {
  TFRecordIndex index;
  for (const std::string& path : paths.paths()) {
    const std::string index_path = tfrecord_index_path(path);
    detail::FileReader in(index_path, "indexed_tfrecord");
    std::string text;
    char chunk[64 * 1024];
    for (;;) {
      const std::size_t got = in.read(chunk, sizeof chunk);
      text.append(chunk, got);
      if (got < sizeof chunk) break;
    }
    std::uint64_t size = 0;
    const std::vector<std::uint64_t> offsets =
        detail::parse_tfrecord_index_file(index_path, text, size);
    index.add_file(path, size, offsets);
  }
  return index;
}

}  // namespace ingest
