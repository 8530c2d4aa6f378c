// A user's own element type and everything ingest needs to know about it:
// how it stacks into a batch (batch_traits), how that batch hands its fields
// to a loader (loader_fields), and how many bytes it holds (element_size,
// for the RAM budget and stats()). Shared by the two translation units.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ingest/ingest.hpp>

namespace shop {

/// One training example: 8 float features, a label, a weight.
struct Example {
  ingest::Tensor features;  // float32 [8]
  std::int64_t label = 0;
  float weight = 1;
};

/// A batch of n examples, one tensor per member.
struct ExampleBatch {
  ingest::Tensor features;  // float32 [n, 8]
  ingest::Tensor labels;    // int64 [n]
  ingest::Tensor weights;   // float32 [n]
};

/// Examples from a translation unit of their own (pipeline.cpp): the caller
/// sees only the element type.
ingest::AnyDataset<Example> examples(std::int64_t count);

}  // namespace shop

// Examples stack member by member, reusing the library's builders: each
// writes its slot straight into the batch's buffer (slots may be set
// concurrently by a parallel map-and-batch).
template <>
struct ingest::batch_traits<shop::Example> {
  using batch_type = shop::ExampleBatch;
  class builder {
   public:
    explicit builder(const BatchSpec& spec) : features_(spec), labels_(spec), weights_(spec) {}
    void set(std::size_t slot, shop::Example&& e) {
      features_.set(slot, std::move(e.features));
      labels_.set(slot, e.label);
      weights_.set(slot, e.weight);
    }
    batch_type finish(std::size_t count) && {
      return {std::move(features_).finish(count), std::move(labels_).finish(count),
              std::move(weights_).finish(count)};
    }

   private:
    batch_traits<ingest::Tensor>::builder features_;
    batch_traits<std::int64_t>::builder labels_;
    batch_traits<float>::builder weights_;
  };
};

// A loader copies these fields, in this order: batch.field(0) is features.
template <>
struct ingest::loader_fields<shop::ExampleBatch> : std::true_type {
  static void split(shop::ExampleBatch&& b, std::vector<ingest::Tensor>& out) {
    out.push_back(std::move(b.features));
    out.push_back(std::move(b.labels));
    out.push_back(std::move(b.weights));
  }
};

// What an example and a batch hold, so that stats() and the RAM budget see
// their tensors (without these, each counts as its sizeof).
template <>
struct ingest::element_size<shop::Example> {
  static std::size_t bytes(const shop::Example& e) {
    return e.features.nbytes() + sizeof e.label + sizeof e.weight;
  }
};
template <>
struct ingest::element_size<shop::ExampleBatch> {
  static std::size_t bytes(const shop::ExampleBatch& b) {
    return b.features.nbytes() + b.labels.nbytes() + b.weights.nbytes();
  }
};
