// tf.Example and tf.SequenceExample parsing straight from the wire format, no
// protobuf at run time. tf counterpart: tf.io.parse_example /
// parse_single_example / parse_single_sequence_example with FixedLenFeature,
// VarLenFeature and FixedLenSequenceFeature (tf's fast parser). Numeric
// features land in Tensors from the pooled allocator (a batch writes straight
// into one [n, shape...] Tensor per feature); bytes features are views into
// the records (zero copy: keep the records alive) or into the spec's
// defaults. An ExampleSpec is immutable and may be shared between threads.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ingest/core/allocator.hpp"
#include "ingest/core/dtype.hpp"
#include "ingest/core/errors.hpp"
#include "ingest/core/shape.hpp"
#include "ingest/core/tensor.hpp"
#include "ingest/formats/protobuf_wire.hpp"

namespace ingest {

/// The three kinds of tf.train.Feature list.
enum class FeatureType : std::uint8_t { bytes, float32, int64 };

/// "bytes_list", "float_list" or "int64_list".
constexpr std::string_view feature_list_name(FeatureType t) noexcept {
  switch (t) {
    case FeatureType::bytes: return "bytes_list";
    case FeatureType::float32: return "float_list";
    case FeatureType::int64: return "int64_list";
  }
  return "unknown";
}

/// Default values of a FixedLenFeature: one value (repeated to fill the shape)
/// or exactly as many as the shape holds, of the feature's type.
using FeatureValues =
    std::variant<std::vector<float>, std::vector<std::int64_t>, std::vector<std::string>>;

/// A feature with a fixed number of values, shaped `shape` (tf.io.FixedLenFeature).
/// Missing from an Example (or present with no kind set), it takes
/// default_value; without a default it is required.
struct FixedLenFeature {
  /// The feature's list kind (its values' type).
  FeatureType dtype = FeatureType::float32;
  /// The shape of its values (their count is the product of the dimensions).
  Shape shape = {};
  /// Its value(s) where an Example lacks it; std::nullopt: the feature is required.
  std::optional<FeatureValues> default_value = {};
};

/// A feature with any number of values (tf.io.VarLenFeature); missing means none.
struct VarLenFeature {
  /// The feature's list kind (its values' type).
  FeatureType dtype = FeatureType::float32;
};

/// In a SequenceExample's feature lists: every step holds `shape` values; the
/// result is [steps, shape...] (tf.io.FixedLenSequenceFeature).
struct FixedLenSequenceFeature {
  /// The feature's list kind (its values' type).
  FeatureType dtype = FeatureType::float32;
  /// The shape of each step's values.
  Shape shape = {};
  /// A missing feature list gives zero steps instead of an error.
  bool allow_missing = false;
};

/// How one feature is parsed: fixed-length, variable-length, or a fixed-length sequence.
using FeatureSpec = std::variant<FixedLenFeature, VarLenFeature, FixedLenSequenceFeature>;

namespace detail {

enum class FeatureForm : std::uint8_t { fixed, var, fixed_sequence };

struct SpecEntry {
  std::string name;
  FeatureType dtype = FeatureType::float32;
  FeatureForm form = FeatureForm::fixed;
  Shape shape{};
  std::size_t count = 0;  // values per row (fixed forms)
  bool has_default = false;
  bool allow_missing = false;
  std::vector<float> default_floats{};  // `count` values
  std::vector<std::int64_t> default_ints{};
  std::vector<std::string> default_bytes{};
};

inline std::uint64_t hash_name(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

struct SpecData {
  std::vector<SpecEntry> entries;
  std::vector<std::uint32_t> table;  // open addressing: entry index + 1, 0 = empty
  std::size_t mask = 0;

  std::optional<std::size_t> find(std::string_view name) const noexcept {
    if (entries.empty()) return std::nullopt;
    for (std::size_t h = hash_name(name) & mask;; h = (h + 1) & mask) {
      const std::uint32_t slot = table[h];
      if (slot == 0) return std::nullopt;
      if (entries[slot - 1].name == name) return slot - 1;
    }
  }
};

template <class T>
void expand_default(const SpecEntry& e, const FeatureValues& given, std::vector<T>& out) {
  const auto* values = std::get_if<std::vector<T>>(&given);
  if (!values) {
    throw InvalidArgument("feature '" + e.name + "': default_value must hold " +
                          std::string(feature_list_name(e.dtype)) + " values");
  }
  if (values->size() == 1) {
    out.assign(e.count, values->front());
  } else if (values->size() == e.count) {
    out = *values;
  } else {
    throw InvalidArgument("feature '" + e.name + "': default_value has " +
                          std::to_string(values->size()) + " values; shape " + e.shape.to_string() +
                          " needs 1 (repeated) or " + std::to_string(e.count));
  }
}

inline SpecEntry make_spec_entry(std::string name, const FeatureSpec& spec) {
  SpecEntry e;
  e.name = std::move(name);
  auto set_shape = [&e](const Shape& shape) {
    if (!shape.is_concrete()) {
      throw InvalidArgument("feature '" + e.name + "': shape " + shape.to_string() +
                            " must be fully known");
    }
    e.shape = shape;
    // Bounded as the tensor it becomes (its default is expanded to it now).
    const std::size_t value_bytes = e.dtype == FeatureType::bytes   ? sizeof(std::string)
                                    : e.dtype == FeatureType::int64 ? sizeof(std::int64_t)
                                                                    : sizeof(float);
    e.count =
        detail::checked_byte_size(shape, value_bytes, "feature '" + e.name + "'") / value_bytes;
  };
  if (const auto* fixed = std::get_if<FixedLenFeature>(&spec)) {
    e.dtype = fixed->dtype;
    e.form = FeatureForm::fixed;
    set_shape(fixed->shape);
    if (fixed->default_value) {
      e.has_default = true;
      switch (e.dtype) {
        case FeatureType::bytes: expand_default(e, *fixed->default_value, e.default_bytes); break;
        case FeatureType::float32:
          expand_default(e, *fixed->default_value, e.default_floats);
          break;
        case FeatureType::int64: expand_default(e, *fixed->default_value, e.default_ints); break;
      }
    }
  } else if (const auto* var = std::get_if<VarLenFeature>(&spec)) {
    e.dtype = var->dtype;
    e.form = FeatureForm::var;
  } else {
    const auto& seq = std::get<FixedLenSequenceFeature>(spec);
    e.dtype = seq.dtype;
    e.form = FeatureForm::fixed_sequence;
    e.allow_missing = seq.allow_missing;
    set_shape(seq.shape);
  }
  return e;
}

}  // namespace detail

/// Which features to parse, by name, and how (tf: the `features` dict of
/// parse_example). Cheap to copy (copies share the compiled spec).
class ExampleSpec {
 public:
  /// An empty spec (e.g. for a SequenceExample without context features).
  /// Allocates nothing: every ParsedExample starts with one.
  ExampleSpec() noexcept = default;
  /// `{{"image", FixedLenFeature{...}}, {"label", ...}}`. Throws InvalidArgument
  /// for a repeated name, an unknown dimension or a default that does not fit.
  ExampleSpec(std::initializer_list<std::pair<std::string, FeatureSpec>> features)
      : ExampleSpec(std::vector<std::pair<std::string, FeatureSpec>>(features)) {}
  /// @copydoc ExampleSpec(std::initializer_list<std::pair<std::string, FeatureSpec>>)
  explicit ExampleSpec(std::vector<std::pair<std::string, FeatureSpec>> features) {
    auto data = std::make_shared<detail::SpecData>();
    for (auto& [name, spec] : features) {
      if (data->find(name)) throw InvalidArgument("feature '" + name + "' is listed twice");
      data->entries.push_back(detail::make_spec_entry(std::move(name), spec));
      rebuild_table(*data);
    }
    data_ = std::move(data);
  }

