#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time on a scratch copy of its committed corpus (tests/fuzz/corpus/,
# never modified). Fails on any finding; the crashing input is kept under
# build/fuzz/findings/<target>/.
#
#   scripts/fuzz.sh [seconds per target, default 60]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
scripts/install-deps.sh

build=build/fuzz
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DINGEST_BUILD_FUZZERS=ON -DINGEST_BUILD_TESTS=OFF -DINGEST_BUILD_BENCH=OFF \
  -DINGEST_BUILD_EXAMPLES=OFF
cmake --build "$build" -j "$(nproc)"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for target in tfrecord_reader_fuzzer example_parser_fuzzer csv_reader_fuzzer \
    text_lines_fuzzer shape_padding_fuzzer image_decode_fuzzer; do
  scratch=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$target/." "$scratch/"
  findings="$build/findings/$target"
  mkdir -p "$findings"
  echo "=== $target: ${seconds}s on $(ls "$scratch" | wc -l) seed inputs"
  if ! "$build/tests/fuzz/$target" "$scratch" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$findings/" 2>&1 | tail -n 25; then
    echo "=== $target: FINDING (inputs in $findings)"
    status=1
  fi
  rm -rf "$scratch"
done
exit $status
