#!/usr/bin/env bash
# Installs what is missing (the image part's packages too), builds ingest's
# demo and runs it: the tf.data performance ladder on a generated ImageNet-
# style image set (written once, then reused), with its table, the
# autotuned pipeline's stats and SVG pictures. Arguments go to the demo
# (--smoke: a tiny version; --data DIR, --out DIR; --host-step).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/release -j "$(nproc)" --target demo
exec ./build/release/examples/demo "$@"