  /// The number of features.
  std::size_t size() const noexcept { return data().entries.size(); }
  /// The name of feature `i`; throws std::out_of_range past size().
  const std::string& name(std::size_t i) const { return data().entries.at(i).name; }
  /// The list kind of feature `i`; throws std::out_of_range past size().
  FeatureType dtype(std::size_t i) const { return data().entries.at(i).dtype; }
  /// The index of feature `name`, if the spec has it.
  std::optional<std::size_t> find(std::string_view name) const noexcept {
    return data().find(name);
  }
  /// The index of feature `name`; throws InvalidArgument if the spec has none.
  std::size_t index(std::string_view name) const {
    if (auto i = data().find(name)) return *i;
    throw InvalidArgument("no feature '" + std::string(name) + "' in the spec");
  }

  /// The compiled spec the parsers read (an empty one for a default-constructed spec).
  const detail::SpecData& data() const noexcept {
    static const detail::SpecData empty;
    return data_ ? *data_ : empty;
  }
  /// Whether `o` shares this spec's compiled form (it is a copy of this spec).
  bool same_as(const ExampleSpec& o) const noexcept { return data_.get() == o.data_.get(); }

  /// A copy sharing this spec through a reference count of the calling
  /// thread's own. Parsers keep a copy in every ParsedExample they fill;
  /// copies of one count, made and dropped on several threads at once,
  /// would bounce its cache line between the cores on every parse.
  ExampleSpec thread_copy() const {
    thread_local std::shared_ptr<const detail::SpecData> local;
    if (local.get() != data_.get()) {
      // The aliasing constructor: a new count (owning a copy of data_) for the same data.
      local =
          data_ ? std::shared_ptr<const detail::SpecData>(
                      std::make_shared<std::shared_ptr<const detail::SpecData>>(data_), data_.get())
                : nullptr;
    }
    ExampleSpec copy;
    copy.data_ = local;
    return copy;
  }

