#!/usr/bin/env bash
# Builds the native library into python/pylucid/_native and the cffi extension
# (python/pylucid/_lucid_ffi*.so, API mode, linked against that library) into
# python/pylucid, for development (PYTHONPATH=python python3 -m pytest tests_py).
# Both renames are atomic, so a process that has the old ones loaded keeps
# working. The extension is built by the same code as in setup.py
# (python/pylucid/_ffi_build.py).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p python/pylucid/_native
tmp=$(mktemp -d)
GOEXPERIMENT=${GOEXPERIMENT:-simd} go build -buildmode=c-shared -trimpath -o "$tmp/liblucid.so" ./capi
cp capi/lucid.h "$tmp/lucid.h.new"
mv -f "$tmp/liblucid.so" python/pylucid/_native/liblucid.so
mv -f "$tmp/lucid.h.new" python/pylucid/_native/lucid.h
rm -rf "$tmp"
python3 python/pylucid/_ffi_build.py python/pylucid/_native  # also builds pylucid._hot (python/csrc)
