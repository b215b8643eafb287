#!/usr/bin/env bash
# tlaloc train llama / eval / sample on a Llama directory: a few steps of a small model on a
# small text, the HF directory it writes, its printed figures against a Python computation of
# the held-out split, the token streams and the unigram baseline (from `tlaloc tokenizer
# encode`'s ids, SentencePiece's own), eval reproducing the validation figure, sampling,
# --resume and --minutes continuing bitwise, and bad input refused in one line with nothing
# written.
source "$(dirname "$0")/lib.bash"
cd "$tmp"
word_corpus  # corpus.txt (lib.bash)
"$TLALOC" tokenizer train corpus.txt --vocab-size 300 -o tok >/dev/null
cat >cfg.json <<'JSON'
{"model_type": "llama", "vocab_size": 320, "hidden_size": 32, "intermediate_size": 64,
 "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
 "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "torch_dtype": "float32"}
JSON
common=(--config cfg.json --tokenizer tok.model --text corpus.txt --context 16 --batch 4
  --lr 1e-2 --threads 1 --log-every 10)
"$TLALOC" train llama "${common[@]}" --steps 30 --save m >train.out
# --plot and --metrics: the validation is the metrics' final row (nats per token) and drawn.
"$TLALOC" train llama "${common[@]}" --steps 20 --save mp --metrics mp.csv --plot mp.png >mp.out
grep -qxF "plotted mp.png (step 20)" mp.out || { echo "FAIL: no plot line: $(cat mp.out)"; exit 1; }
tail -1 mp.csv | grep -qE "^final,20,1,,[0-9.e-]+,,[0-9.e-]+,[0-9.e-]+$" ||
  { echo "FAIL: mp.csv's last row: $(tail -1 mp.csv)"; exit 1; }
[ "$(head -c 8 mp.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  { echo "FAIL: mp.png is not a PNG"; exit 1; }

# The directory: HF files, the tokenizer copied in, the training state beside it.
[ "$(ls m | tr '\n' ' ')" = "config.json generation_config.json model.safetensors tokenizer.model " ] ||
  die "directory layout: $(ls m)"
[ -f m.training.safetensors ] || die "no m.training.safetensors"
cmp -s m/tokenizer.model tok.model || die "tokenizer.model is not the given tokenizer"
python3 -c '
import json; c = json.load(open("m/config.json")); g = json.load(open("m/generation_config.json"))
assert c["vocab_size"] == 320 and c["num_hidden_layers"] == 1 and c["model_type"] == "llama", c
assert c["architectures"] == ["LlamaForCausalLM"], c
assert g["bos_token_id"] == 1 and g["eos_token_id"] == 2, g' || die "config.json"

# The oracle: the held-out split (lines from byte T - floor(T/10)), the streams (BOS, each
# line's ids, <0x0A> after each line end), the add-one unigram of the training stream over the
# tokenizer's 300 ids, in nats/token and bits/byte; and the model's line's own arithmetic.
python3 - <<'PY' || die "held-out text"
t = open("corpus.txt", "rb").read()
cut = len(t) - int(len(t) * 0.1)
i = cut if t[cut - 1:cut] == b"\n" else t.index(b"\n", cut) + 1
open("train.txt", "wb").write(t[:i])
open("val.txt", "wb").write(t[i:])
PY
"$TLALOC" tokenizer encode tok.model train.txt >train.ids
"$TLALOC" tokenizer encode tok.model val.txt >val.ids
python3 - <<'PY' || die "figures differ from the oracle: $(cat train.out)"
import math, re
nl = [l.split("\t")[0] for l in open("tok.vocab", encoding="utf-8")].index("<0x0A>")
def stream(ids_file, text_file):
    text = open(text_file, "rb").read()
    s = [1]
    lines = open(ids_file).read().split("\n")[:len(text.split(b"\n"))]
    for k, l in enumerate(lines):
        s += [int(x) for x in l.split()]
        if k + 1 < len(lines): s.append(nl)
    return s, len(text)
tr, _ = stream("train.ids", "train.txt")
va, vbytes = stream("val.ids", "val.txt")
count = [1] * 300
for x in tr: count[x] += 1
nats = -sum(math.log(count[x] / (len(tr) + 300)) for x in va[1:])
out = open("train.out").read()
pat = r"([0-9.]+) nats/token, perplexity ([0-9.]+), ([0-9.]+) bits/byte \((\d+) tokens, (\d+) bytes\)"
v = re.search("validation: " + pat, out).groups()
u = re.search("unigram baseline: " + pat, out).groups()
n = len(va) - 1
assert int(u[3]) == n and int(u[4]) == vbytes and int(v[3]) == n and int(v[4]) == vbytes, (u, v, n)
assert abs(float(u[0]) - nats / n) < 1e-4, (u, nats / n)
assert abs(float(u[2]) - nats / math.log(2) / vbytes) < 1e-4, u
for f in (u, v):  # perplexity and bits per byte from the printed nats/token
    assert abs(float(f[1]) - math.exp(float(f[0]))) < 0.01 * math.exp(float(f[0])), f
    assert abs(float(f[2]) - float(f[0]) * n / math.log(2) / vbytes) < 2e-4, f
assert float(v[0]) < math.log(320), v  # trained below the uniform model
PY

# eval: the printed validation figure again, from the run's fields and from the held-out file.
want=$(sed -n 's/^validation: //p' train.out)
"$TLALOC" eval m >eval.out
[ "$(sed -n 's/^loss: //p' eval.out)" = "$want" ] || die "eval: $(cat eval.out) vs $want"
"$TLALOC" eval m --text val.txt --threads 2 >eval2.out
[ "$(sed -n 's/^loss: //p' eval2.out)" = "$want" ] || die "eval --text: $(cat eval2.out) vs $want"

# eval of a `train lm` checkpoint on the same text: nats per byte and its bits (the bytes after
# the first are predicted).
"$TLALOC" train lm --text corpus.txt --steps 5 --layers 1 --d-model 16 --heads 2 --kv-heads 2 \
  --context 8 --d-ff 32 --threads 1 --save lm.st >/dev/null
"$TLALOC" eval lm.st --text val.txt >lm.out
python3 - "$(stat -c %s val.txt)" <<'PY' || die "eval lm: $(cat lm.out)"
import math, re, sys
n = int(sys.argv[1]) - 1
m = re.search(r"^loss: ([0-9.]+) nats/byte, perplexity ([0-9.]+) \(per byte\), ([0-9.]+) bits/byte "
              r"\((\d+) bytes predicted\)$", open("lm.out").read(), re.M)
nats, ppl, bits, count = float(m[1]), float(m[2]), float(m[3]), int(m[4])
assert count == n and abs(bits - nats / math.log(2)) < 2e-4 and abs(ppl - math.exp(nats)) < 1e-4 * ppl, m
assert 0 < nats < math.log(256) + 0.5, m
PY
refused "eval: lm.st is a \`tlaloc train lm\` checkpoint; pass the text to score with --text FILE" \
  eval lm.st

# sample: the prompt, then text of the tokenizer's pieces; the same seed, the same text.
"$TLALOC" sample m --prompt "the cat" --tokens 24 --seed 3 >s1 2>s.err
"$TLALOC" sample m --prompt "the cat" --tokens 24 --seed 3 >s2 2>/dev/null
grep -q "layers 1, hidden 32, heads 4, kv_heads 2, vocab 320), context 16" s.err || die "$(cat s.err)"
case "$(cat s1)" in "the cat"?*) ;; *) die "sample: $(cat s1)" ;; esac
cmp -s s1 s2 || die "sample: same seed, different text"
# End of sequence (HF generate's eos_token_id, generation_config.json's over config.json's):
# with every id an end, the text is the prompt alone; --ignore-eos and a null id run on.
cp -r m e
set_eos() { /usr/bin/python3 -c "import json; json.dump({'eos_token_id': $1}, open('e/generation_config.json', 'w'))"; }
set_eos "list(range(320))"
"$TLALOC" sample e --prompt "the cat" --tokens 24 --seed 3 >s3 2>/dev/null
[ "$(cat s3)" = "the cat" ] || die "sample: not stopped at the end-of-sequence id: $(cat s3)"
"$TLALOC" sample e --prompt "the cat" --tokens 24 --seed 3 --ignore-eos >s3 2>/dev/null
cmp -s s1 s3 || die "sample --ignore-eos: $(cat s3)"
set_eos None
"$TLALOC" sample e --prompt "the cat" --tokens 24 --seed 3 >s3 2>/dev/null
cmp -s s1 s3 || die "sample, eos_token_id null: $(cat s3)"
set_eos "'2'"
refused "e/generation_config.json: eos_token_id \"2\" must be an id in [0, 320) or a list of them" \
  sample e
