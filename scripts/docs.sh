#!/usr/bin/env bash
# Builds the API reference from the headers' comments into build/docs/html
# (Doxygen; Debian's doxygen, installed when missing). Every public name must
# have a brief: an undocumented one, or a malformed comment, fails the build
# and the warnings are printed (file:line). --keep-going only prints them.
#
#   scripts/docs.sh [--keep-going] [OUTPUT_DIR]   (default build/docs)
set -euo pipefail
cd "$(dirname "$0")/.."
strict=FAIL_ON_WARNINGS
if [ "${1:-}" = "--keep-going" ]; then strict=NO; shift; fi
out=$(realpath -m "${1:-build/docs}")
if ! command -v doxygen >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends doxygen
fi
mkdir -p "$out"
rm -f "$out/warnings.txt"
status=0
INGEST_DOCS_OUT=$out INGEST_DOCS_WARN_AS_ERROR=$strict doxygen Doxyfile || status=$?
warnings=0
if [ -s "$out/warnings.txt" ]; then
  warnings=$(grep -cE '(warning|error):' "$out/warnings.txt" || true)
  cat "$out/warnings.txt" >&2
fi
if [ "$status" -ne 0 ] || { [ "$strict" != NO ] && [ "$warnings" -ne 0 ]; }; then
  echo "docs: $warnings warnings: the API reference has undocumented or malformed comments (above)" >&2
  exit 1
fi
echo "docs: API reference in $out/html/index.html ($warnings warnings)"
