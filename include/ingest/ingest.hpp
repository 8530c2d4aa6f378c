// ingest: a header-only C++20 input-pipeline library in the style of tf.data.
// This umbrella header brings in the core, every source and every stage. The
// optional parts (ingest/cuda/..., ingest/image/..., ingest/proto/...) and
// those that need DLPack's header (ingest/core/dlpack.hpp, ingest/loader.hpp)
// are never included from here; include them explicitly.
#pragma once

#include "ingest/core/allocator.hpp"
#include "ingest/core/batch_traits.hpp"
#include "ingest/core/context.hpp"
#include "ingest/core/crc32c.hpp"
#include "ingest/core/dataset.hpp"
#include "ingest/core/deal.hpp"
#include "ingest/core/dtype.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/iterator.hpp"
#include "ingest/core/logging.hpp"
#include "ingest/core/options.hpp"
#include "ingest/core/padding.hpp"
#include "ingest/core/random.hpp"
#include "ingest/core/serializer.hpp"
#include "ingest/core/shape.hpp"
#include "ingest/core/state.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/core/world.hpp"
#include "ingest/distributed/restore.hpp"
#include "ingest/distributed/world.hpp"
#include "ingest/formats/compression.hpp"
#include "ingest/formats/crc32c.hpp"
#include "ingest/formats/example.hpp"
#include "ingest/formats/example_builder.hpp"
#include "ingest/formats/tfrecord_format.hpp"
#include "ingest/formats/tfrecord_writer.hpp"
#include "ingest/runtime/runtime.hpp"
#include "ingest/sources/csv.hpp"
#include "ingest/sources/csv_rows.hpp"
#include "ingest/sources/fixed_length_records.hpp"
#include "ingest/sources/from_generator.hpp"
#include "ingest/sources/from_vector.hpp"
#include "ingest/sources/image_folder.hpp"
#include "ingest/sources/indexed_tfrecord.hpp"
#include "ingest/sources/list_files.hpp"
#include "ingest/sources/positional.hpp"
#include "ingest/sources/range.hpp"
#include "ingest/sources/read_file.hpp"
#include "ingest/sources/text_lines.hpp"
#include "ingest/sources/tfrecord.hpp"
#include "ingest/sources/tfrecord_index_file.hpp"
#include "ingest/stages/any_dataset.hpp"
#include "ingest/stages/batch.hpp"
#include "ingest/stages/bucket_by_sequence_length.hpp"
#include "ingest/stages/cache.hpp"
#include "ingest/stages/choose_from_datasets.hpp"
#include "ingest/stages/concatenate.hpp"
#include "ingest/stages/enumerate.hpp"
#include "ingest/stages/filter.hpp"
#include "ingest/stages/flat_map.hpp"
#include "ingest/stages/group_by_window.hpp"
#include "ingest/stages/ignore_errors.hpp"
#include "ingest/stages/interleave.hpp"
#include "ingest/stages/map.hpp"
#include "ingest/stages/map_and_batch.hpp"
#include "ingest/stages/padded_batch.hpp"
#include "ingest/stages/parallel_map.hpp"
#include "ingest/stages/prefetch.hpp"
#include "ingest/stages/random_map.hpp"
#include "ingest/stages/rebatch.hpp"
#include "ingest/stages/rejection_resample.hpp"
#include "ingest/stages/repeat.hpp"
#include "ingest/stages/sample_from_datasets.hpp"
#include "ingest/stages/scan.hpp"
#include "ingest/stages/shard.hpp"
#include "ingest/stages/shuffle.hpp"
#include "ingest/stages/skip.hpp"
#include "ingest/stages/take.hpp"
#include "ingest/stages/take_while.hpp"
#include "ingest/stages/unbatch.hpp"
#include "ingest/stages/unique.hpp"
#include "ingest/stages/window.hpp"
#include "ingest/stages/with_options.hpp"
#include "ingest/stages/zip.hpp"
#include "ingest/storage/state_file.hpp"

/// @namespace ingest
/// ingest's public API: the datasets (sources such as range, tfrecord and
/// list_files, and the stages their methods add), Tensor and its dtypes, the
/// runtime, the iterators and their checkpoints. Internals are in
/// ingest::detail and may change without notice.

/// The library version.
#define INGEST_VERSION_MAJOR 0
#define INGEST_VERSION_MINOR 1
#define INGEST_VERSION_PATCH 0
