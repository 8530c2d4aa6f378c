#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <ingest/sources/indexed_tfrecord.hpp>
#include <ingest/stages/batch.hpp>
#include <ingest/stages/prefetch.hpp>
#include <ingest/stages/repeat.hpp>

#include "support/checkpoint.hpp"
#include "support/files.hpp"
#include "support/fixtures.hpp"
#include "support/records.hpp"
#include "support/testing.hpp"

using namespace ingest;
using namespace ingest::testing;
using V = std::vector<std::string>;

namespace {

// Three files of 7, 0 and 5 records (an empty file in the middle).
struct ThreeFiles {
  TempDir dir;
  V a = sample_payloads(7, 1), c = sample_payloads(5, 3);
  V paths{dir / "a", dir / "b", dir / "c"};
  ThreeFiles() {
    write_file(dir / "a", frame_records(a));
    write_file(dir / "b", "");
    write_file(dir / "c", frame_records(c));
  }
  V all() const {
    V out = a;
    out.insert(out.end(), c.begin(), c.end());
    return out;
  }
};

V sorted(V v) {
  std::sort(v.begin(), v.end());
  return v;
}

// `f()` throws an E whose message contains each of `texts`.
template <class E, class F>
void check_throws(F f, std::initializer_list<std::string> texts) {
  try {
    f();
    FAIL("no exception");
  } catch (const E& e) {
    for (const std::string& t : texts)
      CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains(t));
  }
}

}  // namespace

TEST_CASE("build_tfrecord_index finds every record of every file", "[sources][indexed_tfrecord]") {
  ThreeFiles f;
  const TFRecordIndex index = build_tfrecord_index(f.paths);
  REQUIRE(index.size() == 12);
  REQUIRE(index.num_files() == 3);
  CHECK(index.first_record(0) == 0);
  CHECK(index.first_record(1) == 7);
  CHECK(index.first_record(2) == 7);
  CHECK(index.first_record(3) == 12);
  CHECK(index.file_size(1) == 0);
  CHECK(index.file_size(0) == frame_records(f.a).size());
  // Record 8 is c's second: after c's first record (12 + payload + 4 bytes).
  const TFRecordIndex::Location at = index.locate(8);
  CHECK(at.file == 2);
  CHECK(at.offset == 16 + f.c[0].size());
  CHECK(at.length == f.c[1].size());
  CHECK(index.locate(0).offset == 0);
  CHECK(index.locate(11).length == f.c[4].size());

  CHECK(build_tfrecord_index(V{}).size() == 0);
  check_throws<InvalidArgument>(
      [&] { build_tfrecord_index(f.paths, {.compression = Compression::gzip}); },
      {"compressed files cannot be read by position"});
}

TEST_CASE("indexed_tfrecord reads the records tfrecord reads", "[sources][indexed_tfrecord]") {
  ThreeFiles f;
  CHECK(collect(indexed_tfrecord(f.paths)) == f.all());
  CHECK(collect(indexed_tfrecord(f.paths)) == collect(tfrecord(f.paths)));
  // Small blocks: every record its own read; one byte blocks still read whole records.
  CHECK(collect(indexed_tfrecord(f.paths, {.block_bytes = 1})) == f.all());
  CHECK(collect(indexed_tfrecord(f.paths, {.verify_crc = false, .block_bytes = 40})) == f.all());
  CHECK(collect(indexed_tfrecord(build_tfrecord_index(f.paths))) == f.all());
  const auto ds = indexed_tfrecord(f.paths);
  CHECK(ds.cardinality() == 12);
  CHECK(collect(ds) == collect(ds));
  CHECK(collect(indexed_tfrecord(V{})).empty());
  CHECK(collect(indexed_tfrecord(V{}).global_shuffle({.seed = 1})).empty());
  CHECK_THROWS_AS(indexed_tfrecord(f.paths, {.block_bytes = 0}), InvalidArgument);
}

