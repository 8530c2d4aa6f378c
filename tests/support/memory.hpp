// The process's memory as the kernel counts it, for tests that bound what
// hostile input may cost: the resident set now, its peak, and a reset of
// the peak (Linux: /proc/self/status, /proc/self/clear_refs). Test support.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ingest::testing {

/// False under AddressSanitizer, whose redzones, shadow and quarantine of
/// freed memory make the resident set say nothing of what the code holds,
/// and under ThreadSanitizer, whose shadow grows with every byte touched:
/// memory bounds are then not checked (the release build checks them).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool memory_is_measured = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool memory_is_measured = false;
#else
inline constexpr bool memory_is_measured = true;
#endif
#else
inline constexpr bool memory_is_measured = true;
#endif

/// A field of /proc/self/status ("VmRSS", "VmHWM") in bytes; 0 if absent.
inline std::uint64_t status_bytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  std::uint64_t kb = 0;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = std::strtoull(line + n + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}
/// The resident set now, and its peak since the last reset_peak_rss().
inline std::uint64_t rss_bytes() { return status_bytes("VmRSS"); }
inline std::uint64_t peak_rss_bytes() { return status_bytes("VmHWM"); }
/// Sets the peak (VmHWM) back to the current resident set; false where the
/// kernel does not allow it.
inline bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace ingest::testing
