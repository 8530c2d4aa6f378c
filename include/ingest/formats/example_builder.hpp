// Encoders for tf.Example and tf.SequenceExample, without protobuf: add
// features by name, then serialize() the wire bytes (packed repeated values,
// features in the order added). tf counterpart: building tf.train.Example
// and SerializeToString. A builder is a plain value, not synchronised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingest/formats/protobuf_wire.hpp"

namespace ingest {

namespace detail {

/// serialize() for builders that provide serialize_to(std::string&).
template <class Builder>
class Serializable {
 public:
  /// The serialized message.
  std::string serialize() const {
    std::string out;
    static_cast<const Builder&>(*this).serialize_to(out);
    return out;
  }
};

// Feature{bytes_list = 1 | float_list = 2 | int64_list = 3}, each a list
// message with `repeated value = 1`.
inline void encode_bytes_feature(std::string& out, std::span<const std::string_view> values) {
  std::string list;
  for (std::string_view v : values) wire::put_bytes_field(list, 1, v);
  wire::put_bytes_field(out, 1, list);
}
inline void encode_float_feature(std::string& out, std::span<const float> values) {
  std::string packed;
  packed.reserve(values.size() * 4);
  for (float v : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    wire::put_fixed32(packed, bits);
  }
  std::string list;
  if (!values.empty()) wire::put_bytes_field(list, 1, packed);
  wire::put_bytes_field(out, 2, list);
}
inline void encode_int64_feature(std::string& out, std::span<const std::int64_t> values) {
  std::string packed;
  for (std::int64_t v : values) wire::put_varint(packed, static_cast<std::uint64_t>(v));
  std::string list;
  if (!values.empty()) wire::put_bytes_field(list, 1, packed);
  wire::put_bytes_field(out, 3, list);
}

/// A map<string, Feature> under construction: encoded map entries.
class FeatureMapEncoder {
 public:
  void add_bytes(std::string_view name, std::span<const std::string_view> values) {
    std::string feature;
    encode_bytes_feature(feature, values);
    add_entry(name, feature);
  }
  void add_floats(std::string_view name, std::span<const float> values) {
    std::string feature;
    encode_float_feature(feature, values);
    add_entry(name, feature);
  }
  void add_int64s(std::string_view name, std::span<const std::int64_t> values) {
    std::string feature;
    encode_int64_feature(feature, values);
    add_entry(name, feature);
  }
  /// An entry whose value is `encoded` (a serialized Feature or FeatureList).
  void add_entry(std::string_view name, std::string_view encoded) {
    std::string entry;
    wire::put_bytes_field(entry, 1, name);
    wire::put_bytes_field(entry, 2, encoded);
    wire::put_bytes_field(body_, 1, entry);
  }
  const std::string& body() const noexcept { return body_; }
  void clear() noexcept { body_.clear(); }

 private:
  std::string body_;
};

}  // namespace detail

/// Builds a serialized tf.Example: `ExampleBuilder().add_int64s("label", {3}).serialize()`.
class ExampleBuilder : public detail::Serializable<ExampleBuilder> {
 public:
  /// A bytes_list feature.
  ExampleBuilder& add_bytes(std::string_view name, std::span<const std::string_view> values) {
    features_.add_bytes(name, values);
    return *this;
  }
  /// @copydoc add_bytes(std::string_view, std::span<const std::string_view>)
  ExampleBuilder& add_bytes(std::string_view name, std::initializer_list<std::string_view> values) {
    return add_bytes(name, std::span<const std::string_view>(values.begin(), values.size()));
  }
  /// @copydoc add_bytes(std::string_view, std::span<const std::string_view>)
  ExampleBuilder& add_bytes(std::string_view name, const std::vector<std::string>& values) {
    std::vector<std::string_view> views(values.begin(), values.end());
    return add_bytes(name, std::span<const std::string_view>(views));
  }
  /// A float_list feature.
  ExampleBuilder& add_floats(std::string_view name, std::span<const float> values) {
    features_.add_floats(name, values);
    return *this;
  }
  /// @copydoc add_floats(std::string_view, std::span<const float>)
  ExampleBuilder& add_floats(std::string_view name, std::initializer_list<float> values) {
    return add_floats(name, std::span<const float>(values.begin(), values.size()));
  }
  /// An int64_list feature.
  ExampleBuilder& add_int64s(std::string_view name, std::span<const std::int64_t> values) {
    features_.add_int64s(name, values);
    return *this;
  }
  /// @copydoc add_int64s(std::string_view, std::span<const std::int64_t>)
  ExampleBuilder& add_int64s(std::string_view name, std::initializer_list<std::int64_t> values) {
    return add_int64s(name, std::span<const std::int64_t>(values.begin(), values.size()));
  }
  /// A Feature with no list set (what CSV conversion writes for an empty cell).
  ExampleBuilder& add_empty(std::string_view name) {
    features_.add_entry(name, {});
    return *this;
  }

