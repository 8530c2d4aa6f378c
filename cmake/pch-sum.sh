#!/usr/bin/env bash
# Compiler launcher for the clang builds' shared precompiled header
# (tests/CMakeLists.txt): runs the compile it is given, and after one that
# wrote a .pch, writes <pch>.sum beside it. ccache (pch_external_checksum,
# scripts/ccache-env.sh) hashes that sum, not the .pch, for the units that
# use it: clang's .pch holds the absolute paths of its headers, so the same
# commit in another folder would otherwise miss every one of them. The sum
# covers what the .pch is made of: its compile command and the name and
# content of every file in its dependency file, with this clone's root
# removed from both.
set -euo pipefail
# An empty first argument stands for a build without a launcher of its own.
if [ $# -gt 0 ] && [ -z "$1" ]; then shift; fi
"$@"
out="" depfile=""
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -o) out=${args[i + 1]} ;;
    -MF) depfile=${args[i + 1]} ;;
  esac
done
[[ $out == *.pch && -n $depfile ]] || exit 0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/
# The dependency file: "target: dep dep \" lines; its names have no spaces.
deps=$(sed -e 's/^[^:]*://' -e 's/\\$//' "$depfile" | tr -s ' \t' '\n' | sed '/^$/d' |
       xargs -d '\n' sha256sum)
{
  printf '%s\n' "${args[@]//"$root"/}"
  printf '%s\n' "${deps//"$root"/}"
} | sha256sum | cut -d' ' -f1 > "$out.sum.tmp"
mv "$out.sum.tmp" "$out.sum"
