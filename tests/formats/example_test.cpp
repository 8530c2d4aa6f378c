#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <ingest/formats/example.hpp>
#include <ingest/formats/example_builder.hpp>
#include <ingest/formats/tfrecord_format.hpp>

#include "support/example_reference.hpp"
#include "support/fixtures.hpp"

using namespace ingest;
using namespace ingest::testing;

namespace {

ExampleSpec var_spec_for(const RefFeatures& ref) {
  std::vector<std::pair<std::string, FeatureSpec>> spec;
  for (const auto& [name, f] : ref) {
    spec.emplace_back(name, VarLenFeature{.dtype = f.kind < 0 ? FeatureType::float32
                                                              : static_cast<FeatureType>(f.kind)});
  }
  spec.emplace_back("__absent__", VarLenFeature{.dtype = FeatureType::int64});
  return ExampleSpec(std::move(spec));
}

// Values [begin, end) of a parsed feature as a RefFeature of the given kind.
RefFeature values_of(const ParsedFeature& p, int kind, std::size_t begin, std::size_t end) {
  RefFeature r;
  r.kind = kind;
  for (std::size_t i = begin; i < end; ++i) {
    if (kind == 0) r.bytes.emplace_back(p.bytes.at(i));
    if (kind == 1) r.floats.push_back(float_bits(p.values.data<float>()[i]));
    if (kind == 2) r.ints.push_back(p.values.data<std::int64_t>()[i]);
  }
  return r;
}

// Our parse of `record` (VarLen for every feature) in reference form.
RefFeatures parse_as_reference(const std::string& record, const RefFeatures& like) {
  const ExampleSpec spec = var_spec_for(like);
  const ParsedExample parsed = parse_example(record, spec);
  RefFeatures out;
  for (const auto& [name, f] : like) {
    const ParsedFeature& p = parsed[name];
    REQUIRE(p.shape.rank() == 1);
    RefFeature r = values_of(p, f.kind < 0 ? 1 : f.kind, 0, static_cast<std::size_t>(p.shape[0]));
    if (f.kind < 0) {
      REQUIRE(r.size() == 0);
      r.kind = -1;
      r.floats.clear();
    }
    out[name] = r;
  }
  CHECK(parsed["__absent__"].values.num_elements() == 0);
  return out;
}

const ExampleSpec w3_spec{
    {"image", FixedLenFeature{.dtype = FeatureType::bytes}},
    {"label", FixedLenFeature{.dtype = FeatureType::int64}},
};

}  // namespace

TEST_CASE("Example parser agrees with protobuf on thousands of random Examples",
          "[formats][example][protobuf]") {
  RandomExamples gen(2024);
  OddEncoder odd(99);
  std::size_t odd_encodings = 0;
  for (int i = 0; i < 3000; ++i) {
    const pb::Example ex = gen.example();
    const RefFeatures ref = reference_of(ex.features());
    const std::string packed = ex.SerializeAsString();
    INFO("example " << i);
    CHECK(parse_as_reference(packed, ref) == ref);

    // The same content in other encodings: protobuf reads them as the same
    // message, and so must we.
    for (int k = 0; k < 3; ++k) {
      const std::string encoded = odd.example(ref);
      pb::Example back;
      REQUIRE(back.ParseFromString(encoded));
      REQUIRE(reference_of(back.features()) == ref);
      CHECK(parse_as_reference(encoded, ref) == ref);
      ++odd_encodings;
    }

    // Fixed-length specs of the exact sizes give the same values.
    std::vector<std::pair<std::string, FeatureSpec>> fixed;
    for (const auto& [name, f] : ref) {
      if (f.kind < 0) {
        fixed.emplace_back(name, FixedLenFeature{.dtype = FeatureType::int64,
                                                 .shape = {2},
                                                 .default_value = std::vector<std::int64_t>{-9}});
      } else {
        fixed.emplace_back(name, FixedLenFeature{.dtype = static_cast<FeatureType>(f.kind),
                                                 .shape = {static_cast<std::int64_t>(f.size())}});
      }
    }
    const ParsedExample p = parse_example(packed, ExampleSpec(fixed));
    for (const auto& [name, f] : ref) {
      if (f.kind < 0) {
        CHECK(values_of(p[name], 2, 0, 2).ints == std::vector<std::int64_t>{-9, -9});
      } else {
        CHECK(values_of(p[name], f.kind, 0, f.size()) == f);
      }
    }
  }
  CHECK(odd_encodings == 9000);
}

