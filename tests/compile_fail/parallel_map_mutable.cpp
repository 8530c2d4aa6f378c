// expect: no mutable lambdas
// A mutable lambda given to a parallel map: it would run on several threads at once.
#include <ingest/ingest.hpp>

int main() {
  int calls = 0;
  auto ds = ingest::range(10)
                .map(
                    [calls](std::int64_t x) mutable {
                      ++calls;
                      return x;
                    },
                    {.parallelism = 2})
                .batch(4);
  for (auto&& b : ds) (void)b;
}
