// What every page's C++ fragments see (tests/docs/snippets.py): the whole
// public library, optional parts where their dependencies are installed, and
// two placeholders the pages use for "your training step" and "your files".
#pragma once

#include <ingest/distributed/restore.hpp>
#include <ingest/distributed/world.hpp>
#include <ingest/ingest.hpp>
#include <ingest/loader.hpp>

#if __has_include(<jpeglib.h>) && __has_include(<spng.h>)
#include <ingest/image/image.hpp>
#endif
#if __has_include(<openssl/ssl.h>)
#include <ingest/storage/remote.hpp>
#endif
#if __has_include(<cuda_runtime.h>) && __has_include(<dlpack/dlpack.h>)
#include <ingest/cuda/device_loader.hpp>
#include <ingest/cuda/local_device.hpp>
#endif
#if defined(INGEST_DOCS_TORCH) && __has_include(<ingest/torch/tensor.hpp>)
#include <ingest/torch/tensor.hpp>
#endif

#include <string>
#include <vector>

/// Stands for the user's training step.
template <class... T>
void train_step(const T&...) {}

/// Stands for the user's TFRecord files.
inline std::vector<std::string> files = {"train-00000-of-00002.tfrecord",
                                         "train-00001-of-00002.tfrecord"};
