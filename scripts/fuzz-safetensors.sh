#!/usr/bin/env bash
# Fuzzes tlaloc's safetensors reader with libFuzzer + ASan + UBSan for SECONDS seconds.
#   scripts/fuzz-safetensors.sh SECONDS [extra libFuzzer flags...]
# Builds tests/io/fuzz with clang++ into build-fuzz/ (override with FUZZ_BUILD_DIR), grows the
# corpus in build-fuzz/corpus (seeded from tests/io/fuzz_corpus), writes crashing inputs to
# build-fuzz/artifacts/. Exit status: 0 when no finding, non-zero otherwise.
set -euo pipefail
if [[ $# -lt 1 || ! $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
secs=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "$0: $cxx not found (Debian: apt-get install clang libclang-rt-dev)" >&2
  exit 2
fi
cmake -G Ninja -S "$root/tests/io/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
ninja -C "$build" >/dev/null
mkdir -p "$build/corpus" "$build/artifacts"
exec "$build/fuzz_safetensors" -max_total_time="$secs" -print_final_stats=1 \
  -dict="$root/tests/io/fuzz/safetensors.dict" -artifact_prefix="$build/artifacts/" "$@" \
  "$build/corpus" "$root/tests/io/fuzz_corpus"
