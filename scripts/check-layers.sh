#!/usr/bin/env bash
# Checks the include graph's layers (README, "Layout"): core <- runtime <-
# storage <- formats <- sources, stages <- the umbrella and the optional parts (image/
# may include any layer below it, never the umbrella; torch/ those and cuda/), and distributed/ (scale-out: world(),
# sharding policies) above sources and stages. A header
# may include headers of its own layer and of the layers below it only, and
# no stage header includes another stage header (shared machinery lives in
# runtime/ or core/).
set -euo pipefail
cd "$(dirname "$0")/../include/ingest"

# The layers each directory may include from.
declare -A allowed=(
  [core]="core"
  [runtime]="core runtime"
  [storage]="core runtime storage"
  [formats]="core runtime storage formats"
  [sources]="core runtime storage formats sources"
  [stages]="core runtime storage formats stages"
  [image]="core runtime storage formats sources stages image"
  [distributed]="core runtime storage formats sources stages distributed"
  [torch]="core runtime storage formats sources stages cuda torch"
)

status=0
for dir in "${!allowed[@]}"; do
  for header in "$dir"/*.hpp; do
    while IFS= read -r included; do
      layer=${included%%/*}
      if [[ " ${allowed[$dir]} " != *" $layer "* ]]; then
        echo "$header includes ingest/$included: $dir may include only ${allowed[$dir]}"
        status=1
      elif [[ $dir == stages && $layer == stages ]]; then
        echo "$header includes ingest/$included: a stage includes no other stage"
        status=1
      fi
    done < <(sed -n 's|^#include "ingest/\([a-z_]*/[a-z_0-9]*\.hpp\)".*|\1|p' "$header")
  done
done
if [[ $status == 0 ]]; then echo "layers: ok"; fi
exit $status
