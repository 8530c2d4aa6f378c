#!/usr/bin/env bash
# Installs what is missing, builds ingest's examples and runs the quickstart demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build/release -j "$(nproc)" --target quickstart
./build/release/examples/quickstart