TEST_CASE("indexed_tfrecord reads every fixture file", "[sources][indexed_tfrecord][fixtures]") {
  for (const Fixture& fx : all_fixtures()) {
    if (fx.compression != Compression::none) continue;
    INFO(fx.name);
    CHECK(collect(indexed_tfrecord(fx.path)) == collect(tfrecord(fx.path)));
    CHECK(sorted(collect(indexed_tfrecord(fx.path).global_shuffle({.seed = 3}))) ==
          sorted(collect(tfrecord(fx.path))));
  }
}

TEST_CASE("the global shuffle's order is a seeded bijection of the positions",
          "[sources][indexed_tfrecord]") {
  for (const std::uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 17ull, 64ull, 1000ull, 65539ull}) {
    INFO("n = " << n);
    const detail::IndexPermutation p(n, 42);
    std::vector<bool> seen(n, false);
    std::uint64_t fixed = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t x = p(i);
      REQUIRE(x < n);
      REQUIRE(!seen[x]);
      seen[x] = true;
      fixed += x == i ? 1 : 0;
    }
    if (n >= 64) CHECK(fixed < n / 8);  // about one fixed point expected
  }
  // The key decides the order.
  const detail::IndexPermutation a(1000, 1), b(1000, 1), c(1000, 2);
  std::uint64_t same_ab = 0, same_ac = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    same_ab += a(i) == b(i) ? 1 : 0;
    same_ac += a(i) == c(i) ? 1 : 0;
  }
  CHECK(same_ab == 1000);
  CHECK(same_ac < 20);
}

TEST_CASE("global_shuffle visits every record once per pass, reshuffling each pass",
          "[sources][indexed_tfrecord]") {
  TempDir dir;
  V paths, all;
  for (int i = 0; i < 20; ++i) {  // more files than an iterator keeps open
    const V p = sample_payloads(9, 10 + i);
    const std::string path = dir / ("f" + std::to_string(i));
    write_file(path, frame_records(p));
    paths.push_back(path);
    all.insert(all.end(), p.begin(), p.end());
  }
  const auto ds = indexed_tfrecord(paths).global_shuffle({.seed = 7});
  const V first = collect(ds), second = collect(ds);
  CHECK(sorted(first) == sorted(all));
  CHECK(sorted(second) == sorted(all));
  CHECK(first != all);
  CHECK(first != second);  // a new order each pass
  // The same seed gives the same passes; another seed other ones.
  const auto again = indexed_tfrecord(paths).global_shuffle({.seed = 7});
  CHECK(collect(again) == first);
  CHECK(collect(again) == second);
  CHECK(collect(indexed_tfrecord(paths).global_shuffle({.seed = 8})) != first);
  // Without reshuffling every pass is the first one's order.
  const auto fixed =
      indexed_tfrecord(paths).global_shuffle({.seed = 7, .reshuffle_each_iteration = false});
  CHECK(collect(fixed) == collect(fixed));
  // Within repeat: each epoch is a permutation of its own.
  const V epochs = collect(indexed_tfrecord(paths).global_shuffle({.seed = 7}).repeat(3));
  REQUIRE(epochs.size() == 3 * all.size());
  for (int e = 0; e < 3; ++e) {
    CHECK(sorted(V(epochs.begin() + e * 180, epochs.begin() + (e + 1) * 180)) == sorted(all));
  }
  // Without a seed, one is drawn per dataset.
  CHECK(sorted(collect(indexed_tfrecord(paths).global_shuffle())) == sorted(all));
}

TEST_CASE("indexed_tfrecord restores at every position, shuffled or not",
          "[sources][indexed_tfrecord][checkpoint]") {
  ThreeFiles f;
  check_restore_everywhere([&] { return indexed_tfrecord(f.paths); });
  check_restore_everywhere([&] { return indexed_tfrecord(f.paths).global_shuffle({.seed = 5}); });
  // Across reshuffled epochs, and through batch and prefetch.
  check_restore_everywhere(
      [&] { return indexed_tfrecord(f.paths).global_shuffle({.seed = 5}).repeat(3); });
  check_restore_everywhere([&] {
    return indexed_tfrecord(f.paths, {.block_bytes = 64})
        .global_shuffle({.seed = 9})
        .repeat(2)
        .batch(5)
        .prefetch(2);
  });
  // The state is the count, the pass and the position, whatever the order.
  auto it = indexed_tfrecord(f.paths).global_shuffle({.seed = 5}).iterator();
  for (int i = 0; i < 6; ++i) it.next();
  const IteratorState small = it.save();
  CHECK(small.bytes().size() < 200);
}

