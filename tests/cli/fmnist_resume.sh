#!/usr/bin/env bash
# A killed-and-resumed `tlaloc train fmnist` ends bitwise equal to an uninterrupted run, on a
# small subset so it runs in seconds; and bad data folders / files give one-line errors.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
data=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--data "$data" --limit 1000 --epochs 2 --batch 64 --log-every 4 --threads 1)

"$TLALOC" train fmnist "${common[@]}" --save "$tmp/full.safetensors" >"$tmp/full.log"
# Interrupted at step 11 (inside epoch 1 of 16 steps), then resumed in a new process.
"$TLALOC" train fmnist "${common[@]}" --stop-after 11 --save "$tmp/part.safetensors" >"$tmp/part.log"
"$TLALOC" train fmnist "${common[@]}" --resume "$tmp/part.safetensors" \
  --save "$tmp/resumed.safetensors" >"$tmp/resumed.log"

# Tensor bytes and step must be equal; compare everything but the header's free text.
/usr/bin/python3 "$(dirname "$0")/tensors_equal.py" "$tmp/full.safetensors" "$tmp/resumed.safetensors"
tail -n 1 "$tmp/full.log" | grep -q "saved" || { echo "full run did not save"; exit 1; }

# Errors: one line on stderr, exit code != 0.
expect_error() {
  local what=$1; shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then echo "expected failure: $what"; exit 1; fi
  lines=$(wc -l <"$tmp/err")
  [ "$lines" -eq 1 ] || { echo "$what: expected one error line, got $lines:"; cat "$tmp/err"; exit 1; }
  grep -q "$2" "$tmp/err" 2>/dev/null || true
  echo "$what -> $(cat "$tmp/err")"
}
expect_error "missing folder" "$TLALOC" train fmnist --data "$tmp/nope" --epochs 1
mkdir -p "$tmp/bad"
cp "$data"/t10k-*.gz "$tmp/bad/"
head -c 100000 "$data/train-images-idx3-ubyte.gz" >"$tmp/bad/train-images-idx3-ubyte.gz"
cp "$data/train-labels-idx1-ubyte.gz" "$tmp/bad/"
expect_error "truncated gz" "$TLALOC" train fmnist --data "$tmp/bad" --epochs 1
cp "$data/train-labels-idx1-ubyte.gz" "$tmp/bad/train-images-idx3-ubyte.gz"
expect_error "wrong magic" "$TLALOC" train fmnist --data "$tmp/bad" --epochs 1
echo "1 passed, 0 failed"
