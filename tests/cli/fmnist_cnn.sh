#!/usr/bin/env bash
# `tlaloc train fmnist --model cnn` on a small subset: it trains (loss falls), reports the
# confusion matrix, saves a checkpoint holding the batch norms' running statistics that
# `tlaloc eval` scores the same as the run did; a killed-and-resumed run is bitwise equal to an
# uninterrupted one (buffers included); bad --model / --channels give one line.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
. "$(dirname "$0")/lib.bash"
data=/usr/share/datasets/fashion-mnist
common=(--model cnn --channels 4,8 --data "$data" --limit 640 --epochs 2 --batch 64 --log-every 2
  --threads 1)

"$TLALOC" train fmnist "${common[@]}" --save "$tmp/full.safetensors" >"$tmp/full.log"
grep -q "Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" "$tmp/full.log" ||
  die "no Conv2d in the model printout: $(tail -5 "$tmp/full.log")"
grep -q "BatchNorm2d(8, eps=1e-05, momentum=0.1" "$tmp/full.log" || die "no BatchNorm2d: $(tail -5 "$tmp/full.log")"
grep -q "^confusion matrix" "$tmp/full.log" || die "no confusion matrix: $(tail -5 "$tmp/full.log")"
acc=$(sed -n 's/^test accuracy \([0-9.]*\)%$/\1/p' "$tmp/full.log")
/usr/bin/python3 -c "import sys; a=float('$acc'); sys.exit(0 if a > 40 else 1)" ||
  die "test accuracy $acc% after 20 steps on 640 rows: $(tail -5 "$tmp/full.log")"

# eval scores the checkpoint as the run's last evaluation did (running statistics included).
"$TLALOC" eval "$tmp/full.safetensors" --data "$data" >"$tmp/eval.log"
grep -q "accuracy $acc%" "$tmp/eval.log" || die "eval disagrees with the run's $acc%: $(tail -5 "$tmp/eval.log")"

"$TLALOC" train fmnist "${common[@]}" --stop-after 13 --save "$tmp/part.safetensors" >"$tmp/part.log"
"$TLALOC" train fmnist "${common[@]}" --resume "$tmp/part.safetensors" \
  --save "$tmp/resumed.safetensors" >"$tmp/resumed.log"
/usr/bin/python3 "$(dirname "$0")/tensors_equal.py" "$tmp/full.safetensors" "$tmp/resumed.safetensors" 2.running_var 2.num_batches_tracked

refused "--model 'rnn': expected mlp or cnn" train fmnist --model rnn --epochs 1
refused "--channels '0'" train fmnist --model cnn --channels 0 --epochs 1
refused "--channels: 5 conv blocks" train fmnist --model cnn --channels 1,1,1,1,1 --epochs 1
refused_later "train fmnist --model cnn: 10 training rows make no full batch of 64" \
  train fmnist --model cnn --limit 10 --batch 64 --epochs 1 --data "$data"
# The other model's checkpoint is named as such, not by its first differing size.
refused_later "--resume $tmp/full.safetensors: it is a --model cnn checkpoint, this run is --model mlp" \
  train fmnist --model mlp --limit 640 --epochs 3 --data "$data" --resume "$tmp/full.safetensors" \
  --save "$tmp/mlp.safetensors"
echo "1 passed, 0 failed"