refused "sample: --prompt: line 1 is not UTF-8 text (the tokenizer reads UTF-8; convert it, e.g. with iconv -f latin1 -t utf-8)" \
  sample m --prompt "$(printf 'caf\xe9')"
refused "sample: --ignore-eos is for Llama model directories (lm.st is an lm checkpoint, which has no end-of-sequence byte)" \
  sample lm.st --ignore-eos

# A picture or metrics over a model directory's training state (its checkpoint too) is refused.
refused "train llama: --plot m2.training.safetensors is the checkpoint file m2.training.safetensors too; give it a file of its own" \
  train llama "${common[@]}" --steps 2 --save m2 --plot m2.training.safetensors
refused "train llama: --metrics m.training.safetensors is the checkpoint file m.training.safetensors too; give it a file of its own" \
  train llama "${common[@]}" --steps 40 --resume m --save m2 --metrics m.training.safetensors
[ ! -e m2 ] || die "a refused run wrote m2"

# --resume continues bitwise; so does a run stopped by --minutes.
"$TLALOC" train llama "${common[@]}" --steps 30 --save r --stop-after 12 >/dev/null
"$TLALOC" train llama "${common[@]}" --steps 30 --save r --resume r >r.out
grep -q "resumed from r at step 12" r.out || die "$(cat r.out)"
cmp -s m/model.safetensors r/model.safetensors || die "resumed weights differ"
cmp -s m.training.safetensors r.training.safetensors || die "resumed training state differs"
"$TLALOC" train llama "${common[@]}" --steps 30 --save t --minutes 0.00001 >t.out
# (0.6 ms: the first step or the first few, as fast as this machine runs them)
grep -qE "stopped at step ([1-9]|1[0-9]|2[0-9]) of 30: the time limit of 1e-05 minutes is reached" \
  t.out || die "$(cat t.out)"
