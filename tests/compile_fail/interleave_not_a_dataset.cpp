// expect: interleave: the function must return a dataset
#include <ingest/ingest.hpp>
#include <string>

int main() {
  auto ds = ingest::list_files("/tmp/*.tfrecord")
                .interleave([](const std::string& path) { return path; }, {.cycle_length = 2})
                .batch(4);
  for (auto&& b : ds) (void)b;
}
