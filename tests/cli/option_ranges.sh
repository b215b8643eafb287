#!/usr/bin/env bash
# Every numeric option has a range, checked before any work (issue 18): negative or meaningless
# counts, an empty value for a real-valued option (it read as 0), a huge OMP_NUM_THREADS (it
# ended as "out of memory"), a warm-up no shorter than the run (trained next to nothing and
# exited 0); a one-step run without --warmup is not blamed on --warmup; a diverging `train disc`
# stops with an error like the other recipes instead of logging NaN to the end.
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"
fm=(train fmnist --save "$tmp/f.st")
refused "--limit: Value -1 not in range 0 to" "${fm[@]}" --limit -1
refused "--save-every: Value -1 not in range 0 to" "${fm[@]}" --save-every -1
refused "--stop-after: Value 0 not in range 1 to" "${fm[@]}" --stop-after 0
refused "--stop-after: Value -5 not in range 1 to" "${fm[@]}" --stop-after -5
refused "--batch: Value 0 not in range 1 to" "${fm[@]}" --batch 0
refused "--warmup: Value -1 not in range 0 to" train disc --warmup -1
refused "--warmup: Value -1 not in range 0 to" bench step --warmup -1
refused "--threads: Value -1 not in range 0 to 4096" bench step --threads -1
refused "--repeats: Value 0 not in range 1 to" bench step --repeats 0
refused "--layers: Value 0 not in range 1 to" train lm --layers 0
refused "--context: Value 0 not in range 1 to" train lm --context 0
refused "--context: Value 0 not in range 1 to" train llama --context 0
refused "--batch: Value 0 not in range 1 to" train llama --batch 0
refused "--minutes: Value -1 must be a finite number >= 0" train llama --minutes -1
refused "--minutes: Value inf must be a finite number >= 0" train fmnist --minutes inf
refused "--preset: " train llama --preset huge
# An empty value (an unset variable) is not 0.
refused "--dropout: '' is not a number" train lm --dropout ""
refused "--temperature: '' is not a number" sample "$tmp/none.st" --temperature ""
refused "--lr: '' is not a number" train disc --lr ""
refused "--minutes: '' is not a number" train lm --minutes ""
OMP_NUM_THREADS=100000000 refused "OMP_NUM_THREADS=100000000 asks for more than 4096 threads" \
  train disc --steps 2
# A warm-up that the run never leaves.
refused "train disc: --warmup 1000 is not shorter than the run (20 steps)" \
  train disc --schedule constant --warmup 1000 --steps 20
refused "train fmnist: --warmup 20 is not shorter than the run (16 steps)" \
  "${fm[@]}" --limit 512 --batch 64 --epochs 2 --warmup 20

# A run of one step (100 rows, batch 128) has no room for the default warm-up: plain cosine.
"$TLALOC" train fmnist --limit 100 --batch 128 --epochs 1 --threads 1 --save "$tmp/one.st" \
  >"$tmp/out" 2>"$tmp/err" || die "a one-step run failed: $(cat "$tmp/err")"
tail -1 "$tmp/out" | grep -q "^saved $tmp/one.st (step 1)" || die "one step: $(tail -2 "$tmp/out")"

# train disc diverging (lr 1e30): stopped with an error, nothing saved, not NaN to the end.
if "$TLALOC" train disc --lr 1e30 --steps 50 --log-every 1 --points 16 --threads 1 \
  >"$tmp/out" 2>"$tmp/err"; then
  die "a diverging train disc exited 0: $(tail -2 "$tmp/out")"
fi
grep -q "^tlaloc: error: train disc: the training loss is .* at step" "$tmp/err" ||
  die "diverging disc: $(cat "$tmp/err")"
! grep -qiE "loss (nan|-nan|inf)" "$tmp/out" || die "disc logged a non-finite loss"
echo "option_ranges: ok"
