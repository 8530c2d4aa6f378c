#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <ingest/formats/example_builder.hpp>

#include "support/example_reference.hpp"

using namespace ingest;
using namespace ingest::testing;

TEST_CASE("ExampleBuilder output is what protobuf reads", "[formats][example_builder]") {
  const float nan_bits_value = [] {
    const std::uint32_t bits = 0x7fc12345u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }();
  const std::string bytes = ExampleBuilder()
                                .add_bytes("b", {"", std::string("\0\xff", 2), "hello"})
                                .add_floats("f", {1.5f, -0.0f, nan_bits_value})
                                .add_int64s("i", {0, -1, std::numeric_limits<std::int64_t>::min()})
                                .add_floats("empty_floats", std::span<const float>())
                                .add_empty("none")
                                .serialize();
  pb::Example ex;
  REQUIRE(ex.ParseFromString(bytes));
  const RefFeatures ref = reference_of(ex.features());
  REQUIRE(ref.size() == 5);
  CHECK(ref.at("b").bytes == std::vector<std::string>{"", std::string("\0\xff", 2), "hello"});
  CHECK(ref.at("f").floats == std::vector<std::uint32_t>{0x3fc00000u, 0x80000000u, 0x7fc12345u});
  CHECK(ref.at("i").ints ==
        std::vector<std::int64_t>{0, -1, std::numeric_limits<std::int64_t>::min()});
  CHECK(ref.at("empty_floats").kind == 1);
  CHECK(ref.at("empty_floats").floats.empty());
  CHECK(ref.at("none").kind == -1);
  // Same bytes as protobuf's own serialization of a one-feature Example.
  pb::Example one;
  (*one.mutable_features()->mutable_feature())["label"].mutable_int64_list()->add_value(7);
  CHECK(ExampleBuilder().add_int64s("label", {7}).serialize() == one.SerializeAsString());
}

TEST_CASE("ExampleBuilder reproduces random Examples", "[formats][example_builder]") {
  RandomExamples gen(11);
  for (int i = 0; i < 500; ++i) {
    const pb::Example ex = gen.example();
    const RefFeatures ref = reference_of(ex.features());
    ExampleBuilder b;
    for (const auto& [name, f] : ref) {
      if (f.kind == -1) b.add_empty(name);
      if (f.kind == 0) b.add_bytes(name, f.bytes);
      if (f.kind == 1) {
        std::vector<float> v(f.floats.size());
        if (!v.empty()) std::memcpy(v.data(), f.floats.data(), v.size() * 4);
        b.add_floats(name, v);
      }
      if (f.kind == 2) b.add_int64s(name, f.ints);
    }
    pb::Example back;
    REQUIRE(back.ParseFromString(b.serialize()));
    CHECK(reference_of(back.features()) == ref);
    std::string reused = "stale";
    b.serialize_to(reused);
    CHECK(reused == b.serialize());
  }
}

TEST_CASE("SequenceExampleBuilder output is what protobuf reads", "[formats][example_builder]") {
  SequenceExampleBuilder b;
  b.context().add_int64s("length", {2}).add_bytes("id", {"seq-1"});
  b.feature_list("tokens").add_int64s({1, 2}).add_int64s({3});
  b.feature_list("scores").add_floats({0.5f}).add_empty();
  b.feature_list("tokens").add_int64s({});
  pb::SequenceExample ex;
  REQUIRE(ex.ParseFromString(b.serialize()));
  CHECK(reference_of(ex.context()).at("length").ints == std::vector<std::int64_t>{2});
  const auto& lists = ex.feature_lists().feature_list();
  REQUIRE(lists.at("tokens").feature_size() == 3);
  CHECK(reference_of(lists.at("tokens").feature(1)).ints == std::vector<std::int64_t>{3});
  CHECK(reference_of(lists.at("tokens").feature(2)).kind == 2);
  REQUIRE(lists.at("scores").feature_size() == 2);
  CHECK(reference_of(lists.at("scores").feature(1)).kind == -1);
  b.clear();
  pb::SequenceExample empty;
  REQUIRE(empty.ParseFromString(b.serialize()));
  CHECK(empty.context().feature().empty());
  CHECK(empty.feature_lists().feature_list().empty());
}