TEST_CASE("SequenceExample parser agrees with protobuf on random SequenceExamples",
          "[formats][example][protobuf]") {
  RandomExamples gen(77);
  for (int i = 0; i < 1500; ++i) {
    const pb::SequenceExample ex = gen.sequence_example();
    INFO("sequence example " << i);
    const RefFeatures context = reference_of(ex.context());
    std::vector<std::pair<std::string, FeatureSpec>> lists;
    for (const auto& [name, list] : ex.feature_lists().feature_list()) {
      int kind = 1;
      for (const auto& step : list.feature()) {
        if (step.kind_case() != pb::Feature::KIND_NOT_SET) kind = reference_of(step).kind;
      }
      lists.emplace_back(name, VarLenFeature{.dtype = static_cast<FeatureType>(kind)});
    }
    lists.emplace_back("__absent__", VarLenFeature{.dtype = FeatureType::bytes});
    const ExampleSpec sequence_spec(lists);
    const std::string record = ex.SerializeAsString();  // bytes views point into it
    const ParsedSequenceExample got =
        parse_sequence_example(record, var_spec_for(context), sequence_spec);
    for (const auto& [name, f] : context) {
      const ParsedFeature& p = got.context[name];
      if (f.kind >= 0) CHECK(values_of(p, f.kind, 0, static_cast<std::size_t>(p.shape[0])) == f);
    }
    for (const auto& [name, list] : ex.feature_lists().feature_list()) {
      const ParsedFeature& p = got.feature_lists[name];
      REQUIRE(p.ragged());
      REQUIRE(p.row_splits.num_elements() == list.feature_size() + 1);
      const auto* splits = p.row_splits.data<std::int64_t>();
      for (int s = 0; s < list.feature_size(); ++s) {
        const RefFeature expected = reference_of(list.feature(s));
        const auto b = static_cast<std::size_t>(splits[s]),
                   e = static_cast<std::size_t>(splits[s + 1]);
        if (expected.kind < 0) {
          CHECK(b == e);
        } else {
          CHECK(values_of(p, expected.kind, b, e) == expected);
        }
      }
    }
    CHECK(got.feature_lists["__absent__"].row_splits.num_elements() == 1);
  }
}

TEST_CASE("every Example and SequenceExample in the fixtures parses as its JSON says",
          "[formats][example][fixtures]") {
  std::size_t none_features = 0, records_checked = 0;
  for (const Fixture& f : all_fixtures()) {
    const std::string kind = f.expected.at("payload_kind");
    if (kind == "raw") continue;
    INFO(f.name);
    TFRecordReader reader(f.path, {.compression = f.compression});
    for (const auto& expected : f.expected.at("records")) {
      const auto record = reader.read();
      REQUIRE(record);
      const std::string where =
          f.name + " record " + std::to_string(expected.at("index").get<int>());
      if (kind == "example") {
        const auto& features = expected.at("features");
        for (const auto& [name, feature] : features.items())
          none_features += feature.at("kind") == "none";
        check_features(features, parse_example(*record, var_len_spec(features)), where);
      } else {
        const auto& context = expected.at("context");
        const auto& lists = expected.at("feature_lists");
        const ParsedSequenceExample got =
            parse_sequence_example(*record, var_len_spec(context), var_len_list_spec(lists));
        check_features(context, got.context, where);
        for (const auto& [name, steps] : lists.items()) {
          const ParsedFeature& p = got.feature_lists[name];
          REQUIRE(p.row_splits.num_elements() == static_cast<std::int64_t>(steps.size()) + 1);
          const auto* splits = p.row_splits.data<std::int64_t>();
          for (std::size_t s = 0; s < steps.size(); ++s) {
            check_feature(steps[s], p, static_cast<std::size_t>(splits[s]),
                          static_cast<std::size_t>(splits[s + 1]),
                          where + " list " + name + " step " + std::to_string(s));
          }
        }
      }
      ++records_checked;
    }
    CHECK_FALSE(reader.read());
  }
  CHECK(records_checked == 3 + 42 + 2 + 234 + 424 + 1000 + 100 + 4500 + 3);
  CHECK(none_features == 715);  // the taxi file's empty Features
}

