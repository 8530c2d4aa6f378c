#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingest/runtime/serialized_buffer.hpp>

using namespace ingest;

namespace {

// A value whose serializer fails for some values.
struct Picky {
  std::string text;
  bool fail = false;
};

}  // namespace

template <>
struct ingest::serializer<Picky> {
  static void write(ByteWriter& w, const Picky& v) {
    if (v.fail) throw std::runtime_error("cannot write " + v.text);
    serializer<std::string>::write(w, v.text);
  }
  static Picky read(ByteReader& r) { return {serializer<std::string>::read(r)}; }
  static std::string signature() { return "picky"; }
};

namespace {

using Slots = std::vector<std::optional<std::string>>;

// What StateWriter::write_element_table writes for the elements.
std::vector<std::byte> element_bytes(const Slots& slots) {
  StateWriter w;
  w.write_element_table(std::span<const std::optional<std::string>>(slots));
  return w.bytes();
}

// A save through `kept`: the writer, holding the deferred part.
StateWriter save(detail::SerializedBuffer& kept, const Slots& slots) {
  StateWriter w;
  kept.write(w, std::span<const std::optional<std::string>>(slots));
  return w;
}

std::vector<std::byte> written(const StateWriter& w) {
  std::vector<std::byte> out(w.size());
  w.copy_to(out.data());
  return out;
}

// The shuffle's changes to its buffer, made on `slots` and told to `kept`:
// the element at `slot` drawn and replaced, or drawn with the last moved in.
void replace(detail::SerializedBuffer& kept, Slots& slots, std::size_t slot, std::string value) {
  slots[slot].emplace(std::move(value));
  kept.replaced(slot);
}
void remove(detail::SerializedBuffer& kept, Slots& slots, std::size_t slot) {
  kept.removed(slot, slots.size());
  if (slot != slots.size() - 1) slots[slot] = std::move(slots.back());
  slots.pop_back();
}

// Saves through `kept`, then checks that this save and the last `keep`
// before it (kept in `saves`) give the bytes of their time.
using Saves = std::vector<std::pair<StateWriter, std::vector<std::byte>>>;
void save_and_check(detail::SerializedBuffer& kept, const Slots& slots, Saves& saves,
                    std::size_t keep) {
  StateWriter w = save(kept, slots);
  std::vector<std::byte> expected = element_bytes(slots);
  CHECK(w.size() == expected.size());
  CHECK(written(w) == expected);
  saves.emplace_back(std::move(w), std::move(expected));
  if (saves.size() > keep) saves.erase(saves.begin());
  for (const auto& [state, bytes] : saves) CHECK(written(state) == bytes);
}

}  // namespace

TEST_CASE("kept elements follow the buffer's changes, and earlier saves stay as they were",
          "[runtime][serialized_buffer]") {
  std::mt19937_64 rng(20261127);
  detail::SerializedBuffer kept;
  kept.activate();
  Slots slots;
  int made = 0;
  // Sizes from empty to past a chunk (4 MiB), mostly small.
  const auto make = [&] {
    const std::size_t size = rng() % 50 == 0  ? detail::SerializedBuffer::chunk_bytes + rng() % 100
                             : rng() % 7 == 0 ? 0
                                              : rng() % 3000;
    std::string s(size, static_cast<char>('a' + made % 26));
    if (!s.empty()) s[0] = static_cast<char>(made % 128);
    ++made;
    return s;
  };
  for (int i = 0; i < 40; ++i) slots.emplace_back(make());
  Saves saves;
  for (int round = 0; round < 120; ++round) {
    const int steps = static_cast<int>(rng() % 20);
    for (int s = 0; s < steps; ++s) {
      const std::size_t op = rng() % 10;
      if (op < 6 && !slots.empty()) {  // drawn and refilled
        replace(kept, slots, rng() % slots.size(), make());
      } else if (op < 8 && !slots.empty()) {  // drawn at the end of the input
        remove(kept, slots, rng() % slots.size());
      } else {  // filling
        slots.emplace_back(make());
      }
    }
    // The states taken before still give the bytes of their time, after
    // the changes and compactions since.
    save_and_check(kept, slots, saves, 4);
    std::size_t live = 0;
    for (const auto& s : slots) live += s->size();
    CHECK(kept.kept_bytes() <= 2 * live + detail::SerializedBuffer::chunk_bytes);
  }
}

