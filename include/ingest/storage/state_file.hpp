// write_state(path, state) / read_state(path): an iterator's checkpoint in a
// file (or at a URL), written atomically: a temporary file, fsync, rename
// (AtomicFileWriter), so a crash leaves the previous state or the new one,
// never a torn one. tf.data counterpart: tf.train.Checkpoint of an iterator.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ingest/core/errors.hpp"
#include "ingest/core/state.hpp"
#include "ingest/storage/file.hpp"

namespace ingest {

/// Writes `state` to `path` atomically, a local file with permissions
/// `file_mode` (masked by the umask; only the owner reads a checkpoint
/// unless told otherwise). Throws IoError naming the path.
inline void write_state(const std::string& path, const IteratorState& state,
                        unsigned file_mode = detail::AtomicFileWriter::private_mode) {
  detail::AtomicFileWriter out(path, "checkpoint", file_mode);
  const std::span<const std::byte> bytes = state.bytes();
  out.write(bytes.data(), bytes.size());
  out.commit();
}

/// Reads and validates the state write_state stored at `path`. Throws
/// IoError (cannot read) or DataLossError (corrupt, truncated), naming the path.
inline IteratorState read_state(const std::string& path) {
  detail::FileReader in(path, "checkpoint");
  std::vector<std::byte> bytes;
  std::byte chunk[64 * 1024];
  for (;;) {
    const std::size_t got = in.read(chunk, sizeof chunk);
    bytes.insert(bytes.end(), chunk, chunk + got);
    if (got < sizeof chunk) break;
  }
  try {
    return IteratorState::from_bytes(bytes);
  } catch (Error& e) {
    e.add_context({.stage = "checkpoint", .file = path});
    throw;
  }
}

}  // namespace ingest
