#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <ingest/core/logging.hpp>

TEST_CASE("log lines go to the installed sink", "[core][logging]") {
  std::vector<std::string> lines;
  ingest::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  ingest::log_line("hello");
  ingest::log_line("world");
  ingest::set_log_sink(nullptr);
  CHECK(lines == std::vector<std::string>{"hello", "world"});
}
