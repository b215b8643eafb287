#!/usr/bin/env bash
# Errors name what is wrong (issue 18): an unknown command at any level is named with the known
# ones (exit 2); an empty value is refused by name; a missing --resume fails before any work; a
# data folder that cannot be read is reported as unreadable, not missing; a folder where a data
# file should be, or a file given as the data folder, is one line naming the path, not an
# internal error. The unreadable case needs a user that permissions stop: as root it runs as
# nobody through setpriv (skipped without it).
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"
data=/usr/share/datasets/fashion-mnist

usage_error() { # usage_error "message" args...: refused with exit status 2
  refused "$@"
  [ "$rc" -eq 2 ] || die "${*:2}: exit $rc, not 2 (a usage error)"
}
usage_error "unknown command 'frobnicate' (known: train, export, eval, sample, inspect, bench, tokenizer, plot, finetune, merge)" frobnicate
usage_error "bench: unknown command 'stepz' (known: step)" bench stepz
refused "unknown Llama preset 'huge' (known: tiny, small, medium)" bench step --model llama --preset huge
refused "bench step: --model must be disc, lm or llama, got 'gpt'" bench step --model gpt
refused "bench step: --mode must be latency, throughput or both, got 'fast'" bench step --mode fast
refused "bench step: --flat-state must be auto, on or off, got 'yes'" bench step --flat-state yes
usage_error "train: unknown recipe 'foo' (known: disc, fmnist, lm, llama)" train foo

# An empty value (an unset shell variable) is refused by name, not taken as "not given": an
# empty --adapter would fine-tune every weight, or score the base model without its adapter.
refused "finetune: --adapter is empty (an unset variable?)" finetune "$tmp/none" --adapter ""
refused "eval: --adapter is empty (an unset variable?)" eval "$tmp/none" --adapter ""
refused "sample: --adapter is empty (an unset variable?)" sample "$tmp/none" --adapter ""
refused "train lm: --metrics is empty (an unset variable?)" train lm --steps 1 --metrics ""
refused "train lm: --text is empty (an unset variable?)" train lm --steps 1 --text "$tmp/none" ""
refused "train llama: --init is empty (an unset variable?)" train llama --init ""
refused "train llama: --tokenizer is empty (an unset variable?)" train llama --tokenizer ""
refused "finetune: --text is empty (an unset variable?)" finetune "$tmp/none" --text ""
refused "sample: CKPT is empty (an unset variable?)" sample ""
refused "tokenizer encode: MODEL is empty (an unset variable?)" tokenizer encode ""

# A --resume that does not exist fails before any work (it failed after the step compiled).
refused "train fmnist: --resume $tmp/missing.st: No such file or directory" \
  train fmnist --resume "$tmp/missing.st" --save "$tmp/f.st"

# A folder in place of a data file; a file given as the data folder.
mkdir "$tmp/d"
cp "$data"/* "$tmp/d/"
rm "$tmp/d/t10k-labels-idx1-ubyte.gz"
mkdir "$tmp/d/t10k-labels-idx1-ubyte.gz"
refused_later "$tmp/d/t10k-labels-idx1-ubyte.gz is a folder, not an idx file" \
  train fmnist --data "$tmp/d" --limit 64 --save "$tmp/f.st"
"$TLALOC" train fmnist --limit 64 --batch 64 --epochs 1 --threads 1 --save "$tmp/m.st" >/dev/null
refused_later "$tmp/d/t10k-labels-idx1-ubyte.gz is a folder, not an idx file" \
  eval "$tmp/m.st" --data "$tmp/d"
refused_later "$data/t10k-images-idx3-ubyte.gz is not a folder" \
  train fmnist --data "$data/t10k-images-idx3-ubyte.gz" --save "$tmp/f.st"

# A data folder this user may not search: unreadable, with the reason.
mkdir "$tmp/locked" "$tmp/w"
cp "$data"/* "$tmp/locked/"
chmod 777 "$tmp/w" # where the unprivileged run may save
chmod 700 "$tmp/locked" # owned by root, so nobody cannot search it
[ "$(id -u)" -eq 0 ] || chmod 000 "$tmp/locked"
if as_nobody "unreadable data folder"; then
  refused "$tmp/locked/train-images-idx3-ubyte.gz: cannot read the data folder $tmp/locked: Permission denied" \
    train fmnist --data "$tmp/locked" --save "$tmp/w/f.st"
fi
# A FIFO is refused at once (opening it must not wait for a writer).
mkfifo "$tmp/pipe.safetensors"
timeout 20 "$TLALOC" inspect "$tmp/pipe.safetensors" >/dev/null 2>"$tmp/fifo.err" && die "inspect of a FIFO succeeded"
grep -qxF "tlaloc: error: $tmp/pipe.safetensors: not a regular file" "$tmp/fifo.err" ||
  die "inspect of a FIFO: $(cat "$tmp/fifo.err")"
echo "errors_named: ok"
