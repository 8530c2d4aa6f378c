// Random tf.Examples built with protobuf (the tests' own copy of the schema),
// a plain reference form of their features, and an independent hand encoder
// that writes the same content in the other encodings protobuf accepts
// (unpacked values, split lists, repeated keys, unknown fields, ...).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "example.pb.h"

namespace ingest::testing {

namespace pb = ::ingest_test::tf;

/// A feature as plain values: kind -1 (none), 0 bytes, 1 float (bit patterns), 2 int64.
struct RefFeature {
  int kind = -1;
  std::vector<std::string> bytes;
  std::vector<std::uint32_t> floats;
  std::vector<std::int64_t> ints;
  std::size_t size() const {
    return kind == 0 ? bytes.size() : kind == 1 ? floats.size() : ints.size();
  }
  friend bool operator==(const RefFeature&, const RefFeature&) = default;
};
using RefFeatures = std::map<std::string, RefFeature>;

}  // namespace ingest::testing

template <>
struct Catch::StringMaker<ingest::testing::RefFeature> {
  static std::string convert(const ingest::testing::RefFeature& f) {
    std::string s = "kind " + std::to_string(f.kind) + ":";
    if (f.kind == 0) {
      for (const auto& b : f.bytes) s += " '" + b + "'";
    } else if (f.kind == 1) {
      for (auto b : f.floats) s += " 0x" + Catch::StringMaker<unsigned>::convert(b);
    } else {
      for (auto v : f.ints) s += " " + std::to_string(v);
    }
    return s;
  }
};

namespace ingest::testing {

inline RefFeature reference_of(const pb::Feature& f) {
  RefFeature r;
  switch (f.kind_case()) {
    case pb::Feature::kBytesList:
      r.kind = 0;
      for (const auto& v : f.bytes_list().value()) r.bytes.push_back(v);
      break;
    case pb::Feature::kFloatList:
      r.kind = 1;
      for (float v : f.float_list().value()) {
        std::uint32_t b;
        std::memcpy(&b, &v, 4);
        r.floats.push_back(b);
      }
      break;
    case pb::Feature::kInt64List:
      r.kind = 2;
      for (auto v : f.int64_list().value()) r.ints.push_back(v);
      break;
    default: break;
  }
  return r;
}

inline RefFeatures reference_of(const pb::Features& fs) {
  RefFeatures out;
  for (const auto& [name, f] : fs.feature()) out[name] = reference_of(f);
  return out;
}

class RandomExamples {
 public:
  explicit RandomExamples(std::uint64_t seed) : rng_(seed) {}

  std::uint64_t next(std::uint64_t n) { return rng_() % n; }

  std::string key() {
    static const char* const keys[] = {"image",
                                       "label",
                                       "a",
                                       "",
                                       "x/y:z",
                                       "ключ",
                                       "a_rather_long_feature_name_for_the_hash_table",
                                       "f0",
                                       "f1",
                                       "f2",
                                       "f3",
                                       "f4",
                                       "f5"};
    return keys[next(std::size(keys))];
  }

  void fill(pb::Feature& f, int kind, std::size_t count) {
    switch (kind) {
      case 0: {
        auto* l = f.mutable_bytes_list();
        for (std::size_t i = 0; i < count; ++i) {
          std::string v(next(5) == 0 ? 300 + next(200) : next(12), '\0');
          for (auto& c : v) c = static_cast<char>(next(256));
          l->add_value(v);
        }
        break;
      }
      case 1: {
        auto* l = f.mutable_float_list();
        for (std::size_t i = 0; i < count; ++i) l->add_value(random_float());
        break;
      }
      case 2: {
        auto* l = f.mutable_int64_list();
        for (std::size_t i = 0; i < count; ++i) l->add_value(random_int());
        break;
      }
      default: break;  // no kind
    }
  }

  pb::Example example() {
    pb::Example ex;
    auto* map = ex.mutable_features()->mutable_feature();
    const std::size_t n = next(8);
    for (std::size_t i = 0; i < n; ++i) {
      pb::Feature& f = (*map)[key()];
      f.Clear();
      fill(f, static_cast<int>(next(4)) - 1, next(4) == 0 ? next(40) : next(4));
    }
    return ex;
  }

