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
#include "ingest/formats/tfrecord_format.hpp"
#include "ingest/runtime/pipeline.hpp"
#include "ingest/sources/file_dataset.hpp"

namespace ingest {

namespace detail {
inline constexpr char tfrecord_stage[] = "tfrecord";
}

/// The dataset of `tfrecord(paths, options)`: the records of TFRecord files as std::string.
using TFRecordDataset = FileDataset<TFRecordReader, TFRecordOptions, detail::tfrecord_stage>;

/// The records of the TFRecord files `paths` (one path, or a list), in order
/// (tf: TFRecordDataset). Throws InvalidArgument if buffer_size is 0.
inline TFRecordDataset tfrecord(FileList paths, TFRecordOptions options = {}) {
  detail::check_buffer_size(options.buffer_size, detail::tfrecord_stage);
  return {std::move(paths), options};
}

}  // namespace ingest
