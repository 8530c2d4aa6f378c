// W2's map function (../../shared/bench/WORKLOADS.md) as a C symbol in a shared
// library, so that the Python peers call the same machine code through ctypes
// (which lets go of the GIL during the call): a CPU-bound pure function of
// ~20 us on a current x86 core.
#include <cstdint>

extern "C" std::int64_t ingest_compare_w2(std::int64_t x) {
  constexpr std::int64_t rounds = 10'000;
  auto h = static_cast<std::uint64_t>(x);
  for (std::int64_t k = 0; k < rounds; ++k) {
    h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    h ^= h >> 33;
  }
  return static_cast<std::int64_t>(h & 0xffff);
}