  pb::SequenceExample sequence_example() {
    pb::SequenceExample ex;
    *ex.mutable_context() = example().features();
    auto* lists = ex.mutable_feature_lists()->mutable_feature_list();
    const std::size_t n = next(5);
    for (std::size_t i = 0; i < n; ++i) {
      pb::FeatureList& list = (*lists)[key()];
      list.Clear();
      const int kind = static_cast<int>(next(3));
      const std::size_t steps = next(6);
      for (std::size_t s = 0; s < steps; ++s) {
        fill(*list.add_feature(), next(6) == 0 ? -1 : kind, next(5));
      }
    }
    return ex;
  }

  float random_float() {
    std::uint32_t bits;
    switch (next(6)) {
      case 0: bits = 0x7f800000u | static_cast<std::uint32_t>(1 + next(0x7fffff)); break;  // NaN
      case 1: bits = next(2) ? 0x7f800000u : 0xff800000u; break;                           // inf
      case 2: bits = static_cast<std::uint32_t>(next(0x800000)); break;  // denormal
      case 3: bits = 0x80000000u; break;                                 // -0
      default: bits = static_cast<std::uint32_t>(rng_()); break;
    }
    if (next(2)) bits |= 0x80000000u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  std::int64_t random_int() {
    switch (next(5)) {
      case 0: return std::numeric_limits<std::int64_t>::min();
      case 1: return std::numeric_limits<std::int64_t>::max();
      case 2: return -static_cast<std::int64_t>(next(1000));
      case 3: return static_cast<std::int64_t>(next(10));
      default: return static_cast<std::int64_t>(rng_());
    }
  }

 private:
  std::mt19937_64 rng_;
};

/// Writes protobuf wire bytes by hand, with its own varint code.
struct HandEncoder {
  std::string out;
  void varint(std::uint64_t v) {
    do {
      unsigned char b = v & 0x7f;
      v >>= 7;
      if (v) b |= 0x80;
      out += static_cast<char>(b);
    } while (v);
  }
  void tag(std::uint32_t field, std::uint32_t wire) { varint((std::uint64_t{field} << 3) | wire); }
  void bytes(std::uint32_t field, const std::string& s) {
    tag(field, 2);
    varint(s.size());
    out += s;
  }
  void fixed32(std::uint32_t field, std::uint32_t v) {
    tag(field, 5);
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  }
};

/// Re-encodes features in randomly chosen alternative (but equivalent) forms.
class OddEncoder {
 public:
  explicit OddEncoder(std::uint64_t seed) : rng_(seed) {}

  std::string example(const RefFeatures& features) {
    // Features split over up to three `features` fields, with decoys and unknowns.
    std::vector<std::string> entries;
    for (const auto& [name, f] : features) {
      if (coin(4)) entries.push_back(entry(name, decoy(f)));  // replaced by the later one
      entries.push_back(entry(name, f));
    }
    HandEncoder e;
    std::size_t i = 0;
    while (i < entries.size() || e.out.empty()) {
      const std::size_t take = entries.empty() ? 0 : 1 + rng_() % entries.size();
      HandEncoder map;
      for (std::size_t k = 0; k < take && i < entries.size(); ++k, ++i) {
        unknown(map);
        map.bytes(1, entries[i]);
      }
      unknown(e);
      e.bytes(1, map.out);
      if (entries.empty()) break;
    }
    unknown(e);
    return e.out;
  }

  std::string entry(const std::string& name, const RefFeature& f) {
    // The Feature may come as two value fields, merged by the parser.
    std::vector<std::string> chunks;
    if (f.kind >= 0 && f.size() >= 2 && coin(3)) {
      const std::size_t cut = 1 + rng_() % (f.size() - 1);
      chunks.push_back(feature(slice(f, 0, cut), true));
      chunks.push_back(feature(slice(f, cut, f.size()), false));
    } else {
      chunks.push_back(feature(f, true));
    }
    HandEncoder e;
    const bool key_last = coin(4);
    if (!key_last) e.bytes(1, name);
    for (const auto& c : chunks) {
      unknown(e);
      e.bytes(2, c);
    }
    if (key_last) e.bytes(1, name);
    unknown(e);
    return e.out;
  }

