// expect: map: the function must return the new element (it returns void)
#include <ingest/ingest.hpp>

int main() {
  auto ds = ingest::range(10).map([](std::int64_t) {}).batch(4);
  for (auto&& b : ds) (void)b;
}
