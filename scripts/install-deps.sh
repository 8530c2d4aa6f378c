#!/usr/bin/env bash
# Installs the Debian packages that building, testing and benchmarking ingest
# need, skipping those already installed. Safe to run any number of times.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev clang-format  # toolchains, sanitizers, libFuzzer
  ccache mold                                                    # compiler cache, faster linker (build time)
  libboost-dev zlib1g-dev                                        # the core
  libisal-dev                                                    # faster GZIP/ZLIB inflate (optional)
  catch2 libbenchmark-dev nlohmann-json3-dev                     # tests, benchmarks
  python3 python3-venv                                           # the demo's smoke check; the test servers' venv
  libprotobuf-dev protobuf-compiler                              # tf.Example interop tests
  libdlpack-dev                                                  # optional parts: DLPack,
  libtorch-dev                                                   # libtorch (ingest::torch, the libtorch_train example; CPU-only),
  libjpeg62-turbo-dev libspng-dev libturbojpeg0-dev              # images (TurboJPEG: the tests' reference)
  nginx-light openssl libssl-dev                                 # remote storage part and its test servers
  openmpi-bin libopenmpi-dev                                     # the distributed tests and example (the library never links MPI)
  doxygen                                                        # the API reference (scripts/docs.sh)
  dpkg-dev pkgconf                                               # the Debian package (cpack's dpkg-shlibdeps) and its pkg-config consumer
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