 private:
  static void rebuild_table(detail::SpecData& d) {
    const std::size_t size = std::bit_ceil(std::max<std::size_t>(8, d.entries.size() * 2));
    d.table.assign(size, 0);
    d.mask = size - 1;
    for (std::size_t i = 0; i < d.entries.size(); ++i) {
      std::size_t h = detail::hash_name(d.entries[i].name) & d.mask;
      while (d.table[h] != 0) h = (h + 1) & d.mask;
      d.table[h] = static_cast<std::uint32_t>(i + 1);
    }
  }

  std::shared_ptr<const detail::SpecData> data_;
};

/// One parsed feature.
///  - numeric (float32, int64): `values`, a Tensor;
///  - bytes: `bytes`, views into the record(s) or the spec, row-major;
///  - `shape`: the values' shape (also for bytes);
///  - ragged results (VarLenFeature in a batch, feature lists of a
///    SequenceExample with VarLenFeature): `row_splits`, int64 [rows + 1]; row
///    i's values are [row_splits[i], row_splits[i + 1]).
struct ParsedFeature {
  /// The feature's list kind.
  FeatureType dtype = FeatureType::float32;
  /// The values' shape (also for bytes).
  Shape shape = {};
  /// The numeric values (float32 or int64 features).
  Tensor values = {};
  /// The bytes values, row-major: views into the record(s) or the spec's defaults.
  std::vector<std::string_view> bytes = {};
  /// For a ragged result: int64 [rows + 1], row i's values being [row_splits[i], row_splits[i +
  /// 1]).
  Tensor row_splits = {};

  /// Whether the result is ragged (has row_splits).
  bool ragged() const noexcept { return row_splits.defined(); }
  /// The bytes values as owned strings (outliving the record).
  std::vector<std::string> bytes_copy() const { return {bytes.begin(), bytes.end()}; }
};

namespace detail {
struct ParsedExampleAccess;
}

/// The features of one Example (or of a batch of them), in spec order.
class ParsedExample {
 public:
  /// The number of features (the spec's).
  std::size_t size() const noexcept { return features_.size(); }
  /// Feature `name`; throws InvalidArgument if the spec has no such feature.
  const ParsedFeature& operator[](std::string_view name) const {
    return features_[spec_.index(name)];
  }
  /// Feature `i`, in spec order; throws std::out_of_range past size().
  const ParsedFeature& at(std::size_t i) const { return features_.at(i); }
  /// The values of numeric feature `name`.
  const Tensor& tensor(std::string_view name) const { return (*this)[name].values; }
  /// The values of bytes feature `name`, as views.
  std::span<const std::string_view> bytes(std::string_view name) const {
    return (*this)[name].bytes;
  }
  /// The spec it was parsed with.
  const ExampleSpec& spec() const noexcept { return spec_; }

