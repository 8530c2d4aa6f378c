// TFRecord bytes built by hand (framing written here, CRCs from ingest's
// tested crc32c), so reader tests do not depend on TFRecordWriter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <ingest/formats/crc32c.hpp>

namespace ingest::testing {

inline void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

/// One record in TFRecord framing.
inline std::string frame_record(std::string_view payload) {
  std::string out, len;
  put_le(len, payload.size(), 8);
  out += len;
  put_le(out, masked_crc32c(len.data(), 8), 4);
  out += payload;
  put_le(out, masked_crc32c(payload.data(), payload.size()), 4);
  return out;
}

inline std::string frame_records(const std::vector<std::string>& payloads) {
  std::string out;
  for (const auto& p : payloads) out += frame_record(p);
  return out;
}

/// n payloads of varied sizes (0 included) and contents, from a seed.
inline std::vector<std::string> sample_payloads(std::size_t n, std::uint32_t seed = 1) {
  std::vector<std::string> out;
  std::uint32_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const std::size_t size = (i % 7 == 0) ? 0 : (x >> 8) % (i % 5 == 0 ? 5000 : 300);
    std::string p(size, '\0');
    for (auto& c : p) {
      x = x * 1664525u + 1013904223u;
      c = static_cast<char>(x >> 24);
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ingest::testing