  // A Feature message; `decoy_first` may put a list of another kind before it.
  std::string feature(const RefFeature& f, bool decoy_first) {
    HandEncoder e;
    unknown(e);
    if (f.kind < 0) return e.out;
    if (decoy_first && coin(4)) {
      RefFeature other;
      other.kind = (f.kind + 1) % 3;
      other.ints = {1, 2};
      other.floats = {0x3f800000u};
      other.bytes = {"decoy"};
      e.bytes(static_cast<std::uint32_t>(other.kind) + 1, list(other));
    }
    // The values may be split over two lists of the same kind.
    if (f.size() >= 2 && coin(3)) {
      const std::size_t cut = rng_() % f.size();
      e.bytes(static_cast<std::uint32_t>(f.kind) + 1, list(slice(f, 0, cut)));
      unknown(e);
      e.bytes(static_cast<std::uint32_t>(f.kind) + 1, list(slice(f, cut, f.size())));
    } else {
      e.bytes(static_cast<std::uint32_t>(f.kind) + 1, list(f));
    }
    return e.out;
  }

  std::string list(const RefFeature& f) {
    HandEncoder e;
    unknown(e);
    const bool packed = coin(2);
    if (f.kind == 0) {
      for (const auto& b : f.bytes) e.bytes(1, b);
    } else if (f.kind == 1) {
      if (packed) {
        HandEncoder p;
        for (auto b : f.floats) {
          for (int i = 0; i < 4; ++i) p.out += static_cast<char>((b >> (8 * i)) & 0xff);
        }
        if (!f.floats.empty()) e.bytes(1, p.out);
      } else {
        for (auto b : f.floats) e.fixed32(1, b);
      }
    } else {
      if (packed) {
        HandEncoder p;
        for (auto v : f.ints) p.varint(static_cast<std::uint64_t>(v));
        if (!f.ints.empty()) e.bytes(1, p.out);
      } else {
        for (auto v : f.ints) {
          e.tag(1, 0);
          e.varint(static_cast<std::uint64_t>(v));
        }
      }
    }
    unknown(e);
    return e.out;
  }

 private:
  bool coin(std::uint64_t n) { return rng_() % n == 0; }

  static RefFeature slice(const RefFeature& f, std::size_t b, std::size_t e) {
    RefFeature s;
    s.kind = f.kind;
    if (f.kind == 0)
      s.bytes.assign(f.bytes.begin() + static_cast<std::ptrdiff_t>(b),
                     f.bytes.begin() + static_cast<std::ptrdiff_t>(e));
    if (f.kind == 1)
      s.floats.assign(f.floats.begin() + static_cast<std::ptrdiff_t>(b),
                      f.floats.begin() + static_cast<std::ptrdiff_t>(e));
    if (f.kind == 2)
      s.ints.assign(f.ints.begin() + static_cast<std::ptrdiff_t>(b),
                    f.ints.begin() + static_cast<std::ptrdiff_t>(e));
    return s;
  }

  RefFeature decoy(const RefFeature& f) {
    RefFeature d;
    d.kind = static_cast<int>(rng_() % 4) - 1;
    d.ints = {static_cast<std::int64_t>(rng_())};
    d.floats = {1u, 2u};
    d.bytes = {"old"};
    (void)f;
    return d;
  }

  // Sometimes an unknown field of a random wire type (field numbers unused by the schema).
  void unknown(HandEncoder& e) {
    if (!coin(5)) return;
    const std::uint32_t field = 4 + static_cast<std::uint32_t>(rng_() % 1000);
    switch (rng_() % 5) {
      case 0:
        e.tag(field, 0);
        e.varint(rng_());
        break;
      case 1:
        e.tag(field, 1);
        e.out.append("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
        break;
      case 2: e.bytes(field, "unknown payload"); break;
      case 3:
        e.tag(field, 3);  // a group holding a varint
        e.tag(1, 0);
        e.varint(5);
        e.tag(field, 4);
        break;
      default: e.fixed32(field, 0xabcdef01u); break;
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace ingest::testing