 private:
  friend struct detail::ParsedExampleAccess;
  ExampleSpec spec_{};
  std::vector<ParsedFeature> features_{};
};

/// A parsed SequenceExample: context features, and feature lists (one row per step).
struct ParsedSequenceExample {
  /// The context features.
  ParsedExample context = {};
  /// The feature lists, one row per step.
  ParsedExample feature_lists = {};
};

namespace detail {

// How the parsers fill a ParsedExample.
struct ParsedExampleAccess {
  static std::vector<ParsedFeature>& reset(ParsedExample& out, const ExampleSpec& spec) {
    if (!out.spec_.same_as(spec)) out.spec_ = spec.thread_copy();
    out.features_.resize(spec.size());
    return out.features_;
  }
};

}  // namespace detail

namespace detail::example {

using wire::Field;
using wire::u8;

inline constexpr int kind_none = -1;  // a Feature with no list set

/// A map entry (of Features or FeatureLists) or a lone Feature message.
struct Slot {
  const u8* begin = nullptr;
  const u8* end = nullptr;
  explicit operator bool() const noexcept { return begin != nullptr; }
};

/// Where a feature's values start. Protobuf's merge rules: a later list of
/// another kind replaces the earlier (oneof); lists of the same kind in a row
/// concatenate, also across repeated Feature values of one map entry.
struct Run {
  int kind = kind_none;
  const u8* start = nullptr;      // tag of the field that set `kind`
  const u8* chunk_end = nullptr;  // end of the Feature message holding `start`
  const u8* outer_end = nullptr;  // end of the map entry (== chunk_end for a lone Feature)
};

inline void track_kinds(Run& run, const u8* begin, const u8* end, const u8* outer_end) {
  wire::for_each_field(begin, end, [&](const Field& g) {
    if (g.number >= 1 && g.number <= 3 && g.wire == wire::length_type &&
        static_cast<int>(g.number) - 1 != run.kind) {
      run = {static_cast<int>(g.number) - 1, g.tag, end, outer_end};
    }
  });
}

/// The run of a map entry {key = 1, value = 2 (Feature)}.
inline Run entry_run(Slot entry) {
  Run run;
  wire::for_each_field(entry.begin, entry.end, [&](const Field& f) {
    if (f.number == 2 && f.wire == wire::length_type) track_kinds(run, f.begin, f.end, entry.end);
  });
  return run;
}

/// The run of a lone Feature message.
inline Run feature_run(Slot feature) {
  Run run;
  track_kinds(run, feature.begin, feature.end, feature.end);
  return run;
}

template <class Sink>
void visit_list(int kind, const u8* begin, const u8* end, Sink& sink) {
  wire::for_each_field(begin, end, [&](const Field& v) {
    if (v.number != 1) return;
    if (kind == static_cast<int>(FeatureType::bytes)) {
      if (v.wire == wire::length_type) sink.bytes(wire::as_view(v.begin, v.end));
    } else if (kind == static_cast<int>(FeatureType::float32)) {
      if (v.wire == wire::length_type) {
        const auto len = static_cast<std::size_t>(v.end - v.begin);
        if (len % 4) throw wire::WireError{"packed float_list length is not a multiple of 4"};
        sink.floats(v.begin, len / 4);
      } else if (v.wire == wire::fixed32_type) {
        sink.floats(v.begin, 1);
      }
    } else if (v.wire == wire::length_type) {
      for (const u8* p = v.begin; p < v.end;) {
        std::uint64_t x;
        p = wire::read_varint(p, v.end, x);
        sink.int64(x);
      }
    } else if (v.wire == wire::varint_type) {
      sink.int64(v.value);
    }
  });
}

/// Feeds every value of `run` to sink (bytes / floats / int64).
template <class Sink>
void visit_run(const Run& run, Sink& sink) {
  const int kind = run.kind;
  auto list = [&](const Field& g) {
    if (g.wire == wire::length_type && static_cast<int>(g.number) - 1 == kind) {
      visit_list(kind, g.begin, g.end, sink);
    }
  };
  wire::for_each_field(run.start, run.chunk_end, list);
  if (run.chunk_end != run.outer_end) {
    wire::for_each_field(run.chunk_end, run.outer_end, [&](const Field& f) {
      if (f.number == 2 && f.wire == wire::length_type) wire::for_each_field(f.begin, f.end, list);
    });
  }
}

struct CountSink {
  std::size_t n = 0;
  void bytes(std::string_view) noexcept { ++n; }
  void floats(const u8*, std::size_t k) noexcept { n += k; }
  void int64(std::uint64_t) noexcept { ++n; }
};

template <class T>
struct WriteSink {
  T* out;
  std::size_t capacity;
  std::size_t n = 0;
  void bytes(std::string_view) noexcept { ++n; }
  void floats(const u8* p, std::size_t k) noexcept {
    if constexpr (std::is_same_v<T, float>) {
      const std::size_t take = n < capacity ? std::min(k, capacity - n) : 0;
      if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(out + n, p, take * 4);
      } else {
        for (std::size_t i = 0; i < take; ++i) {
          const std::uint32_t bits = wire::load_fixed32(p + 4 * i);
          std::memcpy(out + n + i, &bits, 4);
        }
      }
    }
    n += k;
  }
  void int64(std::uint64_t v) noexcept {
    if constexpr (std::is_same_v<T, std::int64_t>) {
      if (n < capacity) out[n] = static_cast<std::int64_t>(v);
    }
    ++n;
  }
};

struct BytesSink {
  std::vector<std::string_view>& out;
  std::size_t n = 0;
  void bytes(std::string_view v) {
    out.push_back(v);
    ++n;
  }
  void floats(const u8*, std::size_t k) noexcept { n += k; }
  void int64(std::uint64_t) noexcept { ++n; }
};

/// What a parse is doing, for error messages.
struct Where {
  const char* what = "Example";          // "Example", "SequenceExample"
  const std::string* feature = nullptr;  // the feature being decoded
  const char* row_name = "row";          // "step" in feature lists
  std::int64_t row = -1;
  std::optional<std::int64_t> element{};  // record index in a batch
};

[[noreturn]] inline void fail_invalid(const Where& w, const std::string& message) {
  std::string m = "feature '" + (w.feature ? *w.feature : std::string()) + "'";
  if (w.row >= 0 && std::string_view(w.row_name) == "step") {
    m += ", step " + std::to_string(w.row);
  }
  throw InvalidArgument(m + ": " + message, {.stage = "parse_example", .element = w.element});
}

[[noreturn]] inline void fail_malformed(const Where& w, const char* what) {
  std::string m = std::string("malformed ") + w.what + ": " + what;
  if (w.feature) m += " (feature '" + *w.feature + "')";
  throw DataLossError(m, {.stage = "parse_example", .element = w.element});
}

/// One row of a feature: missing, or the run of its values.
struct Row {
  bool missing = true;
  Run run{};
};

inline void check_kind(const SpecEntry& e, const Run& run, Where& w) {
  if (run.kind != kind_none && run.kind != static_cast<int>(e.dtype)) {
    fail_invalid(w, "expected " + std::string(feature_list_name(e.dtype)) + ", found " +
                        std::string(feature_list_name(static_cast<FeatureType>(run.kind))));
  }
}

/// Makes `t` a tensor of dtype and shape, keeping its storage when nothing
/// else shares it (a ParsedExample reused for the next record).
inline void reuse_or_allocate(Tensor& t, DType dtype, const Shape& shape, Allocator& allocator) {
  if (t.defined() && t.use_count() == 1 && t.dtype() == dtype && t.shape() == shape &&
      t.allocator() == &allocator) {
    return;
  }
  t = Tensor(dtype, shape, allocator);
}

/// Fills `out` with `rows` rows of feature `e`; get_row(r) -> Row. `leading`
/// adds the rows dimension (batches, feature lists); without it there is one row.
template <class GetRow>
void fill_feature(const SpecEntry& e, std::size_t rows, bool leading, GetRow&& get_row,
                  Allocator& allocator, Where& w, ParsedFeature& out) {
  out.dtype = e.dtype;
  if (out.row_splits.defined()) out.row_splits = Tensor();
  out.bytes.clear();
  const auto dims = [&](std::size_t total) { return Shape{static_cast<std::int64_t>(total)}; };
  if (e.form != FeatureForm::var) {
    const std::size_t k = e.count;
    out.shape = leading ? e.shape.prepend(static_cast<std::int64_t>(rows)) : e.shape;
    float* floats = nullptr;
    std::int64_t* ints = nullptr;
    if (e.dtype == FeatureType::float32) {
      reuse_or_allocate(out.values, DType::float32, out.shape, allocator);
      floats = out.values.data<float>();
    } else if (e.dtype == FeatureType::int64) {
      reuse_or_allocate(out.values, DType::int64, out.shape, allocator);
      ints = out.values.data<std::int64_t>();
    } else {
      if (out.values.defined()) out.values = Tensor();
      out.bytes.reserve(rows * k);
    }
    for (std::size_t r = 0; r < rows; ++r) {
      w.row = static_cast<std::int64_t>(r);
      const Row row = get_row(r);
      if (row.missing) {
        if (!e.has_default) {
          fail_invalid(w, "required but missing (give the FixedLenFeature a default_value)");
        }
        if (floats) std::copy_n(e.default_floats.data(), k, floats + r * k);
        if (ints) std::copy_n(e.default_ints.data(), k, ints + r * k);
        if (!floats && !ints)
          out.bytes.insert(out.bytes.end(), e.default_bytes.begin(), e.default_bytes.end());
        continue;
      }
      check_kind(e, row.run, w);
      std::size_t n = 0;
      if (row.run.kind != kind_none) {
        if (floats) {
          WriteSink<float> sink{floats + r * k, k};
          visit_run(row.run, sink);
          n = sink.n;
        } else if (ints) {
          WriteSink<std::int64_t> sink{ints + r * k, k};
          visit_run(row.run, sink);
          n = sink.n;
        } else {
          BytesSink sink{out.bytes};
          visit_run(row.run, sink);
          n = sink.n;
        }
      }
      if (n != k) {
        fail_invalid(w, "expected " + std::to_string(k) + " values (shape " + e.shape.to_string() +
                            "), found " + std::to_string(n));
      }
    }
    w.row = -1;
    return;
  }
  // Variable length: count, then write.
  if (out.values.defined()) out.values = Tensor();
  std::int64_t* splits = nullptr;
  if (leading) {
    out.row_splits = Tensor(DType::int64, Shape{static_cast<std::int64_t>(rows) + 1}, allocator);
    splits = out.row_splits.data<std::int64_t>();
    splits[0] = 0;
  }
  std::size_t total = 0;
  if (e.dtype == FeatureType::bytes) {
    for (std::size_t r = 0; r < rows; ++r) {
      w.row = static_cast<std::int64_t>(r);
      const Row row = get_row(r);
      if (!row.missing && row.run.kind != kind_none) {
        check_kind(e, row.run, w);
        BytesSink sink{out.bytes};
        visit_run(row.run, sink);
        total += sink.n;
      }
      if (splits) splits[r + 1] = static_cast<std::int64_t>(total);
    }
    out.shape = dims(total);
    w.row = -1;
    return;
  }
  for (std::size_t r = 0; r < rows; ++r) {
    w.row = static_cast<std::int64_t>(r);
    const Row row = get_row(r);
    if (!row.missing && row.run.kind != kind_none) {
      check_kind(e, row.run, w);
      CountSink sink;
      visit_run(row.run, sink);
      total += sink.n;
    }
    if (splits) splits[r + 1] = static_cast<std::int64_t>(total);
  }
  out.shape = dims(total);
  const DType dtype = e.dtype == FeatureType::float32 ? DType::float32 : DType::int64;
  out.values = Tensor(dtype, out.shape, allocator);
  std::size_t at = 0;
  for (std::size_t r = 0; r < rows && at < total; ++r) {
    const Row row = get_row(r);
    if (row.missing || row.run.kind == kind_none) continue;
    if (dtype == DType::float32) {
      WriteSink<float> sink{out.values.data<float>() + at, total - at};
      visit_run(row.run, sink);
      at += sink.n;
    } else {
      WriteSink<std::int64_t> sink{out.values.data<std::int64_t>() + at, total - at};
      visit_run(row.run, sink);
      at += sink.n;
    }
  }
  w.row = -1;
}

/// Records the last map entry of every spec'd key of a map<string, X> (Features
/// or FeatureLists) into slots. An entry without a key has key "".
inline void scan_map(const u8* begin, const u8* end, const SpecData& spec, Slot* slots) {
  wire::for_each_field(begin, end, [&](const Field& f) {
    if (f.number != 1 || f.wire != wire::length_type) return;
    std::string_view key;
    wire::for_each_field(f.begin, f.end, [&](const Field& g) {
      if (g.number == 1 && g.wire == wire::length_type) key = wire::as_view(g.begin, g.end);
    });
    if (auto i = spec.find(key)) slots[*i] = {f.begin, f.end};
  });
}

/// Example{features = 1}: every occurrence merges into one map.
inline void scan_example(std::string_view record, const SpecData& spec, Slot* slots) {
  const u8* begin = wire::as_bytes(record);
  wire::for_each_field(begin, begin + record.size(), [&](const Field& f) {
    if (f.number == 1 && f.wire == wire::length_type) scan_map(f.begin, f.end, spec, slots);
  });
}

inline std::vector<Slot>& scratch_slots(std::size_t n) {
  thread_local std::vector<Slot> slots;
  slots.assign(n, Slot{});
  return slots;
}

inline void check_example_spec(const SpecData& spec) {
  for (const SpecEntry& e : spec.entries) {
    if (e.form == FeatureForm::fixed_sequence) {
      throw InvalidArgument("feature '" + e.name +
                            "': FixedLenSequenceFeature is for the feature lists of a "
                            "SequenceExample; use FixedLenFeature or VarLenFeature");
    }
  }
}

/// Parses n records (record(i) -> string_view) into out: one row per record,
/// with a leading batch dimension if `batched`.
template <class GetRecord>
void parse_examples(std::size_t n, GetRecord&& record, const ExampleSpec& spec, bool batched,
                    ParsedExample& out) {
  const SpecData& data = spec.data();
  check_example_spec(data);
  const std::size_t nf = data.entries.size();
  std::vector<Slot>& slots = scratch_slots(n * nf);
  Where w;
  for (std::size_t i = 0; i < n; ++i) {
    if (batched) w.element = static_cast<std::int64_t>(i);
    try {
      scan_example(record(i), data, slots.data() + i * nf);
    } catch (const wire::WireError& e) {
      fail_malformed(w, e.what);
    }
  }
  std::vector<ParsedFeature>& features = ParsedExampleAccess::reset(out, spec);
  for (std::size_t f = 0; f < nf; ++f) {
    const SpecEntry& e = data.entries[f];
    w.feature = &e.name;
    Slot* column = slots.data() + f;
    std::int64_t current = -1;
    auto get_row = [&](std::size_t r) {
      current = static_cast<std::int64_t>(r);
      if (batched) w.element = current;
      const Slot s = column[r * nf];
      if (!s) return Row{};
      Run run = entry_run(s);
      return Row{run.kind == kind_none, run};  // no kind set: as if missing
    };
    try {
      fill_feature(e, n, batched, get_row, default_allocator(), w, features[f]);
    } catch (const wire::WireError& err) {
      if (batched) w.element = current;
      fail_malformed(w, err.what);
    }
  }
}

}  // namespace detail::example

/// Parses one serialized tf.Example into `out`, reusing its storage (tf:
/// parse_single_example): a result tensor that nothing else shares is
/// overwritten in place; copies the caller kept are left alone. Fixed-length features have the
/// spec's shape; variable-length ones shape [n]. Bytes views point into `record` (keep it alive) or
/// the spec. Throws DataLossError for malformed input and InvalidArgument for a type or count
/// mismatch or a missing required feature, naming the feature.
inline void parse_example(std::string_view record, const ExampleSpec& spec, ParsedExample& out) {
  detail::example::parse_examples(
      1, [record](std::size_t) { return record; }, spec, false, out);
}

/// Parses one serialized tf.Example; see the overload above.
inline ParsedExample parse_example(std::string_view record, const ExampleSpec& spec) {
  ParsedExample out;
  parse_example(record, spec, out);
  return out;
}

/// Parses a batch of serialized tf.Examples (tf: parse_example): fixed-length
/// features become [n, shape...] (written straight into one Tensor),
/// variable-length ones values [total] with row_splits [n + 1]. Errors name
/// the record's index as the context's element.
inline ParsedExample parse_example_batch(std::span<const std::string> records,
                                         const ExampleSpec& spec) {
  ParsedExample out;
  detail::example::parse_examples(
      records.size(), [records](std::size_t i) { return std::string_view(records[i]); }, spec, true,
      out);
  return out;
}
/// @copydoc parse_example_batch(std::span<const std::string>, const ExampleSpec&)
inline ParsedExample parse_example_batch(std::span<const std::string_view> records,
                                         const ExampleSpec& spec) {
  ParsedExample out;
  detail::example::parse_examples(
      records.size(), [records](std::size_t i) { return records[i]; }, spec, true, out);
  return out;
}

/// Parses a serialized tf.SequenceExample (tf: parse_single_sequence_example):
/// `context` as for parse_example; `sequence` describes feature lists with
/// FixedLenSequenceFeature ([steps, shape...]) or VarLenFeature (values with
/// row_splits [steps + 1]). A missing VarLenFeature list has zero steps.
inline ParsedSequenceExample parse_sequence_example(std::string_view record,
                                                    const ExampleSpec& context,
                                                    const ExampleSpec& sequence) {
  using namespace detail::example;
  namespace wire = detail::wire;
  const detail::SpecData& cdata = context.data();
  const detail::SpecData& sdata = sequence.data();
  check_example_spec(cdata);
  for (const detail::SpecEntry& e : sdata.entries) {
    if (e.form == detail::FeatureForm::fixed) {
      throw InvalidArgument("feature list '" + e.name +
                            "': use FixedLenSequenceFeature or VarLenFeature for feature lists");
    }
  }
  std::vector<Slot> slots(cdata.entries.size() + sdata.entries.size());
  Slot* cslots = slots.data();
  Slot* sslots = slots.data() + cdata.entries.size();
  Where w{.what = "SequenceExample"};
  const u8* begin = wire::as_bytes(record);
  try {
    wire::for_each_field(begin, begin + record.size(), [&](const Field& f) {
      if (f.wire != wire::length_type) return;
      if (f.number == 1) scan_map(f.begin, f.end, cdata, cslots);
      if (f.number == 2) scan_map(f.begin, f.end, sdata, sslots);
    });
  } catch (const wire::WireError& err) {
    fail_malformed(w, err.what);
  }
  ParsedSequenceExample out;
  std::vector<ParsedFeature>& context_out =
      detail::ParsedExampleAccess::reset(out.context, context);
  std::vector<ParsedFeature>& lists_out =
      detail::ParsedExampleAccess::reset(out.feature_lists, sequence);
  std::vector<Slot> steps;
  try {
    for (std::size_t f = 0; f < cdata.entries.size(); ++f) {
      w.feature = &cdata.entries[f].name;
      auto get_row = [&](std::size_t) {
        if (!cslots[f]) return Row{};
        Run run = entry_run(cslots[f]);
        return Row{run.kind == kind_none, run};
      };
      fill_feature(cdata.entries[f], 1, false, get_row, default_allocator(), w, context_out[f]);
    }
    w.row_name = "step";
    for (std::size_t f = 0; f < sdata.entries.size(); ++f) {
      const detail::SpecEntry& e = sdata.entries[f];
      w.feature = &e.name;
      steps.clear();
      if (sslots[f]) {
        // FeatureLists entry {key = 1, value = 2 (FeatureList{feature = 1 (Feature)})}.
        wire::for_each_field(sslots[f].begin, sslots[f].end, [&](const Field& v) {
          if (v.number != 2 || v.wire != wire::length_type) return;
          wire::for_each_field(v.begin, v.end, [&](const Field& s) {
            if (s.number == 1 && s.wire == wire::length_type) steps.push_back({s.begin, s.end});
          });
        });
      } else if (e.form == detail::FeatureForm::fixed_sequence && !e.allow_missing) {
        throw InvalidArgument("feature list '" + e.name +
                                  "' is required but missing (set allow_missing to accept that)",
                              {.stage = "parse_example"});
      }
      auto get_row = [&](std::size_t r) { return Row{false, feature_run(steps[r])}; };
      fill_feature(e, steps.size(), true, get_row, default_allocator(), w, lists_out[f]);
    }
  } catch (const wire::WireError& err) {
    fail_malformed(w, err.what);
  }
  return out;
}

/// The bytes of `bytes` as a Tensor of `dtype` and `shape` (tf.io.decode_raw,
/// little-endian). Throws InvalidArgument if the sizes differ.
inline Tensor decode_raw(std::string_view bytes, DType dtype, Shape shape,
                         Allocator& allocator = default_allocator()) {
  if (!shape.is_concrete()) {
    throw InvalidArgument("decode_raw: shape " + shape.to_string() + " must be fully known");
  }
  // Sizes are compared before allocating: a shape far larger than the bytes
  // (or than max_tensor_bytes) never reaches the allocator.
  const std::size_t want = detail::checked_byte_size(shape, dtype_size(dtype), "decode_raw");
  if (want != bytes.size()) {
    throw InvalidArgument("decode_raw: " + std::to_string(bytes.size()) + " bytes do not fill " +
                          std::string(dtype_name(dtype)) + shape.to_string() + " (" +
                          std::to_string(want) + " bytes)");
  }
  Tensor t(dtype, shape, allocator);
  if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

}  // namespace ingest
