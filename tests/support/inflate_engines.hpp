// Runs a test case once for each engine that inflates GZIP and ZLIB files in
// this build (zlib, and ISA-L where ingest was built with it): write
// INGEST_EACH_INFLATE_ENGINE(); at the top of the TEST_CASE.
#pragma once

#include <catch2/catch.hpp>

#include <vector>

#include <ingest/formats/compression.hpp>

namespace ingest::testing {

inline std::vector<detail::InflateEngine> inflate_engines() {
  std::vector<detail::InflateEngine> engines{detail::InflateEngine::zlib};
  if (detail::isal_available) engines.push_back(detail::InflateEngine::isal);
  return engines;
}

inline const char* inflate_engine_name(detail::InflateEngine e) {
  return e == detail::InflateEngine::isal ? "isal" : "zlib";
}

/// Makes `engine` the one new InputStreams use, until destroyed.
class InflateEngineScope {
 public:
  explicit InflateEngineScope(detail::InflateEngine engine)
      : previous_(detail::inflate_engine().exchange(engine)) {}
  InflateEngineScope(const InflateEngineScope&) = delete;
  InflateEngineScope& operator=(const InflateEngineScope&) = delete;
  ~InflateEngineScope() { detail::inflate_engine().store(previous_); }

 private:
  detail::InflateEngine previous_;
};

}  // namespace ingest::testing

#define INGEST_EACH_INFLATE_ENGINE()                                                             \
  const auto ingest_inflate_engine = GENERATE(from_range(::ingest::testing::inflate_engines())); \
  INFO("inflate engine: " << ::ingest::testing::inflate_engine_name(ingest_inflate_engine));     \
  ::ingest::testing::InflateEngineScope ingest_inflate_engine_scope(ingest_inflate_engine)
