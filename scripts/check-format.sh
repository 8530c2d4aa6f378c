#!/usr/bin/env bash
# Fails if a C++ file differs from .clang-format (with --fix, reformats
# instead), or if a test name would make ctest run nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.hpp' '*.cpp' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
else
  clang-format --dry-run --Werror "${files[@]}"
fi

# A ';' in a Catch2 test name splits it in catch_discover_tests: ctest then
# runs a name that matches no test, which passes without testing anything.
if bad=$(grep -rnE 'TEST_CASE\("[^"]*;' tests); then
  echo "test names must not contain ';' (ctest would run nothing for them):" >&2
  echo "$bad" >&2
  exit 1
fi
