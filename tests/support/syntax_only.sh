#!/bin/sh
# Compiler launcher of the header checks and the docs' snippets
# (tests/CMakeLists.txt): runs the compile command it is given with
# -fsyntax-only (a header compiles on its own if it parses and its templates
# instantiate; code generation would only cost time), then leaves an empty
# object file where -o said, so the build tool sees the step done and does
# not repeat it. A precompiled header's own compile (-o ending in .gch or
# .pch) runs as given: its users need the real file. The command may start
# with a launcher (ccache), which then caches the check, or with an empty
# argument where the build has none (INGEST_CCACHE=0).
set -e
if [ $# -gt 0 ] && [ -z "$1" ]; then shift; fi
out=
prev=
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then out=$arg; fi
  prev=$arg
done
case "$out" in
  *.gch | *.pch) exec "$@" ;;
esac
"$@" -fsyntax-only
if [ -n "$out" ]; then : > "$out"; fi
