// libFuzzer target: shape arithmetic, decode_raw and padded_batch with
// fuzzer-chosen dtypes, dimensions (small, unknown, negative or huge),
// padding values and byte strings. Any input must end in tensors or an
// ingest::Error: never a crash, an overflow, an out-of-bounds write or an
// allocation beyond max_tensor_bytes. Sizes the fuzzer process cannot hold
// (between its memory limit and max_tensor_bytes) are not built: they are
// the unit tests' business.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>
#include <vector>

#include <ingest/core/padding.hpp>
#include <ingest/core/shape.hpp>
#include <ingest/core/tensor.hpp>
#include <ingest/formats/example.hpp>

namespace {

// Reads the input front to back; zeros once it runs out.
struct Input {
  const std::uint8_t* data;
  std::size_t size;
  std::uint8_t byte() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return v;
  }
  // A dimension: mostly small, sometimes unknown, negative or huge.
  std::int64_t dim() {
    const std::uint8_t kind = byte();
    switch (kind % 8) {
      case 0: return -1;
      case 1: return static_cast<std::int64_t>(u64());  // anything, negative included
      case 2: return std::int64_t{1} << (kind % 63);    // powers of two up to 2^62
      default: return kind % 9;
    }
  }
  std::vector<std::int64_t> dims(std::size_t max_rank) {
    std::vector<std::int64_t> d(byte() % (max_rank + 1));
    for (auto& x : d) x = dim();
    return d;
  }
};

constexpr std::size_t buildable_bytes = std::size_t{1} << 20;
constexpr ingest::DType dtypes[] = {
    ingest::DType::boolean, ingest::DType::uint8,   ingest::DType::int8,     ingest::DType::uint16,
    ingest::DType::int16,   ingest::DType::uint32,  ingest::DType::int32,    ingest::DType::uint64,
    ingest::DType::int64,   ingest::DType::float16, ingest::DType::bfloat16, ingest::DType::float32,
    ingest::DType::float64};

// Whether a shape is small enough for this process to allocate.
bool buildable(const ingest::Shape& s, std::size_t element) {
  return ingest::detail::checked_byte_size(s, element) <= buildable_bytes;
}

void shape_arithmetic(Input& in) {
  const std::vector<std::int64_t> d = in.dims(ingest::Shape::max_rank + 1);
  const ingest::Shape s{std::span<const std::int64_t>(d)};  // may throw: rank, dims < -1
  (void)s.num_elements();                                   // saturates, never overflows
  const std::size_t element = ingest::dtype_size(dtypes[in.byte() % 13]);
  try {
    const std::size_t bytes = ingest::detail::checked_byte_size(s, element);
    if (bytes > ingest::max_tensor_bytes) __builtin_trap();
    if (bytes / element != static_cast<std::uint64_t>(s.num_elements())) __builtin_trap();
  } catch (const ingest::InvalidArgument&) {
  }
  if (s.rank() < ingest::Shape::max_rank) (void)s.prepend(static_cast<std::int64_t>(in.u64() >> 1));
}

void decode(Input& in) {
  const ingest::DType dtype = dtypes[in.byte() % 13];
  const std::vector<std::int64_t> d = in.dims(4);
  const ingest::Shape shape{std::span<const std::int64_t>(d)};
  const std::string_view bytes(reinterpret_cast<const char*>(in.data), in.size);
  // decode_raw compares sizes before allocating, so any shape is safe here.
  const ingest::Tensor t = ingest::decode_raw(bytes, dtype, shape);
  if (t.nbytes() != bytes.size() || !(t.shape() == shape)) __builtin_trap();
}

void pad(Input& in) {
  const ingest::DType dtype = dtypes[in.byte() % 13];
  const std::size_t element = ingest::dtype_size(dtype);
  const std::size_t rank = in.byte() % 4;
  const std::size_t n = 1 + in.byte() % 4;
  std::vector<ingest::Tensor> elems;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int64_t> d(rank);
    for (auto& x : d) x = in.byte() % 6;
    const ingest::Shape s{std::span<const std::int64_t>(d)};
    ingest::Tensor t(dtype, s);
    if (t.nbytes()) std::memset(t.raw_data(), in.byte(), t.nbytes());
    elems.push_back(std::move(t));
  }
  ingest::PaddedBatchOptions options;
  if (in.byte() & 1) {
    std::vector<std::int64_t> d = in.dims(4);
    if (in.byte() & 1) d.resize(rank, -1);  // mostly the right rank
    options.padded_shapes.emplace_back(std::span<const std::int64_t>(d));
  }
  if (in.byte() & 1) {
    const std::uint64_t bits = in.u64();
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    options.padding_values.push_back((bits & 1) ? v : static_cast<double>(in.byte() % 7) - 3);
  }
  ingest::detail::check_padded_batch_options(static_cast<std::int64_t>(n), options, 1);
  if (!options.padded_shapes.empty() && options.padded_shapes[0].rank() == rank) {
    // The batch's shape, as padding computes it. Over max_tensor_bytes,
    // padding must refuse it with an ingest error; under it but too big for
    // the fuzzer's memory, it is not built.
    ingest::Shape biggest = options.padded_shapes[0];
    for (std::size_t k = 0; k < rank; ++k) {
      if (biggest[k] >= 0) continue;
      biggest[k] = 0;
      for (const auto& e : elems) biggest[k] = std::max(biggest[k], e.dim(k));
    }
    biggest = biggest.prepend(static_cast<std::int64_t>(n));
    bool over = false;
    try {
      (void)ingest::detail::checked_byte_size(biggest, element);
    } catch (const ingest::InvalidArgument&) {
      over = true;
    }
    if (!over && !buildable(biggest, element)) return;
  }
  const ingest::Tensor batch = ingest::padded_batch_traits<ingest::Tensor>::build(
      n, [&](std::size_t i) -> ingest::Tensor& { return elems[i]; }, options, 0,
      ingest::default_allocator());
  if (batch.rank() != rank + 1 || batch.dim(0) != static_cast<std::int64_t>(n)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{data, size};
  const std::uint8_t what = in.byte();
  try {
    switch (what % 3) {
      case 0: shape_arithmetic(in); break;
      case 1: decode(in); break;
      default: pad(in); break;
    }
  } catch (const ingest::Error&) {
    // The one acceptable failure.
  }
  return 0;
}