TEST_CASE("indexed_tfrecord refuses states of other data and other orders",
          "[sources][indexed_tfrecord][checkpoint]") {
  ThreeFiles f;
  auto it = indexed_tfrecord(f.paths).global_shuffle({.seed = 5}).iterator();
  it.next();
  const IteratorState state = it.save();
  CHECK_THROWS_AS(indexed_tfrecord(f.paths).global_shuffle({.seed = 6}).iterator(state),
                  InvalidArgument);
  CHECK_THROWS_AS(indexed_tfrecord(f.paths).iterator(state), InvalidArgument);
  CHECK_THROWS_AS(indexed_tfrecord(V{f.paths[0]}).global_shuffle({.seed = 5}).iterator(state),
                  InvalidArgument);
}

TEST_CASE("indexed_tfrecord: a corrupt record is an error naming the file and offset",
          "[sources][indexed_tfrecord]") {
  TempDir dir;
  const V p = {"r0", "r1", "r2", "r3"};
  std::string bytes = frame_records(p);
  write_file(dir / "good", bytes);
  const std::string path = dir / "f";
  write_file(path, bytes);
  const auto ds = indexed_tfrecord(V{path}, {.block_bytes = 1});
  const std::size_t record = 16 + 2;  // each record: 12 + 2 + 4 bytes
  bytes[record + 12] ^= 0x01;         // r1's payload
  write_file(path, bytes);
  const auto out = collect_outcomes(ds);
  REQUIRE(out.size() == 4);
  CHECK(out[0].value == "r0");
  CHECK_THAT(out[1].error, Catch::Matchers::Contains("corrupted record at 30") &&
                               Catch::Matchers::Contains(path));
  CHECK(out[2].value == "r2");  // the next record is read as usual
  CHECK(out[3].value == "r3");
  // Without CRC checks the damaged payload comes through.
  CHECK(collect(indexed_tfrecord(ds.index(), {.verify_crc = false}))[1] == "s1");

  // Building the index over a corrupt file names it and the offset.
  bytes[record] ^= 0x01;  // r1's length
  write_file(path, bytes);
  check_throws<DataLossError>([&] { build_tfrecord_index(V{path}); },
                              {"corrupted record at 18", path});
  write_file(path, frame_records(p).substr(0, bytes.size() - 3));
  check_throws<DataLossError>([&] { build_tfrecord_index(V{path}); }, {"truncated record"});
}

TEST_CASE("indexed_tfrecord: files that changed since they were indexed are data loss",
          "[sources][indexed_tfrecord]") {
  TempDir dir;
  const std::string path = dir / "f";
  write_file(path, frame_records({"aa", "bb", "cc"}));
  const auto ds = indexed_tfrecord(V{path});
  SECTION("a different size") {
    write_file(path, frame_records({"aa", "bb", "cc", "dd"}));
    check_throws<DataLossError>([&] { collect(ds); }, {path, "when it was indexed"});
  }
  SECTION("the same size, other records") {
    write_file(path, frame_records({"a", "bbb", "cc"}));
    // Records 0 and 1 moved; record 2 starts where it did.
    const auto out = collect_outcomes(ds);
    REQUIRE(out.size() == 3);
    CHECK_THAT(out[0].error, Catch::Matchers::Contains("does not match the index") &&
                                 Catch::Matchers::Contains("file changed since") &&
                                 Catch::Matchers::Contains(path));
    CHECK(!out[1].value);
    CHECK(out[2].value == "cc");
  }
  SECTION("gone") {
    std::filesystem::remove(path);
    check_throws<DataLossError>([&] { collect(ds); }, {path, "was indexed but no longer exists"});
  }
}

