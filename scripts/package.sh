#!/usr/bin/env bash
# Makes the Debian package of a configured and built release directory
# (cpack -G DEB: headers, CMake package, ingest.pc, the `ingest` tool),
# installs it into this machine with apt-get, builds the packaging consumers
# against what it installed (tests/package through find_package,
# tests/package/pkgconfig through pkg-config) and runs them, runs
# /usr/bin/ingest, and removes the package again, also when a step fails.
# Needs root or sudo. Refuses to run where libingest-dev is installed already
# (it would remove it at the end).
#
#   scripts/package.sh build/release
set -euo pipefail
cd "$(dirname "$0")/.."
source=$PWD

build=${1:-}
if [ -z "$build" ] || [ ! -f "$build/CPackConfig.cmake" ]; then
  echo "usage: $0 BUILD_DIR (a configured build directory of ingest, e.g. build/release)" >&2
  exit 2
fi
build=$(cd "$build" && pwd)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
package=libingest-dev
if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
  echo "package.sh: $package is installed on this machine already; remove it first" >&2
  exit 1
fi
# The consumers' compiles go through ccache where scripts/ccache-env.sh set it up.
launcher=${CMAKE_CXX_COMPILER_LAUNCHER:-}
if [ -z "$launcher" ] && command -v ccache >/dev/null 2>&1; then launcher=ccache; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ingest-package.XXXXXX")
installed=0
cleanup() {
  local status=$?
  if ((installed)); then
    echo "=== removing $package"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get remove -y -qq "$package" >/dev/null || status=1
    if [ -e /usr/bin/ingest ] || [ -e /usr/include/ingest/ingest.hpp ]; then
      echo "package.sh: files of $package are still installed after its removal" >&2
      status=1
    fi
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

echo "=== cpack -G DEB in $build"
# cpack installs the build's install rules into a staging tree (building
# what is out of date first: nothing, after a full build).
(cd "$build" && cpack -G DEB -B "$work/deb" >"$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/deb/*.deb)
echo "$(basename "$deb"): $(du -h "$deb" | cut -f1)"
dpkg-deb --field "$deb" Package Version Architecture Depends Recommends Suggests
dpkg-deb --contents "$deb" | awk '{print $6}' |
  grep -E '^\./usr/(bin/ingest|include/ingest/ingest\.hpp|lib/.*(ingestConfig\.cmake|ingest\.pc))$'

echo "=== installing $(basename "$deb")"
installed=1
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$deb" >"$work/apt.log" ||
  { cat "$work/apt.log"; exit 1; }
echo "pkg-config: ingest $(pkg-config --modversion ingest): $(pkg-config --cflags --libs ingest)"

echo "=== find_package consumer (tests/package) against /usr"
# No build type (no optimisation): the consumers check that the installed
# package is found, compiles and links; optimising them would only cost time.
cmake -S "$source/tests/package" -B "$work/consumer" -G Ninja \
  "-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher" -DINGEST_CONSUMER_MODE=find_package >"$work/consumer.log" ||
  { cat "$work/consumer.log"; exit 1; }
cmake --build "$work/consumer" >"$work/consumer-build.log" || { cat "$work/consumer-build.log"; exit 1; }
"$work/consumer/consumer"
if [ -x "$work/consumer/image_consumer" ]; then
  "$work/consumer/image_consumer" "$source/tests/fixtures/image/jpeg/rgb420_17x13.jpg" \
    "$source/tests/fixtures/image/png/palette_trns.png"
fi
if [ -x "$work/consumer/remote_consumer" ]; then "$work/consumer/remote_consumer"; fi
if [ -x "$work/consumer/cuda_consumer" ]; then "$work/consumer/cuda_consumer"; fi

echo "=== pkg-config consumer (tests/package/pkgconfig)"
# shellcheck disable=SC2046  # pkg-config's flags are words
$launcher ${CXX:-g++} -std=c++20 -O1 -o "$work/pkgconfig_consumer" "$source/tests/package/pkgconfig/main.cpp" \
  $(pkg-config --cflags --libs ingest)
"$work/pkgconfig_consumer"

echo "=== /usr/bin/ingest"
[ "$(command -v ingest)" = /usr/bin/ingest ] || { echo "package.sh: ingest is not /usr/bin/ingest" >&2; exit 1; }
/usr/bin/ingest --help | head -n 3
/usr/bin/ingest inspect --quiet "$source/tests/fixtures/tfrecord/pwnall-tfrecord__singles.tfrecords" | tail -n 1
echo "package.sh: ok"
