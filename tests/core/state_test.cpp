#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <ingest/core/state.hpp>

using namespace ingest;

namespace {

// A value whose serializer writes part of its bytes, then fails.
struct HalfWritten {
  std::string text;
};

}  // namespace

template <>
struct ingest::serializer<HalfWritten> {
  static void write(ByteWriter& w, const HalfWritten& v) {
    w.write(v.text.data(), v.text.size());
    throw std::runtime_error("cannot write " + v.text);
  }
  static HalfWritten read(ByteReader&) { return {}; }
  static std::string signature() { return "half_written"; }
};

namespace {

std::vector<std::byte> bytes_of(std::span<const std::byte> s) { return {s.begin(), s.end()}; }

// The DataLossError's message, checked to name `needle`, and its offset.
template <class F>
std::uint64_t data_loss_offset(F f, const std::string& needle) {
  try {
    f();
  } catch (const DataLossError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
    REQUIRE(e.context().offset.has_value());
    return *e.context().offset;
  }
  FAIL("no DataLossError");
  return 0;
}

IteratorState sample_state() {
  StateWriter w;
  w.section("map", [&] {
    w.write_i64(-7);
    w.section("range", [&] {
      w.write_u64(42);
      w.write_string("hello");
    });
  });
  return IteratorState(0x1234'5678'9abc'def0ull, w.bytes());
}

}  // namespace

TEST_CASE("state fields round trip", "[core][state]") {
  StateWriter w;
  w.write_u8(250);
  w.write_u32(0xdeadbeef);
  w.write_i64(-5);
  w.write_u64(~0ull);
  w.write_double(2.5);
  w.write_bool(true);
  w.write_bool(false);
  w.write_string("");
  w.write_string("abc");
  const std::vector<std::byte> blob{std::byte{1}, std::byte{0}, std::byte{255}};
  w.write_bytes(blob);
  w.section("batch", [&] { w.write_i64(3); });

  const IteratorState s(99, w.bytes());
  CHECK(s.fingerprint() == 99);
  const IteratorState back = IteratorState::from_bytes(s.bytes());
  CHECK(back == s);
  StateReader r(back.payload());
  CHECK(r.read_u8() == 250);
  CHECK(r.read_u32() == 0xdeadbeef);
  CHECK(r.read_i64() == -5);
  CHECK(r.read_u64() == ~0ull);
  CHECK(r.read_double() == 2.5);
  CHECK(r.read_bool());
  CHECK_FALSE(r.read_bool());
  CHECK(r.read_string().empty());
  CHECK(r.read_string() == "abc");
  CHECK(r.read_bytes() == blob);
  std::int64_t inner = 0;
  r.section("batch", [&] { inner = r.read_i64(); });
  CHECK(inner == 3);
  CHECK_NOTHROW(r.finish());
}

TEST_CASE("scalar fields written together read back in order, range-checked", "[core][state]") {
  StateWriter w;
  const std::int64_t index = -3;
  const std::size_t pos = 5;
  const bool done = true;
  const double rate = 0.25;
  const std::uint64_t big = std::uint64_t{1} << 40;
  w.write(index, pos, done, rate, big);
  CHECK(w.size() == 8 + 8 + 1 + 8 + 8);
  const std::vector<std::byte> payload = w.bytes();

  StateReader r(payload);
  std::int64_t index2 = 0;
  std::size_t pos2 = 0;
  bool done2 = false;
  double rate2 = 0;
  std::uint64_t big2 = 0;
  r.read(index2, pos2, done2, rate2, big2);
  r.finish();
  CHECK(index2 == index);
  CHECK(pos2 == pos);
  CHECK(done2);
  CHECK(rate2 == rate);
  CHECK(big2 == big);

  // A 64-bit value that does not fit the field it is read into.
  StateReader narrow(payload);
  std::int64_t skip = 0;
  std::size_t skip_pos = 0;
  bool skip_done = false;
  double skip_rate = 0;
  std::uint32_t small = 0;
  narrow.read(skip, skip_pos, skip_done, skip_rate);
  CHECK(data_loss_offset([&] { narrow.read(small); }, "out of its type's range") == 25);
  StateReader negative(payload);
  std::uint16_t unsigned_field = 0;
  CHECK(data_loss_offset([&] { negative.read(unsigned_field); }, "out of its type's range") == 0);
}

TEST_CASE("a position past its sequence names the stage", "[core][state]") {
  StateWriter w;
  w.write(std::uint64_t{4}, std::uint64_t{9});
  const std::vector<std::byte> payload = w.bytes();
  StateReader r(payload);
  CHECK(r.read_position(4, "from_vector", "elements") == 4);  // the end is a position
  try {
    r.read_position(4, "from_vector", "elements");
    FAIL("no DataLossError");
  } catch (const DataLossError& e) {
    CHECK(std::string(e.what()).find("from_vector position 9 is past its 4 elements") !=
          std::string::npos);
    CHECK(e.context().stage == "from_vector");
    CHECK(e.context().offset == 8);
  }
}

TEST_CASE("state layout: magic, version, fingerprint, length, CRC, little-endian",
          "[core][state]") {
  StateWriter w;
  w.write_u32(0x01020304);
  const IteratorState s(0x1122334455667788ull, w.bytes());
  const auto b = bytes_of(s.bytes());
  REQUIRE(b.size() == 24 + 4 + 4);
  CHECK(std::string(reinterpret_cast<const char*>(b.data()), 4) == "INGS");
  // format version 6: interleave and flat_map store the counters their functions' datasets
  // share with the fingerprint of the dataset each was found in
  CHECK(b[4] == std::byte{6});
  CHECK(b[8] == std::byte{0x88});
  CHECK(b[15] == std::byte{0x11});
  CHECK(b[16] == std::byte{4});
  CHECK(b[24] == std::byte{4});
  CHECK(b[27] == std::byte{1});
  const std::uint32_t crc = crc32c(b.data(), 28);
  CHECK(b[28] == static_cast<std::byte>(crc & 0xff));
  // The empty state is valid too.
  CHECK(IteratorState::from_bytes(IteratorState().bytes()).payload().empty());
}

TEST_CASE("corrupt states raise DataLossError with the offset", "[core][state]") {
  const auto good = bytes_of(sample_state().bytes());

  SECTION("bad magic") {
    auto b = good;
    b[0] = std::byte{'X'};
    CHECK(data_loss_offset([&] { IteratorState::from_bytes(b); }, "magic") == 0);
  }
  SECTION("unknown version") {
    auto b = good;
    b[4] = std::byte{7};
    CHECK(data_loss_offset([&] { IteratorState::from_bytes(b); }, "version 7") == 4);
  }
  SECTION("a flipped payload byte fails the CRC") {
    auto b = good;
    b[30] ^= std::byte{0x40};
    CHECK(data_loss_offset([&] { IteratorState::from_bytes(b); }, "CRC") == good.size() - 4);
  }
  SECTION("truncated anywhere") {
    for (std::size_t n = 0; n < good.size(); ++n) {
      INFO("truncated to " << n);
      std::span<const std::byte> cut(good.data(), n);
      CHECK_THROWS_AS(IteratorState::from_bytes(cut), DataLossError);
    }
    CHECK(data_loss_offset([&] { IteratorState::from_bytes(std::span(good).first(10)); },
                           "truncated") == 10);
    CHECK(data_loss_offset([&] { IteratorState::from_bytes(std::span(good).first(40)); },
                           "payload length") == 16);
  }
  SECTION("trailing bytes") {
    auto b = good;
    b.push_back(std::byte{0});
    CHECK(data_loss_offset([&] { IteratorState::from_bytes(b); }, "unexpected bytes") ==
          good.size());
  }
}

TEST_CASE("state reads are bounds-checked before allocating", "[core][state]") {
  SECTION("an oversized string length") {
    StateWriter w;
    w.write_u64(std::uint64_t{1} << 60);  // read back as a string's length
    w.write_u32(0);
    const IteratorState s(1, w.bytes());
    StateReader r(s.payload(), IteratorState::header_bytes);
    CHECK(data_loss_offset([&] { r.read_string(); }, "exceeds the 4 bytes left") == 24);
  }
  SECTION("a read past the end") {
    StateWriter w;
    w.write_u32(5);
    StateReader r(w.bytes());
    CHECK(r.read_u32() == 5);
    CHECK(data_loss_offset([&] { r.read_u8(); }, "truncated") == 4);
  }
  SECTION("a read past its section") {
    StateWriter w;
    w.section("take", [&] { w.write_u32(1); });
    w.write_u64(7);
    StateReader r(w.bytes());
    CHECK_THROWS_AS(r.section("take", [&] { r.read_u64(); }), DataLossError);
  }
  SECTION("a section left half read") {
    StateWriter w;
    w.section("take", [&] { w.write_u64(1); });
    StateReader r(w.bytes());
    CHECK(data_loss_offset([&] { r.section("take", [&] { r.read_u32(); }); }, "unread") ==
          8 + 4 + 8 + 4);
  }
  SECTION("a bad bool") {
    StateWriter w;
    w.write_u8(7);
    StateReader r(w.bytes());
    CHECK(data_loss_offset([&] { r.read_bool(); }, "bool") == 0);
  }
  SECTION("unread bytes at the end") {
    StateWriter w;
    w.write_u64(1);
    StateReader r(w.bytes());
    CHECK(data_loss_offset([&] { r.finish(); }, "8 bytes left unread") == 0);
  }
}

TEST_CASE("a section of another stage names both and the byte", "[core][state]") {
  const IteratorState s = sample_state();
  StateReader r(s.payload(), IteratorState::header_bytes);
  try {
    r.section("batch", [] {});
    FAIL("no error");
  } catch (const DataLossError& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("checkpoint: expected stage 'batch' at byte 24, found 'map'"));
  }
  // The nested section is checked too.
  StateReader r2(s.payload(), IteratorState::header_bytes);
  CHECK_THROWS_WITH(r2.section("map",
                               [&] {
                                 r2.read_i64();
                                 r2.section("from_vector", [] {});
                               }),
                    Catch::Contains("expected stage 'from_vector'") && Catch::Contains("'range'"));
}

