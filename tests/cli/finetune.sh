#!/usr/bin/env bash
# tlaloc finetune / merge on a small Llama directory: a LoRA run writes a PEFT adapter directory
# (config and tensor names / shapes read back with the stdlib) and its training state holds only
# the adapters' moments; the base directory is never touched; --stop-after then --resume gives
# the uninterrupted run's bytes (LoRA, LoRA with dropout, --freeze); a frozen tensor keeps the
# base's bytes; merge writes W + scaling * B A into exactly the adapted weights (checked against
# a Python computation) and a model that `eval` scores as the adapter's run did; bad input
# (CLI options, adapter configs PEFT can write but tlaloc does not implement, damaged adapters)
# is refused in one line with nothing written.
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"
cd "$tmp"

# The word-list text (lib.bash), its held-out tail (the recipe's last tenth, cut at a line end)
# and a 300-piece tokenizer: a quick tiny-preset base model.
word_corpus
python3 - <<'PY'
t = open("corpus.txt", "rb").read()
cut = len(t) - int(len(t) * 0.1)
i = cut if t[cut - 1:cut] == b"\n" else t.index(b"\n", cut) + 1
open("val.txt", "wb").write(t[i:])
PY
"$TLALOC" tokenizer train corpus.txt --vocab-size 300 -o tok >/dev/null
"$TLALOC" train llama --preset tiny --tokenizer tok.model --text corpus.txt --steps 20 --batch 4 \
  --threads 1 --save base >/dev/null
cp -r base base.orig && cp base.training.safetensors base.orig.training.safetensors
common=(--text corpus.txt --batch 4 --lr 1e-2 --threads 1 --steps 20)

# (a) LoRA: the adapter directory's two files, its config, tensor names and shapes (A [r, in],
# B [out, r] from the base's [out, in]); the training state holds adapter moments only.
"$TLALOC" finetune base --lora "${common[@]}" --save ad >ad.out
[ "$(ls ad | tr '\n' ' ')" = "adapter_config.json adapter_model.safetensors " ] ||
  die "adapter layout: $(ls ad)"
python3 - "$tmp" <<'PY' || die "adapter contents"
import json, sys, st
c = json.load(open("ad/adapter_config.json"))
assert c["peft_type"] == "LORA" and c["r"] == 8 and c["lora_alpha"] == 16, c
assert c["target_modules"] == ["q_proj", "v_proj"] and c["lora_dropout"] == 0, c
assert c["use_rslora"] is False and c["use_dora"] is False and c["bias"] == "none", c
assert c["base_model_name_or_path"] == sys.argv[1] + "/base", c
layers = json.load(open("base/config.json"))["num_hidden_layers"]
base, ad = st.read("base/model.safetensors"), st.read("ad/adapter_model.safetensors")
want = {}
for i in range(layers):
    for m in ("q_proj", "v_proj"):
        out, inp = base[f"model.layers.{i}.self_attn.{m}.weight"][1]
        p = f"base_model.model.model.layers.{i}.self_attn.{m}"
        want[p + ".lora_A.weight"] = [8, inp]
        want[p + ".lora_B.weight"] = [out, 8]
assert {k: v[1] for k, v in ad.items()} == want, sorted(ad)
assert all(v[0] == "F32" and any(st.floats(v[2])) for v in ad.values())  # B trained off 0
state = st.read("ad.training.safetensors")
moments = {"optimizer." + k[len("base_model.model."):] + s for k in want
           for s in (".exp_avg", ".exp_avg_sq")}
assert set(state) == moments | {"optimizer.step"}, sorted(set(state) ^ moments)
PY

