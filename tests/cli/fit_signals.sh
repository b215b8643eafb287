#!/usr/bin/env bash
# Every recipe trains through train::fit, so they save, stop and resume alike: `train disc`
# writes a checkpoint only with --save, --stop-after + --resume continues bit for bit, SIGTERM
# (like Ctrl-C) saves and exits 130 (in the final evaluation too, saved before it), and an empty --save or --resume (an unset variable) is
# refused before any work.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TLALOC_PJRT_PLUGIN="$tmp/no-such-plugin.so"
disc=(train disc --points 64 --threads 1)
die() { echo "FAIL: $*"; exit 1; }

# No --save: no file, no "saved" line.
(cd "$tmp" && "$TLALOC" "${disc[@]}" --steps 20 >"$tmp/plain.out")
[ -z "$(find "$tmp" -name '*.safetensors')" ] || die "train disc saved without --save"
! grep -q "^saved" "$tmp/plain.out" || die "a saved line without --save"

# Stopped at step 15, resumed: the same checkpoint, byte for byte, as an uninterrupted run.
"$TLALOC" "${disc[@]}" --steps 40 --log-every 10 --save "$tmp/full.safetensors" >"$tmp/full.out"
[ "$(tail -n 1 "$tmp/full.out")" = "saved $tmp/full.safetensors (step 40)" ] ||
  die "no saved line: $(tail -n 1 "$tmp/full.out")"
"$TLALOC" "${disc[@]}" --steps 40 --stop-after 15 --save "$tmp/part.safetensors" >"$tmp/part.out"
grep -q "^stopped after 15 steps (--stop-after)" "$tmp/part.out" || die "not stopped at 15"
"$TLALOC" "${disc[@]}" --steps 40 --resume "$tmp/part.safetensors" \
  --save "$tmp/resumed.safetensors" >"$tmp/resumed.out"
grep -q "^resumed from $tmp/part.safetensors at step 15" "$tmp/resumed.out" || die "no resume line"
cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors" ||
  die "stopped + resumed disc differs from the uninterrupted run"

# SIGTERM saves a checkpoint that --resume continues from; the command exits 130.
"$TLALOC" "${disc[@]}" --log-every 1 --steps 100000000 --save "$tmp/term.safetensors" \
  >"$tmp/term.out" &
pid=$!
for _ in $(seq 1800); do
  grep -q "^step" "$tmp/term.out" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || break  # it ended early: the checks below say why
  sleep 0.1
done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] || die "SIGTERM: exit $rc, not 130"
grep -q "^interrupted at step [0-9]*: continue with --resume $tmp/term.safetensors" \
  "$tmp/term.out" || die "SIGTERM: no interrupted line"
"$TLALOC" inspect "$tmp/term.safetensors" >"$tmp/term.inspect"
grep -q "user.recipe = disc" "$tmp/term.inspect" || die "SIGTERM: no checkpoint"

# A signal in the final evaluation (the checkpoint is written before it) stops at once with a
# line saying where the run is; one during the last steps saves and stops as above. Either way
# the checkpoint holds the last step.
bible gen1:1-rev22:21 >"$tmp/bible.txt"
head -c 200000 "$tmp/bible.txt" >"$tmp/head.txt"
"$TLALOC" tokenizer train "$tmp/head.txt" --vocab-size 400 -o "$tmp/tok" >/dev/null
"$TLALOC" train llama --preset tiny --tokenizer "$tmp/tok.model" --text "$tmp/bible.txt" \
  --steps 2 --threads 1 --save "$tmp/m" --plot "$tmp/m.png" >"$tmp/final.out" 2>"$tmp/final.err" &
pid=$!
for _ in $(seq 1200); do
  grep -q "100%" "$tmp/final.out" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
sleep 0.3
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] || die "SIGTERM in the final evaluation: exit $rc, not 130"
grep -qxF "train llama: interrupted in the final evaluation: stopped; $tmp/m holds step 2, the run's last (only the final evaluation is lost)" \
  "$tmp/final.err" || grep -qxF "interrupted at step 2: continue with --resume $tmp/m" "$tmp/final.out" ||
  die "SIGTERM in the final evaluation: $(cat "$tmp/final.out" "$tmp/final.err")"
[ -s "$tmp/m.png" ] || die "SIGTERM in the final evaluation: no --plot picture"
"$TLALOC" inspect "$tmp/m.training.safetensors" >"$tmp/m.inspect"
grep -qx "  step = 2" "$tmp/m.inspect" ||
  die "SIGTERM in the final evaluation: the training state is not at step 2"

# A signal while train llama trains its tokenizer (its text copied to a private folder under
# $TMPDIR) leaves no folder behind.
mkdir "$tmp/tmpdir"
TMPDIR="$tmp/tmpdir" "$TLALOC" train llama --preset tiny --text "$tmp/bible.txt" --steps 2 \
  --threads 1 --save "$tmp/t" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 600); do
  [ -n "$(ls -A "$tmp/tmpdir")" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.02
done
sleep 0.3
kill -TERM "$pid"
wait "$pid" || true
[ -z "$(ls -A "$tmp/tmpdir")" ] || die "a signal left $(ls -A "$tmp/tmpdir") in TMPDIR"

# An empty --save / --resume is refused by name before any work, and writes nothing.
for args in "train disc --save ''" "train fmnist --resume '' --save $tmp/f.safetensors" \
  "train lm --resume '' --save $tmp/l.safetensors"; do
  if eval "\"$TLALOC\" $args" >"$tmp/out" 2>"$tmp/err"; then die "accepted: $args"; fi
  grep -qE "^tlaloc: error: train (disc|fmnist|lm): --(save|resume) is empty" "$tmp/err" ||
    die "$args: $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || die "$args: output before the error: $(cat "$tmp/out")"
done
[ -z "$(find "$tmp" -name 'f.safetensors' -o -name 'l.safetensors')" ] || die "a refused run saved"
echo "fit_signals: ok"