TEST_CASE("batch parsing writes fixed-length features into one tensor",
          "[formats][example][fixtures]") {
  for (const Fixture& f : all_fixtures()) {
    if (f.name != "tfx-mnist__mnist.tfrecord") continue;
    TFRecordReader reader(f.path);
    std::vector<std::string> records;
    while (auto r = reader.read()) records.push_back(std::move(*r));
    REQUIRE(records.size() == 1000);
    const ExampleSpec spec{
        {"image_floats", FixedLenFeature{.dtype = FeatureType::float32, .shape = {28, 28}}},
        {"image_class", FixedLenFeature{.dtype = FeatureType::int64, .shape = {}}},
    };
    const ParsedExample batch = parse_example_batch(records, spec);
    CHECK(batch.tensor("image_floats").shape() == Shape{1000, 28, 28});
    CHECK(batch.tensor("image_class").shape() == Shape{1000});
    for (std::size_t i = 0; i < records.size(); i += 97) {
      const ParsedExample one = parse_example(records[i], spec);
      CHECK(batch.tensor("image_floats").slice(static_cast<std::int64_t>(i)) ==
            one.tensor("image_floats"));
      CHECK(batch.tensor("image_class").values<std::int64_t>()[i] ==
            one.tensor("image_class").item<std::int64_t>());
      const auto& json = f.expected.at("records")[i].at("features");
      CHECK(one.tensor("image_class").item<std::int64_t>() ==
            json.at("image_class").at("values")[0].get<std::int64_t>());
    }
  }
}

