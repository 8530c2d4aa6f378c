// `ingest write-tfrecords`: an image folder or a CSV file as tf.Example
// shards PREFIX-00000-of-0000N, written with TFRecordWriter (a temporary
// name, fsync, rename). Every shard stays under its temporary name until
// all are complete, so a failure leaves none of them. Image shards are
// written on up to --jobs threads (one shard per thread at a time); a CSV
// file is read twice on one thread (once to type its columns).
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/core/errors.hpp>
#include <ingest/core/random.hpp>
#include <ingest/formats/csv.hpp>
#include <ingest/formats/example_builder.hpp>
#include <ingest/formats/tfrecord_writer.hpp>
#include <ingest/sources/csv.hpp>
#include <ingest/sources/image_folder.hpp>
#include <ingest/sources/read_file.hpp>

#include "cli.hpp"

namespace ingest::cli {
namespace {

constexpr std::string_view help =
    R"(usage: ingest write-tfrecords --from image-folder DIR --out PREFIX [options]
       ingest write-tfrecords --from csv FILE --out PREFIX [options]

Writes tf.Example records into N shards PREFIX-00000-of-0000N ... as
TensorFlow's own conversion scripts name them. Each shard is written under a
temporary name, synced and renamed into place only when every shard is
complete.

--from image-folder DIR: DIR holds one directory per class. Classes are the
sorted directory names, labelled 0, 1, ... (plus --label-offset); the images
are found as image_folder finds them (recursively, by extension) and shuffled
(--seed) before being dealt to the shards in contiguous runs. Each Example
holds, as build_imagenet_data.py writes them:
  image/encoded      bytes   the file's bytes, as they are
  image/class/label  int64   the class's index + --label-offset
  image/class/text   bytes   the class directory's name
  image/filename     bytes   the file's name (without its directory)
  image/format       bytes   the extension in capitals, JPEG for .jpg/.jpeg

--from csv FILE: the first record is the header; each later record becomes
one Example with a feature per column, named by the header. A column whose
non-empty cells are all whole numbers is int64; else, if all are numbers,
float; else bytes (the text as it is). An empty cell is a feature with no
value. Records keep their order and are dealt to the shards in contiguous
runs. A GZIP-compressed FILE is read as such.

options:
  --from KIND          image-folder or csv (required)
  --out PREFIX         output path prefix (required); its directory is created
  --shards N           number of shards (default 1)
  --gzip               GZIP-compress the shards (TFRecordOptions "GZIP")
  --zlib               ZLIB-compress the shards
  --seed N             image-folder: the shuffle's seed (default 12345)
  --no-shuffle         image-folder: keep image_folder's order
  --label-offset N     image-folder: added to each label (default 0; TensorFlow's
                       build_imagenet_data.py starts at 1)
  --extensions LIST    image-folder: comma-separated endings to keep
                       (default: .jpg,.jpeg,.png,.ppm,.bmp,.pgm,.tif,.tiff,.webp)
  --delimiter C        csv: the field separator (default ,)
  --jobs N             image-folder: shards written at once (default: cores)
  --json               print one JSON document on stdout instead of text
  --quiet              no progress on stderr

exit codes: 0 written, 1 a malformed CSV record (file and line named), 2 usage
error, 3 an input cannot be read (or holds no class/image), or an output
cannot be written.
)";

std::string shard_path(const std::string& prefix, std::size_t i, std::size_t n) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "-%05zu-of-%05zu", i, n);
  return prefix + buf;
}

struct ShardResult {
  std::string path;
  std::uint64_t records = 0, bytes = 0;
};

struct Output {
  std::string prefix;
  std::size_t shards = 1;
  Compression compression = Compression::none;
};