TEST_CASE("a buffer of many blocks grows and shrinks across them between saves",
          "[runtime][serialized_buffer]") {
  // Small elements, a buffer of 0 to a few hundred slots (blocks of 64
  // refs): saves share the blocks that did not change, and each save,
  // taken before or after, still gives the bytes of its time.
  std::mt19937_64 rng(1127);
  detail::SerializedBuffer kept;
  kept.activate();
  Slots slots;
  int made = 0;
  const auto make = [&] { return std::string(rng() % 9, static_cast<char>('a' + made++ % 26)); };
  for (int i = 0; i < 200; ++i) slots.emplace_back(make());
  Saves saves;
  for (int round = 0; round < 300; ++round) {
    // Phases: draws only, then a drain to empty, then a refill past 300.
    const int phase = round / 50 % 3;
    const int steps = static_cast<int>(rng() % 70);
    for (int s = 0; s < steps; ++s) {
      if (phase == 0 && !slots.empty()) {
        replace(kept, slots, rng() % slots.size(), make());
      } else if (phase == 1 && !slots.empty()) {
        remove(kept, slots, rng() % slots.size());
      } else if (phase == 2) {
        slots.emplace_back(make());
      }
    }
    save_and_check(kept, slots, saves, 6);
  }
}

TEST_CASE("saves of a large buffer a few changes apart share a journal across its blocks",
          "[runtime][serialized_buffer]") {
  // 6,000 slots, 1 to 40 draws between saves: the saves' journal grows past
  // several of its blocks (1,024 entries) before a new base (a quarter of
  // the slots), then drains; each save, taken before or after, still gives
  // the bytes of its time.
  std::mt19937_64 rng(112824);
  detail::SerializedBuffer kept;
  kept.activate();
  Slots slots;
  int made = 0;
  const auto make = [&] { return std::to_string(made++) + std::string(rng() % 4, 'z'); };
  for (int i = 0; i < 6000; ++i) slots.emplace_back(make());
  Saves saves;
  for (int round = 0; round < 400; ++round) {
    const int steps = 1 + static_cast<int>(rng() % 40);
    for (int s = 0; s < steps; ++s) {
      if (round < 300) {
        replace(kept, slots, rng() % slots.size(), make());
      } else if (!slots.empty()) {
        remove(kept, slots, rng() % slots.size());
      }
    }
    save_and_check(kept, slots, saves, 8);
  }
}

TEST_CASE("a compaction copies the least live chunks, not every live element",
          "[runtime][serialized_buffer]") {
  // 3,000 elements of 3,000 bytes that stay (about 9 MB, two chunks and
  // part of a third) and 100 slots of which one is replaced 5,000 times by
  // 4,000 bytes, saved every 4 (5 MB serialized): the dead bytes lie in the chunks the replacements
  // filled, so the compactions that keep the bytes under twice the live
  // ones plus a chunk copy some of the replacements but not the stable
  // elements (copying every live element would copy them each time).
  std::mt19937_64 rng(2911);
  detail::SerializedBuffer kept;
  kept.activate();
  Slots slots;
  for (int i = 0; i < 3000; ++i) slots.emplace_back(std::string(3000, static_cast<char>(i)));
  for (int i = 0; i < 100; ++i) slots.emplace_back(std::string(4000, 'r'));
  std::size_t live = 0;  // the same throughout: each replacement has the size of the one before
  for (const auto& s : slots) live += 8 + s->size();
  Saves saves;
  for (int i = 0; i < 5000; ++i) {
    replace(kept, slots, 3000 + rng() % 100, std::string(4000, static_cast<char>(i)));
    if (i % 2000 == 0) {
      save_and_check(kept, slots, saves, 1);
    } else if (i % 4 == 0) {
      (void)save(kept, slots);
    }
    REQUIRE(kept.kept_bytes() <= 2 * live + detail::SerializedBuffer::chunk_bytes);
  }
  CHECK(kept.compacted_bytes() > 0);
  CHECK(kept.compacted_bytes() < 3000 * 3008);
  save_and_check(kept, slots, saves, 1);
}

TEST_CASE("a large element that left is dropped even from the newest chunk",
          "[runtime][serialized_buffer]") {
  // The last element takes two chunks' bytes (a chunk of its own, the
  // newest); once it leaves, its bytes are more dead bytes than the live
  // ones plus a chunk, and though nothing new is serialized, that chunk is
  // the one compacted away (nothing copied).
  detail::SerializedBuffer kept;
  kept.activate();
  Slots slots;
  for (int i = 0; i < 10; ++i) slots.emplace_back(std::string(100, static_cast<char>('a' + i)));
  slots.emplace_back(std::string(2 * detail::SerializedBuffer::chunk_bytes, 'z'));
  Saves saves;
  save_and_check(kept, slots, saves, 2);
  CHECK(kept.chunks() == 2);
  remove(kept, slots, slots.size() - 1);
  save_and_check(kept, slots, saves, 2);
  CHECK(kept.kept_bytes() == 10 * 108);
  CHECK(kept.chunks() == 1);
  CHECK(kept.compacted_bytes() == 0);
}

