#!/usr/bin/env bash
# A resumed checkpoint is checked before training, in every recipe (issue 18): NaN / inf in a
# parameter or in the optimizer state, a negative exp_avg_sq, a metadata step that disagrees with
# the optimizer.step tensor (edited) or a missing optimizer.step are refused with one line naming
# the tensor and the values, and nothing is trained or saved. Another --lr or --schedule is taken
# with a note naming the change. `tlaloc eval` of a model holding
# inf refuses it by name instead of printing 10%.
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"

# edit IN OUT set NAME VALUE | meta KEY VALUE | drop NAME: a copy of a checkpoint with every
# element of f32 tensor NAME set to VALUE, a metadata value changed, or a state tensor removed.
edit() {
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
src, dst, op, name = sys.argv[1:5]
b = open(src, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
head = json.loads(b[8:8 + n])
meta = head.pop('__metadata__', {})
data = b[8 + n:]
tensors = {k: (v['dtype'], v['shape'], data[v['data_offsets'][0]:v['data_offsets'][1]])
           for k, v in head.items()}
if op == 'set':
    dt, shape, raw = tensors[name]
    assert dt == 'F32', dt
    tensors[name] = (dt, shape, struct.pack('<f', float(sys.argv[5])) * (len(raw) // 4))
elif op == 'meta':
    meta[name] = sys.argv[5]
elif op == 'drop':
    del tensors[name]
    meta['optimizer_state'] = json.dumps([s for s in json.loads(meta['optimizer_state']) if s != name])
out, blob = {'__metadata__': meta}, b''
for k, (dt, shape, raw) in tensors.items():
    out[k] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(blob), len(blob) + len(raw)]}
    blob += raw
h = json.dumps(out).encode()
h += b' ' * (-len(h) % 8)
open(dst, 'wb').write(struct.pack('<Q', len(h)) + h + blob)
PY
}

printf 'the cat sat on the mat. %.0s' $(seq 60) >"$tmp/corpus.txt"
recipes=(
  "disc:0.weight:train disc --points 16 --threads 1 --steps 12"
  "fmnist:0.weight:train fmnist --limit 256 --batch 64 --epochs 3 --threads 1"
  "lm:tok_emb.weight:train lm --text $tmp/corpus.txt --layers 1 --d-model 16 --heads 2 --kv-heads 2 --context 8 --d-ff 32 --threads 1 --steps 12"
)
for r in "${recipes[@]}"; do
  recipe=${r%%:*} rest=${r#*:}
  param=${rest%%:*}
  read -r -a cmd <<<"${rest#*:}"
  ck="$tmp/$recipe.st"
  "$TLALOC" "${cmd[@]}" --stop-after 5 --save "$ck" >/dev/null
  # The untouched checkpoint resumes.
  "$TLALOC" "${cmd[@]}" --resume "$ck" --save "$tmp/ok.st" >"$tmp/out" ||
    die "$recipe: a good checkpoint did not resume"
  grep -q "^resumed from $ck at step 5" "$tmp/out" || die "$recipe: no resume line"
  ! grep -q "^note: " "$tmp/out" || die "$recipe: a note on an unchanged resume: $(cat "$tmp/out")"
  # Another lr and schedule train (as fine-tuning does), each change noted in a line.
  "$TLALOC" "${cmd[@]}" --resume "$ck" --save "$tmp/ok.st" --lr 0.5 --schedule step:2:0.5 >"$tmp/out" ||
    die "$recipe: another --lr was refused"
  grep -q "^note: $ck was trained with lr=[0-9.e-]*, this run has lr=0.5 (this run's is used)$" "$tmp/out" ||
    die "$recipe: no note of the lr: $(cat "$tmp/out")"
  grep -q "^note: $ck was trained with the lr schedule '[^']*', this run has 'step: x0.5 every 2 steps': from step 5 the lr follows this run's (0.125 now)$" "$tmp/out" ||
    die "$recipe: no note of the schedule: $(cat "$tmp/out")"

  where="--resume $tmp/bad.st"
  edit "$ck" "$tmp/bad.st" set "$param" nan
  refused_later "$where: tensor '$param' holds" "${cmd[@]}" --resume "$tmp/bad.st" --save "$tmp/r.st"
  edit "$ck" "$tmp/bad.st" set "optimizer.$param.exp_avg" inf
  refused_later "$where: tensor 'optimizer.$param.exp_avg' holds" "${cmd[@]}" --resume "$tmp/bad.st" --save "$tmp/r.st"
  grep -qF "NaN or inf values" "$tmp/err" || die "$recipe: inf not named: $(cat "$tmp/err")"
  edit "$ck" "$tmp/bad.st" set "optimizer.$param.exp_avg_sq" -1
  refused_later "$where: tensor 'optimizer.$param.exp_avg_sq' holds" "${cmd[@]}" --resume "$tmp/bad.st" --save "$tmp/r.st"
  grep -qF "negative values" "$tmp/err" || die "$recipe: negative not named: $(cat "$tmp/err")"
  edit "$ck" "$tmp/bad.st" meta step 3
  refused_later "$where: its metadata says step 3, but tensor 'optimizer.step' holds 5" \
    "${cmd[@]}" --resume "$tmp/bad.st" --save "$tmp/r.st"
  edit "$ck" "$tmp/bad.st" meta step -1
  refused_later "$where: its metadata says step -1: a step count is never negative" \
    "${cmd[@]}" --resume "$tmp/bad.st" --save "$tmp/r.st"
  edit "$ck" "$tmp/bad.st" meta data_position -5
  refused_later "$where: its metadata says data_position -5: a position is never negative" \
    "${cmd[@]}" --resume "$tmp/bad.st" --save "$tmp/r.st"
  edit "$ck" "$tmp/bad.st" drop optimizer.step
  refused_later "$where: its metadata says step 5, but it has no tensor 'optimizer.step'" \
    "${cmd[@]}" --resume "$tmp/bad.st" --save "$tmp/r.st"
  [ ! -e "$tmp/r.st" ] || die "$recipe: a refused resume saved a checkpoint"
done

# train lm continues only on the text it was trained on (its bytes, wherever they are).
printf 'a dog ran in the fog. %.0s' $(seq 60) >"$tmp/other.txt"
lm=(train lm --layers 1 --d-model 16 --heads 2 --kv-heads 2 --context 8 --d-ff 32 --threads 1 --steps 12)
refused_later "--resume $tmp/lm.st: it was trained with text_digest=crc32:" \
  "${lm[@]}" --text "$tmp/other.txt" --resume "$tmp/lm.st" --save "$tmp/r.st"
[ ! -e "$tmp/r.st" ] || die "lm: a resume on other text saved a checkpoint"
cp "$tmp/corpus.txt" "$tmp/moved.txt"
"$TLALOC" "${lm[@]}" --text "$tmp/moved.txt" --resume "$tmp/lm.st" --save "$tmp/r.st" >/dev/null ||
  die "lm: the same text at another path was refused"

# eval of a model whose weights are all inf: refused by name, not "10% accuracy".
edit "$tmp/fmnist.st" "$tmp/inf.st" set 0.weight inf
refused_later "$tmp/inf.st: parameter '0.weight' holds 200704 NaN or inf values" eval "$tmp/inf.st"
echo "resume_checks: ok"
