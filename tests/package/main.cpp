// Built against an installed (or add_subdirectory'd) ingest; prints a checksum.
#include <cstdint>
#include <iostream>

#include <ingest/ingest.hpp>

int main() {
  std::int64_t sum = 0;
  for (const ingest::Tensor& b :
       ingest::range(100).map([](std::int64_t x) { return x * 2; }).batch(10)) {
    for (std::int64_t v : b.values<std::int64_t>()) sum += v;
  }
  std::cout << "consumer sum " << sum << "\n";
  return sum == 9900 ? 0 : 1;
}
