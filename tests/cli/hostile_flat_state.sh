#!/usr/bin/env bash
# --flat-state on the command line (export, bench step): values other than the documented ones
# are refused in one line before any work and before any output file is made; export's two
# layouts name their state as documented (buckets "flat.<group>.<kind>" vs per parameter), also
# with data parallelism; `train --flat-state` (below).
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"

refused "tlaloc export: --flat-state 'auto': use on or off" export disc --flat-state auto
refused "tlaloc export: --flat-state 'ON': use on or off" export disc --flat-state ON -o "$tmp/x.mlir"
[ ! -e "$tmp/x.mlir" ] || die "export made its output file before refusing --flat-state ON"
refused "bench step: --flat-state must be auto, on or off, got 'Off'" bench step --flat-state Off

"$TLALOC" export disc --flat-state on -o "$tmp/on.mlir"
"$TLALOC" export disc --flat-state off -o "$tmp/off.mlir"
"$TLALOC" export disc -o "$tmp/default.mlir"
grep -qF 'tlaloc.name = "flat.all.exp_avg"' "$tmp/on.mlir" || die "--flat-state on: no bucket"
! grep -qF '.weight.exp_avg"' "$tmp/on.mlir" || die "--flat-state on: per-parameter state"
grep -qF 'tlaloc.name = "0.weight.exp_avg"' "$tmp/off.mlir" || die "--flat-state off: no slot"
! grep -qF '"flat.' "$tmp/off.mlir" || die "--flat-state off: a bucket"
cmp -s "$tmp/on.mlir" "$tmp/default.mlir" || die "export's default is not --flat-state on"

"$TLALOC" export fmnist --replicas 2 --flat-state on -o "$tmp/dp.mlir"
grep -qF '"flat.all.exp_avg_sq"' "$tmp/dp.mlir" || die "fmnist --replicas 2: no bucket"
grep -qF 'mhlo.num_replicas = 2' "$tmp/dp.mlir" || die "fmnist --replicas 2: not 2 replicas"
# `train --flat-state`: the same run in either layout writes the same checkpoint, byte for
# byte, and either resumes in the other (the host lane: its default is per parameter).
refused "--flat-state must be auto, on or off, got 'maybe'" train disc --flat-state maybe
"$TLALOC" train lm --steps 30 --flat-state on --save "$tmp/lm_on.st" >/dev/null
"$TLALOC" train lm --steps 30 --flat-state off --save "$tmp/lm_off.st" >/dev/null
cmp "$tmp/lm_on.st" "$tmp/lm_off.st" || die "train lm: flat and per-parameter checkpoints differ"
"$TLALOC" train lm --steps 40 --stop-after 20 --flat-state on --save "$tmp/part.st" >/dev/null
"$TLALOC" train lm --steps 40 --flat-state off --resume "$tmp/part.st" --save "$tmp/res.st" >/dev/null
"$TLALOC" train lm --steps 40 --save "$tmp/full.st" >/dev/null
cmp "$tmp/res.st" "$tmp/full.st" || die "train lm: a flat checkpoint resumed per parameter differs"
echo "ok"
