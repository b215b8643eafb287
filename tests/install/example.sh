#!/usr/bin/env bash
# Installs the build into a scratch prefix, checks the installed files, then configures, builds
# and runs examples/ against it as a user's project would (find_package(tlaloc 0.1 CONFIG)).
# The scratch folder is under the build folder, at a fixed place, so ccache (base_dir) finds
# the example's object from an earlier run.
set -euo pipefail
: "${TLALOC_SOURCE_DIR:?}" "${TLALOC_BINARY_DIR:?}"
cmake=${CMAKE_COMMAND:-cmake}
work="$TLALOC_BINARY_DIR/install-test"
prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"

# The README shows examples/CMakeLists.txt and the core of examples/rings.cpp: every line of its
# ```cmake and ```cpp blocks must be a line of those files.
readme_block() {  # the lines of the README's ```$1 block
  awk -v fence="\`\`\`$1" '$0 == fence { on = 1; next } on && /^```/ { exit } on' \
    "$TLALOC_SOURCE_DIR/README.md"
}
in_sync() {  # $1: block language, $2: file under examples/
  local n=0
  while IFS= read -r line; do
    [ -z "$line" ] && continue
    n=$((n + 1))
    grep -qxF -- "$line" "$TLALOC_SOURCE_DIR/examples/$2" ||
      { echo "FAIL: README's $1 block has a line not in examples/$2: $line"; exit 1; }
  done < <(readme_block "$1")
  [ "$n" -gt 0 ] || { echo "FAIL: no \`\`\`$1 block in README.md"; exit 1; }
}
in_sync cmake CMakeLists.txt
in_sync cpp rings.cpp

"$cmake" --install "$TLALOC_BINARY_DIR" --prefix "$prefix" >"$work/install.log" ||
  { echo "FAIL: cmake --install"; cat "$work/install.log"; exit 1; }
for f in lib/libtlaloc.a bin/tlaloc include/tlaloc/train/trainer.h include/tlaloc/ir/ops.def \
  lib/cmake/tlaloc/tlalocConfig.cmake lib/cmake/tlaloc/tlalocConfigVersion.cmake \
  lib/cmake/tlaloc/tlalocTargets.cmake; do
  [ -f "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done

args=(-S "$TLALOC_SOURCE_DIR/examples" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix"
  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror")
[ -n "${CMAKE_GENERATOR:-}" ] && args+=(-G "$CMAKE_GENERATOR")
[ -n "${CXX:-}" ] && args+=(-DCMAKE_CXX_COMPILER="$CXX")
[ -n "${TLALOC_LAUNCHER:-}" ] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$TLALOC_LAUNCHER")
"$cmake" "${args[@]}" >"$work/configure.log" 2>&1 ||
  { echo "FAIL: configuring examples/ against the package"; cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/build" >"$work/build.log" 2>&1 ||
  { echo "FAIL: building examples/"; cat "$work/build.log"; exit 1; }

# The example exits 1 unless its loss went down. Its last lines are the ones the README quotes
# (the host lane gives the same bits on every run and thread count).
OMP_NUM_THREADS=1 "$work/build/rings" | tee "$work/rings.out"
for line in "epoch 12  train loss 0.0622" "held-out accuracy 95.80%"; do
  grep -qxF "$line" "$work/rings.out" || { echo "FAIL: no line '$line' (in README)"; exit 1; }
done
# The tokenizer (SentencePiece, which the package's config finds): trained on the README.
"$work/build/tokenize" "$TLALOC_SOURCE_DIR/README.md" ||
  { echo "FAIL: examples/tokenize did not round-trip its sentence"; exit 1; }
rm -rf "$work"
echo "install.example: ok"
