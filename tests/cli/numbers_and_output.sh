#!/usr/bin/env bash
# Integer options are plain decimal ("010" is ten, "0x10" and "1e3" are errors, a number past
# int64 is an error, not a clamped value), counts are range-checked before any work, and a
# command whose output cannot be written (a full disk) fails with one error line. An unknown
# train recipe is named.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "--steps 010" trains 10 steps (CLI11 alone reads 8): the loss is printed at steps 5 and 10.
"$TLALOC" train disc --steps 010 --log-every 5 --points 8 --threads 1 >"$tmp/out"
[ "$(grep -c '^step' "$tmp/out")" -eq 2 ] && grep -q '^step   10 ' "$tmp/out" ||
  { echo "FAIL: --steps 010 is not 10 steps:"; cat "$tmp/out"; exit 1; }

fails() {  # fails "expected message" args...
  local want=$1
  shift
  if "$TLALOC" "$@" >"$tmp/o" 2>"$tmp/e"; then
    echo "FAIL: succeeded: $*"
    exit 1
  fi
  grep -qF -- "$want" "$tmp/e" || { echo "FAIL: $*: expected '$want', got:"; cat "$tmp/e"; exit 1; }
}
fails "--steps: '0x10' is not a decimal integer" train disc --steps 0x10
fails "--steps: '1e3' is not a decimal integer" train disc --steps 1e3
fails "--steps: '99999999999999999999' is out of range" train disc --steps 99999999999999999999
fails "--steps: Value 0 not in range" train disc --steps 0
fails "--points: Value 0 not in range" train disc --points 0
fails "--points: Value -3 not in range" train disc --points -3
fails "--steps: Value -1 not in range" train lm --steps -1
fails "--tokens: '12abc' is not a decimal integer" sample x.safetensors --tokens 12abc
fails "tlaloc: error: train: unknown recipe 'foo' (known: disc, fmnist, lm, llama)" train foo
# Real-valued and named choices are checked before any work (no model printout first).
fails "tlaloc: error: --lr: Value -1 must be a finite number >= 0" train fmnist --lr -1
fails "tlaloc: error: --lr: Value nan must be a finite number >= 0" train lm --lr nan
fails "tlaloc: error: --wd: Value inf must be a finite number >= 0" train lm --wd inf
fails "tlaloc: error: --norm: batchnorm not in {layernorm,rmsnorm}" train lm --norm batchnorm
[ ! -s "$tmp/o" ] || { echo "FAIL: output before the error:"; cat "$tmp/o"; exit 1; }
fails "tlaloc: error: --gelu: exact not in {tanh,none}" train lm --gelu exact
# A usage error is a "tlaloc: error:" line with exit status 2; no command prints the usage.
set +e
"$TLALOC" train disc --bogus >/dev/null 2>"$tmp/e"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "^tlaloc: error: The following argument was not expected: --bogus" "$tmp/e" ||
  { echo "FAIL: --bogus: exit $rc:"; cat "$tmp/e"; exit 1; }
"$TLALOC" >"$tmp/o" 2>&1 || true
grep -q "^Usage: tlaloc \[OPTIONS\] SUBCOMMAND" "$tmp/o" || { echo "FAIL: no usage:"; cat "$tmp/o"; exit 1; }

# Output that cannot be written: one error line, exit 1 (export, train).
if [ -w /dev/full ]; then
  for cmd in "export disc" "train disc --steps 2 --points 8 --threads 1"; do
    # shellcheck disable=SC2086  # the command's words
    if "$TLALOC" $cmd >/dev/full 2>"$tmp/e"; then echo "FAIL: '$cmd' >/dev/full succeeded"; exit 1; fi
    grep -q "cannot write the output" "$tmp/e" || { echo "FAIL: '$cmd' >/dev/full:"; cat "$tmp/e"; exit 1; }
  done
fi
echo "ok"
