// tfrecord(paths, {.compression, .buffer_size, ...}): the payloads of the
// records of TFRecord files, file after file, as std::string (one allocation
// per record, read through a large reused window). tf.data counterpart:
// TFRecordDataset. A corrupt or truncated record raises DataLossError with
// the file and offset; the iterator then moves on to the next file. Each
// iterator opens its own files; iterators of one dataset are independent.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ingest/core/dataset.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/formats/file_sequence.hpp"
#include "ingest/formats/tfrecord_format.hpp"

namespace ingest {

class TFRecordDataset : public DatasetBase<TFRecordDataset, std::string> {
 public:
  TFRecordDataset(FileList paths, TFRecordOptions options)
      : paths_(std::move(paths)), options_(options) {
    if (options.buffer_size == 0) {
      throw InvalidArgument("tfrecord: buffer_size must be > 0", {.stage = "tfrecord"});
    }
  }

  auto make_iterator(const IteratorContext&) const {
    return detail::FileSequenceIterator<TFRecordReader, TFRecordOptions>(paths_, options_,
                                                                         "tfrecord");
  }

  const FileList& paths() const noexcept { return paths_; }
  const TFRecordOptions& options() const noexcept { return options_; }

 private:
  FileList paths_;
  TFRecordOptions options_;
};

/// The records of the TFRecord files `paths` (one path, or a list), in order
/// (tf: TFRecordDataset). Throws InvalidArgument if buffer_size is 0.
inline TFRecordDataset tfrecord(FileList paths, TFRecordOptions options = {}) {
  return {std::move(paths), options};
}

}  // namespace ingest
