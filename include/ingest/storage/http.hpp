// The http:// and https:// storage scheme in one include: URLs
// (storage/url.hpp), the HTTP(S) client with keep-alive pools, timeouts and
// retries (storage/http_client.hpp), and the ranged, read-ahead object reader
// with the scheme that opens it (storage/http_file.hpp). Part of the remote
// storage part (CMake target ingest::remote: Boost.Beast and OpenSSL).
// tf.data counterpart: TensorFlow's HTTP file system and its
// RetryingFileSystem; AWS counterpart: the SDK's HTTP client.
#pragma once

#include "ingest/storage/http_client.hpp"
#include "ingest/storage/http_file.hpp"
#include "ingest/storage/url.hpp"
