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