TEST_CASE("chunks let go on other threads go back to the pool for the next ones",
          "[runtime][serialized_buffer]") {
  // States dropped on another thread hand their chunks back to the pooled
  // host allocator (under ThreadSanitizer in CI); new chunks reuse them
  // rather than taking memory from upstream, and the saves made from
  // reused chunks read back.
  std::mt19937_64 rng(1129);
  detail::SerializedBuffer kept;
  kept.activate();
  Slots slots;
  for (int i = 0; i < 2000; ++i) slots.emplace_back(std::string(3000, static_cast<char>(i)));
  const auto upstream = [] {
    return detail::CachingHostPool::instance().stats().upstream_allocations;
  };
  std::uint64_t warm = 0;
  for (int round = 0; round < 12; ++round) {
    if (round == 2) warm = upstream();
    std::vector<StateWriter> states;
    for (int s = 0; s < 10; ++s) {
      for (int d = 0; d < 100; ++d)
        replace(kept, slots, rng() % slots.size(), std::string(3000, static_cast<char>(rng())));
      states.push_back(save(kept, slots));
    }
    const std::vector<std::byte> expected = element_bytes(slots);
    CHECK(written(states.back()) == expected);
    std::thread([last = std::move(states)]() mutable { last.clear(); }).join();
  }
  // Ten rounds serialize 30 MB, more than seven chunks: from reused memory
  // (2 chunks from upstream here; without the pool, 7 or more).
  const std::uint64_t grown = upstream() - warm;
  CAPTURE(grown);
  CHECK(grown <= 4);
}

TEST_CASE("adopted elements are read when drawn and saved as they are",
          "[runtime][serialized_buffer]") {
  const Slots original{std::string("one"), std::string(), std::string(10000, 'x'),
                       std::string("four")};
  auto storage = std::make_shared<std::vector<std::byte>>(element_bytes(original));
  std::vector<std::span<const std::byte>> elements;
  {
    StateReader r(*storage, 0, storage);
    elements = r.read_element_table(original.size());
    r.finish();
  }
  detail::SerializedBuffer kept;
  kept.adopt(storage, elements);
  CHECK(kept.active());
  std::weak_ptr<std::vector<std::byte>> alive = storage;
  storage.reset();  // kept holds it
  REQUIRE(!alive.expired());
  Slots slots(original.size());  // nothing read yet
  // Saved before anything is read: the bytes as they were.
  CHECK(written(save(kept, slots)) == element_bytes(original));
  CHECK(kept.read<std::string>(2, "shuffle") == original[2]);
  CHECK(kept.read<std::string>(1, "shuffle").empty());
  slots[2] = original[2];
  slots[0].emplace("replaced");
  kept.replaced(0);
  kept.removed(3, slots.size());  // "four", the last, drawn at the end of the input
  slots.pop_back();
  slots[1] = original[1];
  Slots now{std::string("replaced"), std::string(), original[2]};
  std::optional<StateWriter> later = save(kept, slots);
  CHECK(written(*later) == element_bytes(now));
  // Compaction keeps the state's storage while more than half of it is
  // live (here 10,016 of its 10,039 bytes)...
  for (int i = 0; i < 2000; ++i) {
    slots[0].emplace(4000, static_cast<char>(i));
    kept.replaced(0);
    (void)save(kept, slots);
  }
  later.reset();
  CHECK(!alive.expired());
  CHECK(written(save(kept, slots)) == element_bytes(slots));
  // ... and copies out what is left of it once most of it left the buffer.
  slots[2].emplace("two");
  kept.replaced(2);
  later = save(kept, slots);
  now = slots;
  for (int i = 0; i < 2000; ++i) {
    slots[0].emplace(4000, static_cast<char>(i));
    kept.replaced(0);
    (void)save(kept, slots);
  }
  CHECK(!alive.expired());  // `later` still shares it
  CHECK(written(*later) == element_bytes(now));
  later.reset();
  CHECK(alive.expired());
}

TEST_CASE("an element whose serializer fails leaves the others kept",
          "[runtime][serialized_buffer]") {
  detail::SerializedBuffer kept;
  kept.activate();
  std::vector<std::optional<Picky>> slots{Picky{"a"}, Picky{"b", true}, Picky{"c"}};
  StateWriter w;
  CHECK_THROWS_WITH(kept.write(w, std::span<const std::optional<Picky>>(slots)), "cannot write b");
  slots[1] = Picky{"fixed"};
  kept.replaced(1);
  StateWriter again;
  kept.write(again, std::span<const std::optional<Picky>>(slots));
  std::vector<std::byte> bytes(again.size());
  again.copy_to(bytes.data());
  StateReader r(bytes);
  const std::vector<std::span<const std::byte>> read = r.read_element_table(3);
  r.finish();
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(read_stored<Picky>(read[i], "test").text ==
          std::vector<std::string>{"a", "fixed", "c"}[i]);
  // Bytes that do not read back are a DataLossError naming the stage.
  const std::vector<std::byte> junk(3, std::byte{1});
  auto owner = std::make_shared<std::vector<std::byte>>(junk);
  detail::SerializedBuffer bad;
  bad.adopt(owner, {std::span<const std::byte>(*owner)});
  CHECK_THROWS_AS(bad.read<std::string>(0, "shuffle"), DataLossError);
}
