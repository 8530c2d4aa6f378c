#!/usr/bin/env bash
# Where a build's time went, from the build directory's .ninja_log: the
# slowest translation units with their compile seconds, then every target's
# compile seconds (summed over its units), its link seconds and its unit
# count, then the totals. Each output's last entry in the log counts, so after
# an incremental build the figures are the last time each file was built (a
# compiler-cache hit shows as the seconds the hit took).
#
#   scripts/build-profile.sh [BUILD_DIR] [--top N]   (default build/release, 15)
#
# A unity unit (tests/CMakeLists.txt groups eight test files to one unit) is
# named by its first file and how many more it holds. The seconds are wall
# seconds of each job while others ran beside it (ninja -j nproc), so they
# add up to more than the build's wall time on a machine with several cores.
set -euo pipefail

build=build/release
top=15
while (($#)); do
  case $1 in
    --top) top=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) build=$1; shift ;;
  esac
done
log="$build/.ninja_log"
if [ ! -f "$log" ]; then
  echo "build-profile: no $log (build with the Ninja generator first)" >&2
  exit 1
fi

python3 - "$build" "$top" <<'EOF'
import os, re, sys
from collections import defaultdict

build, top = sys.argv[1], int(sys.argv[2])
entries = {}
with open(os.path.join(build, ".ninja_log")) as f:
    for line in f:
        if line.startswith("#"):
            continue
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 4:
            continue
        start, end, _, output = int(parts[0]), int(parts[1]), parts[2], parts[3]
        entries[output] = (start, end)   # the last build of each output wins

def unity_members(path):
    try:
        with open(os.path.join(build, path)) as f:
            return re.findall(r'#include "([^"]+)"', f.read())
    except OSError:
        return []

compile_rows, links = [], []
per_target = defaultdict(lambda: [0.0, 0.0, 0])   # compile s, link s, units
for output, (start, end) in entries.items():
    seconds = (end - start) / 1000.0
    m = re.match(r"(?:(.*)/)?CMakeFiles/([^/]+)\.dir/(.+)\.o$", output)
    if m:
        target, source = m.group(2), m.group(3)
        if source.endswith(".gch") or "cmake_pch" in source:
            source = "(precompiled header)"
        elif "/Unity/" in "/" + source:   # CMake's UNITY_BUILD
            members = unity_members(output[: -len(".o")])
        elif source.startswith("unity/"):   # tests/CMakeLists.txt's groups
            members = unity_members(os.path.join(m.group(1) or "", source))
        else:
            members = []
        if members:
            first = os.path.basename(members[0])
            source = f"{os.path.basename(source)} ({first} +{len(members) - 1})"
        per_target[target][0] += seconds
        per_target[target][2] += 1
        compile_rows.append((seconds, target, source))
    elif output.endswith((".gch", ".pch")):
        m = re.match(r"(?:(.*)/)?CMakeFiles/([^/]+)\.dir/", output)
        target = m.group(2) if m else output
        per_target[target][0] += seconds
        per_target[target][2] += 1
        compile_rows.append((seconds, target, "(precompiled header)"))
    elif not os.path.basename(output).startswith("cmake.") and not output.endswith(
            (".cmake", ".ninja", ".txt", ".h", ".cc", ".stamp")) and seconds > 0:
        target = os.path.basename(output)
        if target.startswith("lib") and target.endswith(".a"):
            target = target[3:-2]
        per_target[target][1] += seconds
        links.append((seconds, target))

if not compile_rows:
    print(f"build-profile: no compile jobs in {build}/.ninja_log")
    sys.exit(0)
span = (max(e for _, e in entries.values()) - min(s for s, _ in entries.values())) / 1000.0
print(f"== {build}: slowest {top} translation units (compile seconds)")
print(f"{'seconds':>8}  {'target':<34} unit")
for seconds, target, source in sorted(compile_rows, reverse=True)[:top]:
    print(f"{seconds:8.1f}  {target:<34} {source}")
print()
print(f"== {build}: per target (compile = sum over its units)")
print(f"{'compile':>8} {'link':>7} {'units':>5}  target")
for target, (c, l, n) in sorted(per_target.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
    print(f"{c:8.1f} {l:7.1f} {n:5d}  {target}")
total_c = sum(v[0] for v in per_target.values())
total_l = sum(v[1] for v in per_target.values())
print(f"{total_c:8.1f} {total_l:7.1f} {sum(v[2] for v in per_target.values()):5d}  "
      f"all ({len(compile_rows)} compile jobs, {len(links)} links; build span {span:.0f} s wall)")
EOF