TEST_CASE("fingerprints tell descriptions apart", "[core][state]") {
  auto fp = [](auto... parts) {
    Fingerprint f;
    (f.add(parts), ...);
    return f.value();
  };
  CHECK(fp("map", std::int64_t{3}) == fp("map", std::int64_t{3}));
  CHECK(fp("map", std::int64_t{3}) != fp("map", std::int64_t{4}));
  CHECK(fp("ab", "c") != fp("a", "bc"));
  CHECK(fp("batch") != fp("take"));
  CHECK(fp(true) != fp(false));
  CHECK(Fingerprint().value() == 0xcbf29ce484222325ull);
}

TEST_CASE("elements are written in place, and a failing serializer leaves no bytes",
          "[core][state]") {
  StateWriter w;
  w.reserve(1 << 10);
  w.write_element(std::string("abc"));
  const std::size_t before = w.size();
  CHECK_THROWS_WITH(w.write_element(HalfWritten{"partial"}), "cannot write partial");
  CHECK(w.size() == before);
  w.write_element(std::vector<std::int64_t>{4, 5});
  // Each element is one length-prefixed field; the next field follows.
  const std::vector<std::byte> payload = bytes_of(w.bytes());
  StateReader r(payload);
  CHECK(r.read_element<std::string>("test") == "abc");
  CHECK(r.read_element<std::vector<std::int64_t>>("test") == std::vector<std::int64_t>{4, 5});
  r.finish();
  // A recycled buffer: cleared, its capacity kept.
  std::vector<std::byte> old(100, std::byte{7});
  old.reserve(4096);
  StateWriter again;
  again.reuse(std::move(old));
  CHECK(again.size() == 0);
  again.write_element(std::string("x"));
  StateReader r2(again.bytes());
  CHECK(r2.read_element<std::string>("test") == "x");
}

