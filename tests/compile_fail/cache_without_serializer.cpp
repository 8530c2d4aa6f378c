// expect: cache(path): no ingest::serializer<T> for this element type
#include <ingest/ingest.hpp>

struct Point {
  int x, y;
};

int main() {
  auto ds = ingest::range(10)
                .map([](std::int64_t x) {
                  return Point{static_cast<int>(x), 0};
                })
                .cache("/tmp/points.cache")
                .batch(4);
  for (auto&& b : ds) (void)b;
}
