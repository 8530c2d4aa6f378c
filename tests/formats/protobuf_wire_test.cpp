#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <ingest/formats/protobuf_wire.hpp>

using namespace ingest::detail::wire;

namespace {
std::uint64_t decode(const std::string& s, std::size_t* used = nullptr) {
  std::uint64_t v = 0;
  const u8* p = as_bytes(s);
  const u8* end = read_varint(p, p + s.size(), v);
  if (used) *used = static_cast<std::size_t>(end - p);
  return v;
}
}  // namespace

TEST_CASE("varints round-trip, negative int64 take 10 bytes", "[formats][wire]") {
  for (std::uint64_t v :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{127}, std::uint64_t{128},
        std::uint64_t{300}, std::uint64_t{1} << 35, std::numeric_limits<std::uint64_t>::max(),
        static_cast<std::uint64_t>(std::int64_t{-1}),
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::min())}) {
    std::string s;
    put_varint(s, v);
    CHECK(s.size() == varint_size(v));
    std::size_t used = 0;
    CHECK(decode(s, &used) == v);
    CHECK(used == s.size());
  }
  std::string neg;
  put_varint(neg, static_cast<std::uint64_t>(std::int64_t{-5}));
  CHECK(neg.size() == 10);
}

TEST_CASE("malformed varints and fields are rejected, never read past the end", "[formats][wire]") {
  CHECK_THROWS_AS(decode(std::string("\x80\x80", 2)), WireError);
  CHECK_THROWS_AS(decode(std::string(11, '\xff')), WireError);
  CHECK_THROWS_AS(decode(std::string()), WireError);
  auto field = [](const std::string& s) {
    Field f;
    return read_field(as_bytes(s), as_bytes(s) + s.size(), f);
  };
  CHECK_THROWS_AS(field(std::string("\x0a\x05"
                                    "abc",
                                    5)),
                  WireError);                                             // length too long
  CHECK_THROWS_AS(field(std::string("\x0d\x01\x02", 3)), WireError);      // short fixed32
  CHECK_THROWS_AS(field(std::string("\x09\x01\x02\x03", 4)), WireError);  // short fixed64
  CHECK_THROWS_AS(field(std::string("\x00\x01", 2)), WireError);          // field 0
  CHECK_THROWS_AS(field(std::string("\x0e", 1)), WireError);              // wire type 6
  CHECK_THROWS_AS(field(std::string("\x0c", 1)), WireError);              // stray end group
  CHECK_THROWS_AS(field(std::string("\x0b\x08\x01", 3)), WireError);      // unterminated group
  CHECK_THROWS_AS(field(std::string("\x0b\x08\x01\x14", 4)), WireError);  // wrong end group
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += '\x0b';
  CHECK_THROWS_AS(field(deep), WireError);
}

TEST_CASE("for_each_field walks every wire type and skips groups", "[formats][wire]") {
  std::string m;
  put_tag(m, 1, varint_type);
  put_varint(m, 150);
  put_tag(m, 2, fixed64_type);
  m.append("12345678");
  put_bytes_field(m, 3, "hello");
  put_tag(m, 4, start_group_type);
  put_tag(m, 1, varint_type);
  put_varint(m, 7);
  put_tag(m, 4, end_group_type);
  put_tag(m, 5, fixed32_type);
  put_fixed32(m, 0xdeadbeef);
  std::vector<std::uint32_t> numbers;
  std::uint64_t value = 0;
  std::string bytes;
  std::uint32_t fixed = 0;
  for_each_field(as_bytes(m), as_bytes(m) + m.size(), [&](const Field& f) {
    numbers.push_back(f.number);
    if (f.number == 1) value = f.value;
    if (f.number == 3) bytes = std::string(as_view(f.begin, f.end));
    if (f.number == 5) fixed = load_fixed32(f.begin);
  });
  CHECK(numbers == std::vector<std::uint32_t>{1, 2, 3, 4, 5});
  CHECK(value == 150);
  CHECK(bytes == "hello");
  CHECK(fixed == 0xdeadbeefu);
}