TEST_CASE("an element table holds the lengths first, and its reads are bounds-checked",
          "[core][state]") {
  using S = std::optional<std::string>;
  const std::vector<S> values{std::string("abc"), std::string(), std::string(300, 'z')};
  StateWriter w;
  w.write_u64(7);
  w.write_element_table(std::span<const S>(values));
  w.write_u64(9);
  const std::vector<std::byte> payload = bytes_of(w.bytes());
  // A string's bytes are its serializer's: its length, then its characters.
  REQUIRE(payload.size() == 8 + 3 * 8 + (8 + 3) + 8 + (8 + 300) + 8);
  CHECK(payload[8] == std::byte{11});       // the first length
  CHECK(payload[8 + 16] == std::byte{52});  // the third: 308 = 0x134
  {
    StateReader r(payload, 100);
    CHECK(r.read_u64() == 7);
    const auto spans = r.read_element_table(3);
    REQUIRE(spans.size() == 3);
    CHECK(r.offset_of(spans[0]) == 100 + 8 + 24);
    for (std::size_t i = 0; i < 3; ++i)
      CHECK(read_stored<std::string>(spans[i], "t") == *values[i]);
    CHECK(r.read_u64() == 9);
    r.finish();
  }
  // An empty table; a failing serializer leaves no bytes.
  StateWriter e;
  e.write_element_table(std::span<const S>());
  CHECK(e.size() == 0);
  const std::vector<std::optional<HalfWritten>> bad{HalfWritten{"ok"}, HalfWritten{"partial"}};
  CHECK_THROWS(e.write_element_table(std::span<const std::optional<HalfWritten>>(bad)));
  CHECK(e.size() == 0);
  // More lengths than bytes, or a length past the end: DataLossError with
  // the offset, before anything is allocated for it.
  {
    StateReader r(payload);
    r.read_u64();
    CHECK_THROWS_AS(r.read_element_table(std::size_t{1} << 60), DataLossError);
  }
  std::vector<std::byte> cut(payload.begin(), payload.end() - 20);
  StateReader r(cut);
  r.read_u64();
  CHECK_THROWS_WITH(r.read_element_table(3),
                    Catch::Contains("value 2") && Catch::Contains("at byte 24"));
}