TEST_CASE("FixedLenFeature: defaults, missing, kind not set, shapes", "[formats][example]") {
  const std::string record = ExampleBuilder()
                                 .add_int64s("m", {1, 2, 3, 4, 5, 6})
                                 .add_floats("f", {0.5f})
                                 .add_bytes("b", {"x", "yz"})
                                 .add_empty("none")
                                 .serialize();
  const ExampleSpec spec{
      {"m", FixedLenFeature{.dtype = FeatureType::int64, .shape = {2, 3}}},
      {"f", FixedLenFeature{.dtype = FeatureType::float32, .shape = {}}},
      {"b", FixedLenFeature{.dtype = FeatureType::bytes, .shape = {2}}},
      {"none",
       FixedLenFeature{
           .dtype = FeatureType::float32, .shape = {3}, .default_value = std::vector<float>{1.5f}}},
      {"gone", FixedLenFeature{.dtype = FeatureType::bytes,
                               .shape = {2},
                               .default_value = std::vector<std::string>{"d0", "d1"}}},
  };
  const ParsedExample p = parse_example(record, spec);
  CHECK(p.tensor("m") == Tensor::from_values<std::int64_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  CHECK(p.tensor("f").shape() == Shape{});
  CHECK(p.tensor("f").item<float>() == 0.5f);
  CHECK(p["b"].bytes_copy() == std::vector<std::string>{"x", "yz"});
  CHECK(p["b"].shape == Shape{2});
  CHECK(p.tensor("none") == Tensor::from_values<float>({1.5f, 1.5f, 1.5f}));
  CHECK(p["gone"].bytes_copy() == std::vector<std::string>{"d0", "d1"});
  CHECK(p.size() == 5);
  CHECK(p.spec().name(0) == "m");
  CHECK_THROWS_AS(p["nope"], InvalidArgument);

  auto error_of = [&](const ExampleSpec& s) -> std::string {
    try {
      parse_example(record, s);
    } catch (const InvalidArgument& e) {
      CHECK(e.context().stage == "parse_example");
      return e.message();
    }
    return "no error";
  };
  CHECK(error_of({{"m", FixedLenFeature{.dtype = FeatureType::int64, .shape = {5}}}}) ==
        "feature 'm': expected 5 values (shape [5]), found 6");
  CHECK(error_of({{"m", FixedLenFeature{.dtype = FeatureType::float32, .shape = {6}}}}) ==
        "feature 'm': expected float_list, found int64_list");
  CHECK(error_of({{"gone", FixedLenFeature{.dtype = FeatureType::int64}}}) ==
        "feature 'gone': required but missing (give the FixedLenFeature a default_value)");
  CHECK(error_of({{"none", FixedLenFeature{.dtype = FeatureType::int64}}}) ==
        "feature 'none': required but missing (give the FixedLenFeature a default_value)");
  CHECK(error_of({{"b", VarLenFeature{.dtype = FeatureType::int64}}}) ==
        "feature 'b': expected int64_list, found bytes_list");
}

TEST_CASE("ExampleSpec validates its features", "[formats][example]") {
  using P = std::pair<std::string, FeatureSpec>;
  CHECK_THROWS_AS(ExampleSpec({P{"a", VarLenFeature{}}, P{"a", VarLenFeature{}}}), InvalidArgument);
  CHECK_THROWS_AS(ExampleSpec({P{"a", FixedLenFeature{.shape = {-1}}}}), InvalidArgument);
  CHECK_THROWS_AS(ExampleSpec({P{"a", FixedLenFeature{.dtype = FeatureType::int64,
                                                      .default_value = std::vector<float>{1}}}}),
                  InvalidArgument);
  CHECK_THROWS_AS(ExampleSpec({P{"a", FixedLenFeature{.shape = {3},
                                                      .default_value = std::vector<float>{1, 2}}}}),
                  InvalidArgument);
  const ExampleSpec seq{{"s", FixedLenSequenceFeature{.shape = {2}}}};
  CHECK_THROWS_AS(parse_example("", seq), InvalidArgument);
  CHECK_THROWS_AS(parse_sequence_example("", ExampleSpec{}, ExampleSpec{{"x", FixedLenFeature{}}}),
                  InvalidArgument);
  // Many features: the hash table finds each of them.
  std::vector<P> many;
  for (int i = 0; i < 300; ++i) many.emplace_back("feature/" + std::to_string(i), VarLenFeature{});
  const ExampleSpec big(many);
  for (int i = 0; i < 300; ++i)
    CHECK(big.index("feature/" + std::to_string(i)) == static_cast<std::size_t>(i));
  CHECK_FALSE(big.find("feature/300"));
  CHECK_FALSE(ExampleSpec{}.find(""));
}

TEST_CASE("a parsed Example keeps its spec, counted per parsing thread", "[formats][example]") {
  const std::string record =
      ExampleBuilder().add_bytes("image", {"px"}).add_int64s("label", {3}).serialize();
  ParsedExample kept;
  {
    const ExampleSpec spec{{"image", FixedLenFeature{.dtype = FeatureType::bytes}},
                           {"label", FixedLenFeature{.dtype = FeatureType::int64}}};
    kept = parse_example(record, spec);
    // Results parsed on other threads share the spec too (each thread's own count).
    std::vector<ParsedExample> parsed(4);
    std::vector<std::thread> threads;
    for (auto& p : parsed) threads.emplace_back([&] { p = parse_example(record, spec); });
    for (auto& t : threads) t.join();
    for (const auto& p : parsed) {
      CHECK(p.spec().same_as(spec));
      CHECK(p.tensor("label").item<std::int64_t>() == 3);
    }
  }  // the spec is gone; every result keeps what it needs
  CHECK(kept.bytes("image")[0] == "px");
  CHECK(kept.tensor("label").item<std::int64_t>() == 3);
  CHECK(kept.spec().size() == 2);
  // An empty spec: what a ParsedExample starts with.
  CHECK(ParsedExample{}.spec().size() == 0);
  CHECK(ExampleSpec{}.same_as(ExampleSpec{}));
  CHECK_THROWS_AS(ParsedExample{}["image"], InvalidArgument);
}

TEST_CASE("bytes values are views into the record", "[formats][example]") {
  const std::string record = ExampleBuilder()
                                 .add_bytes("image", {std::string(3072, 'p')})
                                 .add_int64s("label", {7})
                                 .serialize();
  ParsedExample p;
  parse_example(record, w3_spec, p);
  const std::string_view image = p.bytes("image")[0];
  CHECK(image.size() == 3072);
  CHECK(image.data() >= record.data());
  CHECK(image.data() + image.size() <= record.data() + record.size());
  CHECK(p.tensor("label").item<std::int64_t>() == 7);
  // Reusing the result for another record: a copy the caller kept is not overwritten.
  const Tensor kept = p.tensor("label");
  const std::string other =
      ExampleBuilder().add_bytes("image", {"tiny"}).add_int64s("label", {1}).serialize();
  parse_example(other, w3_spec, p);
  CHECK(p.bytes("image")[0] == "tiny");
  CHECK(p.tensor("label").item<std::int64_t>() == 1);
  CHECK(kept.item<std::int64_t>() == 7);
  CHECK_FALSE(kept.shares_storage_with(p.tensor("label")));
  // Unshared, the storage is reused.
  const void* storage = p.tensor("label").raw_data();
  parse_example(record, w3_spec, p);
  CHECK(p.tensor("label").raw_data() == storage);
  CHECK(p.tensor("label").item<std::int64_t>() == 7);
  CHECK(decode_raw(image, DType::uint8, Shape{32, 32, 3}).shape() == Shape{32, 32, 3});
  CHECK(decode_raw(image, DType::uint8, Shape{32, 32, 3}).values<std::uint8_t>()[5] == 'p');
  CHECK_THROWS_AS(decode_raw(image, DType::float32, Shape{32, 32, 3}), InvalidArgument);
}

TEST_CASE("parse_example_batch: fixed rows, ragged var-len, errors name the record",
          "[formats][example]") {
  std::vector<std::string> records;
  for (int i = 0; i < 5; ++i) {
    ExampleBuilder b;
    b.add_int64s("label", {i});
    std::vector<float> v(static_cast<std::size_t>(i), 0.25f * static_cast<float>(i));
    b.add_floats("v", v);
    if (i != 2) b.add_bytes("tags", {"t" + std::to_string(i)});
    records.push_back(b.serialize());
  }
  const ExampleSpec spec{
      {"label", FixedLenFeature{.dtype = FeatureType::int64, .shape = {1}}},
      {"v", VarLenFeature{.dtype = FeatureType::float32}},
      {"tags", VarLenFeature{.dtype = FeatureType::bytes}},
  };
  const ParsedExample b = parse_example_batch(records, spec);
  CHECK(b.tensor("label") == Tensor::from_values<std::int64_t>({0, 1, 2, 3, 4}, Shape{5, 1}));
  CHECK(b["v"].row_splits == Tensor::from_values<std::int64_t>({0, 0, 1, 3, 6, 10}));
  CHECK(b.tensor("v").num_elements() == 10);
  CHECK(b.tensor("v").values<float>()[9] == 1.0f);
  CHECK(b["tags"].bytes_copy() == std::vector<std::string>{"t0", "t1", "t3", "t4"});
  CHECK(b["tags"].row_splits == Tensor::from_values<std::int64_t>({0, 1, 2, 2, 3, 4}));
  std::vector<std::string_view> views(records.begin(), records.end());
  CHECK(parse_example_batch(std::span<const std::string_view>(views), spec).tensor("v") ==
        b.tensor("v"));
  CHECK(parse_example_batch(std::span<const std::string>(), spec).tensor("label").shape() ==
        Shape{0, 1});

  records[3] = ExampleBuilder().add_floats("label", {1.0f}).serialize();
  try {
    parse_example_batch(records, spec);
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.context().element == 3);
    CHECK_THAT(e.message(), Catch::Contains("feature 'label'"));
  }
  records[3] = records[4].substr(0, records[4].size() - 2);
  try {
    parse_example_batch(records, spec);
    FAIL("no error");
  } catch (const DataLossError& e) {
    CHECK(e.context().element == 3);
  }
}

