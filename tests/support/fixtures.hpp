// The real TFRecord files in tests/fixtures/tfrecord (written by TensorFlow,
// TFX and Beam; see SOURCES.md there) and their expected decodings, plus
// checks of parsed features against the JSON.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <ingest/ingest.hpp>

#include "support/files.hpp"
#include "support/paths.hpp"
#include "support/sha256.hpp"

namespace ingest::testing {

inline std::string fixture_dir() { return std::string(INGEST_FIXTURES_DIR) + "/tfrecord"; }

struct Fixture {
  std::string name;  // file name
  std::string path;
  nlohmann::json expected;  // the whole .expected.json
  Compression compression = Compression::none;
};

/// Every fixture, sorted by name.
inline std::vector<Fixture> all_fixtures() {
  std::vector<Fixture> out;
  for (const auto& e : std::filesystem::directory_iterator(fixture_dir())) {
    const std::string file = e.path().filename().string();
    const std::string suffix = ".expected.json";
    if (file.size() <= suffix.size() || file.substr(file.size() - suffix.size()) != suffix) {
      continue;
    }
    Fixture f;
    f.name = file.substr(0, file.size() - suffix.size());
    f.path = fixture_dir() + "/" + f.name;
    f.expected = nlohmann::json::parse(file_contents(e.path().string()));
    const std::string c = f.expected.at("compression");
    f.compression = c == "gzip"   ? Compression::gzip
                    : c == "zlib" ? Compression::zlib
                                  : Compression::none;
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(),
            [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
  return out;
}

inline FeatureType feature_type_of(const std::string& kind) {
  if (kind == "bytes_list") return FeatureType::bytes;
  if (kind == "int64_list") return FeatureType::int64;
  return FeatureType::float32;  // float_list, or "none" (any type parses as empty)
}

inline std::uint32_t float_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Checks values [begin, end) of `got` against the JSON feature `expected`.
inline void check_feature(const nlohmann::json& expected, const ParsedFeature& got,
                          std::size_t begin, std::size_t end, const std::string& where) {
  INFO(where);
  const std::string kind = expected.at("kind");
  const auto& values = expected.at("values");
  REQUIRE(end - begin == values.size());
  if (kind == "none") return;
  REQUIRE(got.dtype == feature_type_of(kind));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto& v = values[i];
    if (kind == "bytes_list") {
      const std::string_view b = got.bytes.at(begin + i);
      if (v.is_string()) {
        CHECK(to_hex(b) == v.get<std::string>());
      } else {
        CHECK(b.size() == v.at("len").get<std::size_t>());
        CHECK(sha256_hex(b) == v.at("sha256").get<std::string>());
        CHECK(to_hex(b.substr(0, 32)) == v.at("head_hex").get<std::string>());
      }
    } else if (kind == "int64_list") {
      CHECK(got.values.data<std::int64_t>()[begin + i] == v.get<std::int64_t>());
    } else {
      const float f = got.values.data<float>()[begin + i];
      if (expected.contains("bits")) {
        const auto& bits = expected["bits"][i];
        CHECK(float_bits(f) == (bits.is_string() ? std::stoul(bits.get<std::string>(), nullptr, 16)
                                                 : bits.get<std::uint32_t>()));
      } else {
        CHECK(float_bits(f) == float_bits(std::strtof(v.get<std::string>().c_str(), nullptr)));
      }
    }
  }
}

/// A spec of VarLenFeatures for the features of a JSON record's map.
inline ExampleSpec var_len_spec(const nlohmann::json& features) {
  std::vector<std::pair<std::string, FeatureSpec>> spec;
  for (const auto& [name, feature] : features.items()) {
    spec.emplace_back(name, VarLenFeature{.dtype = feature_type_of(feature.at("kind"))});
  }
  return ExampleSpec(std::move(spec));
}

/// A spec of VarLenFeatures for a JSON record's feature lists (the type of
/// their first step with a kind).
inline ExampleSpec var_len_list_spec(const nlohmann::json& lists) {
  std::vector<std::pair<std::string, FeatureSpec>> spec;
  for (const auto& [name, steps] : lists.items()) {
    std::string kind = "none";
    for (const auto& s : steps) {
      if (s.at("kind") != "none") {
        kind = s.at("kind");
        break;
      }
    }
    spec.emplace_back(name, VarLenFeature{.dtype = feature_type_of(kind)});
  }
  return ExampleSpec(std::move(spec));
}

/// Checks every feature of a parsed single Example against the JSON map.
inline void check_features(const nlohmann::json& features, const ParsedExample& got,
                           const std::string& where) {
  for (const auto& [name, feature] : features.items()) {
    const ParsedFeature& f = got[name];
    check_feature(feature, f, 0, f.shape[0], where + " feature " + name);
  }
}

}  // namespace ingest::testing
