// libFuzzer target: the tf.Example and tf.SequenceExample parsers over
// arbitrary bytes, with specs of every form and type (short names, so the
// fuzzer finds them). Any input must parse or raise an ingest::Error; every
// value handed back is read, so that ASan checks the views stay inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <ingest/formats/example.hpp>

namespace {

using ingest::FeatureType;
using ingest::FixedLenFeature;
using ingest::FixedLenSequenceFeature;
using ingest::VarLenFeature;

const ingest::ExampleSpec& example_spec() {
  static const ingest::ExampleSpec spec{
      {"a", FixedLenFeature{.dtype = FeatureType::int64,
                            .shape = {2},
                            .default_value = std::vector<std::int64_t>{-1}}},
      {"b",
       FixedLenFeature{
           .dtype = FeatureType::float32, .shape = {1}, .default_value = std::vector<float>{0.5f}}},
      {"c", FixedLenFeature{.dtype = FeatureType::bytes,
                            .shape = {},
                            .default_value = std::vector<std::string>{"none"}}},
      {"d", VarLenFeature{.dtype = FeatureType::int64}},
      {"e", VarLenFeature{.dtype = FeatureType::float32}},
      {"f", VarLenFeature{.dtype = FeatureType::bytes}},
      {"", VarLenFeature{.dtype = FeatureType::bytes}},
  };
  return spec;
}

const ingest::ExampleSpec& sequence_spec() {
  static const ingest::ExampleSpec spec{
      {"a",
       FixedLenSequenceFeature{.dtype = FeatureType::int64, .shape = {2}, .allow_missing = true}},
      {"b",
       FixedLenSequenceFeature{.dtype = FeatureType::float32, .shape = {}, .allow_missing = true}},
      {"c", VarLenFeature{.dtype = FeatureType::bytes}},
      {"d", VarLenFeature{.dtype = FeatureType::int64}},
  };
  return spec;
}

std::uint64_t touch(const ingest::ParsedExample& parsed) {
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    const ingest::ParsedFeature& f = parsed.at(i);
    for (std::string_view b : f.bytes) {
      for (char c : b) h = h * 31 + static_cast<unsigned char>(c);
    }
    if (f.values.defined() && f.values.nbytes()) {
      const auto* p = static_cast<const unsigned char*>(f.values.raw_data());
      for (std::size_t k = 0; k < f.values.nbytes(); ++k) h = h * 31 + p[k];
    }
    if (f.row_splits.defined()) {
      for (std::int64_t s : f.row_splits.values<std::int64_t>()) h += static_cast<std::uint64_t>(s);
    }
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::uint64_t h = 0;
  try {
    h += touch(ingest::parse_example(input, example_spec()));
  } catch (const ingest::Error&) {
  }
  try {
    // The input split in two records, parsed as a batch.
    const std::size_t cut = size ? data[0] % (size + 1) : 0;
    const std::vector<std::string_view> records{input.substr(0, cut), input.substr(cut)};
    h += touch(
        ingest::parse_example_batch(std::span<const std::string_view>(records), example_spec()));
  } catch (const ingest::Error&) {
  }
  try {
    const ingest::ParsedSequenceExample s =
        ingest::parse_sequence_example(input, example_spec(), sequence_spec());
    h += touch(s.context) + touch(s.feature_lists);
  } catch (const ingest::Error&) {
  }
  if (h == 0xdeadbeef) std::puts("");  // keep the reads
  return 0;
}
