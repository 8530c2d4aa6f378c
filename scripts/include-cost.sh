#!/usr/bin/env bash
# What including a header costs: for each public header (or those given), a
# translation unit holding only `#include <header>` is compiled with
# -fsyntax-only and to an object at -O2, and the CPU seconds (user + sys) and
# the compiler's peak memory (maxrss) are reported, sorted by cost; then the
# umbrella header and two programs (examples/quickstart.cpp and W3's
# bench/w3_tfrecord.cpp). Each number is the median of --repeat runs (3).
#
#   scripts/include-cost.sh                        # every header under include/ingest
#   scripts/include-cost.sh ingest/loader.hpp ...  # just these
#   scripts/include-cost.sh --tree ingest/ingest.hpp  # which system/third-party headers cost most
#
# Options: --repeat N, --no-o2 (syntax only), --no-programs, --tree HEADER
# (-ftime-report and the -H include tree of one header: the heaviest
# system and third-party headers by the time the compiler spent in them).
# Flags: those of the project's own targets (CMakeLists.txt:
# ingest_project_options) at -O2: -std=c++20 -O2 -DNDEBUG -DBOOST_ALL_NO_LIB
# and the warnings. CXX picks the compiler (g++). W3 needs the protoc
# output: BUILD_DIR (build/release) after `ninja -C build/release tests/proto/example.pb.h`;
# without it W3 is skipped. Measure on an otherwise quiet machine, or at
# least compare CPU time (what this reports), never wall time.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cxx=${CXX:-g++}
build_dir=${BUILD_DIR:-$root/build/release}
repeat=3
do_o2=1
do_programs=1
tree=""
headers=()
while (($#)); do
  case $1 in
    --repeat) repeat=$2; shift 2 ;;
    --no-o2) do_o2=0; shift ;;
    --no-programs) do_programs=0; shift ;;
    --tree) tree=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) headers+=("$1"); shift ;;
  esac
done

if ! [[ -x /usr/bin/time ]]; then
  echo "include-cost.sh: needs GNU time (/usr/bin/time; apt-get install time)" >&2
  exit 1
fi

flags=(-std=c++20 -DBOOST_ALL_NO_LIB -DNDEBUG -I"$root/include"
       -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# measure OUT_VAR -- compiler arguments: "median_cpu_s median_maxrss_mb"
measure() {
  local cpus=() mems=() i out
  for ((i = 0; i < repeat; ++i)); do
    out=$(/usr/bin/time -f '%U %S %M' "$cxx" "$@" 2>&1 >/dev/null | tail -1)
    read -r u s m <<<"$out"
    if ! [[ $m =~ ^[0-9]+$ ]]; then
      echo "include-cost.sh: compile failed: $cxx $*" >&2
      "$cxx" "$@" >&2 || true
      return 1
    fi
    cpus+=("$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')")
    mems+=("$((m / 1024))")
  done
  local cpu mem
  cpu=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  mem=$(printf '%s\n' "${mems[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  echo "$cpu $mem"
}

if [[ -n $tree ]]; then
  tu=$work/tree.cpp
  echo "#include <$tree>" >"$tu"
  echo "== -ftime-report for <$tree> (-fsyntax-only) =="
  "$cxx" "${flags[@]}" -fsyntax-only -ftime-report "$tu" 2>&1 | grep -E 'phase|TOTAL|template|name lookup|parser' | head -20
  echo
  echo "== system and third-party headers that ingest headers include, each compiled alone =="
  # -H prints one line per include, its depth as dots: the entry points are
  # the non-ingest headers whose includer is an ingest header (or the TU).
  "$cxx" "${flags[@]}" -fsyntax-only -H "$tu" 2>&1 >/dev/null | grep -E '^\.+ ' |
    awk -v inc="$root/include/" '{
      depth = length($1); path = $2; stack[depth] = path
      parent = depth == 1 ? inc : stack[depth - 1]
      if (index(path, inc) != 1 && index(parent, inc) == 1 && !(path in seen)) { seen[path] = 1; print path }
    }' >"$work/entries"
  while IFS= read -r p; do
    echo "#include \"$p\"" >"$work/entry.cpp"
    read -r c m < <(measure "${flags[@]}" -fsyntax-only "$work/entry.cpp")
    printf '%9s %7s  %s\n' "$c" "$m" "$p"
  done <"$work/entries" | sort -gr | head -40
  exit 0
fi

if ((${#headers[@]} == 0)); then
  while IFS= read -r h; do headers+=("${h#"$root/include/"}"); done < <(
    find "$root/include/ingest" -name '*.hpp' | sort)
fi

# The optional parts need their dependencies: skip a header that does not
# compile at all (e.g. ingest/cuda/ without the CUDA toolkit).
printf '%-44s %9s %7s %9s %7s\n' "header" "syntax s" "MB" "-O2 s" "MB"
rows=$work/rows
: >"$rows"
for h in "${headers[@]}"; do
  id=${h//[\/.]/_}
  tu=$work/$id.cpp
  echo "#include <$h>" >"$tu"
  if ! "$cxx" "${flags[@]}" -fsyntax-only "$tu" >/dev/null 2>&1; then
    echo "skipped: $h (does not compile here: a missing optional dependency?)" >&2
    continue
  fi
  read -r sc sm < <(measure "${flags[@]}" -fsyntax-only "$tu")
  if ((do_o2)); then
    read -r oc om < <(measure "${flags[@]}" -O2 -c "$tu" -o "$work/$id.o")
  else
    oc=-; om=-
  fi
  printf '%-44s %9s %7s %9s %7s\n' "$h" "$sc" "$sm" "$oc" "$om" | tee -a "$rows" >/dev/null
done
echo "-- sorted by -fsyntax-only CPU seconds --"
sort -k2,2gr "$rows"

if ((do_programs)); then
  echo "-- programs (compiled to an object at -O2; syntax-only too) --"
  prog() {
    local name=$1; shift
    read -r sc sm < <(measure "${flags[@]}" "$@" -fsyntax-only)
    read -r oc om < <(measure "${flags[@]}" "$@" -O2 -c -o "$work/prog.o")
    printf '%-44s %9s %7s %9s %7s\n' "$name" "$sc" "$sm" "$oc" "$om"
  }
  printf '#include <ingest/ingest.hpp>\n' >"$work/umbrella.cpp"
  prog "umbrella <ingest/ingest.hpp>" "$work/umbrella.cpp"
  prog "examples/quickstart.cpp" "$root/examples/quickstart.cpp"
  if [[ -f $build_dir/tests/proto/example.pb.h ]]; then
    prog "bench/w3_tfrecord.cpp (W3)" -I"$root/bench" -isystem "$build_dir/tests/proto" \
      "$root/bench/w3_tfrecord.cpp"
  else
    echo "skipped: bench/w3_tfrecord.cpp (no $build_dir/tests/proto/example.pb.h;" \
      "run ninja -C $build_dir tests/proto/example.pb.h)" >&2
  fi
fi