  /// Writes the serialized Example into `out` (replacing its contents).
  void serialize_to(std::string& out) const {
    out.clear();
    detail::wire::put_bytes_field(out, 1, features_.body());
  }
  /// Removes every feature.
  void clear() noexcept { features_.clear(); }

 private:
  friend class SequenceExampleBuilder;
  detail::FeatureMapEncoder features_;
};

/// Builds a serialized tf.SequenceExample: context features, and feature
/// lists of one Feature per step.
///
///     SequenceExampleBuilder b;
///     b.context().add_int64s("length", {2});
///     b.feature_list("tokens").add_int64s({1, 2}).add_int64s({3});
///     std::string bytes = b.serialize();
class SequenceExampleBuilder : public detail::Serializable<SequenceExampleBuilder> {
 public:
  /// Adds steps to one feature list.
  class FeatureListBuilder {
   public:
    /// A step holding a bytes_list.
    FeatureListBuilder& add_bytes(std::span<const std::string_view> values) {
      std::string feature;
      detail::encode_bytes_feature(feature, values);
      return add_step(feature);
    }
    /// @copydoc add_bytes(std::span<const std::string_view>)
    FeatureListBuilder& add_bytes(std::initializer_list<std::string_view> values) {
      return add_bytes(std::span<const std::string_view>(values.begin(), values.size()));
    }
    /// A step holding a float_list.
    FeatureListBuilder& add_floats(std::span<const float> values) {
      std::string feature;
      detail::encode_float_feature(feature, values);
      return add_step(feature);
    }
    /// @copydoc add_floats(std::span<const float>)
    FeatureListBuilder& add_floats(std::initializer_list<float> values) {
      return add_floats(std::span<const float>(values.begin(), values.size()));
    }
    /// A step holding an int64_list.
    FeatureListBuilder& add_int64s(std::span<const std::int64_t> values) {
      std::string feature;
      detail::encode_int64_feature(feature, values);
      return add_step(feature);
    }
    /// @copydoc add_int64s(std::span<const std::int64_t>)
    FeatureListBuilder& add_int64s(std::initializer_list<std::int64_t> values) {
      return add_int64s(std::span<const std::int64_t>(values.begin(), values.size()));
    }
    /// A step with no list set.
    FeatureListBuilder& add_empty() { return add_step({}); }

   private:
    friend class SequenceExampleBuilder;
    FeatureListBuilder(SequenceExampleBuilder& owner, std::size_t index)
        : owner_(owner), index_(index) {}
    FeatureListBuilder& add_step(std::string_view feature) {
      detail::wire::put_bytes_field(owner_.lists_[index_].second, 1, feature);
      return *this;
    }
    SequenceExampleBuilder& owner_;
    std::size_t index_;
  };

  /// The context features (an ExampleBuilder's add_* on them).
  ExampleBuilder& context() noexcept { return context_; }

  /// The feature list `name`, created empty on first use.
  FeatureListBuilder feature_list(std::string_view name) {
    for (std::size_t i = 0; i < lists_.size(); ++i) {
      if (lists_[i].first == name) return {*this, i};
    }
    lists_.emplace_back(std::string(name), std::string());
    return {*this, lists_.size() - 1};
  }

  /// Writes the serialized SequenceExample into `out` (replacing its contents).
  void serialize_to(std::string& out) const {
    out.clear();
    detail::wire::put_bytes_field(out, 1, context_.features_.body());
    detail::FeatureMapEncoder lists;
    for (const auto& [name, list] : lists_) lists.add_entry(name, list);
    detail::wire::put_bytes_field(out, 2, lists.body());
  }
  /// Removes every context feature and feature list.
  void clear() noexcept {
    context_.clear();
    lists_.clear();
  }

 private:
  ExampleBuilder context_;
  std::vector<std::pair<std::string, std::string>> lists_;  // name, encoded FeatureList
};

}  // namespace ingest
