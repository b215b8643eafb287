#!/usr/bin/env bash
# Long phases say what is running (issue 18: a large LM's validation ran silently for tens of
# seconds after "ETA 0.0s"): compiling the step, evaluating, validating and `tlaloc eval` each
# print "LABEL..." and "LABEL: done in N.Ns" once they have run TLALOC_PROGRESS_AFTER seconds
# (default 5; 0 here, so every phase shows), and a quick run's output has none of these lines.
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"
has() { # has FILE LINE-PATTERN...
  local f=$1
  shift
  for p in "$@"; do grep -qE -- "$p" "$f" || die "no line '$p' in: $(cat "$f")"; done
}
printf 'the cat sat on the mat. %.0s' $(seq 60) >"$tmp/corpus.txt"
lm=(train lm --text "$tmp/corpus.txt" --layers 1 --d-model 16 --heads 2 --kv-heads 2 --context 8
  --d-ff 32 --threads 1 --steps 4 --save "$tmp/lm.st")
fm=(train fmnist --limit 256 --batch 64 --epochs 1 --threads 1 --save "$tmp/f.st")

TLALOC_PROGRESS_AFTER=0 "$TLALOC" "${lm[@]}" >"$tmp/lm.out"
has "$tmp/lm.out" "^compiling the train step\.\.\.$" "^compiling the train step: done in [0-9.]+s$" \
  "^validation on [0-9]+ windows of 8 bytes\.\.\.$" "^validation on [0-9]+ windows of 8 bytes: done in"
grep -A1 "^validation on .*: done in" "$tmp/lm.out" | grep -q "^validation: " ||
  die "the validation result does not follow its phase: $(cat "$tmp/lm.out")"
TLALOC_PROGRESS_AFTER=0 "$TLALOC" "${fm[@]}" >"$tmp/f.out"
has "$tmp/f.out" "^compiling the train step\.\.\.$" "^evaluating on 10000 test images\.\.\.$" \
  "^evaluating on 10000 test images: done in"
TLALOC_PROGRESS_AFTER=0 "$TLALOC" eval "$tmp/f.st" >"$tmp/e.out"
has "$tmp/e.out" "^evaluating $tmp/f.st\.\.\.$" "^evaluating $tmp/f.st: done in"

# Quick phases (the default 5 s) print nothing of the kind.
"$TLALOC" "${lm[@]}" >"$tmp/quiet.out"
! grep -qE "\.\.\.$|: done in" "$tmp/quiet.out" || die "a quick run printed: $(cat "$tmp/quiet.out")"
echo "long_phases: ok"