TEST_CASE("indexed_tfrecord: reads planned ahead give the same records, errors and restores",
          "[sources][indexed_tfrecord][checkpoint]") {
  // `.in_flight` reads planned ahead (URLs' default; local files here, read
  // as they are planned): the same output as one read at a time.
  ThreeFiles f;
  for (const std::size_t ahead : {std::size_t{2}, std::size_t{5}, std::size_t{64}}) {
    CAPTURE(ahead);
    CHECK(collect(indexed_tfrecord(f.paths, {.in_flight = ahead})) == f.all());
    CHECK(collect(indexed_tfrecord(f.paths, {.block_bytes = 1, .in_flight = ahead})) == f.all());
    CHECK(collect(indexed_tfrecord(f.paths, {.block_bytes = 60, .in_flight = ahead})) == f.all());
    CHECK(collect(indexed_tfrecord(f.paths, {.in_flight = ahead}).global_shuffle({.seed = 4})) ==
          collect(indexed_tfrecord(f.paths).global_shuffle({.seed = 4})));
    check_restore_everywhere([&] {
      return indexed_tfrecord(f.paths, {.block_bytes = 40, .in_flight = ahead})
          .global_shuffle({.seed = 7})
          .repeat(2);
    });
    check_restore_everywhere(
        [&] { return indexed_tfrecord(f.paths, {.block_bytes = 50, .in_flight = ahead}); });
  }
}

TEST_CASE("indexed_tfrecord: with reads planned ahead, an error belongs to its own records",
          "[sources][indexed_tfrecord]") {
  TempDir dir;
  const V p = {"r0", "r1", "r2", "r3", "r4", "r5"};
  const V paths{dir / "a", dir / "b", dir / "c"};
  for (const std::string& path : paths) write_file(path, frame_records(p));
  const auto ds = indexed_tfrecord(paths, {.block_bytes = 40, .in_flight = 4});
  SECTION("a corrupt record in a span of two") {
    std::string bytes = frame_records(p);
    bytes[18 + 12] ^= 0x01;  // r1's payload: the second record of the first span of b
    write_file(paths[1], bytes);
    const auto out = collect_outcomes(ds);
    REQUIRE(out.size() == 18);
    for (std::size_t i = 0; i < out.size(); ++i) {
      CAPTURE(i);
      if (i == 7) {
        CHECK_THAT(out[i].error, Catch::Matchers::Contains("corrupted record at 30") &&
                                     Catch::Matchers::Contains(paths[1]));
      } else {
        CHECK(out[i].value == p[i % 6]);
      }
    }
  }
  SECTION("a file gone: each of its records fails, naming it; the others come") {
    std::filesystem::remove(paths[1]);
    const auto out = collect_outcomes(ds);
    REQUIRE(out.size() == 18);
    for (std::size_t i = 0; i < out.size(); ++i) {
      CAPTURE(i);
      if (i >= 6 && i < 12) {
        CHECK_THAT(out[i].error, Catch::Matchers::Contains("was indexed but no longer exists") &&
                                     Catch::Matchers::Contains(paths[1]));
      } else {
        CHECK(out[i].value == p[i % 6]);
      }
    }
  }
  SECTION("destroyed with reads planned") {
    auto it = ds.global_shuffle({.seed = 2}).iterator();
    CHECK(it.next().has_value());
    CHECK(it.next().has_value());
  }
}

TEST_CASE("a global shuffle reads mapped files and read ones alike",
          "[sources][indexed_tfrecord]") {
  ThreeFiles f;
  const auto index = build_tfrecord_index(f.paths);
  const V mapped = collect(indexed_tfrecord(index).global_shuffle({.seed = 3}));
  const V read =
      collect(indexed_tfrecord(index, {.memory_map = false}).global_shuffle({.seed = 3}));
  CHECK(mapped == read);
  CHECK(sorted(mapped) == sorted(f.all()));
}
