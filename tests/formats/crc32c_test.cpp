#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <ingest/formats/crc32c.hpp>

using namespace ingest;

namespace {
// Bit-at-a-time CRC-32C: the definition, for checking the fast paths.
std::uint32_t crc32c_reference(const unsigned char* p, std::size_t n) {
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
  }
  return ~c;
}
}  // namespace

TEST_CASE("crc32c matches the published check values", "[formats][crc32c]") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<unsigned char>(i);
    dec[i] = static_cast<unsigned char>(31 - i);
  }
  CHECK(crc32c(zeros.data(), 32) == 0x8A9136AAu);
  CHECK(crc32c(ones.data(), 32) == 0x62A8AB43u);
  CHECK(crc32c(inc.data(), 32) == 0x46DD794Eu);
  CHECK(crc32c(dec.data(), 32) == 0x113FDB5Cu);
  CHECK(detail::crc32c_portable(0, "123456789", 9) == 0xE3069283u);
}

TEST_CASE("crc32c: portable and hardware paths agree on every length and alignment",
          "[formats][crc32c]") {
  std::mt19937 rng(42);
  std::vector<unsigned char> data(3 * 8192 * 2 + 4096);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const bool hw = detail::crc32c_hardware_available();
  INFO("hardware crc32: " << hw);
  for (std::size_t n = 0; n <= 2100; ++n) {
    for (std::size_t offset : {0, 1, 3, 7}) {
      const unsigned char* p = data.data() + offset;
      const std::uint32_t expected = crc32c_reference(p, n);
      REQUIRE(detail::crc32c_portable(0, p, n) == expected);
#if INGEST_CRC32C_X86
      if (hw) REQUIRE(detail::crc32c_sse42(0, p, n) == expected);
      if (hw) REQUIRE(detail::crc32c_sse42<true>(0, p, n) == expected);
#endif
      REQUIRE(crc32c(p, n) == expected);
      REQUIRE(detail::crc32c_extend_streamed(0, p, n) == expected);
    }
  }
  // Lengths that exercise the long three-stream blocks and their combination.
  for (std::size_t n : {std::size_t{3 * 8192 - 1}, std::size_t{3 * 8192}, std::size_t{3 * 8192 + 5},
                        std::size_t{2 * 3 * 8192 + 777}, data.size() - 5}) {
    const std::uint32_t expected = crc32c_reference(data.data() + 5, n);
    CHECK(detail::crc32c_portable(0, data.data() + 5, n) == expected);
    CHECK(crc32c(data.data() + 5, n) == expected);
    CHECK(detail::crc32c_extend_streamed(0, data.data() + 5, n) == expected);
  }
}

TEST_CASE("crc32c_extend continues a CRC across pieces", "[formats][crc32c]") {
  const std::string s = "The quick brown fox jumps over the lazy dog, again and again and again.";
  const std::uint32_t whole = crc32c(s.data(), s.size());
  for (std::size_t cut = 0; cut <= s.size(); ++cut) {
    CHECK(crc32c_extend(crc32c(s.data(), cut), s.data() + cut, s.size() - cut) == whole);
    CHECK(detail::crc32c_portable(detail::crc32c_portable(0, s.data(), cut), s.data() + cut,
                                  s.size() - cut) == whole);
  }
}

TEST_CASE("TFRecord's CRC mask round-trips and matches TensorFlow's constant",
          "[formats][crc32c]") {
  for (std::uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x12345678u}) {
    CHECK(crc32c_unmask(crc32c_mask(c)) == c);
  }
  CHECK(crc32c_mask(0) == 0xa282ead8u);
  const std::uint32_t c = crc32c("123456789", 9);
  CHECK(masked_crc32c("123456789", 9) == (((c >> 15) | (c << 17)) + 0xa282ead8u));
}