grep -q "^validation: " t.out || die "no report after --minutes: $(cat t.out)"
"$TLALOC" train llama "${common[@]}" --steps 30 --save t --resume t >/dev/null
cmp -s m/model.safetensors t/model.safetensors || die "weights after --minutes + resume differ"

# Bad input: one line naming it, exit status 1, no output folder.
bad() {
  refused "$@" --save bad
  [ "$rc" -eq 1 ] || die "$*: exit status $rc"
  [ ! -e bad ] && [ ! -e bad.training.safetensors ] || die "$*: wrote output"
}
python3 -c '
import json; c = json.load(open("cfg.json")); c["sliding_window"] = 8
json.dump(c, open("cfg_sw.json", "w"))'
bad "cfg_sw.json: key 'sliding_window'" train llama --config cfg_sw.json --text corpus.txt
"$TLALOC" tokenizer train corpus.txt --vocab-size 330 -o big >/dev/null
bad "train llama: tokenizer big.model has 330 pieces, more than the model's vocab_size 320" \
  train llama --config cfg.json --tokenizer big.model --text corpus.txt
# --init directories: a sharded copy of m missing a shard; one with a tensor of another shape,
# one of another dtype.
python3 - <<'PY'
import json, os, shutil
from st import read, write
t = read("m/model.safetensors")
for d in ("sharded", "shape", "dtype"):
    os.mkdir(d); shutil.copy("m/config.json", d)
