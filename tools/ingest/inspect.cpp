// `ingest inspect FILES...`: reads every record of each TFRecord file with
// the library's reader (CRCs checked), and reports the records, bytes,
// compression, record sizes, the first bad record, and the tf.Example (or
// SequenceExample) schema of the first records. A file's error is reported
// and the next file read; the exit code is the worst seen.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ingest/core/errors.hpp>
#include <ingest/formats/example.hpp>
#include <ingest/formats/protobuf_wire.hpp>
#include <ingest/formats/tfrecord_format.hpp>

#include "cli.hpp"

namespace ingest::cli {
namespace {

constexpr std::string_view help = R"(usage: ingest inspect [options] FILE...

Reads every record of each TFRecord file, checking both CRCs of each, and
prints: the compression (detected from the data), the file's bytes, the
records and their payload bytes, the smallest, median and largest record,
the first bad record (its file, offset and what is wrong), and the
tf.Example schema of the first records (feature keys, types, value counts).

options:
  --sample N           records whose features make the schema (default 100; 0: none)
  --compression KIND   auto (default: detected per file), none, gzip or zlib
  --json               print one JSON document on stdout instead of text
  --quiet              no progress on stderr

exit codes: 0 every record is intact, 1 a corrupt or truncated record was
found, 2 usage error, 3 a file cannot be read.
)";

using detail::wire::Field;
using detail::wire::u8;
namespace wire = detail::wire;
namespace ex = detail::example;

constexpr std::uint64_t no_count = std::numeric_limits<std::uint64_t>::max();

const char* kind_name(int kind) {
  switch (kind) {
    case static_cast<int>(FeatureType::bytes): return "bytes_list";
    case static_cast<int>(FeatureType::float32): return "float_list";
    case static_cast<int>(FeatureType::int64): return "int64_list";
    default: return "none";
  }
}

// What the sample saw of one feature (or one feature list).
struct FeatureStats {
  std::string type;              // kind_name, or "mixed"
  std::uint64_t records = 0;     // sampled records holding it
  std::uint64_t min = no_count;  // values per record (per step for a list)
  std::uint64_t max = 0;
  std::uint64_t min_steps = no_count, max_steps = 0;  // feature lists only

  void add_type(int kind) {
    if (kind == ex::kind_none) {
      if (type.empty()) type = "none";
      return;
    }
    const std::string t = kind_name(kind);
    if (type.empty() || type == "none") {
      type = t;
    } else if (type != t) {
      type = "mixed";
    }
  }
  void add_values(std::uint64_t n) {
    min = std::min(min, n);
    max = std::max(max, n);
  }
};

struct Schema {
  std::uint64_t sampled = 0, examples = 0, sequence_examples = 0, others = 0;
  std::map<std::string, FeatureStats> features;  // Example features, or SequenceExample context
  std::map<std::string, FeatureStats> lists;     // SequenceExample feature lists

