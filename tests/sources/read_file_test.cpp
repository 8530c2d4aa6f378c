#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "support/files.hpp"
#include "support/testing.hpp"

using namespace ingest;
using ingest::testing::TempDir;

TEST_CASE("read_file returns a file's bytes", "[sources][read_file]") {
  TempDir dir;
  std::string bytes;
  for (int i = 0; i < 200'000; ++i) bytes.push_back(static_cast<char>(i * 7 % 256));  // NULs too
  testing::write_file(dir / "data.bin", bytes);
  testing::write_file(dir / "empty", "");
  CHECK(read_file(dir / "data.bin") == bytes);
  CHECK(read_file(dir / "empty").empty());
  // Usable as a map's function, sequential or parallel.
  const auto ds = from_vector(std::vector<std::string>{dir / "data.bin", dir / "empty"});
  CHECK(testing::collect(ds.map(read_file)) == std::vector<std::string>{bytes, ""});
  CHECK(testing::collect(ds.map(read_file, {.parallelism = 2})) ==
        std::vector<std::string>{bytes, ""});
}

TEST_CASE("read_file reads files of unknown size to their end", "[sources][read_file]") {
  // /proc files report size 0.
  const std::string status = read_file("/proc/self/status");
  CHECK(status.find("Name:") != std::string::npos);
}

TEST_CASE("read_file errors name the path", "[sources][read_file]") {
  TempDir dir;
  testing::write_file(dir / "big", std::string(100, 'x'));
  CHECK_THROWS_AS(read_file(dir / "missing"), IoError);
  CHECK_THROWS_WITH(read_file(dir / "missing"), Catch::Contains(dir / "missing"));
  CHECK_THROWS_AS(read_file(dir.path().string()), IoError);
  CHECK_THROWS_WITH(read_file(dir.path().string()), Catch::Contains("Is a directory"));
  CHECK(read_file(dir / "big", {.max_bytes = 100}).size() == 100);
  CHECK_THROWS_AS(read_file(dir / "big", {.max_bytes = 99}), IoError);
  CHECK_THROWS_WITH(read_file(dir / "big", {.max_bytes = 99}),
                    Catch::Contains("exceeds max_bytes 99") && Catch::Contains(dir / "big"));
  CHECK_THROWS_WITH(read_file("/proc/self/status", {.max_bytes = 10}),
                    Catch::Contains("exceeds max_bytes 10"));
}
