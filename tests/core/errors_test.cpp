#include <catch2/catch.hpp>

#include <new>
#include <stdexcept>

#include <ingest/core/errors.hpp>

using namespace ingest;

TEST_CASE("errors carry their kind, message and context", "[core][errors]") {
  DataLossError e("corrupted record", {.stage = "tfrecord", .file = "a.tfrecord", .offset = 128});
  CHECK(std::string(e.kind()) == "DataLossError");
  CHECK(e.message() == "corrupted record");
  CHECK(std::string(e.what()) ==
        "DataLossError: corrupted record [stage 'tfrecord', file 'a.tfrecord', offset 128]");
  CHECK(e.context().offset == 128u);

  InvalidArgument plain("bad");
  CHECK(std::string(plain.what()) == "InvalidArgument: bad");
}

TEST_CASE("add_context fills only missing fields", "[core][errors]") {
  IoError e("read failed", {.stage = "text_lines", .line = 3});
  e.add_context({.stage = "map", .element = 7, .file = "x.txt"});
  CHECK(e.context().stage == "text_lines");
  CHECK(e.context().element == 7);
  CHECK(e.context().file == "x.txt");
  CHECK(std::string(e.what()) ==
        "IoError: read failed [stage 'text_lines', element 7, file 'x.txt', line 3]");
}

TEST_CASE("rethrow_with_context keeps ingest errors' type and wraps others", "[core][errors]") {
  auto rethrown = [](auto thrower) {
    try {
      try {
        thrower();
      } catch (...) {
        detail::rethrow_with_context({.stage = "map", .element = 4});
      }
    } catch (...) {
      return std::current_exception();
    }
    return std::exception_ptr();
  };

  auto e1 = rethrown([] { throw DataLossError("bad crc"); });
  try {
    std::rethrow_exception(e1);
  } catch (const DataLossError& e) {
    CHECK(e.context().stage == "map");
    CHECK(e.context().element == 4);
  }

  auto e2 = rethrown([] { throw std::out_of_range("index 9"); });
  try {
    std::rethrow_exception(e2);
  } catch (const FunctionError& e) {
    CHECK(std::string(e.what()) == "FunctionError: index 9 [stage 'map', element 4]");
    // The user's exception is still there.
    CHECK_THROWS_AS(std::rethrow_if_nested(e), std::out_of_range);
  }

  auto e3 = rethrown([] { throw 42; });
  CHECK_THROWS_AS(std::rethrow_exception(e3), FunctionError);
}

TEST_CASE("std::bad_alloc and internal failures keep their type (issue 10 item 4)",
          "[core][errors]") {
  auto rethrown = [](auto thrower, detail::Raiser raiser) {
    try {
      try {
        thrower();
      } catch (...) {
        detail::rethrow_with_context({.stage = "padded_batch"}, raiser);
      }
    } catch (...) {
      return std::current_exception();
    }
    return std::exception_ptr();
  };
  using detail::Raiser;
  // Out of memory is never reported as a user function's FunctionError.
  CHECK_THROWS_AS(
      std::rethrow_exception(rethrown([] { throw std::bad_alloc(); }, Raiser::user_function)),
      std::bad_alloc);
  CHECK_THROWS_AS(
      std::rethrow_exception(rethrown([] { throw std::bad_alloc(); }, Raiser::internal)),
      std::bad_alloc);
  // Internal code: foreign exceptions pass unchanged, ingest errors gain context.
  CHECK_THROWS_AS(
      std::rethrow_exception(rethrown([] { throw std::length_error("x"); }, Raiser::internal)),
      std::length_error);
  CHECK_THROWS_WITH(
      std::rethrow_exception(rethrown([] { throw InvalidArgument("x"); }, Raiser::internal)),
      "InvalidArgument: x [stage 'padded_batch']");
  const std::exception_ptr captured = [] {
    try {
      throw std::bad_alloc();
    } catch (...) {
      return detail::capture_with_context({.stage = "map"});
    }
  }();
  CHECK_THROWS_AS(std::rethrow_exception(captured), std::bad_alloc);
}

TEST_CASE("invoke_user passes results through and adds context to errors", "[core][errors]") {
  auto twice = [](int x) { return 2 * x; };
  CHECK(detail::invoke_user("map", 0, twice, 21) == 42);
  auto fails = [](int) -> int { throw std::runtime_error("nope"); };
  try {
    detail::invoke_user("filter", 12, fails, 1);
    FAIL("no exception");
  } catch (const FunctionError& e) {
    CHECK(e.context().stage == "filter");
    CHECK(e.context().element == 12);
    CHECK(e.message() == "nope");
  }
}
