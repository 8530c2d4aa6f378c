// expect: or a type for which ingest::loader_fields is specialised
// batch() collects a struct without batch_traits into a std::vector, which a
// loader cannot copy field by field.
#include <ingest/ingest.hpp>
#include <ingest/loader.hpp>

struct Point {
  int x, y;
};

int main() {
  auto ds = ingest::range(10)
                .map([](std::int64_t x) {
                  return Point{static_cast<int>(x), 0};
                })
                .batch(4);
  for (auto&& b : ingest::HostLoader(ds)) (void)b;
}
