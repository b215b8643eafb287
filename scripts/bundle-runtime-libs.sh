#!/usr/bin/env bash
# Copies the shared libraries that build/tlaloc and build/tests/test_runtime_pjrt load from this
# machine's Debian packages (OpenBLAS, OpenMP, fmt, zlib, libstdc++, libgfortran, ...; not glibc
# itself) into build/runtime-libs/, so a carried build runs on a GPU machine without apt;
# scripts/device-check.sh puts that folder on LD_LIBRARY_PATH. About 45 MB.
# What to carry to the GPU machine: build/tlaloc build/tests/test_runtime_pjrt
# build/tests/fake_pjrt build/runtime-libs (plus the source tree for bench/ and scripts/).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=build/runtime-libs
mkdir -p "$dest"
for bin in build/tlaloc build/tests/test_runtime_pjrt; do
  [ -x "$bin" ] || { echo "error: $bin is missing: build first (scripts/build.sh)" >&2; exit 1; }
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case "$name" in
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) continue ;;
    esac
    cp -L "$path" "$dest/$name"
  done
done
du -sh "$dest"
ls "$dest"