TEST_CASE("malformed Examples raise DataLossError, at every truncation", "[formats][example]") {
  google::protobuf::LogSilencer quiet;  // protobuf logs every invalid UTF-8 key it meets
  RandomExamples gen(5);
  std::size_t errors = 0;
  for (int i = 0; i < 200; ++i) {
    const pb::Example ex = gen.example();
    const RefFeatures ref = reference_of(ex.features());
    const std::string record = ex.SerializeAsString();
    const ExampleSpec spec = var_spec_for(ref);
    for (std::size_t cut = 0; cut < record.size(); ++cut) {
      pb::Example back;
      const bool protobuf_ok = back.ParseFromString(record.substr(0, cut));
      try {
        parse_example(std::string_view(record).substr(0, cut), spec);
        CHECK(protobuf_ok);  // we accept only what protobuf accepts
      } catch (const DataLossError&) {
        ++errors;
      } catch (const InvalidArgument&) {
        // A truncated list can leave a feature of another kind: fine.
      }
    }
  }
  CHECK(errors > 1000);
  // A packed float list whose length is not a multiple of 4 names the feature.
  std::string bad = ExampleBuilder().add_floats("f", {1.0f, 2.0f}).serialize();
  HandEncoder e;
  e.bytes(1, "\x01\x02\x03");  // FloatList{value: 3 bytes}
  HandEncoder feature;
  feature.bytes(2, e.out);
  HandEncoder entry;
  entry.bytes(1, "f");
  entry.bytes(2, feature.out);
  HandEncoder map;
  map.bytes(1, entry.out);
  HandEncoder example;
  example.bytes(1, map.out);
  try {
    parse_example(example.out, ExampleSpec{{"f", VarLenFeature{}}});
    FAIL("no error");
  } catch (const DataLossError& err) {
    CHECK(err.message() ==
          "malformed Example: packed float_list length is not a multiple of 4 (feature 'f')");
  }
}

