// expect: filter: the predicate must be callable with const element& and return bool
#include <ingest/ingest.hpp>
#include <string>

int main() {
  auto ds = ingest::range(10).filter([](std::int64_t x) { return std::to_string(x); }).batch(2);
  for (auto&& b : ds) (void)b;
}
