#!/usr/bin/env bash
# ingest side by side with tf.data, DALI, Grain and PyTorch's DataLoader on the
# standard workloads (../shared/bench/WORKLOADS.md), same machine, same data,
# same run; writes bench/compare/results.md and bench/compare/charts/*.svg.
#
#   scripts/compare.sh [--rounds N] [--epochs N] [--only W1,W3,...] [--no-check-round]
#                      [--systems ingest,tfdata,dali,grain,torch,libtorch] [--smoke]
#                      [--driver PATH] [--data DIR] [--out DIR]
#
# Steps: (1) with any peer among --systems, a virtual environment outside the
# tree (INGEST_COMPARE_VENV, default ~/.cache/ingest-compare/venv) made from
# Debian's python3 with its site packages (python3-torch, python3-torchvision,
# python3-pil from apt: installed here when missing and run as root) and the
# peers pinned by bench/compare/requirements.lock (hashes checked); (2) ingest's
# side built as a CMake user builds it (Release, ISA-L where found) in
# INGEST_COMPARE_BUILD (default build-compare), unless --driver names a built
# ingest_compare; (3) bench/compare/compare.py: data generated once with
# ingest's writer (INGEST_COMPARE_DATA, default ~/.cache/ingest-compare/data),
# every system checked to read the same records, then the rounds.
# --smoke: tiny data, one round, results under the data directory (not in the
# tree); `--smoke --systems ingest` needs no network (CTest: bench_compare_smoke).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${INGEST_COMPARE_VENV:-$HOME/.cache/ingest-compare/venv}
build=${INGEST_COMPARE_BUILD:-$root/build-compare}
data=${INGEST_COMPARE_DATA:-$HOME/.cache/ingest-compare/data}
rounds=3 epochs=2 only="W1,W2,W3,W3-GZIP,W4,W4-RRC,W4L,W4L-RRC,W5,W9"
systems="ingest,tfdata,dali,grain,torch,libtorch" smoke=0 driver="" out=""
argv=("$@")

check_flag=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --systems) systems=$2; shift 2 ;;
    --smoke) smoke=1; shift ;;
    --no-check-round) check_flag=(--no-check-round); shift ;;
    --driver) driver=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
if [[ $smoke == 1 ]]; then
  rounds=1
  out=${out:-$data/smoke-results}
fi
out=${out:-$root/bench/compare}

python=python3
if [[ ",$systems," != ",ingest," ]]; then
  # The peers' environment, made again when the lock file changes.
  lock=$root/bench/compare/requirements.lock
  stamp=$(sha256sum "$lock" | cut -d' ' -f1)
  if [[ ",$systems," == *",torch,"* ]] && ! /usr/bin/python3 -c 'import torch, torchvision, PIL' 2>/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3-torch python3-torchvision python3-pil
    else
      echo "compare.sh: the torch peer needs Debian's python3-torch python3-torchvision python3-pil (apt)" >&2
      exit 1
    fi
  fi
  if [[ ! -f $venv/.lock-sha256 || $(cat "$venv/.lock-sha256") != "$stamp" ]]; then
    echo "compare.sh: making $venv from $lock" >&2
    rm -rf "$venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install --quiet --no-deps --require-hashes -r "$lock"
    echo "$stamp" > "$venv/.lock-sha256"
  fi
  python=$venv/bin/python
fi

if [[ -z $driver ]]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
  cmake --build "$build" --target ingest_compare_all -j "$(nproc)" >/dev/null
  driver=$build/bench/compare/ingest_compare
fi
[[ -x $driver ]] || { echo "compare.sh: no ingest_compare at $driver (libjpeg-turbo and the image part are needed)" >&2; exit 1; }

version=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
smoke_flag=()
[[ $smoke == 1 ]] && smoke_flag=(--smoke)
mkdir -p "$data" "$out"
exec "$python" "$root/bench/compare/compare.py" --driver "$driver" --python "$python" \
  --data "$data" --out "$out" --rounds "$rounds" --epochs "$epochs" --only "$only" \
  --systems "$systems" --ingest-version "$version" "${smoke_flag[@]}" "${check_flag[@]}" --argv "${argv[@]}"
