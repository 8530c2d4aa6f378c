#!/usr/bin/env bash
# Looks at the docs as a reader does: renders Markdown pages to HTML with
# pandoc (GitHub's dialect, pictures embedded) and takes a full-page
# screenshot of each with headless Chromium, into build/docs/screens/.
# Fails on a picture pandoc cannot load, or on HTML that shows as text in
# the rendered page (a tag outside code that the renderer escaped). The
# screenshot is DOCS_SCREEN_HEIGHT pixels tall (default 9000).
#
#   scripts/docs-screenshots.sh [PAGE...]   (default README.md docs/getting-started.md docs/checkpoints.md)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then set -- README.md docs/getting-started.md docs/checkpoints.md; fi
need=()
command -v pandoc >/dev/null 2>&1 || need+=(pandoc)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if ((${#need[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
out=build/docs/screens
mkdir -p "$out"
css=$out/page.css
cat > "$css" <<'CSS'
body { max-width: 980px; margin: 2em auto; padding: 0 1em; font: 16px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; }
pre, code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 85%; background: #f6f8fa; }
pre { padding: 1em; overflow: auto; border-radius: 6px; }
table { border-collapse: collapse; } th, td { border: 1px solid #d0d7de; padding: 4px 10px; }
img { max-width: 100%; } h1, h2 { border-bottom: 1px solid #d8dee4; }
CSS
status=0
for page in "$@"; do
  name=$(echo "$page" | tr '/' '_' | sed 's/\.md$//')
  html=$out/$name.html
  log=$out/$name.pandoc.log
  if ! pandoc -f gfm -t html5 --standalone --self-contained --metadata title="$page" \
       --resource-path="$(dirname "$page")" --css "$css" -o "$html" "$page" 2> "$log"; then
    cat "$log" >&2; status=1; continue
  fi
  if grep -qiE "could not fetch|not found|couldn't" "$log"; then
    echo "docs-screenshots: $page: a picture could not be loaded:" >&2; cat "$log" >&2; status=1
  fi
  # Text that reads like a tag outside <code>/<pre>: raw HTML the renderer escaped.
  if python3 - "$html" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
text = re.sub(r"<(pre|code)\b.*?</\1>", "", text, flags=re.S)
bad = re.findall(r"&lt;/?(?:img|a|div|table|br|p|span|details|summary)\b[^&]{0,60}", text)
if bad:
    print("\n".join(bad[:5])); sys.exit(0)
sys.exit(1)
PY
  then
    echo "docs-screenshots: $page: HTML shows as text (above)" >&2; status=1
  fi
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,"${DOCS_SCREEN_HEIGHT:-9000}" \
    --screenshot="$PWD/$out/$name.png" "file://$PWD/$html" > /dev/null 2>&1 || status=1
  echo "docs-screenshots: $page -> $out/$name.png"
done
exit $status
