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

# A ';' in a Catch2 test name splits it in catch_discover_tests, and an
# unbalanced '[' or ']' merges it with the names after it: ctest then runs
# names that match no test, which pass without testing anything. So test
# names (on the TEST_CASE line or the next) hold none of the three.
if bad=$(python3 - <<'PY'
import pathlib, re
bad = []
for path in sorted(pathlib.Path("tests").rglob("*")):
    if path.suffix not in (".cpp", ".cu"):
        continue
    text = path.read_text(errors="replace")
    for m in re.finditer(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"', text):
        if re.search(r"[\[\];]", m.group(1)):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path}:{line}: {m.group(1)}")
print("\n".join(bad))
PY
) && [ -n "$bad" ]; then
  echo "test names must not contain ';', '[' or ']' (ctest would run nothing for them):" >&2
  echo "$bad" >&2
  exit 1
fi
