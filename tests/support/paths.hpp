// Where the tests' files are. The paths are compiled into one small source
// that the build directory generates (tests/CMakeLists.txt: ingest_test_paths),
// not passed as -D flags: a compile command then holds no absolute path, so
// a compiler cache serves a clone in another folder (scripts/ccache-env.sh).
#pragma once

namespace ingest::testing {

/// <source tree>/tests/fixtures.
extern const char* const fixtures_dir;

/// The checkpoint crash test's child program (checkpoint_crash_tests only).
extern const char* const crash_child;

}  // namespace ingest::testing

#define INGEST_FIXTURES_DIR (::ingest::testing::fixtures_dir)