# (c) Stopped after 10 steps and resumed to 20: the uninterrupted run's adapter and state,
# byte for byte; with lora_dropout too (a fresh mask every step), and for a --freeze run.
"$TLALOC" finetune base --lora "${common[@]}" --save ad10 --stop-after 10 >/dev/null
"$TLALOC" finetune base --lora "${common[@]}" --save ad10 --resume ad10 >r.out
grep -q "resumed from ad10 at step 10" r.out || die "$(cat r.out)"
cmp -s ad/adapter_model.safetensors ad10/adapter_model.safetensors || die "resumed adapter differs"
cmp -s ad.training.safetensors ad10.training.safetensors || die "resumed LoRA state differs"
"$TLALOC" finetune base --lora --dropout 0.3 "${common[@]}" --save dr >/dev/null
"$TLALOC" finetune base --lora --dropout 0.3 "${common[@]}" --save dr10 --stop-after 10 >/dev/null
"$TLALOC" finetune base --lora --dropout 0.3 "${common[@]}" --save dr10 --resume dr10 >/dev/null
cmp -s dr/adapter_model.safetensors dr10/adapter_model.safetensors || die "dropout: adapter differs"
cmp -s dr.training.safetensors dr10.training.safetensors || die "dropout: state differs"
! cmp -s dr/adapter_model.safetensors ad/adapter_model.safetensors || die "dropout changed nothing"
grep -q '"lora_dropout": 0.3' dr/adapter_config.json || die "dropout: $(cat dr/adapter_config.json)"
freeze=(--freeze 'model.embed_tokens.*')
"$TLALOC" finetune base "${freeze[@]}" "${common[@]}" --save fz >/dev/null
"$TLALOC" finetune base "${freeze[@]}" "${common[@]}" --save fz10 --stop-after 10 >/dev/null
"$TLALOC" finetune base "${freeze[@]}" "${common[@]}" --save fz10 --resume fz10 >/dev/null
for f in fz/*; do cmp -s "$f" "fz10/${f#fz/}" || die "--freeze resumed: $f differs"; done
cmp -s fz.training.safetensors fz10.training.safetensors || die "--freeze resumed: state differs"

# (d) --freeze: the output's embed_tokens holds the base's bytes and has no moments; every other
# tensor was trained.
python3 - <<'PY' || die "--freeze output"
import st
base, out = st.read("base/model.safetensors"), st.read("fz/model.safetensors")
assert set(base) == set(out), set(base) ^ set(out)
for k in base:
    assert (base[k] == out[k]) == (k == "model.embed_tokens.weight"), k
assert not [k for k in st.read("fz.training.safetensors") if "embed_tokens" in k]
PY

# (d2) --adapter whose config targets k_proj too, without k_proj tensors: as PEFT's
# from_pretrained(is_trainable=True), k_proj is adapted from a fresh start and trained beside
# q_proj / v_proj, which continue from the file's values.
rm -rf ak && cp -r ad ak
python3 -c "
import json
c = json.load(open('ak/adapter_config.json'))
c['target_modules'] = ['q_proj', 'v_proj', 'k_proj']
json.dump(c, open('ak/adapter_config.json', 'w'))"
"$TLALOC" finetune base --adapter ak --text corpus.txt --batch 4 --lr 1e-2 --threads 1 --steps 2 --save ak2 >ak2.out
python3 - <<'PY' || die "--adapter with a target without tensors"
import st
a, b = st.read("ad/adapter_model.safetensors"), st.read("ak2/adapter_model.safetensors")
k = [n for n in b if ".k_proj." in n]
assert len(k) == 2 * sum(1 for n in a if n.endswith("q_proj.lora_A.weight")), sorted(b)
assert set(b) - set(k) == set(a), set(b) ^ set(a)
for n in k:  # B trained from 0; A from its fresh draw
    assert b[n][2] != bytes(len(b[n][2])), n
for n in a:  # every tensor of the file went on training
    assert a[n][1] == b[n][1] and a[n][2] != b[n][2], n
PY

# (e) merge: an adapter of layer 0's q_proj and every v_proj, r 4, alpha 8, rsLoRA (scaling
# 8 / sqrt(4)); the merged weights are W + 4 B A (computed here in f64) where it applies and
# the base's bytes elsewhere, and eval of the merged model repeats the adapter run's validation.
"$TLALOC" finetune base --lora --target 0.self_attn.q_proj,v_proj --r 4 --alpha 8 --rslora \
  "${common[@]}" --save sub >sub.out
"$TLALOC" merge base sub merged >merge.out
grep -q "^merged the 3 LoRA adapters of sub (r 4, scaling 4) into base: wrote merged$" merge.out ||
  die "merge: $(cat merge.out)"
[ "$(ls merged | tr '\n' ' ')" = "config.json generation_config.json model.safetensors tokenizer.model " ] ||
  die "merged layout: $(ls merged)"
cmp -s merged/tokenizer.model base/tokenizer.model || die "merged tokenizer.model"
python3 - <<'PY' || die "merged weights"
import json, st
c = json.load(open("sub/adapter_config.json"))
assert (c["r"], c["lora_alpha"], c["use_rslora"]) == (4, 8, True), c
assert c["target_modules"] == ["0.self_attn.q_proj", "v_proj"], c
base, ad, out = (st.read(f) for f in ("base/model.safetensors", "sub/adapter_model.safetensors",
                                      "merged/model.safetensors"))
adapted = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
           "model.layers.1.self_attn.v_proj"}
assert {k[len("base_model.model."):].rsplit(".", 2)[0] for k in ad} == adapted, sorted(ad)
assert set(out) == set(base) and all(out[k][:2] == base[k][:2] for k in base)
for k in base:
    m = k[:-len(".weight")]
    if m not in adapted:
        assert out[k] == base[k], k
        continue
    (o, i), r = base[k][1], 4
    w, got = st.floats(base[k][2]), st.floats(out[k][2])
    a = st.floats(ad[f"base_model.model.{m}.lora_A.weight"][2])
    b = st.floats(ad[f"base_model.model.{m}.lora_B.weight"][2])
    moved = 0
    for y in range(o):
        for x in range(i):
            want = w[y * i + x] + 4 * sum(b[y * r + j] * a[j * i + x] for j in range(r))
            assert abs(got[y * i + x] - want) <= 1e-6 * (1 + abs(want)), (k, y, x, got[y * i + x], want)
            moved += abs(got[y * i + x] - w[y * i + x]) > 1e-6
    assert moved > o * i // 2, (k, moved)
PY
"$TLALOC" eval merged --text val.txt >eval.out || die "eval merged: $(cat eval.out)"
python3 - <<'PY' || die "merged eval $(cat eval.out) vs the run's $(grep validation sub.out)"
import re
v = float(re.search(r"^validation: ([0-9.]+) nats", open("sub.out").read(), re.M)[1])
e = float(re.search(r"^loss: ([0-9.]+) nats", open("eval.out").read(), re.M)[1])
assert abs(v - e) <= 2e-4, (v, e)
PY
cp -r ad ad.orig && cp ad.training.safetensors ad.orig.training.safetensors
refused "merge: base is base: write the merged model to a folder of its own" merge base ad base
refused "merge: base/ is base: write the merged model" merge base ad base/
ln -s base baselink
refused "merge: baselink is base: write the merged model" merge base ad baselink
refused "merge: ad is ad: write the merged model to a folder of its own" merge base ad ad

# (f) Bad input: one line naming it, exit status 1 (2 for CLI usage errors), nothing written.
bad() { # bad "message" args...: `tlaloc args --save new` refused, no new, no state beside it
  refused_later "$@" --save new
  [ "$rc" -eq 1 ] || die "$*: exit status $rc"
  [ ! -e new ] && [ ! -e new.training.safetensors ] || die "$*: wrote output"
}
usage() { # usage "message" args...: a CLI usage error
  refused "$@"
  [ "$rc" -eq 2 ] || die "$*: exit status $rc, not 2"
  [ ! -e new ] || die "$*: wrote output"
}
bad "finetune: LoRA: target_modules 'qkv' matches no Linear module of the model (its Linear modules: model.layers.0.self_attn.q_proj," \
  finetune base --lora --target qkv "${common[@]}"
bad "finetune: --freeze with --lora: LoRA freezes the whole base model already" \
  finetune base --lora "${freeze[@]}" "${common[@]}"
bad "finetune: freeze: the pattern 'model.embed' matches no parameter of the model" \
  finetune base --freeze model.embed "${common[@]}"
bad "finetune: corpus.txt is neither a Llama model directory nor a \`train lm\` checkpoint" \
  finetune corpus.txt --lora "${common[@]}"
mkdir empty
bad "empty/config.json: missing (a HuggingFace model directory has one)" \
  finetune empty --lora "${common[@]}"
bad "base/adapter_config.json: missing (a PEFT adapter directory has one)" \
  finetune base --lora "${common[@]}" --resume base
mkdir notad && echo hi >notad/notes.txt
refused "finetune: --save notad holds 'notes.txt', which is not a file of a PEFT adapter directory" \
  finetune base --lora "${common[@]}" --save notad
[ "$(ls notad)" = notes.txt ] && [ ! -e notad.training.safetensors ] || die "notad was written"
refused "finetune: --save base is the model directory it starts from" finetune base --lora "${common[@]}" --save base
# A resume with another rank, after the run's setup lines: the adapter is left as it was.
refused_later "--resume ad: its adapter (r 8, lora_alpha 16, lora_dropout 0, use_rslora false, targets q_proj,v_proj) is not this run's (r 4," \
  finetune base --lora --r 4 "${common[@]}" --save ad --resume ad
[ "$rc" -eq 1 ] || die "--resume with --r 4: exit status $rc"
usage "--r: Value 0 not in range" finetune base --lora --r 0 --save new
usage "--dropout: Value 1 not in range" finetune base --lora --dropout 1 --save new
usage "--alpha: Value -1 must be a finite number >= 0" finetune base --lora --alpha -1 --save new
usage "OUT is required" merge base ad

# Adapters PEFT can write that tlaloc does not implement, or damaged: copies of ad edited.
badad() { # badad "message" PYTHON: merging a copy of ad, its config / tensors t edited by PYTHON
  rm -rf ed && cp -r ad ed
  python3 -c "
import json, st
config = json.load(open('ed/adapter_config.json'))
t = st.read('ed/adapter_model.safetensors')
A = 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight'
$2
json.dump(config, open('ed/adapter_config.json', 'w'))
st.write('ed/adapter_model.safetensors', t, {'format': 'pt'})"
  refused "$1" merge base ed new
  [ "$rc" -eq 1 ] || die "$1: exit status $rc"
  [ ! -e new ] || die "$1: wrote new"
}
badad "ed/adapter_config.json: use_dora = true is a PEFT option tlaloc does not implement (DoRA)" \
  'config["use_dora"] = True'
badad 'ed/adapter_config.json: rank_pattern = {"q_proj":4} is a PEFT option tlaloc does not implement' \
  'config["rank_pattern"] = {"q_proj": 4}'
badad 'ed/adapter_config.json: modules_to_save = ["lm_head"] is a PEFT option' \
  'config["modules_to_save"] = ["lm_head"]'
badad "ed/adapter_config.json: fan_in_fan_out = true is a PEFT option tlaloc does not implement" \
  'config["fan_in_fan_out"] = True'
badad 'ed/adapter_config.json: bias = "all" (bias training) is not implemented' \
  'config["bias"] = "all"'
badad "ed/adapter_config.json: peft_type 'PREFIX_TUNING' is not implemented (tlaloc reads LORA adapters)" \
  'config["peft_type"] = "PREFIX_TUNING"'
badad 'ed/adapter_config.json: target_modules ".*\\.q_proj" is a regular expression, which tlaloc does not implement' \
  'config["target_modules"] = r".*\.q_proj"'
badad "ed/adapter_config.json: r must be a positive integer, got 0" 'config["r"] = 0'
badad "ed: LoRA: module 'model.layers.7.self_attn.q_proj' is not a Linear module of the model" \
  't = {k.replace("layers.1.", "layers.7."): v for k, v in t.items()}'
badad "ed: LoRA: module 'decoder.layers.0.self_attn.q_proj' is not a Linear module of the model" \
  't = {k.replace("base_model.model.model.", "base_model.model.decoder."): v for k, v in t.items()}'
badad "ed: tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight' is f32[8,64], the model's is f32[8,128]" \
  'dt, sh, raw = t[A]; t[A] = (dt, [8, 64], raw[:len(raw) // 2])'
badad "ed/adapter_model.safetensors: module 'model.layers.0.self_attn.q_proj': lora_A is f32[8,128] and lora_B f32[128,4], the config's r is 8" \
  'B = A.replace("lora_A", "lora_B"); dt, sh, raw = t[B]; t[B] = (dt, [128, 4], raw[:len(raw) // 2])'
badad "ed/adapter_model.safetensors: module 'model.layers.0.self_attn.q_proj' has lora_B but no lora_A" \
  'del t[A]'
rm ed/adapter_model.safetensors
refused "ed/adapter_model.safetensors: missing" merge base ed new
[ ! -e new ] || die "merge without adapter_model.safetensors wrote new"

short=(--text corpus.txt --batch 4 --lr 1e-2 --threads 1 --steps 5)
badad "ed: module 'model.layers.0.self_attn.q_proj' has adapter tensors but its target_modules do not name it" \
  'config["target_modules"] = ["v_proj"]'
badad "ed: adapter tensor" \
  'dt, sh, raw = t[A]; t[A] = (dt, sh, b"\x00\x00\xc0\x7f" + raw[4:])'
badad "merge: new: merged weight" 'config["lora_alpha"] = 1e300'
# What PEFT 0.17+ writes beside the options (qalora_group_size with use_qalora off) is accepted:
# the merge equals the unedited adapter's.
rm -rf ed && cp -r ad ed && python3 -c "
import json
c = json.load(open('ed/adapter_config.json'))
c.update(qalora_group_size=16, use_qalora=False, peft_version='0.18.1', lora_bias=False)
json.dump(c, open('ed/adapter_config.json', 'w'))"
"$TLALOC" merge base ed mq >/dev/null && "$TLALOC" merge base ad mq2 >/dev/null
cmp -s mq/model.safetensors mq2/model.safetensors || die "a PEFT 0.18 config merged otherwise"
# Merge drops another model's tokenizer files; refuses a folder with a training state beside it.
mkdir mt && echo '{}' >mt/tokenizer.json && "$TLALOC" merge base ad mt >/dev/null
[ ! -e mt/tokenizer.json ] || die "merge kept another model's tokenizer.json"
"$TLALOC" finetune base "${short[@]}" --save full >/dev/null
refused "merge: full: full.training.safetensors is beside it" merge base ad full
# A run that would write over the directory it starts from; a trailing slash on --save; LoRA
# options without --lora; an adapter without a training state to resume.
cp -r base b3
refused "finetune: --save b3 is the model directory it starts from" \
  finetune b3 "${freeze[@]}" "${common[@]}" --save b3
"$TLALOC" finetune base --lora "${short[@]}" --save slash/ >/dev/null
[ -e .slash.lock ] && [ -e slash.training.safetensors ] && [ ! -e slash/..lock ] ||
  die "--save slash/: lock or state misplaced"
usage "--r requires --lora" finetune base --r 4 "${common[@]}" --save new
cp -r ad nostate
refused_later "--resume nostate: no training state beside it (nostate.training.safetensors)" \
  finetune base --lora "${common[@]}" --save nostate --resume nostate
# --adapter: training goes on from an adapter's weights (its config), scored first as the
# adapter scores.
"$TLALOC" finetune base --adapter ad "${short[@]}" --save ad3 >ad3.out
want=$("$TLALOC" eval base --adapter ad --text val.txt | sed -n 's/^loss: //p')
"$TLALOC" eval base --adapter ad3 --text val.txt >/dev/null
grep -q "^before fine-tuning: " ad3.out || die "--adapter: no score before fine-tuning"
[ -n "$want" ] || die "eval --adapter printed no loss"

# An adapter whose training state names another base is refused by merge, eval and sample.
"$TLALOC" train llama --preset tiny --tokenizer tok.model --text corpus.txt --steps 5 --batch 4 \
  --threads 1 --seed 5 --save other >/dev/null
refused "ad: was trained on another base model than other" merge other ad new
refused "ad: was trained on another base model than other" eval other --adapter ad
refused "ad: was trained on another base model than other" sample other --adapter ad

# `train lm` checkpoints: LoRA on the default q_proj, v_proj (blocks.N.attn.*) resumes bitwise;
# --freeze keeps the frozen bytes in a checkpoint that sample reads.
"$TLALOC" train lm --text corpus.txt --steps 10 --threads 1 --save lmb.safetensors >/dev/null
lmft=(--text corpus.txt --threads 1 --steps 20)
"$TLALOC" finetune lmb.safetensors --lora "${lmft[@]}" --save lml >/dev/null
"$TLALOC" finetune lmb.safetensors --lora "${lmft[@]}" --save lml2 --stop-after 10 >/dev/null
"$TLALOC" finetune lmb.safetensors --lora "${lmft[@]}" --save lml2 --resume lml2 >/dev/null
cmp -s lml/adapter_model.safetensors lml2/adapter_model.safetensors &&
  cmp -s lml.training.safetensors lml2.training.safetensors || die "lm LoRA resume differs"
python3 -c "
import st
t = st.read('lml/adapter_model.safetensors')
want = {f'base_model.model.blocks.{b}.attn.{m}.lora_{x}.weight' for b in (0, 1) for m in ('q_proj', 'v_proj') for x in 'AB'}
assert set(t) == want, sorted(t)" || die "lm adapter tensors"
"$TLALOC" finetune lmb.safetensors --freeze 'tok_emb.*' "${lmft[@]}" --save lmf.safetensors >/dev/null
python3 -c "
import st
a, f = st.read('lmb.safetensors'), st.read('lmf.safetensors')
assert a['tok_emb.weight'] == f['tok_emb.weight'] and a['head.weight'] != f['head.weight']" ||
  die "lm --freeze"
"$TLALOC" sample lmf.safetensors --tokens 5 >/dev/null
refused "finetune: lmb.safetensors is a \`train lm\` checkpoint" \
  finetune lmb.safetensors --lora --tokenizer tok.model "${lmft[@]}"
# A resume with other --freeze patterns, or none, is refused by the patterns' name.
refused_later "--resume lmf.safetensors: it was trained with freeze=tok_emb.*, this run has freeze=pos_emb.*" \
  finetune lmb.safetensors --freeze 'pos_emb.*' --text corpus.txt --threads 1 --steps 30 --resume lmf.safetensors --save lmf2.safetensors
refused_later "--resume lmf.safetensors: it was trained with freeze=tok_emb.*, this run has none" \
  train lm --text corpus.txt --threads 1 --steps 30 --resume lmf.safetensors --save lmf2.safetensors
# An lm adapter in eval, sample and merge: the merged weights are W + (alpha / r) B A (computed
# here in f64), the rest the base's; the merged checkpoint scores and samples as base + adapter.
"$TLALOC" merge lmb.safetensors lml lmm.safetensors >merge.out
grep -q "^merged the 4 LoRA adapters of lml (r 8, scaling 2) into lmb.safetensors: wrote lmm.safetensors$" merge.out ||
  die "lm merge: $(cat merge.out)"
python3 - <<'PY' || die "lm merged weights"
import json, st
c = json.load(open("lml/adapter_config.json"))
s = c["lora_alpha"] / c["r"]
base, ad = st.read("lmb.safetensors"), st.read("lml/adapter_model.safetensors")
out, meta = st.read_all("lmm.safetensors")
params = {k for k in base if not k.startswith("optimizer.")}
assert set(out) == params, set(out) ^ params
assert meta["user.recipe"] == "lm" and "optimizer" not in meta, meta
for k in params:
    m = "base_model.model." + k[:-len(".weight")]
    if m + ".lora_A.weight" not in ad:
        assert out[k] == base[k], k
        continue
    (o, i), r = base[k][1], c["r"]
    w, got = st.floats(base[k][2]), st.floats(out[k][2])
    a, b = st.floats(ad[m + ".lora_A.weight"][2]), st.floats(ad[m + ".lora_B.weight"][2])
    for y in range(0, o, 7):
        for x in range(i):
            want = w[y * i + x] + s * sum(b[y * r + j] * a[j * i + x] for j in range(r))
            assert abs(got[y * i + x] - want) <= 1e-6 * (1 + abs(want)), (k, y, x)
PY
"$TLALOC" eval lmb.safetensors --adapter lml --text corpus.txt | tail -1 >ev1
"$TLALOC" eval lmm.safetensors --text corpus.txt | tail -1 >ev2
"$TLALOC" eval lmb.safetensors --text corpus.txt | tail -1 >ev0
cmp -s ev1 ev2 || die "lm eval with the adapter $(cat ev1), merged $(cat ev2)"
! cmp -s ev0 ev1 || die "lm eval: the adapter changed nothing"
"$TLALOC" sample lmb.safetensors --adapter lml --temperature 0 --tokens 30 >sa1 2>/dev/null
"$TLALOC" sample lmm.safetensors --temperature 0 --tokens 30 >sa2 2>/dev/null
cmp -s sa1 sa2 || die "lm sample with the adapter $(cat sa1), merged $(cat sa2)"
refused "merge: lmb.safetensors is lmb.safetensors: write the merged model to a file of its own" \
  merge lmb.safetensors lml lmb.safetensors
refused "ad: was trained on another base model than lmb.safetensors" eval lmb.safetensors --adapter ad --text corpus.txt

# (b) After all of it the base directory and its training state are byte for byte as trained.
[ "$(ls -A base)" = "$(ls -A base.orig)" ] || die "base's files changed: $(ls -A base)"
for f in base.orig/*; do cmp -s "$f" "base/${f#base.orig/}" || die "base/${f#base.orig/} changed"; done
cmp -s base.training.safetensors base.orig.training.safetensors || die "base's state changed"
for f in ad.orig/*; do cmp -s "$f" "ad/${f#ad.orig/}" || die "refused runs changed ad"; done
cmp -s ad.training.safetensors ad.orig.training.safetensors || die "refused runs changed ad's state"
echo "finetune: ok"
