#!/usr/bin/env bash
# tlaloc tokenizer against Debian's SentencePiece tools, the oracle: a model trained by tlaloc
# has the vocabulary spm_train makes with the same options; on 1,000 held-out lines of the King
# James Bible and fortunes, tlaloc's ids equal spm_encode's line for line (tlaloc's model, and a
# model spm_train made with its own defaults); decoding equals spm_decode and round-trips the
# text; training is deterministic. Then bad input: one error line, exit 1 (usage: 2), nothing
# written.
source "$(dirname "$0")/lib.bash"
for tool in spm_train spm_encode spm_decode bible; do
  command -v "$tool" >/dev/null ||
    die "$tool is missing: run scripts/install-deps.sh (Debian packages sentencepiece, bible-kjv)"
done
fortunes=/usr/share/games/fortunes
[ -f "$fortunes/cookie" ] || die "no $fortunes/cookie: run scripts/install-deps.sh (fortunes)"

# Training text (450 KB): Genesis and a fortunes file. Held-out text: the first 490 lines of
# Exodus, 500 of another fortunes file and 10 of other characters and spaces.
bible gen1:1-gen50:26 >"$tmp/genesis.txt"
train=("$tmp/genesis.txt" "$fortunes/cookie")
bible exo1:1-exo40:38 >"$tmp/exodus.txt"
head -1500 "$tmp/genesis.txt" >"$tmp/gen1500.txt" # 87 KB, for unigram models
{
  head -490 "$tmp/exodus.txt"
  head -500 "$fortunes/computers"
  # Characters the training text lacks (byte fallback), spaces, a CR, an empty line.
  printf '%s\n' "café naïve résumé" "日本語のテキスト" "emoji 😀 🎉" "  two leading spaces" \
    "three trailing   " "tabs"$'\t'"inside" "a CRLF line"$'\r' "" "digits 3.14159 and 2026" "ÆØÅ ß"
} >"$tmp/lines.txt"
[ "$(wc -l <"$tmp/lines.txt")" -eq 1000 ] || die "expected 1000 held-out lines"
llama=(--byte_fallback=true --split_digits=true --allow_whitespace_only_pieces=true
  --normalization_rule_name=identity --remove_extra_whitespaces=false --character_coverage=0.99995
  --minloglevel=2)

"$TLALOC" tokenizer train --vocab-size 2000 -o "$tmp/tl" "${train[@]}" >"$tmp/train.out"
grep -qx "trained a bpe tokenizer of 2000 pieces on 2 text files in .* s" "$tmp/train.out" ||
  die "train printed: $(cat "$tmp/train.out")"
grep -qxF "wrote $tmp/tl.model and $tmp/tl.vocab" "$tmp/train.out" || die "no 'wrote' line"
spm_train --input="$tmp/genesis.txt,$fortunes/cookie" --model_prefix="$tmp/sp" --vocab_size=2000 \
  --model_type=bpe "${llama[@]}"
cmp -s "$tmp/tl.vocab" "$tmp/sp.vocab" || die "tlaloc's vocabulary differs from spm_train's"

