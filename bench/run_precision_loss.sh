#!/usr/bin/env bash
# Mixed precision's accuracy (issue "Mixed precision"): the same run in f32 and in bf16
# (--precision bf16) from the same seed, its held-out loss after the same number of steps:
# `tlaloc train lm` (the benchmark LM on its default text, bits/byte on its validation split)
# and `tlaloc train llama --preset small|medium` (the default text, one tokenizer trained once
# and shared, nats/token on the held-out tenth). Prints each pair and the relative difference
# |bf16 - f32| / f32 (target <= 2 %).
# Usage: bench/run_precision_loss.sh [LM_STEPS=1000] [SMALL_STEPS=150] [MEDIUM_STEPS=60]
set -euo pipefail
cd "$(dirname "$0")/.."
lm_steps=${1:-1000}
small_steps=${2:-150}
medium_steps=${3:-60}
tlaloc=$PWD/build/tlaloc
[ -x "$tlaloc" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. bench/bench_env.sh
cd "$out"
declare -A got

for p in f32 bf16; do
  echo "lm $p: $lm_steps steps" >&2
  OMP_NUM_THREADS=2 "$tlaloc" train lm --threads 2 --steps "$lm_steps" --precision "$p" \
    --save "lm_$p.safetensors" >"lm_$p.log"
  got[lm_$p]=$(sed -n 's/^validation: \([0-9.]*\) bits\/byte.*/\1/p' "lm_$p.log")
done
tok=()
for m in small medium; do
  steps=$small_steps
  [ "$m" = medium ] && steps=$medium_steps
  for p in f32 bf16; do
    echo "llama $m $p: $steps steps" >&2
    OMP_NUM_THREADS=2 "$tlaloc" train llama --preset "$m" --threads 2 --steps "$steps" \
      --precision "$p" --save "llama_${m}_$p" "${tok[@]}" >"llama_${m}_$p.log"
    got[${m}_$p]=$(sed -n 's/^validation: \([0-9.]*\) nats\/token.*/\1/p' "llama_${m}_$p.log")
    tok=(--tokenizer "$out/llama_small_f32/tokenizer.model")
  done
done
for k in lm small medium; do
  unit="nats/token"
  [ "$k" = lm ] && unit="bits/byte"
  awk -v k="$k" -v f="${got[${k}_f32]}" -v b="${got[${k}_bf16]}" -v u="$unit" 'BEGIN {
    printf "%s: held-out loss f32 %.4f, bf16 %.4f %s: bf16 / f32 - 1 = %+.2f %% (target within 2 %%)\n",
      k, f, b, u, 100 * (b / f - 1) }'
done
