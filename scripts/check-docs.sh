#!/usr/bin/env bash
# Checks the docs as CI does: compiles every C++ block of the given pages
# (default: README.md and docs/*.md; tests/docs/snippets.py says how each
# block is compiled) and checks their links (tests/docs/check_links.py).
# Compiler errors name the Markdown file and line. The build does the same
# (target ingest_docs_snippets, test docs:links); this script needs no build
# directory.
#
#   scripts/check-docs.sh [PAGE...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then set -- README.md docs/*.md; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
python3 tests/docs/check_links.py --root . "$@" || status=1
units=$(python3 tests/docs/snippets.py --root . --out "$out" "$@") || status=1
cxx=${CXX:-g++}
flags=(-std=c++20 -fsyntax-only -Iinclude -Itests -DINGEST_HAVE_ISAL=1)
if [ -d /usr/local/cuda/include ]; then flags+=(-isystem /usr/local/cuda/include); fi
torch_flags=()
if [ -d /usr/include/torch/csrc/api/include ]; then
  torch_flags=(-isystem /usr/include/torch/csrc/api/include)
fi
count=0
while read -r kind unit; do
  [ -n "${unit:-}" ] || continue
  extra=()
  case "$kind" in
    torch-*)
      if [ ${#torch_flags[@]} -eq 0 ]; then echo "check-docs: $unit uses libtorch, which is not installed: skipped"; continue; fi
      extra=("${torch_flags[@]}") ;;
  esac
  count=$((count + 1))
  "$cxx" "${flags[@]}" "${extra[@]}" "$unit" || status=1
done <<< "$units"
if [ "$status" -ne 0 ]; then
  echo "check-docs: failed (above)" >&2
  exit 1
fi
echo "check-docs: $# pages, $count translation units compiled, links resolve"