// Opens the N shard writers; the caller closes them all at the end.
std::vector<std::unique_ptr<TFRecordWriter>> open_shards(const Output& out) {
  const std::filesystem::path parent = std::filesystem::path(out.prefix).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      throw IoError("cannot create directory: " + ec.message(),
                    {.stage = "write-tfrecords", .file = parent.string()});
    }
  }
  std::vector<std::unique_ptr<TFRecordWriter>> writers;
  for (std::size_t i = 0; i < out.shards; ++i) {
    writers.push_back(
        std::make_unique<TFRecordWriter>(shard_path(out.prefix, i, out.shards),
                                         TFRecordWriterOptions{.compression = out.compression}));
  }
  return writers;
}

// Closes (renames into place) every shard, in order, and reports them.
std::vector<ShardResult> close_shards(std::vector<std::unique_ptr<TFRecordWriter>>& writers) {
  std::vector<ShardResult> results;
  for (auto& w : writers) {
    w->close();
    struct stat st {};
    const std::uint64_t bytes =
        ::stat(w->path().c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    results.push_back({w->path(), w->records_written(), bytes});
  }
  return results;
}

// Rows [begin, end) of n dealt to shard i of `shards` in contiguous runs.
std::pair<std::size_t, std::size_t> shard_range(std::size_t n, std::size_t i, std::size_t shards) {
  return {n * i / shards, n * (i + 1) / shards};
}

std::string image_format(const std::string& name) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return "";
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return ext == "JPG" ? "JPEG" : ext;
}

struct Written {
  std::vector<ShardResult> shards;
  std::vector<std::string> classes;                          // image-folder
  std::vector<std::pair<std::string, std::string>> columns;  // csv: name, type
};

