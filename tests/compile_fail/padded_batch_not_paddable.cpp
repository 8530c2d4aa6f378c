// expect: padded_batch: the element type cannot be padded
// Strings are not padded (tf.data pads tensors); batch() collects them instead.
#include <ingest/ingest.hpp>
#include <string>

int main() {
  auto ds = ingest::range(10).map([](std::int64_t x) { return std::to_string(x); }).padded_batch(4);
  for (auto&& b : ds) (void)b;
}