names = sorted(t)
a, b = names[: len(names) // 2], names[len(names) // 2:]
write("sharded/model-00001-of-00002.safetensors", {k: t[k] for k in a})
json.dump({"metadata": {"total_size": 0}, "weight_map":
           {**{k: "model-00001-of-00002.safetensors" for k in a},
            **{k: "model-00002-of-00002.safetensors" for k in b}}},
          open("sharded/model.safetensors.index.json", "w"))
s = dict(t); dt, sh, raw = s["model.norm.weight"]; s["model.norm.weight"] = (dt, [16, 2], raw)
write("shape/model.safetensors", s)
s = dict(t); s["model.norm.weight"] = ("I32", sh, raw)
write("dtype/model.safetensors", s)
# HF checkpoints are mostly BF16: every F32 tensor of m cut to BF16 (its high 16 bits), and the
# same values widened back to F32 by hand, each beside m's config and tokenizer.
for d in ("bf16", "widened"):
    os.mkdir(d); shutil.copy("m/config.json", d); shutil.copy("m/tokenizer.model", d)
def hi16(raw):
    return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))
write("bf16/model.safetensors", {k: ("BF16", sh, hi16(raw)) for k, (dt, sh, raw) in t.items()})
write("widened/model.safetensors",
      {k: (dt, sh, b"".join(b"\0\0" + raw[i + 2:i + 4] for i in range(0, len(raw), 4)))
       for k, (dt, sh, raw) in t.items()})