TEST_CASE("SequenceExample: fixed-length steps, missing lists", "[formats][example]") {
  SequenceExampleBuilder b;
  b.context().add_int64s("length", {3});
  b.feature_list("pos").add_floats({1, 2}).add_floats({3, 4}).add_floats({5, 6});
  b.feature_list("words").add_bytes({"a"}).add_bytes({}).add_bytes({"b", "c"});
  const std::string record = b.serialize();
  const ExampleSpec context{{"length", FixedLenFeature{.dtype = FeatureType::int64}}};
  const ExampleSpec lists{
      {"pos", FixedLenSequenceFeature{.dtype = FeatureType::float32, .shape = {2}}},
      {"words", VarLenFeature{.dtype = FeatureType::bytes}},
      {"maybe",
       FixedLenSequenceFeature{.dtype = FeatureType::int64, .shape = {4}, .allow_missing = true}},
  };
  const ParsedSequenceExample s = parse_sequence_example(record, context, lists);
  CHECK(s.context.tensor("length").item<std::int64_t>() == 3);
  CHECK(s.feature_lists.tensor("pos") ==
        Tensor::from_values<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2}));
  CHECK(s.feature_lists["words"].bytes_copy() == std::vector<std::string>{"a", "b", "c"});
  CHECK(s.feature_lists["words"].row_splits == Tensor::from_values<std::int64_t>({0, 1, 1, 3}));
  CHECK(s.feature_lists.tensor("maybe").shape() == Shape{0, 4});
  try {
    parse_sequence_example(
        record, context,
        ExampleSpec{{"gone", FixedLenSequenceFeature{.dtype = FeatureType::int64}}});
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK_THAT(e.message(), Catch::Contains("feature list 'gone' is required but missing"));
  }
  try {
    parse_sequence_example(
        record, context,
        ExampleSpec{{"pos", FixedLenSequenceFeature{.dtype = FeatureType::float32, .shape = {3}}}});
    FAIL("no error");
  } catch (const InvalidArgument& e) {
    CHECK(e.message() == "feature 'pos', step 0: expected 3 values (shape [3]), found 2");
  }
}

TEST_CASE("decode_raw refuses impossible shapes before allocating (issue 10 item 1)",
          "[formats][example]") {
  constexpr std::int64_t p62 = std::int64_t{1} << 62;
  // Was: a float32[4611686018427387904] tensor over no storage.
  CHECK_THROWS_WITH(decode_raw("", DType::float32, Shape{p62}),
                    Catch::Contains("decode_raw") && Catch::Contains("4611686018427387904"));
  CHECK_THROWS_AS(decode_raw("", DType::uint8, Shape{std::int64_t{1} << 32, std::int64_t{1} << 32}),
                  InvalidArgument);
  CHECK_THROWS_AS(decode_raw("abcd", DType::uint8, Shape{-1}), InvalidArgument);
  // Within the limit but not what the bytes hold: refused without allocating a TiB.
  CHECK_THROWS_WITH(decode_raw("abcd", DType::uint8, Shape{std::int64_t{1} << 39}),
                    Catch::Contains("4 bytes do not fill"));
  CHECK(decode_raw("", DType::float32, Shape{0, 3}).nbytes() == 0);
}

TEST_CASE("an Example spec refuses fixed shapes too large to hold (issue 10 item 1)",
          "[formats][example]") {
  constexpr std::int64_t p32 = std::int64_t{1} << 32;
  auto spec_with = [](Shape shape) {
    return ExampleSpec{{"m", FixedLenFeature{.dtype = FeatureType::int64,
                                             .shape = shape,
                                             .default_value = std::vector<std::int64_t>{0}}}};
  };
  // Was: a signed overflow, or a default expanded to 2^40 values (std::bad_alloc).
  CHECK_THROWS_WITH(spec_with(Shape{p32, p32}),
                    Catch::Contains("feature 'm'") && Catch::Contains("[4294967296, 4294967296]"));
  CHECK_THROWS_AS(spec_with(Shape{std::int64_t{1} << 40}), InvalidArgument);
  CHECK_THROWS_AS((ExampleSpec{{"s", FixedLenSequenceFeature{.dtype = FeatureType::float32,
                                                             .shape = Shape{p32, p32}}}}),
                  InvalidArgument);
  CHECK(spec_with(Shape{2, 3}).size() == 1);
}
