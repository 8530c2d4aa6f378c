// Checkpoint test helpers: save an iterator after every number of elements,
// restore into freshly built datasets (directly, after a round trip through
// bytes, through write_state/read_state) and compare what follows with the
// uninterrupted pass. Errors count as elements and are compared by message.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/testing.hpp"

namespace ingest::testing {

/// Sets detail::compact_replay_pulls (PipelineIterator::save's threshold
/// for compacting a state) for a scope: -1 compacts every state.
struct CompactAfter {
  explicit CompactAfter(std::int64_t pulls)
      : old(detail::compact_replay_pulls.exchange(pulls, std::memory_order_relaxed)) {}
  CompactAfter(const CompactAfter&) = delete;
  CompactAfter& operator=(const CompactAfter&) = delete;
  ~CompactAfter() { detail::compact_replay_pulls.store(old, std::memory_order_relaxed); }
  std::int64_t old;
};

/// One call of next() that gave an element or an error.
template <class T>
struct Step {
  std::optional<T> value;
  std::string error;
  bool operator==(const Step&) const = default;
};

/// The next step of `it`, or nullopt at the end.
template <class It>
std::optional<Step<typename It::value_type>> next_step(It& it) {
  try {
    auto x = it.next();
    if (!x) return std::nullopt;
    return Step<typename It::value_type>{std::move(*x), {}};
  } catch (const Error& e) {
    return Step<typename It::value_type>{std::nullopt, e.what()};
  }
}

/// The steps of `it` up to its end.
template <class It>
std::vector<Step<typename It::value_type>> drain_steps(It& it) {
  std::vector<Step<typename It::value_type>> out;
  while (auto s = next_step(it)) out.push_back(std::move(*s));
  return out;
}

/// For every k in 0..n: k steps of an iterator of `make()`, save, and the
/// rest of a new iterator of `make_restored()` restored from the state
/// (three ways) equals the uninterrupted tail; so does the saved iterator's.
/// The datasets are built afresh each time, as another process would.
template <class Make, class MakeRestored>
void check_restore_everywhere(Make make, MakeRestored make_restored) {
  auto reference = make().iterator();
  const auto full = drain_steps(reference);
  REQUIRE(!full.empty());
  TempDir dir;
  const std::string path = dir / "state";
  for (std::size_t k = 0; k <= full.size(); ++k) {
    INFO("saved after " << k << " of " << full.size() << " steps");
    const auto ds = make();
    auto it = ds.iterator();
    for (std::size_t i = 0; i < k; ++i) REQUIRE(next_step(it).has_value());
    const IteratorState state = it.save();
    const decltype(full) tail(full.begin() + static_cast<std::ptrdiff_t>(k), full.end());

    const auto ds1 = make_restored();
    auto restored = ds1.iterator(state);
    CHECK(drain_steps(restored) == tail);

    const auto ds2 = make_restored();
    auto from_bytes = ds2.iterator(IteratorState::from_bytes(state.bytes()));
    CHECK(drain_steps(from_bytes) == tail);

    write_state(path, state);
    const auto ds3 = make_restored();
    auto from_file = ds3.iterator(read_state(path));
    CHECK(drain_steps(from_file) == tail);

    // Saving does not disturb the saved iterator.
    CHECK(drain_steps(it) == tail);
  }
}

template <class Make>
void check_restore_everywhere(Make make) {
  check_restore_everywhere(make, make);
}

/// For order-free stages (.deterministic = false): for every k, k steps,
/// save, restore into `make_restored()`, a few steps, save and restore
/// again, and the steps before the saves and after the last restore
/// together are exactly those of a whole pass (as multisets: nothing lost,
/// nothing twice). `key` turns an element into something sortable.
template <class Make, class MakeRestored, class Key>
void check_restore_unordered(Make make, MakeRestored make_restored, Key key) {
  using T = typename decltype(make())::element_type;
  using K = std::decay_t<decltype(key(std::declval<const T&>()))>;
  const auto keys = [&](const std::vector<Step<T>>& steps) {
    std::vector<std::pair<K, std::string>> out;
    for (const auto& s : steps) out.emplace_back(s.value ? key(*s.value) : K{}, s.error);
    return out;
  };
  auto reference = make().iterator();
  auto all = keys(drain_steps(reference));
  std::sort(all.begin(), all.end());
  REQUIRE(!all.empty());
  for (std::size_t k = 0; k <= all.size(); ++k) {
    INFO("saved after " << k << " of " << all.size() << " steps");
    const auto ds = make();
    auto it = ds.iterator();
    std::vector<Step<T>> before;
    for (std::size_t i = 0; i < k; ++i) {
      auto s = next_step(it);
      REQUIRE(s.has_value());
      before.push_back(std::move(*s));
    }
    const IteratorState state = IteratorState::from_bytes(it.save().bytes());
    const auto ds1 = make_restored();
    auto restored = ds1.iterator(state);
    // Saved again after a few steps (0 to 2), and restored again.
    for (std::size_t i = 0; i < k % 3; ++i) {
      if (auto s = next_step(restored)) before.push_back(std::move(*s));
    }
    const auto ds2 = make_restored();
    auto again = ds2.iterator(restored.save());
    auto seen = keys(before);
    const auto after = keys(drain_steps(again));
    seen.insert(seen.end(), after.begin(), after.end());
    std::sort(seen.begin(), seen.end());
    CHECK(seen == all);
  }
}

}  // namespace ingest::testing
