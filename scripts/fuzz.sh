#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# bounded time on a scratch copy of its committed corpus (tests/fuzz/corpus/,
# never modified), as many at a time as there are cores. Fails on any
# finding; the crashing input is kept under build/fuzz/findings/<target>/.
#
#   scripts/fuzz.sh [seconds per target, default 60]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
scripts/install-deps.sh
source scripts/ccache-env.sh

build=build/fuzz
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  "-DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-}" \
  -DINGEST_BUILD_FUZZERS=ON -DINGEST_BUILD_TESTS=OFF -DINGEST_BUILD_BENCH=OFF \
  -DINGEST_BUILD_EXAMPLES=OFF -DINGEST_BUILD_TOOLS=OFF
cmake --build "$build" -j "$(nproc)"
scripts/build-profile.sh "$build" --top 8

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# One target: its output (the last lines) and exit status into $2 and $2.status.
run_target() {
  local target=$1 log=$2 scratch findings status=0
  scratch=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$target/." "$scratch/"
  findings="$build/findings/$target"
  mkdir -p "$findings"
  {
    echo "=== $target: ${seconds}s on $(ls "$scratch" | wc -l) seed inputs"
    if ! "$build/tests/fuzz/$target" "$scratch" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$findings/" 2>&1 | tail -n 25; then
      echo "=== $target: FINDING (inputs in $findings)"
      status=1
    fi
  } > "$log" 2>&1
  rm -rf "$scratch"
  echo "$status" > "$log.status"
}

# The targets run as many at a time as there are cores (each fuzzer is one
# process on one core), their outputs printed in order once all are done.
logs=$(mktemp -d)
targets=(tfrecord_reader_fuzzer example_parser_fuzzer csv_reader_fuzzer text_lines_fuzzer
         shape_padding_fuzzer image_decode_fuzzer http_response_fuzzer s3_xml_fuzzer)
for target in "${targets[@]}"; do
  while (( $(jobs -rp | wc -l) >= $(nproc) )); do sleep 1; done
  run_target "$target" "$logs/$target" &
done
wait
status=0
for target in "${targets[@]}"; do
  cat "$logs/$target" 2>/dev/null || echo "=== $target: did not run"
  [[ "$(cat "$logs/$target.status" 2>/dev/null)" == 0 ]] || status=1
done
rm -rf "$logs"
exit $status
