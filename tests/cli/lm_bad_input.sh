#!/usr/bin/env bash
# tlaloc train lm / sample with bad input: each is one error line naming the problem and a
# non-zero exit, never a crash, NaN output or a checkpoint of a diverged run. Also: a NaN
# checkpoint is refused, a tiny temperature is greedy, long outputs stream, Ctrl-C saves
# (exit 130); a diverged train fmnist saves nothing either.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TLALOC_PJRT_PLUGIN="$tmp/no-such-plugin.so"
for _ in $(seq 40); do printf 'the cat sat on the mat. the dog sat on the log. '; done >"$tmp/corpus.txt"
base=(--text "$tmp/corpus.txt" --layers 1 --d-model 16 --heads 2 --kv-heads 2 --context 8 --d-ff 32
  --log-every 1)
small=("${base[@]}" --threads 1)  # and the default --batch 4
"$TLALOC" train lm "${small[@]}" --steps 4 --save "$tmp/lm.safetensors" >/dev/null
ckpt="$tmp/lm.safetensors"

fails() {  # fails "expected message" args...
  local want=$1; shift
  if "$TLALOC" "$@" >"$tmp/out" 2>"$tmp/err"; then echo "FAIL: accepted: $*"; exit 1; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "FAIL: $*: expected one line:"; cat "$tmp/err"; exit 1; }
  grep -qF "tlaloc: error: $want" "$tmp/err" || { echo "FAIL: $*: got"; cat "$tmp/err"; exit 1; }
}

cli_fails() {  # CLI11's own parse errors: the message, then "Run with --help ..."
  local want=$1; shift
  if "$TLALOC" "$@" >"$tmp/out" 2>"$tmp/err"; then echo "FAIL: accepted: $*"; exit 1; fi
  grep -qF -- "$want" <(head -1 "$tmp/err") || { echo "FAIL: $*: got"; cat "$tmp/err"; exit 1; }
}

# train lm: options checked before any work, no checkpoint left behind.
fails "lm: text file $tmp is a directory" train lm --text "$tmp" --steps 2
fails "lm: text file /dev/zero is a device" train lm --text /dev/zero --steps 2  # was: no end
fails "train lm: --save $tmp is a folder" train lm "${small[@]}" --steps 2 --save "$tmp"
fails "train lm: --save is empty" train lm "${small[@]}" --steps 2 --save ""
fails "train lm: --resume is empty" train lm "${small[@]}" --steps 2 --resume "" --save "$tmp/e.st"
[ ! -e "$tmp/e.st" ] || { echo "FAIL: --resume '' trained from scratch"; exit 1; }
cli_fails "--batch: Value 0 not in range 1 to" train lm "${small[@]}" --batch 0 --steps 2
# A step whose logits and layer inputs alone pass the machine's memory: refused before compiling.
fails "train lm: a step of --batch 1073741824 x --context 8 tokens needs at least" \
  train lm "${small[@]}" --batch 1073741824 --steps 2
fails "train lm: --dropout 1 must be in [0, 1)" train lm "${small[@]}" --dropout 1 --steps 2
fails "train lm: --dropout -0.5 must be in [0, 1)" train lm "${small[@]}" --dropout -0.5 --steps 2
fails "train lm: --save $tmp/no/x.safetensors: folder $tmp/no does not exist" \
  train lm "${small[@]}" --steps 2 --save "$tmp/no/x.safetensors"
fails "--lane pjrt: pjrt unavailable" train lm "${small[@]}" --steps 2 --lane pjrt
fails "train lm: the training loss is nan at step" \
  train lm "${small[@]}" --steps 6 --lr 1e30 --save "$tmp/diverged.safetensors"
[ ! -e "$tmp/diverged.safetensors" ] || { echo "FAIL: a diverged run saved a checkpoint"; exit 1; }
cli_fails "--threads: Value -1 not in range 0 to 4096" train lm "${base[@]}" --threads -1
cli_fails "--log-every: Value 0 not in range 1 to 1073741824" train lm --log-every 0
cli_fails "--seed: Value -1 is negative; it must be >= 0" train lm --seed -1  # was 2^64 - 1
fails "train lm: a model of 1.983e+14 parameters needs about" train lm --layers 1000000000
fails "train lm: --d-model 128 must be a multiple of --heads 3, itself a multiple of --kv-heads 4" \
  train lm --heads 3
[ ! -s "$tmp/out" ] || { echo "FAIL: --heads 3: output before the error:"; cat "$tmp/out"; exit 1; }
fails "train lm: --kv-heads 0 must be >= 1" train lm --d-model 16 --heads 2 --kv-heads 0
fails "train lm: --heads -2 must be >= 1" train lm --d-model 16 --heads -2

