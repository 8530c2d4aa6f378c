// `ingest index FILES...`: builds each TFRecord file's sidecar index
// (FILE.idx, sources/tfrecord_index_file.hpp) with build_tfrecord_index,
// reading the files on up to --jobs threads, one file per thread at a time.
// Each index is written atomically; a file that fails leaves no index.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <ingest/core/errors.hpp>
#include <ingest/sources/indexed_tfrecord.hpp>
#include <ingest/sources/tfrecord_index_file.hpp>

#include "cli.hpp"

namespace ingest::cli {
namespace {

constexpr std::string_view help = R"(usage: ingest index [options] FILE...

Builds the sidecar index of each TFRecord file: FILE.idx, one line
"OFFSET SIZE" per record (DALI's tfrecord2idx format), which
ingest::read_tfrecord_index loads for ingest::indexed_tfrecord (random
access, global shuffle) without reading the data again. Every record's CRCs
are checked while indexing. Files are indexed in parallel; each index is
written atomically (temporary file, fsync, rename).

options:
  --jobs N   files indexed at once (default: the machine's cores)
  --json     print one JSON document on stdout instead of text
  --quiet    no progress on stderr

exit codes: 0 every file indexed, 1 a corrupt or truncated record was
found (that file gets no index), 2 usage error, 3 a file cannot be read or
written, or is compressed (GZIP and ZLIB files have no random access).
)";

struct Result {
  std::string path, index_path;
  std::uint64_t records = 0, file_bytes = 0;
  int code = exit_ok;
  std::string error;
  std::optional<std::uint64_t> offset;
};

Result index_file(const std::string& path) {
  Result r;
  r.path = path;
  r.index_path = tfrecord_index_path(path);
  try {
    if (const Compression c = detect_compression(path); c != Compression::none) {
      r.code = exit_io;
      r.error = "the file is " + std::string(compression_name(c)) +
                "-compressed: compressed files cannot be read by position; decompress it first";
      return r;
    }
    const TFRecordIndex index = build_tfrecord_index(FileList{path});
    write_tfrecord_index_file(index, 0, r.index_path);
    r.records = index.size();
    r.file_bytes = index.file_size(0);
  } catch (const DataLossError& e) {
    r.code = exit_bad_data;
    r.error = e.message();
    r.offset = e.context().offset;
  } catch (const Error& e) {
    r.code = exit_io;
    r.error = e.message();
  }
  return r;
}

int run(std::span<const std::string> argv) {
  const Args args(argv, {"--json", "--quiet"}, {"--jobs"});
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t jobs = args.number("--jobs", cores, 1, 1024);
  const auto& files = args.positional();
  if (files.empty()) throw UsageError("no FILE given");

  std::vector<Result> results(files.size());
  {
    Progress progress("index", files.size(), "files", !args.flag("--quiet"));
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < files.size();) {
        results[i] = index_file(files[i]);
        progress.add(1);
      }
    };
    std::vector<std::thread> threads;
    const std::size_t n = std::min<std::size_t>(jobs, files.size());
    for (std::size_t t = 1; t < n; ++t) threads.emplace_back(worker);
    worker();
    for (std::thread& t : threads) t.join();
  }

  int code = exit_ok;
  for (const Result& r : results) {
    if (r.code == exit_io) code = exit_io;
    if (r.code == exit_bad_data && code == exit_ok) code = exit_bad_data;
  }
  if (args.flag("--json")) {
    JsonWriter j;
    j.begin_object().key("files").begin_array();
    for (const Result& r : results) {
      j.begin_object().member("path", r.path);
      if (r.code == exit_ok) {
        j.member("index", r.index_path)
            .member("records", r.records)
            .member("file_bytes", r.file_bytes);
      } else {
        j.key("error").begin_object().member("message", r.error).key("offset");
        if (r.offset) {
          j.value(*r.offset);
        } else {
          j.null();
        }
        j.end_object();
      }
      j.end_object();
    }
    j.end_array().member("exit_code", code).end_object();
    std::fputs(j.str().c_str(), stdout);
  } else {
    for (const Result& r : results) {
      if (r.code == exit_ok) {
        std::printf("%s: %llu records, index %s\n", r.path.c_str(),
                    static_cast<unsigned long long>(r.records), r.index_path.c_str());
      }
    }
  }
  for (const Result& r : results) {
    if (r.code != exit_ok) {
      std::fprintf(stderr, "ingest index: %s: %s\n", r.path.c_str(), r.error.c_str());
    }
  }
  return code;
}

}  // namespace

const Command index_command{"index", "build the sidecar indexes (FILE.idx) of TFRecord files", help,
                            run};

}  // namespace ingest::cli
