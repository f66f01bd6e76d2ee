#!/usr/bin/env bash
# Builds the native library into python/pylucid/_native for development
# (PYTHONPATH=python python3 -m pytest tests_py). The rename is atomic, so a
# process that has the old library loaded keeps working.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p python/pylucid/_native
tmp=$(mktemp -d)
GOEXPERIMENT=${GOEXPERIMENT:-simd} go build -buildmode=c-shared -trimpath -o "$tmp/liblucid.so" ./capi
cp capi/lucid.h "$tmp/lucid.h.new"
mv -f "$tmp/liblucid.so" python/pylucid/_native/liblucid.so
mv -f "$tmp/lucid.h.new" python/pylucid/_native/lucid.h
rm -rf "$tmp"