  std::string payload() const {
    if (sampled == 0) return "none";
    if (others) return "other";
    return sequence_examples ? "tf.SequenceExample" : "tf.Example";
  }
};

// The last entry of each key of a map<string, X> message, or nullopt when
// the message is not shaped as one.
std::optional<std::map<std::string, ex::Slot>> map_entries(const u8* begin, const u8* end) {
  std::map<std::string, ex::Slot> entries;
  bool ok = true;
  wire::for_each_field(begin, end, [&](const Field& f) {
    if (f.number != 1 || f.wire != wire::length_type) {
      ok = false;
      return;
    }
    std::string key;
    wire::for_each_field(f.begin, f.end, [&](const Field& g) {
      if ((g.number != 1 && g.number != 2) || g.wire != wire::length_type) ok = false;
      if (g.number == 1) key = std::string(wire::as_view(g.begin, g.end));
    });
    entries[key] = {f.begin, f.end};
  });
  if (!ok) return std::nullopt;
  return entries;
}

// The values of a Feature's run.
std::uint64_t count_values(const ex::Run& run) {
  if (run.kind == ex::kind_none) return 0;
  ex::CountSink sink;
  ex::visit_run(run, sink);
  return sink.n;
}

// Adds one record to the schema; a record that is not an Example or
// SequenceExample counts as "other".
void add_to_schema(std::string_view record, Schema& schema) {
  ++schema.sampled;
  try {
    const u8* begin = wire::as_bytes(record);
    const u8* end = begin + record.size();
    std::vector<Field> contexts, lists;
    bool ok = true;
    wire::for_each_field(begin, end, [&](const Field& f) {
      if ((f.number != 1 && f.number != 2) || f.wire != wire::length_type) ok = false;
      (f.number == 1 ? contexts : lists).push_back(f);
    });
    // Features (Example = 1, SequenceExample context = 1) merge across occurrences.
    std::map<std::string, ex::Slot> features;
    for (const Field& f : contexts) {
      auto entries = map_entries(f.begin, f.end);
      if (!entries) ok = false;
      if (ok) {
        for (auto& [k, v] : *entries) features[k] = v;
      }
    }
    std::map<std::string, ex::Slot> feature_lists;
    for (const Field& f : lists) {
      auto entries = map_entries(f.begin, f.end);
      if (!entries) ok = false;
      if (ok) {
        for (auto& [k, v] : *entries) feature_lists[k] = v;
      }
    }
    if (!ok) {
      ++schema.others;
      return;
    }
    // Count first, then merge: a record that fails to parse adds nothing.
    std::vector<std::pair<std::string, std::pair<int, std::uint64_t>>> seen;
    for (const auto& [key, slot] : features) {
      const ex::Run run = ex::entry_run(slot);
      seen.push_back({key, {run.kind, count_values(run)}});
    }
    struct ListSeen {
      std::string key;
      int kind = ex::kind_none;
      std::uint64_t steps = 0, min = no_count, max = 0;
    };
    std::vector<ListSeen> seen_lists;
    for (const auto& [key, slot] : feature_lists) {
      ListSeen s{key};
      wire::for_each_field(slot.begin, slot.end, [&](const Field& g) {
        if (g.number != 2 || g.wire != wire::length_type) return;
        wire::for_each_field(g.begin, g.end, [&](const Field& step) {
          if (step.number != 1 || step.wire != wire::length_type) return;
          const ex::Run run = ex::feature_run({step.begin, step.end});
          if (s.kind == ex::kind_none) s.kind = run.kind;
          const std::uint64_t n = count_values(run);
          ++s.steps;
          s.min = std::min(s.min, n);
          s.max = std::max(s.max, n);
        });
      });
      seen_lists.push_back(std::move(s));
    }
    if (lists.empty()) {
      ++schema.examples;
    } else {
      ++schema.sequence_examples;
    }
    for (const auto& [key, kv] : seen) {
      FeatureStats& st = schema.features[key];
      ++st.records;
      st.add_type(kv.first);
      st.add_values(kv.second);
    }
    for (const ListSeen& s : seen_lists) {
      FeatureStats& st = schema.lists[s.key];
      ++st.records;
      st.add_type(s.kind);
      if (s.steps) {
        st.add_values(s.min);
        st.add_values(s.max);
      }
      st.min_steps = std::min(st.min_steps, s.steps);
      st.max_steps = std::max(st.max_steps, s.steps);
    }
  } catch (const wire::WireError&) {
    ++schema.others;
  }
}

struct FileReport {
  std::string path;
  Compression compression = Compression::none;
  std::uint64_t file_bytes = 0;
  std::uint64_t records = 0, payload_bytes = 0;
  std::vector<std::uint64_t> sizes;
  Schema schema;
  std::optional<std::string> io_error;  // cannot be read at all
  struct Bad {
    std::string message;
    std::optional<std::uint64_t> offset;
  };
  std::optional<Bad> bad;  // the first corrupt or truncated record
  std::uint64_t min() const {
    return sizes.empty() ? 0 : *std::min_element(sizes.begin(), sizes.end());
  }
  std::uint64_t max() const {
    return sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  }
  // The middle record size (the lower middle for an even count).
  std::uint64_t median() const {
    if (sizes.empty()) return 0;
    std::vector<std::uint64_t> s = sizes;
    auto mid = s.begin() + static_cast<std::ptrdiff_t>((s.size() - 1) / 2);
    std::nth_element(s.begin(), mid, s.end());
    return *mid;
  }
};

std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

FileReport inspect_file(const std::string& path, std::optional<Compression> forced,
                        std::uint64_t sample, Progress& progress) {
  FileReport r;
  r.path = path;
  r.file_bytes = file_size(path);
  std::uint64_t reported = 0;
  try {
    r.compression = forced ? *forced : detect_compression(path);
    TFRecordReader reader(path, {.compression = r.compression});
    while (auto record = reader.read_view()) {
      ++r.records;
      r.payload_bytes += record->size();
      r.sizes.push_back(record->size());
      if (r.records <= sample) add_to_schema(*record, r.schema);
      if (r.compression == Compression::none && (r.records & 1023) == 0) {
        progress.add(reader.offset() - reported);
        reported = reader.offset();
      }
    }
  } catch (const DataLossError& e) {
    r.bad = FileReport::Bad{e.message(), e.context().offset};
  } catch (const Error& e) {
    r.io_error = e.message();
  }
  progress.add(r.file_bytes > reported ? r.file_bytes - reported : 0);
  return r;
}

std::string counts(std::uint64_t min, std::uint64_t max) {
  if (min == no_count) return "-";
  return min == max ? std::to_string(min) : std::to_string(min) + "-" + std::to_string(max);
}

void print_text(const std::vector<FileReport>& reports, std::uint64_t sample) {
  for (const FileReport& r : reports) {
    std::printf("%s\n", r.path.c_str());
    if (r.io_error) {
      std::printf("  error          %s\n\n", r.io_error->c_str());
      continue;
    }
    std::printf("  compression    %s\n", std::string(compression_name(r.compression)).c_str());
    std::printf("  file bytes     %llu (%s)\n", static_cast<unsigned long long>(r.file_bytes),
                human_bytes(r.file_bytes).c_str());
    std::printf("  records        %llu%s\n", static_cast<unsigned long long>(r.records),
                r.bad ? " before the bad record" : "");
    std::printf("  payload bytes  %llu (%s)\n", static_cast<unsigned long long>(r.payload_bytes),
                human_bytes(r.payload_bytes).c_str());
    std::printf("  record bytes   min %llu, median %llu, max %llu\n",
                static_cast<unsigned long long>(r.min()),
                static_cast<unsigned long long>(r.median()),
                static_cast<unsigned long long>(r.max()));
    if (r.bad) {
      std::printf("  crc            BAD at offset %s: %s\n",
                  r.bad->offset ? std::to_string(*r.bad->offset).c_str() : "?",
                  r.bad->message.c_str());
    } else {
      std::printf("  crc            ok (every record)\n");
    }
    const Schema& s = r.schema;
    if (sample == 0 || s.sampled == 0) {
      std::printf("\n");
      continue;
    }
    std::printf("  payload        %s (first %llu record%s)\n", s.payload().c_str(),
                static_cast<unsigned long long>(s.sampled), s.sampled == 1 ? "" : "s");
    if (s.payload() == "other") {
      std::printf("\n");
      continue;
    }
    std::size_t width = 7;
    for (const auto& [k, v] : s.features) width = std::max(width, k.size());
    for (const auto& [k, v] : s.lists) width = std::max(width, k.size());
    const int w = static_cast<int>(width);
    if (!s.features.empty()) {
      std::printf("  %s\n",
                  s.lists.empty() && !s.sequence_examples ? "features" : "context features");
      std::printf("    %-*s  %-10s  %-8s  %s\n", w, "key", "type", "values", "in records");
      for (const auto& [k, v] : s.features) {
        std::printf("    %-*s  %-10s  %-8s  %llu/%llu\n", w, k.c_str(), v.type.c_str(),
                    counts(v.min, v.max).c_str(), static_cast<unsigned long long>(v.records),
                    static_cast<unsigned long long>(s.sampled));
      }
    }
    if (!s.lists.empty()) {
      std::printf("  feature lists\n");
      std::printf("    %-*s  %-10s  %-8s  %-8s  %s\n", w, "key", "type", "steps", "values",
                  "in records");
      for (const auto& [k, v] : s.lists) {
        std::printf("    %-*s  %-10s  %-8s  %-8s  %llu/%llu\n", w, k.c_str(), v.type.c_str(),
                    counts(v.min_steps, v.max_steps).c_str(), counts(v.min, v.max).c_str(),
                    static_cast<unsigned long long>(v.records),
                    static_cast<unsigned long long>(s.sampled));
      }
    }
    std::printf("\n");
  }
  std::uint64_t records = 0, bytes = 0, bad = 0;
  for (const FileReport& r : reports) {
    records += r.records;
    bytes += r.file_bytes;
    bad += (r.bad || r.io_error) ? 1 : 0;
  }
  std::printf("%zu file%s, %llu records, %s; %llu with errors\n", reports.size(),
              reports.size() == 1 ? "" : "s", static_cast<unsigned long long>(records),
              human_bytes(bytes).c_str(), static_cast<unsigned long long>(bad));
}

void json_counts(JsonWriter& j, std::string_view key, std::uint64_t min, std::uint64_t max) {
  j.key(key).begin_object();
  if (min == no_count) {
    j.key("min").null().key("max").null();
  } else {
    j.member("min", min).member("max", max);
  }
  j.end_object();
}

void print_json(const std::vector<FileReport>& reports, std::uint64_t sample, int code) {
  JsonWriter j;
  j.begin_object().key("files").begin_array();
  std::uint64_t records = 0, bytes = 0, bad = 0;
  for (const FileReport& r : reports) {
    records += r.records;
    bytes += r.file_bytes;
    bad += (r.bad || r.io_error) ? 1 : 0;
    j.begin_object().member("path", r.path);
    if (r.io_error) {
      j.member("io_error", *r.io_error).end_object();
      continue;
    }
    j.member("compression", compression_name(r.compression))
        .member("file_bytes", r.file_bytes)
        .member("records", r.records)
        .member("payload_bytes", r.payload_bytes);
    j.key("record_bytes").begin_object();
    j.member("min", r.min()).member("median", r.median()).member("max", r.max()).end_object();
    j.member("crc_ok", !r.bad);
    j.key("error");
    if (r.bad) {
      j.begin_object().member("message", r.bad->message).key("offset");
      if (r.bad->offset) {
        j.value(*r.bad->offset);
      } else {
        j.null();
      }
      j.end_object();
    } else {
      j.null();
    }
    const Schema& s = r.schema;
    j.key("schema").begin_object();
    j.member("sampled_records", s.sampled).member("sample_limit", sample);
    j.member("payload", s.payload());
    j.key("features").begin_array();
    for (const auto& [k, v] : s.features) {
      j.begin_object().member("key", k).member("type", v.type).member("records", v.records);
      json_counts(j, "values", v.min, v.max);
      j.end_object();
    }
    j.end_array();
    j.key("feature_lists").begin_array();
    for (const auto& [k, v] : s.lists) {
      j.begin_object().member("key", k).member("type", v.type).member("records", v.records);
      json_counts(j, "steps", v.min_steps, v.max_steps);
      json_counts(j, "values_per_step", v.min, v.max);
      j.end_object();
    }
    j.end_array().end_object().end_object();
  }
  j.end_array();
  j.key("total").begin_object();
  j.member("files", static_cast<std::uint64_t>(reports.size()))
      .member("records", records)
      .member("file_bytes", bytes)
      .member("files_with_errors", bad)
      .end_object();
  j.member("exit_code", code).end_object();
  std::fputs(j.str().c_str(), stdout);
}

int run(std::span<const std::string> argv) {
  const Args args(argv, {"--json", "--quiet"}, {"--sample", "--compression"});
  const std::uint64_t sample = args.number("--sample", 100);
  std::optional<Compression> forced;
  if (auto c = args.value("--compression"); c && *c != "auto") {
    if (*c == "none") {
      forced = Compression::none;
    } else if (*c == "gzip") {
      forced = Compression::gzip;
    } else if (*c == "zlib") {
      forced = Compression::zlib;
    } else {
      throw UsageError("option --compression: '" + *c + "' is not auto, none, gzip or zlib");
    }
  }
  const auto& files = args.positional();
  if (files.empty()) throw UsageError("no FILE given");
  std::uint64_t total = 0;
  for (const std::string& f : files) total += file_size(f);
  std::vector<FileReport> reports;
  {
    Progress progress("inspect", total, "bytes", !args.flag("--quiet"));
    for (const std::string& f : files) reports.push_back(inspect_file(f, forced, sample, progress));
  }
  int code = exit_ok;
  for (const FileReport& r : reports) {
    if (r.io_error) code = exit_io;
    if (r.bad && code == exit_ok) code = exit_bad_data;
  }
  if (args.flag("--json")) {
    print_json(reports, sample, code);
  } else {
    print_text(reports, sample);
  }
  for (const FileReport& r : reports) {
    if (r.io_error)
      std::fprintf(stderr, "ingest inspect: %s: %s\n", r.path.c_str(), r.io_error->c_str());
    if (r.bad) {
      std::fprintf(stderr, "ingest inspect: %s: %s\n", r.path.c_str(), r.bad->message.c_str());
    }
  }
  return code;
}

}  // namespace

const Command inspect_command{
    "inspect", "records, sizes, CRC check and feature schema of TFRecord files", help, run};

}  // namespace ingest::cli
