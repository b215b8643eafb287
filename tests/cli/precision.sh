#!/usr/bin/env bash
# --precision: train lm in bf16 and f16 (f16's loss scaler is in the checkpoint); a resume with
# another precision is refused in one line; the bf16 step exports as StableHLO dots of bf16
# operands with f32 results (attention's too); the fallback GEMM gives the same run and
# says so once; a bad value is refused.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
run=(train lm --log-every 10 --threads 1)

"$TLALOC" "${run[@]}" --steps 20 --precision bf16 --save bf16.safetensors >out
grep -q "^validation: " out || { echo "FAIL: bf16 run did not finish"; cat out; exit 1; }
if "$TLALOC" "${run[@]}" --steps 30 --resume bf16.safetensors --save more.safetensors >out 2>err; then
  echo "FAIL: a bf16 checkpoint resumed as f32"; exit 1
fi
[ "$(wc -l <err)" -eq 1 ] && grep -q "trained with precision=bf16, this run has f32" err ||
  { echo "FAIL: unexpected refusal:"; cat err; exit 1; }
[ ! -e more.safetensors ] || { echo "FAIL: the refused run wrote a checkpoint"; exit 1; }
"$TLALOC" "${run[@]}" --precision bf16 --steps 30 --resume bf16.safetensors --save bf16.safetensors >out
grep -q "^validation: " out || { echo "FAIL: bf16 resume"; cat out; exit 1; }

"$TLALOC" "${run[@]}" --steps 20 --precision f16 --save f16.safetensors >out
grep -q "^validation: " out || { echo "FAIL: f16 run did not finish"; cat out; exit 1; }
grep -aq '"optimizer.scaler.scale"\|"scaler.scale"' f16.safetensors ||
  { echo "FAIL: the f16 checkpoint holds no loss scale"; exit 1; }

"$TLALOC" export lm --precision bf16 -o lm.mlir
grep -q 'stablehlo.dot_general.*xbf16>, tensor<.*xbf16>) -> tensor<.*xf32>' lm.mlir ||
  { echo "FAIL: no bf16 x bf16 -> f32 dot in the export"; exit 1; }
# Every dot is bf16, attention's (batched over [0, 1]) too.
grep -q 'stablehlo.dot_general.*lhs_batching_dimensions = \[0, 1\].*xbf16>, tensor<.*xbf16>)' lm.mlir ||
  { echo "FAIL: attention's dots are not bf16 in the export"; exit 1; }
if grep -q 'stablehlo.dot_general.*xf32>, tensor<.*xf32>)' lm.mlir; then
  echo "FAIL: an f32 matmul left in the bf16 export"; exit 1
fi

# Without AVX-512 BF16 (forced here) the fallback runs, says so once, and gives the same run.
TLALOC_BF16_GEMM=fallback "$TLALOC" "${run[@]}" --steps 20 --precision bf16 --save fb.safetensors \
  >fb.out 2>fb.err
[ "$(grep -c 'bf16 matmuls run on the .* fallback' fb.err)" -eq 1 ] ||
  { echo "FAIL: the fallback was not reported once:"; cat fb.err; exit 1; }
"$TLALOC" "${run[@]}" --steps 20 --precision bf16 --save nat.safetensors >nat.out 2>nat.err
if grep -q "^flags" /proc/cpuinfo && grep -qw avx512_bf16 /proc/cpuinfo; then
  [ ! -s nat.err ] || { echo "FAIL: the native run printed:"; cat nat.err; exit 1; }
fi
[ "$(grep '^validation' fb.out)" = "$(grep '^validation' nat.out)" ] ||
  { echo "FAIL: fallback and native runs differ"; grep '^validation' fb.out nat.out; exit 1; }
cmp -s fb.safetensors nat.safetensors || { echo "FAIL: the checkpoints differ"; exit 1; }
if TLALOC_BF16_GEMM=amx "$TLALOC" "${run[@]}" --steps 2 --precision bf16 >out 2>err; then
  echo "FAIL: a bad TLALOC_BF16_GEMM was accepted"; exit 1
fi
grep -q "TLALOC_BF16_GEMM=amx" err || { echo "FAIL: bad TLALOC_BF16_GEMM message:"; cat err; exit 1; }

for bad in "--precision fp8" "--precision default"; do
  # shellcheck disable=SC2086
  if "$TLALOC" "${run[@]}" $bad >out 2>err; then echo "FAIL: $bad accepted"; exit 1; fi
  [ "$(wc -l <err)" -eq 1 ] || { echo "FAIL: $bad: expected one line"; cat err; exit 1; }
done
echo "precision: ok"