# same_ids MODEL [tlaloc encode flags] [-- spm_encode flags]: equal ids on every line (a folder
# as MODEL: its tokenizer.model for spm_encode).
same_ids() {
  local model=$1 file=$1 ours=() theirs=()
  [ -d "$model" ] && file=$model/tokenizer.model
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do ours+=("$1") && shift; done
  [ $# -gt 0 ] && shift && theirs=("$@")
  "$TLALOC" tokenizer encode "${ours[@]}" "$model" "$tmp/lines.txt" >"$tmp/ours"
  spm_encode --model="$file" "${theirs[@]}" <"$tmp/lines.txt" >"$tmp/theirs"
  [ "$(wc -l <"$tmp/ours")" -eq 1000 ] || die "$model: $(wc -l <"$tmp/ours") lines of ids"
  diff "$tmp/ours" "$tmp/theirs" >"$tmp/diff" ||
    die "$model ${ours[*]}: ids differ from spm_encode's: $(head -4 "$tmp/diff")"
}
spm_train --input="$tmp/gen1500.txt" --model_prefix="$tmp/spdefault" --vocab_size=600 \
  --minloglevel=2 # SentencePiece's own defaults: unigram, NFKC normalization
for model in "$tmp/tl.model" "$tmp/spdefault.model"; do
  same_ids "$model" -- --output_format=id
  same_ids "$model" --pieces -- --output_format=piece
  same_ids "$model" --bos --eos -- --output_format=id --extra_options=bos:eos
  spm_encode --model="$model" --output_format=id "$tmp/lines.txt" >"$tmp/ids"
  "$TLALOC" tokenizer decode "$model" "$tmp/ids" >"$tmp/decoded"
  spm_decode --model="$model" --input_format=id <"$tmp/ids" | cmp -s - "$tmp/decoded" ||
    die "$model: decoded text differs from spm_decode's"
done
# With Llama's options (identity normalization, byte fallback) the text comes back unchanged.
"$TLALOC" tokenizer encode "$tmp/tl.model" <"$tmp/lines.txt" |
  "$TLALOC" tokenizer decode "$tmp/tl.model" - | cmp -s - "$tmp/lines.txt" ||
  die "decode(encode(text)) differs from the text"
info=$("$TLALOC" tokenizer info "$tmp/tl.model")
[ "$info" = "$tmp/tl.model: 2000 pieces; unk 0 <unk>, bos 1 <s>, eos 2 </s>, pad none" ] ||
  die "info: $info"

# Deterministic: the same text from stdin gives the same model bytes; a folder as -o gets
# tokenizer.model (HuggingFace's name), which encode finds given the folder.
mkdir "$tmp/hf"
cat "${train[@]}" | "$TLALOC" tokenizer train --vocab-size 2000 -o "$tmp/hf" - >/dev/null
cmp -s "$tmp/tl.model" "$tmp/hf/tokenizer.model" || die "a second training gave another model"
same_ids "$tmp/hf" -- --output_format=id
# Unigram too: the vocabulary spm_train makes (its EM depends on the thread count: both 16).
"$TLALOC" tokenizer train --vocab-size 600 --model-type unigram -o "$tmp/tu" "$tmp/gen1500.txt" \
  >/dev/null
spm_train --input="$tmp/gen1500.txt" --model_prefix="$tmp/su" --vocab_size=600 \
  --model_type=unigram "${llama[@]}"
cmp -s "$tmp/tu.vocab" "$tmp/su.vocab" || die "unigram: tlaloc's vocabulary differs from spm_train's"
# A line longer than SentencePiece's default max_sentence_length (4192 bytes) is trained on, as
# spm_train does given a long enough --max_sentence_length (by default it drops the line).
tr '\n' ' ' <"$tmp/gen1500.txt" >"$tmp/oneline.txt"
len=$(wc -c <"$tmp/oneline.txt")
[ "$len" -gt 4192 ] || die "oneline.txt has only $len bytes"
"$TLALOC" tokenizer train --vocab-size 400 -o "$tmp/tol" "$tmp/oneline.txt" >/dev/null
spm_train --input="$tmp/oneline.txt" --model_prefix="$tmp/sol" --model_type=bpe --vocab_size=400 \
  --max_sentence_length="$len" "${llama[@]}"
cmp -s "$tmp/tol.vocab" "$tmp/sol.vocab" || die "one long line: the vocabulary differs from spm_train's"

# Bad input: one line, nothing written (no model, no vocab, no temporary).
mkdir "$tmp/dest"
nothing_written() {
  [ -z "$(ls -A "$tmp/dest")" ] || die "$*: left $(ls -A "$tmp/dest")"
}
exits() { # exits STATUS: the last refusal's exit status
  [ "$rc" -eq "$1" ] || die "exit status $rc, expected $1"
}
o=(-o "$tmp/dest/m")
small="$tmp/small.txt"
head -c 3000 "$tmp/genesis.txt" >"$small"
: >"$tmp/empty.txt"
t=(tokenizer train --vocab-size 500 "${o[@]}")
refused "tokenizer train: --vocab-size 5000 is too large for this text: bpe allows at most" \
  tokenizer train --vocab-size 5000 "${o[@]}" "$small" && exits 1 && nothing_written too large
refused "tokenizer train: --vocab-size 5000 is too large for this text: unigram allows at most" \
  tokenizer train --vocab-size 5000 --model-type unigram "${o[@]}" "$small" && exits 1
refused "tokenizer train: --vocab-size 300 is too small for this text: its characters, the 256 byte \
pieces and <unk> <s> </s> need 306" tokenizer train --vocab-size 300 "${o[@]}" "$small" && exits 1
refused "tokenizer train: --vocab-size 2 is too small: the 256 byte pieces and <unk> <s> </s> alone \
need 259" tokenizer train --vocab-size 2 "${o[@]}" "$small" && exits 1
refused "--vocab-size: Value 0 not in range 1 to 16777216" \
  tokenizer train --vocab-size 0 "${o[@]}" "$small" && exits 2
refused "--vocab-size: Value 99999999999 not in range 1 to 16777216" \
  tokenizer train --vocab-size 99999999999 "${o[@]}" "$small" && exits 2
refused "--vocab-size: 'lots' is not a decimal integer" \
  tokenizer train --vocab-size lots "${o[@]}" "$small" && exits 2
refused "--model-type: word not in {bpe,unigram}" "${t[@]}" --model-type word "$small" && exits 2
refused "--vocab-size is required" tokenizer train "${o[@]}" "$small" && exits 2
refused "TEXT is required" "${t[@]}" && exits 2
refused "tokenizer train: text file $tmp/empty.txt is empty" "${t[@]}" "$small" "$tmp/empty.txt" &&
  exits 1
refused "tokenizer train: text file - is empty" "${t[@]}" - </dev/null && exits 1
refused "tokenizer train: text file $tmp/none.txt: cannot open: No such file or directory" \
  "${t[@]}" "$tmp/none.txt" && exits 1
refused "tokenizer train: text file $tmp is a folder, not a file" "${t[@]}" "$tmp" && exits 1
refused "tokenizer train: text file /dev/zero is a character device, not a file" \
  "${t[@]}" /dev/zero && exits 1
printf 'first line\ncaf\xe9 au lait\n' >"$tmp/latin1.txt"
refused "tokenizer train: text file $tmp/latin1.txt: line 2 is not UTF-8 text" \
  "${t[@]}" "$tmp/latin1.txt" && exits 1
refused "tokenizer encode: $tmp/latin1.txt: line 2 is not UTF-8 text" \
  tokenizer encode "$tmp/tl.model" "$tmp/latin1.txt" && exits 1
nothing_written bad text
# An output replaces only a tokenizer's files: not the text trained on, nor another file.
cp "$small" "$tmp/dest/corpus.vocab"
refused "tokenizer train: -o $tmp/dest/corpus.vocab is also a text file to train on" \
  tokenizer train --vocab-size 500 -o "$tmp/dest/corpus" "$tmp/dest/corpus.vocab" \
  && exits 1
cmp -s "$small" "$tmp/dest/corpus.vocab" || die "the text trained on was overwritten"
echo "my notes" >"$tmp/dest/notes.model"
refused "tokenizer train: -o $tmp/dest/notes.model exists and is not a SentencePiece model" \
  tokenizer train --vocab-size 500 -o "$tmp/dest/notes" "$small" && exits 1
echo "my notes" >"$tmp/dest/other.vocab"
refused "tokenizer train: -o $tmp/dest/other.vocab exists and is not a SentencePiece vocab file" \
  tokenizer train --vocab-size 500 -o "$tmp/dest/other" "$small" && exits 1
[ "$(cat "$tmp/dest/notes.model" "$tmp/dest/other.vocab")" = "my notes
my notes" ] && [ ! -e "$tmp/dest/notes.vocab" ] && [ ! -e "$tmp/dest/other.model" ] ||
  die "a refused output was written"
rm "$tmp/dest/corpus.vocab" "$tmp/dest/notes.model" "$tmp/dest/other.vocab"
"$TLALOC" tokenizer train --vocab-size 500 -o "$tmp/dest/again" "$small" >/dev/null
"$TLALOC" tokenizer train --vocab-size 400 -o "$tmp/dest/again" "$small" >/dev/null ||
  die "a tokenizer did not replace a tokenizer"
rm "$tmp/dest/again.model" "$tmp/dest/again.vocab"
# Outputs that cannot be written: refused before training.
w=(tokenizer train --vocab-size 500)
refused "tokenizer train: -o $tmp/none/m.model: folder $tmp/none does not exist" \
  "${w[@]}" -o "$tmp/none/m" "$small" && exits 1
refused "tokenizer train: -o is empty" "${w[@]}" -o "" "$small" && exits 1
refused "tokenizer train: -o /dev/full is a character device; give a folder or a prefix" \
  "${w[@]}" -o /dev/full "$small" && exits 1
refused "tokenizer train: -o $small is a file; give a folder or a prefix" \
  "${w[@]}" -o "$small" "$small" && exits 1
mkdir "$tmp/dest/m.vocab"
refused "tokenizer train: -o $tmp/dest/m.vocab is a folder; give a file name" \
  "${w[@]}" "${o[@]}" "$small" && exits 1
[ "$(ls -A "$tmp/dest")" = m.vocab ] || die "wrote $(ls -A "$tmp/dest")"
rmdir "$tmp/dest/m.vocab"
if as_nobody "a read-only output folder"; then
  chmod 555 "$tmp/dest"
  refused "tokenizer train: -o $tmp/dest/m.model: folder $tmp/dest is not writable" \
    "${w[@]}" "${o[@]}" "$small" && exits 1
  run_as=()
  chmod 755 "$tmp/dest"
fi
nothing_written bad outputs

# Bad models and ids.
: >"$tmp/empty.model"
echo "not a model" >"$tmp/text.model"
refused "tokenizer $tmp/none.model: cannot open: No such file or directory" \
  tokenizer encode "$tmp/none.model" "$small" && exits 1
refused "tokenizer $tmp/empty.model is empty, not a SentencePiece model" \
  tokenizer encode "$tmp/empty.model" "$small" && exits 1
refused "tokenizer $tmp/text.model is not a SentencePiece model" \
  tokenizer decode "$tmp/text.model" "$small" && exits 1
refused "tokenizer $tmp/dest: a folder without a tokenizer.model" tokenizer info "$tmp/dest" && exits 1
refused "tokenizer encode: input $tmp/none.txt: cannot open: No such file or directory" \
  tokenizer encode "$tmp/tl.model" "$small" "$tmp/none.txt" && exits 1
printf '5 6\n1 2000\n' >"$tmp/bad.ids"
refused "tokenizer decode: $tmp/bad.ids line 2: id 2000 is out of range (the model has 2000 pieces: \
0 to 1999)" tokenizer decode "$tmp/tl.model" "$tmp/bad.ids" && exits 1
printf '5 x6\n' >"$tmp/bad.ids"
refused "tokenizer decode: $tmp/bad.ids line 1: \"x6\" is not an id" \
  tokenizer decode "$tmp/tl.model" "$tmp/bad.ids" && exits 1
refused "tokenizer: unknown command 'split' (known: train, encode, decode, info)" tokenizer split &&
  exits 2
echo "cli.tokenizer: ok"
