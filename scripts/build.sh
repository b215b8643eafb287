#!/usr/bin/env bash
# Installs the Debian packages tlaloc needs (skipping those present), then configures and builds
# everything (library, `tlaloc` command, tests, benchmarks) into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
ninja -C build "$@"
