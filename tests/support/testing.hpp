// Helpers shared by the tests: collect a pass into a vector, record errors
// in place of elements, and build Tensors from literals.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <ingest/ingest.hpp>

namespace ingest::testing {

/// Every element of one pass.
template <class D>
std::vector<typename D::element_type> collect(const D& ds) {
  std::vector<typename D::element_type> out;
  auto it = ds.iterator();
  while (auto x = it.next()) out.push_back(std::move(*x));
  return out;
}

/// Every element of one pass, drained through the bulk fill protocol.
template <class D>
std::vector<typename D::element_type> collect_bulk(const D& ds, std::size_t chunk = 7) {
  std::vector<typename D::element_type> out;
  std::vector<typename D::element_type> buf(chunk);
  auto it = ds.iterator();
  for (;;) {
    const std::size_t n = it.fill(buf);
    out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    if (n == buf.size()) continue;
    auto x = it.next();
    if (!x) break;
    out.push_back(std::move(*x));
  }
  return out;
}

/// An element, or the what() of the error that replaced it.
template <class T>
struct Outcome {
  std::optional<T> value;
  std::string error;
};

/// One pass, recording each error where it surfaced and continuing (at most `limit` steps).
template <class D>
std::vector<Outcome<typename D::element_type>> collect_outcomes(const D& ds,
                                                                std::size_t limit = 100000) {
  std::vector<Outcome<typename D::element_type>> out;
  auto it = ds.iterator();
  for (std::size_t i = 0; i < limit; ++i) {
    try {
      auto x = it.next();
      if (!x) break;
      out.push_back({std::move(*x), {}});
    } catch (const ingest::Error& e) {
      out.push_back({std::nullopt, e.what()});
    }
  }
  return out;
}

/// range(n), counting the elements produced in `produced` and taking
/// `delay` over each: a producer whose progress a test can watch.
inline auto counted_range(std::int64_t n, std::atomic<int>& produced,
                          std::chrono::microseconds delay = {}) {
  return range(n).map([&produced, delay](std::int64_t x) {
    produced.fetch_add(1);
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    return x;
  });
}

inline std::vector<std::int64_t> iota(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

template <class T>
Tensor tensor(std::initializer_list<T> values, Shape shape) {
  return Tensor::from_values<T>(values, shape);
}

/// Values of an int64 tensor.
inline std::vector<std::int64_t> values_of(const Tensor& t) {
  auto s = t.values<std::int64_t>();
  return {s.begin(), s.end()};
}

/// A user exception type, to check that errors keep it nested.
struct Boom : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The stats row of the stage named `name` (the first, inputs after their
/// consumer), or null when there is none.
inline const StageStats* find_stage(const PipelineStats& stats, std::string_view name) {
  for (const StageStats& r : stats.stages) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

}  // namespace ingest::testing
