// SHA-256 (FIPS 180-4), for checking record payloads against the fixtures'
// expected digests without OpenSSL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ingest::testing {

namespace sha256_detail {
// One 64-byte block into the state `h`. Plain arrays, scalars and shifts, no
// calls: the sanitizer builds run this at -O0 over megabytes of fixtures,
// where each std::array subscript and lambda would be a call.
inline void block(std::uint32_t (&h)[8], const unsigned char* p) {
  static constexpr std::uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  std::uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (std::uint32_t{p[4 * i]} << 24) | (std::uint32_t{p[4 * i + 1]} << 16) |
           (std::uint32_t{p[4 * i + 2]} << 8) | std::uint32_t{p[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t x = w[i - 15], y = w[i - 2];
    const std::uint32_t s0 = ((x >> 7) | (x << 25)) ^ ((x >> 18) | (x << 14)) ^ (x >> 3);
    const std::uint32_t s1 = ((y >> 17) | (y << 15)) ^ ((y >> 19) | (y << 13)) ^ (y >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], t = h[7];
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t s1 =
        ((e >> 6) | (e << 26)) ^ ((e >> 11) | (e << 21)) ^ ((e >> 25) | (e << 7));
    const std::uint32_t ch = (e & f) ^ (~e & g);
    const std::uint32_t t1 = t + s1 + ch + k[i] + w[i];
    const std::uint32_t s0 =
        ((a >> 2) | (a << 30)) ^ ((a >> 13) | (a << 19)) ^ ((a >> 22) | (a << 10));
    const std::uint32_t t2 = s0 + ((a & b) ^ (a & c) ^ (b & c));
    t = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += t;
}
}  // namespace sha256_detail

/// Lower-case hex SHA-256 of `data`.
inline std::string sha256_hex(std::string_view data) {
  std::uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t blocks = data.size() / 64;
  for (std::size_t i = 0; i < blocks; ++i) sha256_detail::block(h, p + 64 * i);
  // The padded end: the bytes after the last whole block, 0x80, zeros and
  // the length in bits (big-endian), in one block or two.
  unsigned char tail[128] = {};
  const std::size_t rest = data.size() % 64;
  if (rest > 0) std::memcpy(tail, p + 64 * blocks, rest);
  tail[rest] = 0x80;
  const std::size_t tail_size = rest < 56 ? 64 : 128;
  const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
  for (std::size_t i = 0; i < 8; ++i)
    tail[tail_size - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  sha256_detail::block(h, tail);
  if (tail_size == 128) sha256_detail::block(h, tail + 64);
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(64, '0');
  for (std::size_t i = 0; i < 64; ++i) out[i] = digits[(h[i / 8] >> (28 - 4 * (i % 8))) & 0xf];
  return out;
}

/// Lower-case hex of `data`.
inline std::string to_hex(std::string_view data) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(data.size() * 2);
  for (unsigned char c : data) {
    out += digits[c >> 4];
    out += digits[c & 0xf];
  }
  return out;
}

}  // namespace ingest::testing