# --resume: another seed, batch or dropout, or nothing left to train, is refused by name.
r=(train lm "${small[@]}" --resume "$ckpt" --save "$tmp/r.safetensors")
fails "--resume $ckpt: it was trained with --seed 20260921, this run has 5" "${r[@]}" --steps 6 --seed 5
fails "--resume $ckpt: it was trained with batch=4, this run has 8" "${r[@]}" --steps 6 --batch 8
fails "--resume $ckpt: it was trained with dropout=0, this run has 0.1" "${r[@]}" --steps 6 --dropout 0.1
fails "--resume $ckpt: it is at step 4 already; this run ends at step 4: nothing to train" "${r[@]}" --steps 4
[ ! -e "$tmp/r.safetensors" ] || { echo "FAIL: a refused resume saved a checkpoint"; exit 1; }
# Another recipe's checkpoint (or one without a recipe) is named as such, not as a batch mismatch.
meta_only() {  # meta_only FILE JSON-METADATA: a safetensors file with metadata and no tensors
  local h="{\"__metadata__\":$2}"
  # shellcheck disable=SC2059  # the length byte is built as a printf escape
  { printf "$(printf '\\x%02x' ${#h})\\0\\0\\0\\0\\0\\0\\0"; printf '%s' "$h"; } >"$1"
}
meta_only "$tmp/fm.safetensors" '{"tlaloc.checkpoint":"1","user.recipe":"fmnist","user.batch":"128"}'
fails "--resume $tmp/fm.safetensors: it is a \`tlaloc train fmnist\` checkpoint, this is \`tlaloc train lm\`" \
  train lm "${small[@]}" --resume "$tmp/fm.safetensors" --steps 6
meta_only "$tmp/none.safetensors" '{"tlaloc.checkpoint":"1"}'
fails "--resume $tmp/none.safetensors: not a checkpoint of \`tlaloc train lm\` (it has no recipe metadata)" \
  train lm "${small[@]}" --resume "$tmp/none.safetensors" --steps 6

# A checkpoint whose tensor data is all 0xff bytes (f32 NaN): refused by sample and --resume.
hlen=$(od -An -tu8 -N8 "$ckpt" | tr -d ' ')
cp "$ckpt" "$tmp/nan.safetensors"
size=$(wc -c <"$ckpt")
head -c $((size - 8 - hlen)) /dev/zero | tr '\0' '\377' |
  dd of="$tmp/nan.safetensors" bs=1 seek=$((8 + hlen)) conv=notrunc status=none
fails "$tmp/nan.safetensors: parameter '" sample "$tmp/nan.safetensors"
grep -qF "NaN or inf values" "$tmp/err" || { echo "FAIL: NaN not named"; cat "$tmp/err"; exit 1; }
fails "--resume $tmp/nan.safetensors: tensor '" \
  train lm "${small[@]}" --steps 6 --resume "$tmp/nan.safetensors" --save "$tmp/r.safetensors"

# sample: non-finite temperature and bad threads are refused; a tiny temperature is greedy.
fails "sample: temperature inf must be finite and >= 0" sample "$ckpt" --temperature inf
fails "sample: temperature nan must be finite and >= 0" sample "$ckpt" --temperature nan
cli_fails "--seed: Value -3 is negative; it must be >= 0" sample "$ckpt" --seed -3
cli_fails "--threads: Value -1 not in range 0 to 4096" sample "$ckpt" --threads -1
"$TLALOC" sample "$ckpt" --prompt "the " --tokens 30 --temperature 0 >"$tmp/greedy" 2>/dev/null
"$TLALOC" sample "$ckpt" --prompt "the " --tokens 30 --temperature 1e-300 >"$tmp/tiny" 2>/dev/null
cmp -s "$tmp/greedy" "$tmp/tiny" || { echo "FAIL: temperature 1e-300 is not greedy"; exit 1; }

if [ -w /dev/full ]; then  # a write error is an error, not exit 0
  if "$TLALOC" sample "$ckpt" --tokens 5 >/dev/full 2>"$tmp/err"; then
    echo "FAIL: sample to /dev/full exited 0"; exit 1
  fi
  grep -qF "tlaloc: error: sample: cannot write the text to stdout: No space left on device" \
    "$tmp/err" || { echo "FAIL: /dev/full: got"; cat "$tmp/err"; exit 1; }
fi
# A huge --tokens streams: the first bytes arrive at once and `head` ends the run.
got=$({ timeout 120 "$TLALOC" sample "$ckpt" --tokens 1000000000000 2>/dev/null || true; } |
  head -c 40 | wc -c)  # tlaloc then dies of SIGPIPE at its next byte
[ "$got" -eq 40 ] || { echo "FAIL: --tokens 1e12 did not stream ($got bytes)"; exit 1; }

# train fmnist too: a diverged run stops with an error and saves nothing.
fails "train fmnist: the training loss is nan at step" train fmnist --epochs 1 --lr 1e30 \
  --log-every 1 --threads 1 --save "$tmp/fnan.safetensors"
[ ! -e "$tmp/fnan.safetensors" ] || { echo "FAIL: diverged fmnist saved"; exit 1; }

# Ctrl-C during train lm saves a checkpoint that --resume continues from.
"$TLALOC" train lm "${small[@]}" --steps 1000000 --save "$tmp/int.safetensors" >"$tmp/int.out" &
pid=$!
for _ in $(seq 1800); do grep -q "train lm " "$tmp/int.out" 2>/dev/null && break; sleep 0.1; done
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] || { echo "FAIL: interrupted train lm exited $rc, not 130"; cat "$tmp/int.out"; exit 1; }
grep -q "^interrupted at step [0-9]*: continue with --resume $tmp/int.safetensors" "$tmp/int.out" ||
  { echo "FAIL: no interrupted line"; cat "$tmp/int.out"; exit 1; }
"$TLALOC" inspect "$tmp/int.safetensors" >"$tmp/inspect"
grep -q "user.recipe = lm" "$tmp/inspect" ||
  { echo "FAIL: no checkpoint after Ctrl-C"; exit 1; }
echo "lm_bad_input: ok"
