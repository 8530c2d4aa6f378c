#include <catch2/catch.hpp>

#include <ingest/core/shape.hpp>

using namespace ingest;

TEST_CASE("shapes store dims inline and compare by value", "[core][shape]") {
  Shape s{2, 3, 4};
  CHECK(s.rank() == 3);
  CHECK(s[1] == 3);
  CHECK(s.num_elements() == 24);
  CHECK(s.to_string() == "[2, 3, 4]");
  CHECK(s == Shape{2, 3, 4});
  CHECK_FALSE(s == Shape{2, 3});
  CHECK(Shape{}.num_elements() == 1);  // a scalar
  CHECK(Shape{}.rank() == 0);
  CHECK(Shape{0, 5}.num_elements() == 0);
}

TEST_CASE("prepend and drop_front add and remove the batch dimension", "[core][shape]") {
  Shape s{3, 4};
  CHECK(s.prepend(8) == Shape{8, 3, 4});
  CHECK(s.prepend(8).drop_front() == s);
  CHECK(Shape{}.prepend(5) == Shape{5});
  CHECK(Shape{}.drop_front() == Shape{});
}

TEST_CASE("unknown dims and invalid shapes", "[core][shape]") {
  Shape pattern{-1, 10};
  CHECK_FALSE(pattern.is_concrete());
  CHECK(Shape{1, 10}.is_concrete());
  CHECK_THROWS_AS((Shape{-2}), InvalidArgument);
  CHECK_THROWS_AS((Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}), InvalidArgument);
  Shape full{1, 1, 1, 1, 1, 1, 1, 1};
  CHECK_THROWS_AS(full.prepend(2), InvalidArgument);
}

TEST_CASE("element counts and byte sizes are checked, never overflow (issue 10 item 1)",
          "[core][shape]") {
  constexpr std::int64_t p32 = std::int64_t{1} << 32, p62 = std::int64_t{1} << 62;
  // num_elements saturates instead of overflowing a signed product.
  CHECK(Shape{p32, p32}.num_elements() == INT64_MAX);
  CHECK(Shape{p62, p62, 4}.num_elements() == INT64_MAX);
  CHECK(Shape{-1, p62}.num_elements() == 0);
  CHECK(detail::checked_num_elements(Shape{2, 3}) == 6);
  CHECK(detail::checked_num_elements(Shape{}) == 1);
  CHECK(detail::checked_num_elements(Shape{0, 7}) == 0);
  CHECK(detail::checked_byte_size(Shape{2, 3}, 4) == 24);
  CHECK(detail::checked_byte_size(Shape{std::int64_t{1} << 38}, 4) == max_tensor_bytes);
  CHECK_THROWS_WITH(detail::checked_num_elements(Shape{p32, p32}, "padded_batch"),
                    Catch::Contains("padded_batch") && Catch::Contains("[4294967296, 4294967296]"));
  CHECK_THROWS_AS(detail::checked_num_elements(Shape{p62, p62, 0}), InvalidArgument);
  CHECK_THROWS_AS(detail::checked_num_elements(Shape{-1, 2}), InvalidArgument);
  CHECK_THROWS_WITH(detail::checked_byte_size(Shape{p62}, 4, "Tensor"),
                    Catch::Contains("Tensor") && Catch::Contains("[4611686018427387904]"));
  CHECK_THROWS_AS(detail::checked_byte_size(Shape{(std::int64_t{1} << 38) + 1}, 4),
                  InvalidArgument);
  CHECK(detail::checked_bytes(3, 8, "batch") == 24);
  CHECK_THROWS_WITH(detail::checked_bytes(std::uint64_t{1} << 40, 8, "batch"),
                    Catch::Contains("batch") && Catch::Contains("1 TiB"));
  CHECK_THROWS_AS(detail::checked_bytes(UINT64_MAX, UINT64_MAX, "x"), InvalidArgument);
}
