// Deterministic random numbers for shuffles and sampling: xoshiro256**
// seeded through splitmix64, and Lemire's unbiased bounded integers. Unlike
// std::uniform_int_distribution, the sequence for a seed is the same with
// every compiler and standard library, so a seeded shuffle gives the same
// order everywhere.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace ingest {

/// Mixes a 64-bit value (splitmix64's finaliser).
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Derives an independent seed from a seed and a stream number (e.g. an epoch).
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) noexcept {
  return mix64(seed ^ mix64(stream + 0x632be59bd9b4e019ULL));
}

/// The seed of element `position` (0-based, in its stage's input) of pass
/// `epoch` (IteratorContext::epoch) under `seed`: random_map's per-element
/// generator. Two rounds of derive_seed, so neighbouring positions and
/// epochs get unrelated streams, and the result depends on nothing else
/// (not the thread, the parallelism or the timing).
constexpr std::uint64_t element_seed(std::uint64_t seed, std::uint64_t epoch,
                                     std::uint64_t position) noexcept {
  return derive_seed(derive_seed(seed, epoch), position);
}

/// A seed from the operating system's entropy, for unseeded randomness.
/// (getrandom(2), as std::random_device does without `<random>`'s cost to
/// every translation unit.)
inline std::uint64_t random_seed() {
  std::uint64_t seed = 0;
  auto* p = reinterpret_cast<unsigned char*>(&seed);
  for (std::size_t got = 0; got < sizeof seed;) {
    const ssize_t n = ::getrandom(p + got, sizeof seed - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      throw std::runtime_error("ingest::random_seed: getrandom failed");  // as random_device throws
    }
  }
  return seed;
}

namespace detail {
__extension__ using uint128 =
    unsigned __int128;  // GCC and Clang; __extension__ keeps -Wpedantic quiet
}  // namespace detail

/// A deterministic generator (xoshiro256**): the same seed gives the same
/// sequence with every compiler and standard library. Not thread-safe: use one
/// per thread or stream.
class Rng {
 public:
  /// A generator seeded from `seed` (through splitmix64, so nearby seeds give
  /// unrelated sequences).
  explicit Rng(std::uint64_t seed) noexcept {
    for (auto& s : s_) s = seed = mix64(seed);
  }

  /// The next 64 random bits.
  std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, bound); bound > 0.
  std::uint64_t uniform(std::uint64_t bound) noexcept {
    detail::uint128 m = static_cast<detail::uint128>(next()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = -bound % bound;
      while (low < threshold) {
        m = static_cast<detail::uint128>(next()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  /// Uniform in [0, 1).
  double uniform01() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// The generator's state, to save and restore a stream mid-way (a
  /// checkpoint); an all-zero state is not one a seed gives.
  const std::uint64_t (&state() const noexcept)[4] { return s_; }
  /// Restores a state from state(): the sequence continues where it was saved.
  void set_state(const std::uint64_t (&s)[4]) noexcept {
    for (int i = 0; i < 4; ++i) s_[i] = s[i];
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
  }
  std::uint64_t s_[4];
};

}  // namespace ingest