# What HF's loading skips: m as F64 (the same values) with the RoPE buffer older transformers
# saved; m tied (no lm_head.weight), and tied with an lm_head.weight equal to the embedding, or
# not equal.
import struct
def f64(raw):
    v = struct.unpack("<%df" % (len(raw) // 4), raw)
    return struct.pack("<%dd" % len(v), *v)
c = json.load(open("m/config.json"))
for d in ("f32", "f64", "tied", "tied_head", "tied_other"):
    os.mkdir(d); shutil.copy("m/tokenizer.model", d)
    json.dump({**c, "tie_word_embeddings": d.startswith("tied")}, open(d + "/config.json", "w"))
write("f32/model.safetensors", t)
inv_freq = struct.pack("<4f", 1.0, 0.1, 0.01, 0.001)
write("f64/model.safetensors",
      {**{k: ("F64", sh, f64(raw)) for k, (dt, sh, raw) in t.items()},
       "model.layers.0.self_attn.rotary_emb.inv_freq": ("F32", [4], inv_freq)})
os.mkdir("f64big"); shutil.copy("m/tokenizer.model", "f64big"); shutil.copy("f64/config.json", "f64big")
big = {k: ("F64", sh, f64(raw)) for k, (dt, sh, raw) in t.items()}
dt, sh, raw = big["model.norm.weight"]
big["model.norm.weight"] = (dt, sh, struct.pack("<d", 1e300) + raw[8:])
write("f64big/model.safetensors", big)
tied = {k: v for k, v in t.items() if k != "lm_head.weight"}
write("tied/model.safetensors", tied)
write("tied_head/model.safetensors", {**tied, "lm_head.weight": t["model.embed_tokens.weight"]})
write("tied_other/model.safetensors", t)
PY
for d in f32 f64 tied tied_head; do "$TLALOC" eval $d --text val.txt >$d.out || die "eval $d failed"; done
[ "$(sed -n 's/^loss: //p' f64.out)" = "$(sed -n 's/^loss: //p' f32.out)" ] ||
  die "F64 directory: $(cat f64.out) vs its F32 original: $(cat f32.out)"
[ "$(sed -n 's/^loss: //p' tied.out)" = "$(sed -n 's/^loss: //p' tied_head.out)" ] ||
  die "tied with lm_head.weight: $(cat tied_head.out) vs without: $(cat tied.out)"
# --context: eval's scoring window and sample's attention window, at most max_position_embeddings;
# a text shorter than the window is scored as one window of its own length (the same figure), so
# a model of 2^30 positions scores a short text at once.
python3 -c '
import json; c = json.load(open("f32/config.json")); c["max_position_embeddings"] = 2 ** 30
json.dump(c, open("cfg_long.json", "w"))'
cp -r f32 long && cp cfg_long.json long/config.json
"$TLALOC" eval long --text val.txt >long.out
n=$(sed -n 's/^loss: .*(\([0-9]*\) tokens.*/\1/p' long.out)
"$TLALOC" eval long --text val.txt --context "$n" >long_n.out
[ "$(sed -n 's/^loss: //p' long.out)" = "$(sed -n 's/^loss: //p' long_n.out)" ] ||
  die "one window of the text's length: $(cat long_n.out) vs $(cat long.out)"
"$TLALOC" eval f32 --text val.txt --context 8 >ctx8.out
grep -q "context 8; on 1 text file (" ctx8.out || die "eval --context 8: $(cat ctx8.out)"
[ "$(sed -n 's/^loss: //p' ctx8.out)" != "$(sed -n 's/^loss: //p' f32.out)" ] ||
  die "eval --context 8 gave the figure of context 32"
refused "eval: --context 33 is more than the model's max_position_embeddings 32" \
  eval f32 --text val.txt --context 33
refused "sample: --context 33 is more than the model's max_position_embeddings 32" \
  sample f32 --context 33
"$TLALOC" sample long --tokens 4 --temperature 0 >/dev/null 2>long_sample.err ||
  die "sample of a model of 2^30 positions: $(cat long_sample.err)"
# generation_config.json's sampling keys are sample's defaults (as HF generate's), flags over them.
for d in gc_greedy gc_top gc_bad; do cp -r f32 $d; done
echo '{"do_sample": false}' >gc_greedy/generation_config.json
echo '{"do_sample": true, "temperature": 0.7, "top_k": 3, "top_p": 0.9}' >gc_top/generation_config.json
echo '{"top_p": 2}' >gc_bad/generation_config.json
"$TLALOC" sample gc_greedy --tokens 8 >gc_greedy.out 2>gc_greedy.err
"$TLALOC" sample f32 --tokens 8 --temperature 0 >greedy.out 2>/dev/null
cmp -s gc_greedy.out greedy.out || die "do_sample false: $(cat gc_greedy.out) vs greedy $(cat greedy.out)"
grep -qF "sampling with generation_config.json's do_sample false (greedy)" gc_greedy.err ||
  die "no sampling line: $(cat gc_greedy.err)"
"$TLALOC" sample gc_top --tokens 8 --seed 3 >gc_top.out 2>/dev/null
"$TLALOC" sample f32 --tokens 8 --seed 3 --temperature 0.7 --top-k 3 --top-p 0.9 >top.out 2>/dev/null
cmp -s gc_top.out top.out || die "generation_config sampling: $(cat gc_top.out) vs flags $(cat top.out)"
"$TLALOC" sample gc_greedy --tokens 8 --seed 3 --temperature 0.7 --top-k 3 --top-p 0.9 >over.out 2>/dev/null
cmp -s over.out top.out || die "flags did not override generation_config.json"
refused "gc_bad/generation_config.json: top_p 2 must be a number in (0, 1]" sample gc_bad
refused "f64big: tensor 'model.norm.weight' (f64big/model.safetensors) holds F64 values beyond F32's range" \
  eval f64big --text val.txt
refused "tied_other: tensor 'lm_head.weight' (tied_other/model.safetensors) differs from model.embed_tokens.weight, which the config ties it to (tie_word_embeddings)" \
  eval tied_other --text val.txt
# A BF16 directory loads widened to F32 exactly: the same figure as its F32 copy.
"$TLALOC" eval bf16 --text val.txt >bf16.out || die "eval of a BF16 directory failed"
"$TLALOC" eval widened --text val.txt >widened.out
[ "$(sed -n 's/^loss: //p' bf16.out)" = "$(sed -n 's/^loss: //p' widened.out)" ] ||
  die "BF16 directory: $(cat bf16.out) vs its F32 copy: $(cat widened.out)"
bad "sharded/model.safetensors.index.json: shard 'model-00002-of-00002.safetensors' is missing" train llama --init sharded --text corpus.txt
bad "train llama: --init shape: tensor 'model.norm.weight' (shape/model.safetensors) is F32 [16,2], the model's is F32 [32]" \
  train llama --init shape --text corpus.txt
bad "train llama: --init dtype: tensor 'model.norm.weight' (dtype/model.safetensors) is I32 [32], the model's is F32 [32]" \
  train llama --init dtype --text corpus.txt
cp -r m nostate
refused_later "--resume nostate: no training state beside it (nostate.training.safetensors), so there is no run to continue; to train on from its weights, give it with --init" \
  train llama "${common[@]}" --steps 40 --resume nostate --save bad
mkdir notok && cp m/config.json m/model.safetensors notok/
bad "train llama: the model directory notok has no tokenizer.model: give its tokenizer with --tokenizer" \
  train llama --init notok --text corpus.txt
bad "train llama: --preset, --config and --init exclude each other" \
  train llama --preset tiny --config cfg.json --text corpus.txt
mkdir empty && refused "eval: empty is a folder without config.json" eval empty
refused "sample: empty is a folder without config.json (not a model directory)" sample empty
# config.json's bos / eos ids (what HF's generate uses): in the vocabulary, and the tokenizer's.
python3 -c '
import json; c = json.load(open("cfg.json"))
json.dump({**c, "bos_token_id": 5}, open("cfg_bos.json", "w"))
json.dump({**c, "eos_token_id": 99999}, open("cfg_eos.json", "w"))'
refused_later "train llama: the model's bos_token_id is 5, tokenizer tok.model's <s> is 1" \
  train llama --config cfg_bos.json --tokenizer tok.model --text corpus.txt --save bad
bad "cfg_eos.json: eos_token_id 99999 is outside the vocabulary [0, 320)" \
  train llama --config cfg_eos.json --text corpus.txt
[ ! -e bad ] || die "a refused tokenizer wrote bad"

# The training state records the run's text and tokenizer: eval refuses a directory whose
# tokenizer.model was swapped, or whose training text changed since (a resume too); text that
# is not UTF-8 is refused by file and line.
cp -r m swapped && cp m.training.safetensors swapped.training.safetensors
"$TLALOC" tokenizer train corpus.txt --vocab-size 290 -o swapped/tokenizer >/dev/null
rm swapped/tokenizer.vocab
refused_later "swapped: tokenizer.model is not the tokenizer its training run used" eval swapped
cp corpus.txt corpus.orig && echo "one more line" >>corpus.txt
refused_later "eval m: the text of its training run ([\"$tmp/corpus.txt\"]) has changed since" eval m
refused_later "--resume m: it was trained with text_digest=" \
  train llama "${common[@]}" --steps 40 --save m --resume m
mv corpus.orig corpus.txt
# The same text at another path (a moved folder) resumes.
cp corpus.txt moved.txt
"$TLALOC" train llama --config cfg.json --tokenizer tok.model --text moved.txt --context 16 \
  --batch 4 --lr 1e-2 --threads 1 --steps 31 --resume m --save moved >moved.out ||
  die "the same text at another path: $(cat moved.out)"
# A save over a directory drops HF's files of another tokenizer (tokenizer.json first).
cp -r m stale && echo '{}' >stale/tokenizer.json && echo '{}' >stale/special_tokens_map.json
"$TLALOC" train llama "${common[@]}" --steps 2 --save stale >/dev/null
[ "$(ls stale | tr '\n' ' ')" = "config.json generation_config.json model.safetensors tokenizer.model " ] ||
  die "a save kept another tokenizer's files: $(ls stale)"
"$TLALOC" eval m >/dev/null || die "eval after the text was restored"
printf 'caf\xe9 au lait\nsecond line\n' >latin1.txt
refused_later "eval: --text latin1.txt: line 1 is not UTF-8 text" eval m --text latin1.txt
{ head -2 corpus.txt && printf '\xff\n'; } >tail.txt
refused_later "train llama: --text tail.txt: line 3 is not UTF-8 text" \
  train llama --config cfg.json --tokenizer tok.model --save bad --text tail.txt
[ ! -e bad ] || die "a refused text wrote bad"
echo "llama: ok"
