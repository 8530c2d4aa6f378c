#!/usr/bin/env bash
# Runs the benchmarks and renders docs/performance.md and its charts
# (docs/performance/*.svg) from their JSON output: the performance page is
# generated, never typed. A change that claims speed reruns this script.
#
#   scripts/bench-report.sh [--smoke] [--repetitions N] [--only NAME,...] [--out DIR] [BUILD_DIR]
#
#   --smoke          CI-sized runs, rendered into --out (default build/bench-report/smoke),
#                    never into docs/: proves the pipeline from benchmark to page works
#   --repetitions N  each benchmark N times; the page shows medians (default 3)
#   --only a,b       only these binaries (e.g. bench_w3_tfrecord,bench_w4_images)
#   --out DIR        where the page and charts go (default: the repository's docs/)
#   BUILD_DIR        a release build with the benchmarks (default build/release;
#                    configured and built here when missing)
#
# Every binary writes Google Benchmark's JSON (--benchmark_out) and the
# ratios to its references (--ratios_out) under BUILD_DIR/bench-report/.
# W9 starts SeaweedFS (scripts/setup-test-servers.sh installs it), W10
# mpirun; W7 needs a CUDA device and is left out without one.
set -euo pipefail
cd "$(dirname "$0")/.."
invocation="scripts/bench-report.sh${*:+ $*}"
smoke=0
reps=3
only=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --repetitions) reps=$2; shift ;;
    --only) only=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "bench-report: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
build=${1:-build/release}
if [ -z "$out" ]; then
  if ((smoke)); then out=$build/bench-report/smoke-page; else out=docs; fi
fi

if [ ! -f "$build/build.ninja" ]; then
  scripts/install-deps.sh
  source scripts/ccache-env.sh
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINGEST_BUILD_BENCH=ON \
    "-DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-}"
fi
binaries=(bench_w1_overhead bench_w1_overhead_native bench_w2_parallel_map bench_w3_tfrecord
          bench_image_decode bench_w4_images bench_w6_autotune bench_w8_checkpoint bench_w9_remote
          bench_w10_ranks bench_w7_device_loading)
if [ -n "$only" ]; then IFS=, read -r -a binaries <<< "$only"; fi
targets=$(ninja -C "$build" -t targets all 2>/dev/null || true)
present=()
for b in "${binaries[@]}"; do
  if grep -q "^$b:" <<< "$targets"; then present+=("$b"); fi
done
ninja -C "$build" "${present[@]}"
if [[ " ${present[*]} " == *" bench_w9_remote "* ]] && [ -z "${INGEST_WEED:-}" ]; then
  INGEST_WEED=$(scripts/setup-test-servers.sh | tail -n 1)
  export INGEST_WEED
fi

json=$build/bench-report/$( ((smoke)) && echo smoke || echo full)
rm -rf "$json"
mkdir -p "$json"
args=(--benchmark_repetitions="$reps")
if ((smoke)); then args=(--smoke --benchmark_min_time=0.01); fi
for b in "${present[@]}"; do
  echo "=== $b"
  log=$json/$b.log
  if ! "$build/bench/$b" "${args[@]}" --benchmark_out="$json/$b.json" --benchmark_out_format=json \
       --ratios_out="$json/$b.ratios.json" > "$log" 2>&1; then
    if grep -q "no CUDA device" "$log"; then
      echo "$b: no CUDA device, left out"
      rm -f "$json/$b.json" "$json/$b.ratios.json"
      continue
    fi
    cat "$log" >&2
    echo "bench-report: $b failed (log above)" >&2
    exit 1
  fi
  tail -n 30 "$log"
done
python3 scripts/bench_report.py --json "$json" --out "$out" --root . \
  --compiler "$(c++ --version | head -n 1)" --command "$invocation"
