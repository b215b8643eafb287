#!/usr/bin/env bash
# bench/hlo_kernels.py on a hand-written XLA dump (tests/fixtures/hlo_kernels): the largest
# after-optimizations module is chosen, fusions counted by kind, custom-calls by target, a
# command buffer's kernels counted through its call, non-kernel ops apart; a folder without a
# module fails with one line.
set -euo pipefail
src=${TLALOC_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$src/bench/hlo_kernels.py" "$src/tests/fixtures/hlo_kernels" >"$tmp/out"
cat >"$tmp/want" <<'WANT'
modules: module_0003.jit_init.sm_9.0_gpu_after_optimizations.txt 1 kernels; module_0007.jit_step.sm_9.0_gpu_after_optimizations.txt 7 kernels
module module_0007.jit_step.sm_9.0_gpu_after_optimizations.txt (jit_step)
fusion:kLoop 2
fusion:kCustom(__triton_gemm) 1
fusion:kInput 1
custom-call:__cublas$gemm 2
op:copy 1
total kernels 7
not kernels: parameter 6, get-tuple-element 4, tuple 2, constant 1, bitcast 1
command buffers (calls): 1, their kernels counted above
WANT
diff -u "$tmp/want" "$tmp/out" || { echo "FAIL: unexpected counts"; exit 1; }
/usr/bin/python3 "$src/bench/hlo_kernels.py" "$src/tests/fixtures/hlo_kernels" --all >"$tmp/all"
grep -q '^module module_0003.jit_init.* (jit_init)$' "$tmp/all" || { echo "FAIL: --all"; cat "$tmp/all"; exit 1; }
[ "$(grep -c '^total kernels' "$tmp/all")" -eq 2 ] || { echo "FAIL: --all totals"; exit 1; }
if /usr/bin/python3 "$src/bench/hlo_kernels.py" "$tmp" >"$tmp/none" 2>&1; then
  echo "FAIL: an empty folder succeeded"; exit 1
fi
grep -qx "no \*after_optimizations.txt module in $tmp" "$tmp/none" || { echo "FAIL:"; cat "$tmp/none"; exit 1; }
echo "hlo_kernels: ok"
