#!/usr/bin/env bash
# tlaloc sample: a tiny `train lm` on a repetitive corpus, then KV-cache generation read back
# from its checkpoint (model sizes from the metadata): greedy text past the context is corpus
# text, a seed gives the same text twice and another seed other text, bad input is one error
# line naming the problem.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for _ in $(seq 60); do printf 'the cat sat on the mat. the dog sat on the log. '; done >"$tmp/corpus.txt"
"$TLALOC" train lm --text "$tmp/corpus.txt" --steps 300 --batch 8 --layers 1 --d-model 32 \
  --heads 4 --kv-heads 2 --context 16 --d-ff 64 --lr 1e-2 --log-every 100 --threads 1 \
  --save "$tmp/lm.safetensors" >"$tmp/train.out"
ckpt="$tmp/lm.safetensors"

# Greedy, 48 bytes after an 8-byte prompt (past the 16-byte context): text of the corpus.
"$TLALOC" sample "$ckpt" --prompt "the cat " --tokens 48 --temperature 0 >"$tmp/greedy" 2>"$tmp/err"
grep -q "layers 1, d_model 32, heads 4, kv_heads 2, context 16, d_ff 64, layernorm, gelu tanh)" "$tmp/err" ||
  { echo "FAIL: sizes not read back from the checkpoint:"; cat "$tmp/err"; exit 1; }
[ "$(wc -c <"$tmp/greedy")" -eq 57 ] || { echo "FAIL: not prompt + 48 bytes:"; cat "$tmp/greedy"; exit 1; }
greedy=$(head -c 56 "$tmp/greedy")
case "$greedy" in "the cat "*) ;; *) echo "FAIL: output does not start with the prompt: $greedy"; exit 1 ;; esac
grep -qF "$greedy" "$tmp/corpus.txt" || { echo "FAIL: greedy text is not corpus text: $greedy"; exit 1; }

# Sampling: same seed, same bytes; another seed, other bytes.
s=(sample "$ckpt" --prompt "the " --tokens 64 --temperature 2 --top-k 0)
"$TLALOC" "${s[@]}" --seed 1 >"$tmp/a" 2>/dev/null
"$TLALOC" "${s[@]}" --seed 1 >"$tmp/b" 2>/dev/null
"$TLALOC" "${s[@]}" --seed 2 >"$tmp/c" 2>/dev/null
cmp -s "$tmp/a" "$tmp/b" || { echo "FAIL: same seed, different text"; exit 1; }
if cmp -s "$tmp/a" "$tmp/c"; then echo "FAIL: seeds 1 and 2 gave the same text"; exit 1; fi
[ "$(wc -c <"$tmp/a")" -eq 69 ] || { echo "FAIL: not prompt + 64 bytes"; exit 1; }
"$TLALOC" sample "$ckpt" --prompt "the " --tokens 20 --temperature 0.7 --top-k 3 --seed 5 >/dev/null 2>&1

# A checkpoint of another recipe (a safetensors file with only metadata).
h='{"__metadata__":{"tlaloc.checkpoint":"1","user.recipe":"fmnist","user.hidden":"128"}}'
# shellcheck disable=SC2059  # the length byte is built as a printf escape
{ printf "$(printf '\\x%02x' ${#h})\\0\\0\\0\\0\\0\\0\\0"; printf '%s' "$h"; } >"$tmp/fmnist.safetensors"
fails() {  # fails "expected message" args...
  local want=$1; shift
  if "$TLALOC" "$@" >"$tmp/out" 2>"$tmp/err"; then echo "FAIL: accepted: $*"; exit 1; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "FAIL: $*: expected one line:"; cat "$tmp/err"; exit 1; }
  grep -qF "tlaloc: error: $want" "$tmp/err" || { echo "FAIL: $*: got"; cat "$tmp/err"; exit 1; }
}
fails "$tmp/none.safetensors: cannot open" sample "$tmp/none.safetensors"
fails "$tmp/fmnist.safetensors: not a \`tlaloc train lm\` checkpoint (metadata user.recipe is 'fmnist')" \
  sample "$tmp/fmnist.safetensors"
fails "sample: --tokens -1 must be >= 0" sample "$ckpt" --tokens -1
fails "sample: temperature -0.5 must be finite and >= 0" sample "$ckpt" --temperature -0.5
fails "sample: top_k -2 must be >= 0" sample "$ckpt" --top-k -2
fails "sample: --prompt is empty" sample "$ckpt" --prompt ""
fails "sample: --context 17 is more than the model's context 16" sample "$ckpt" --context 17
fails "eval: --context 17 is more than the model's context 16" eval "$ckpt" --text "$tmp/corpus.txt" --context 17
# A shorter window: sample slides it sooner (still corpus text), eval scores in smaller windows.
"$TLALOC" sample "$ckpt" --prompt "the cat " --tokens 24 --temperature 0 --context 12 >"$tmp/c12" 2>"$tmp/err"
grep -q "context 12, d_ff 64" "$tmp/err" || { echo "FAIL: sample --context 12: $(cat "$tmp/err")"; exit 1; }
"$TLALOC" eval "$ckpt" --text "$tmp/corpus.txt" --context 12 >"$tmp/e12"
grep -q "context 12; on 1 text file (" "$tmp/e12" ||
  { echo "FAIL: eval --context 12"; exit 1; }
echo "sample: ok"