namespace {

// Deferred bytes that count how often they were copied out.
struct Repeated final : DeferredBytes {
  std::byte value;
  std::size_t n;
  mutable int copies = 0;
  Repeated(std::byte v, std::size_t count) : value(v), n(count) {}
  std::size_t size() const noexcept override { return n; }
  void copy_to(std::byte* out) const noexcept override {
    ++copies;
    for (std::size_t i = 0; i < n; ++i) out[i] = value;
  }
};

}  // namespace

TEST_CASE("deferred parts are shared until the state is written out", "[core][state]") {
  // What the same writes give with the deferred parts written as bytes.
  const auto flat = [](std::size_t a, std::size_t b) {
    StateWriter w;
    w.section("outer", [&] {
      w.write_u64(1);
      w.section("inner", [&] {
        w.write_bytes(std::vector<std::byte>(a, std::byte{0xa}));
        w.write_u64(2);
        for (std::size_t i = 0; i < b; ++i) w.write_u8(0xb);
      });
    });
    return IteratorState(9, w.bytes());
  };
  for (const std::size_t a : {std::size_t{0}, std::size_t{5}}) {
    for (const std::size_t b : {std::size_t{0}, std::size_t{300}}) {
      INFO("a " << a << ", b " << b);
      auto first = std::make_shared<Repeated>(std::byte{0xa}, a);
      auto second = std::make_shared<Repeated>(std::byte{0xb}, b);
      StateWriter inner;
      inner.write_u64(a);
      inner.write_deferred(first);
      inner.write_u64(2);
      inner.write_deferred(second);
      CHECK(inner.size() == 16 + a + b);
      CHECK(inner.bytes().size() == 16);  // the deferred parts are not copied in
      StateWriter w;
      w.section("outer", [&] {
        w.write_u64(1);
        w.write_string("inner");
        // A section's length counts its deferred parts.
        w.write_nested(inner);
      });
      CHECK(first->copies == 0);
      const IteratorState state(9, w);
      CHECK(first->copies == 1);
      CHECK(second->copies == 1);
      CHECK(state == flat(a, b));
      // A copy of the state shares its bytes; the restore reads them in place.
      const IteratorState copy = state;
      CHECK(copy.bytes().data() == state.bytes().data());
      StateReader r(state.payload(), IteratorState::header_bytes, state.storage());
      CHECK(r.owner() == state.storage());
      r.section("outer", [&] {
        CHECK(r.read_u64() == 1);
        r.section("inner", [&] {
          CHECK(r.read_span().size() == a);
          CHECK(r.read_u64() == 2);
          for (std::size_t i = 0; i < b; ++i) CHECK(r.read_u8() == 0xb);
        });
      });
      r.finish();
    }
  }
  // Prepaid time adds up (the anchors' pacing leaves it out).
  StateWriter w;
  w.add_prepaid_ns(5);
  w.add_prepaid_ns(7);
  CHECK(w.prepaid_ns() == 12);
}