Written write_image_folder(const std::string& dir, const Output& out, const Args& args) {
  ImageFolderOptions options;
  if (auto list = args.value("--extensions")) {
    options.extensions.clear();
    std::size_t start = 0;
    while (start <= list->size()) {
      const std::size_t comma = std::min(list->find(',', start), list->size());
      if (comma > start) options.extensions.push_back(list->substr(start, comma - start));
      start = comma + 1;
    }
    if (options.extensions.empty()) throw UsageError("option --extensions: no extension given");
  }
  const std::uint64_t seed = args.number("--seed", 12345);
  const auto offset = static_cast<std::int64_t>(args.number("--label-offset", 0, 0, 1u << 30));
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t jobs = args.number("--jobs", cores, 1, 1024);

  const ImageFolderDataset folder = image_folder(dir, options);
  std::vector<std::pair<std::string, std::int64_t>> samples;
  for (auto&& s : folder) samples.push_back(std::move(s));
  if (!args.flag("--no-shuffle")) {
    Rng rng(seed);
    for (std::size_t i = samples.size(); i > 1; --i) {
      std::swap(samples[i - 1], samples[static_cast<std::size_t>(rng.uniform(i))]);
    }
  }
  const std::vector<std::string>& classes = folder.class_names();

  auto writers = open_shards(out);
  Progress progress("write-tfrecords", samples.size(), "images", !args.flag("--quiet"));
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    std::string record;
    for (std::size_t s; !failed && (s = next.fetch_add(1)) < out.shards;) {
      try {
        const auto [begin, end] = shard_range(samples.size(), s, out.shards);
        for (std::size_t i = begin; i < end && !failed; ++i) {
          const auto& [path, label] = samples[i];
          const std::string bytes = read_file(path);
          const std::string name = std::filesystem::path(path).filename().string();
          ExampleBuilder b;
          b.add_bytes("image/encoded", {std::string_view(bytes)})
              .add_int64s("image/class/label", {label + offset})
              .add_bytes("image/class/text",
                         {std::string_view(classes[static_cast<std::size_t>(label)])})
              .add_bytes("image/filename", {std::string_view(name)})
              .add_bytes("image/format", {std::string_view(image_format(name))});
          b.serialize_to(record);
          writers[s]->write(record);
          progress.add(1);
        }
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  const std::size_t n = std::min<std::size_t>(jobs, out.shards);
  for (std::size_t t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);  // the writers' temporaries go with them
  progress.finish();
  return {close_shards(writers), classes, {}};
}

// A CSV column's type: int64 while every non-empty cell is a whole number,
// float while every one is a number, else bytes.
struct ColumnType {
  bool any = false, all_int = true, all_float = true;
  void add(std::string_view cell) {
    if (cell.empty()) return;
    any = true;
    std::int64_t i;
    float f;
    if (all_int && !detail::parse_csv_number(cell, i)) all_int = false;
    if (all_float && !all_int && !detail::parse_csv_number(cell, f)) all_float = false;
  }
  std::string name() const {
    if (!any) return "bytes";
    return all_int ? "int64" : all_float ? "float" : "bytes";
  }
};

Compression csv_compression(const std::string& path) {
  detail::FileReader file(path, "csv");
  unsigned char head[2] = {0, 0};
  const std::size_t got = file.read(head, 2);
  return got == 2 && head[0] == 0x1f && head[1] == 0x8b ? Compression::gzip : Compression::none;
}

Written write_csv(const std::string& path, const Output& out, const Args& args) {
  const auto delimiter = args.value("--delimiter").value_or(",");
  if (delimiter.size() != 1) throw UsageError("option --delimiter: give one character");
  const detail::CsvDialect dialect{.delimiter = delimiter[0]};
  const Compression compression = csv_compression(path);
  auto bad_record = [&](const detail::CsvRecordReader& reader, std::size_t fields,
                        std::size_t want) {
    return DataLossError(
        "record has " + std::to_string(fields) + " fields; the header has " + std::to_string(want),
        {.stage = "csv", .file = path, .line = reader.record_line()});
  };

  std::vector<std::string> names;
  std::vector<ColumnType> types;
  std::size_t rows = 0;
  try {
    detail::CsvRecordReader reader(path, compression, default_buffer_size, dialect);
    if (!reader.next()) {
      throw IoError("the file is empty: no header", {.stage = "csv", .file = path});
    }
    for (std::size_t i = 0; i < reader.size(); ++i) names.emplace_back(reader.field(i));
    types.resize(names.size());
    while (reader.next()) {
      if (reader.size() != names.size()) throw bad_record(reader, reader.size(), names.size());
      for (std::size_t i = 0; i < names.size(); ++i) types[i].add(reader.field(i));
      ++rows;
    }
  } catch (const InvalidArgument& e) {  // a malformed record: bad data, not a bad call
    throw DataLossError(e.message(), e.context());
  }

  std::vector<std::pair<std::string, std::string>> columns;
  for (std::size_t i = 0; i < names.size(); ++i) columns.emplace_back(names[i], types[i].name());

  auto writers = open_shards(out);
  Progress progress("write-tfrecords", rows, "rows", !args.flag("--quiet"));
  try {
    detail::CsvRecordReader reader(path, compression, default_buffer_size, dialect);
    reader.next();  // the header
    std::string record;
    std::size_t row = 0;
    for (std::size_t s = 0; s < out.shards; ++s) {
      const auto [begin, end] = shard_range(rows, s, out.shards);
      for (; row < end && reader.next(); ++row) {
        if (reader.size() != names.size()) throw bad_record(reader, reader.size(), names.size());
        ExampleBuilder b;
        for (std::size_t i = 0; i < names.size(); ++i) {
          const std::string_view cell = reader.field(i);
          if (cell.empty()) {
            b.add_empty(names[i]);
          } else if (columns[i].second == "int64") {
            std::int64_t v = 0;
            detail::parse_csv_number(cell, v);
            b.add_int64s(names[i], {v});
          } else if (columns[i].second == "float") {
            float v = 0;
            detail::parse_csv_number(cell, v);
            b.add_floats(names[i], {v});
          } else {
            b.add_bytes(names[i], {cell});
          }
        }
        b.serialize_to(record);
        writers[s]->write(record);
        progress.add(1);
      }
      (void)begin;
    }
  } catch (const InvalidArgument& e) {
    throw DataLossError(e.message(), e.context());
  }
  progress.finish();
  return {close_shards(writers), {}, std::move(columns)};
}

int run(std::span<const std::string> argv) {
  const Args args(argv, {"--gzip", "--zlib", "--no-shuffle", "--json", "--quiet"},
                  {"--from", "--out", "--shards", "--seed", "--label-offset", "--extensions",
                   "--delimiter", "--jobs"});
  const auto from = args.value("--from");
  if (!from) throw UsageError("--from image-folder or --from csv is required");
  if (*from != "image-folder" && *from != "csv") {
    throw UsageError("option --from: '" + *from + "' is not image-folder or csv");
  }
  if (args.positional().size() != 1) {
    throw UsageError(*from == "csv" ? "give one CSV FILE" : "give one image folder DIR");
  }
  const std::string& source = args.positional()[0];
  const auto prefix = args.value("--out");
  if (!prefix || prefix->empty()) throw UsageError("--out PREFIX is required");
  Output out{*prefix, static_cast<std::size_t>(args.number("--shards", 1, 1, 99999))};
  if (args.flag("--gzip") && args.flag("--zlib"))
    throw UsageError("--gzip and --zlib exclude each other");
  if (args.flag("--gzip")) out.compression = Compression::gzip;
  if (args.flag("--zlib")) out.compression = Compression::zlib;
  if (*from == "csv") {
    for (const char* o : {"--seed", "--label-offset", "--extensions", "--jobs"}) {
      if (args.value(o))
        throw UsageError(std::string("option ") + o + " is for --from image-folder");
    }
    if (args.flag("--no-shuffle"))
      throw UsageError("option --no-shuffle is for --from image-folder");
  } else if (args.value("--delimiter")) {
    throw UsageError("option --delimiter is for --from csv");
  }

  const Written w =
      *from == "csv" ? write_csv(source, out, args) : write_image_folder(source, out, args);
  std::uint64_t records = 0, bytes = 0;
  for (const ShardResult& s : w.shards) {
    records += s.records;
    bytes += s.bytes;
  }
  if (args.flag("--json")) {
    JsonWriter j;
    j.begin_object().member("from", *from).member("source", source).member("out", out.prefix);
    j.member("compression", compression_name(out.compression));
    j.member("records", records).member("bytes", bytes);
    j.key("shards").begin_array();
    for (const ShardResult& s : w.shards) {
      j.begin_object()
          .member("path", s.path)
          .member("records", s.records)
          .member("bytes", s.bytes)
          .end_object();
    }
    j.end_array();
    if (*from == "csv") {
      j.key("columns").begin_array();
      for (const auto& [name, type] : w.columns) {
        j.begin_object().member("name", name).member("type", type).end_object();
      }
      j.end_array();
    } else {
      j.key("classes").begin_array();
      for (const std::string& c : w.classes) j.value(c);
      j.end_array();
    }
    j.member("exit_code", 0).end_object();
    std::fputs(j.str().c_str(), stdout);
  } else {
    for (const ShardResult& s : w.shards) {
      std::printf("%s: %llu records, %s\n", s.path.c_str(),
                  static_cast<unsigned long long>(s.records), human_bytes(s.bytes).c_str());
    }
    if (*from == "csv") {
      std::printf("columns: ");
      for (std::size_t i = 0; i < w.columns.size(); ++i) {
        std::printf("%s%s (%s)", i ? ", " : "", w.columns[i].first.c_str(),
                    w.columns[i].second.c_str());
      }
      std::printf("\n");
    } else {
      std::printf("classes: %zu (", w.classes.size());
      for (std::size_t i = 0; i < w.classes.size(); ++i) {
        std::printf("%s%s", i ? ", " : "", w.classes[i].c_str());
      }
      std::printf(")\n");
    }
    std::printf("wrote %llu records in %zu shard%s (%s, compression %s)\n",
                static_cast<unsigned long long>(records), w.shards.size(),
                w.shards.size() == 1 ? "" : "s", human_bytes(bytes).c_str(),
                std::string(compression_name(out.compression)).c_str());
  }
  return exit_ok;
}

}  // namespace

const Command write_tfrecords_command{
    "write-tfrecords", "write tf.Example shards from an image folder or a CSV file", help, run};

}  // namespace ingest::cli
