#!/usr/bin/env bash
# Pictures (issue 25): `tlaloc plot` draws metrics files; `train ... --plot` the run's curves,
# `train disc --boundary` the learned boundary, `train fmnist` and `eval --confusion` the
# confusion matrix; each a PNG of the expected size, the same bytes for the same input; a bad
# metrics file (a missing column, no rows, a non-number) is refused in one line naming the file
# and the line, and a bad picture path before any work, nothing written.
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"
cd "$tmp"
disc=(train disc --points 64 --steps 60 --log-every 10 --threads 1)
fmnist=(train fmnist --limit 512 --epochs 2 --batch 128 --log-every 2 --threads 1)

# png_size FILE: "WIDTHxHEIGHT" from the PNG header (the signature, then IHDR's width and height
# as big-endian 32-bit numbers at bytes 16 and 20).
png_size() {
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || die "$1 is not a PNG"
  local w h
  w=$(od -An -tu1 -j16 -N4 "$1" | awk '{print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4}')
  h=$(od -An -tu1 -j20 -N4 "$1" | awk '{print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4}')
  echo "${w}x$h"
}
expect_size() { [ "$(png_size "$1")" = "$2" ] || die "$1 is $(png_size "$1"), not $2"; }
# A confusion matrix of 10 classes: 10 cells of 52 pixels each way, and its labels (their width
# depends on the font) around them.
expect_confusion_size() {
  local s w h
  s=$(png_size "$1") w=${s%x*} h=${s#*x}
  [ "$w" -gt 620 ] && [ "$w" -lt 900 ] && [ "$h" -gt 560 ] && [ "$h" -lt 800 ] ||
    die "$1 is $s, not a 10-class confusion matrix's size"
}
has_line() { grep -qxF -- "$1" "$2" || die "no line '$1' in $2: $(cat "$2")"; }

# 1. train disc: the curves at the end (the metrics' final row drawn too), the boundary picture.
"$TLALOC" "${disc[@]}" --metrics m.csv --plot curves.png --boundary b.png >disc.log
has_line "plotted curves.png (step 60)" disc.log
has_line "wrote b.png (the learned boundary beside the true disc)" disc.log
expect_size curves.png 900x600
expect_size b.png 884x522
head -1 m.csv | grep -qx "kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s" ||
  die "m.csv header: $(head -1 m.csv)"
tail -1 m.csv | grep -qE "^final,60,1,,[0-9.e-]+,[0-9.e-]+,0.02,[0-9.e-]+$" ||
  die "m.csv last row: $(tail -1 m.csv)"
# The same run again: the same bytes (the wall times differ, but the pictures do not draw them).
"$TLALOC" "${disc[@]}" --plot curves2.png --boundary b2.png >/dev/null
cmp curves.png curves2.png || die "train disc --plot: two runs gave different bytes"
cmp b.png b2.png || die "train disc --boundary: two runs gave different bytes"

# train lm: the validation (nats per byte) is the metrics' final row; a save point at step 10
# draws the rows so far, the end (not the save point at the last step) draws them all.
printf 'the cat sat on the mat. %.0s' $(seq 200) >corpus.txt
"$TLALOC" train lm --text corpus.txt --layers 1 --d-model 16 --heads 2 --kv-heads 2 --context 8 \
  --d-ff 32 --threads 1 --steps 20 --log-every 5 --save lm.st --save-every 10 --metrics lm.csv \
  --plot lm.png >lm.log
[ "$(grep -c "^plotted lm.png" lm.log)" -eq 2 ] || die "lm: $(grep plotted lm.log)"
has_line "plotted lm.png (step 10)" lm.log
has_line "plotted lm.png (step 20)" lm.log
tail -1 lm.csv | grep -qE "^final,20,1,,[0-9.e-]+,,0.003,[0-9.e-]+$" || die "lm.csv: $(tail -1 lm.csv)"
expect_size lm.png 900x600

# 2. tlaloc plot: one file, two files overlaid, a log scale; the same bytes twice.
"$TLALOC" plot m.csv -o p.png >plot.log
has_line "wrote p.png (900 x 600 pixels, 1 run)" plot.log
"$TLALOC" plot m.csv -o p2.png >/dev/null
cmp p.png p2.png || die "plot: the same file drew different bytes"
sed 's/^step,\([0-9]*\),1,\([0-9.e-]*\),/step,\1,1,0.5,/' m.csv >half.csv
"$TLALOC" plot m.csv half.csv --log-y --title "two runs" --width 640 --height 480 -o two.png >plot.log
has_line "wrote two.png (640 x 480 pixels, 2 runs)" plot.log
expect_size two.png 640x480
cmp -s two.png p.png && die "two runs drew the picture of one"

# 3. Bad metrics files: one line naming the file and the line, exit 1, nothing written.
printf 'kind,step,epoch,train_loss,val_loss,val_accuracy,lr\nstep,10,1,0.5,,,0.02\n' >nowall.csv
refused "plot: nowall.csv line 1: no column 'wall_s' (the layout is kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s)" \
  plot nowall.csv -o bad.png
[ "$rc" -eq 1 ] || die "exit status $rc"
head -1 m.csv >header.csv
refused "plot: header.csv line 2: no rows (only the header)" plot header.csv -o bad.png
(head -4 m.csv && echo "step,70,1,abc,,,0.02,0.5") >word.csv
refused 'plot: word.csv line 5: "abc" in column train_loss is not a number' plot word.csv -o bad.png
: >empty.csv
refused "plot: empty.csv line 1: the file is empty (no header, no rows)" plot empty.csv -o bad.png
refused "plot: missing.csv: No such file or directory" plot missing.csv -o bad.png
[ ! -e bad.png ] || die "a refused plot wrote bad.png"
# A loss of 0 cannot go on a log scale.
(head -1 m.csv && echo "step,10,1,0,,,0.02,0.5") >zero.csv
refused "plot: zero.csv line 2: train_loss 0 cannot go on a log scale (--log-y needs losses > 0)" \
  plot zero.csv --log-y -o bad.png
# -o: checked before the files are read.
refused "plot: -o is empty" plot m.csv -o ""
refused "plot: -o $tmp is a folder; give a file name" plot m.csv -o "$tmp"
refused "plot: -o no/p.png: folder no does not exist" plot m.csv -o no/p.png
refused "plot: -o m.csv is one of the metrics files read; give the picture a file of its own" \
  plot m.csv -o m.csv
[ "$(head -1 m.csv)" = "kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s" ] ||
  die "m.csv was overwritten"

# 4. Picture options of the train commands: refused before any work, nothing written.
refused "train disc: --plot is empty (an unset variable?); omit it to write no picture" \
  "${disc[@]}" --plot ""
refused "train disc: --plot $tmp is a folder; give a file name" "${disc[@]}" --plot "$tmp"
refused "train disc: --boundary no/b.png: folder no does not exist" "${disc[@]}" --boundary no/b.png
refused "train disc: --plot m.csv is the --metrics file too; give the picture a file of its own" \
  "${disc[@]}" --metrics m.csv --plot m.csv
refused "train disc: --boundary x.png is the --plot file too; give it a file of its own" \
  "${disc[@]}" --plot x.png --boundary x.png
refused "train fmnist: --confusion $tmp is a folder; give a file name" "${fmnist[@]}" --confusion "$tmp"
refused "train fmnist: --confusion f.st is the --save file too; give it a file of its own" \
  "${fmnist[@]}" --save f.st --confusion f.st
# An old metrics file is not appended to.
printf 'kind,step,epoch,train_loss,test_loss,test_accuracy,seconds\nstep,1,1,2,,,0.1\n' >old.csv
refused "train disc: --metrics old.csv holds another layout" "${disc[@]}" --metrics old.csv
[ ! -e x.png ] && [ ! -e f.st ] || die "a refused run wrote a file"

# 5. train fmnist: curves with validation and accuracy, the confusion matrix; eval's too.
"$TLALOC" "${fmnist[@]}" --save f.st --save-every 6 --plot fc.png --confusion c.png >fmnist.log
has_line "plotted fc.png (step 6)" fmnist.log
has_line "plotted fc.png (step 8)" fmnist.log
has_line "wrote c.png (the confusion matrix)" fmnist.log
expect_size fc.png 900x600
expect_confusion_size c.png
"$TLALOC" eval f.st --confusion e.png >eval.log
has_line "wrote e.png (the confusion matrix)" eval.log
expect_size e.png "$(png_size c.png)"
"$TLALOC" eval f.st --confusion e2.png >/dev/null
cmp e.png e2.png || die "eval --confusion: the same checkpoint drew different bytes"
refused "eval: --confusion is empty (an unset variable?); omit it to write no picture" \
  eval f.st --confusion ""
refused "eval: --confusion f.st is the checkpoint being evaluated" eval f.st --confusion f.st
# Pictures never replace another kind of file (an input text, a checkpoint), never need a name
# too long for their temporary, and a refused picture leaves no lock; hostile values are refused
# by line; a metrics file whose last line lacks its newline gets one before new rows.
H=kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s
printf 'not a picture\n' >notes.txt
refused "train disc: --boundary notes.txt exists and is not a PNG picture" \
  "${disc[@]}" --boundary notes.txt --save d9.st
[ "$(cat notes.txt)" = "not a picture" ] && [ ! -e .d9.st.lock ] || die "notes.txt or a lock"
refused "plot: -o notes.txt exists and is not a PNG picture" plot m.csv -o notes.txt
long=$(printf 'a%.0s' $(seq 1 248)).png
refused "plot: -o $long: the file name is 252 bytes" plot m.csv -o "$long"
printf "$H\nstep,1,1,5e-324,,,0.1,1\nstep,2,1,1,,,0.1,1\n" >tiny.csv
refused "plot: tiny.csv line 2: train_loss 5e-324 is too small to draw" plot tiny.csv -o t.png --log-y
printf "$H\nstep,1,1,0.5,0.4,2,0.1,1\n" >acc.csv
refused "plot: acc.csv line 2: val_accuracy 2 is not a fraction in [0, 1]" plot acc.csv -o t.png
printf "$H" >open.csv
"$TLALOC" "${disc[@]}" --metrics open.csv >/dev/null
"$TLALOC" plot open.csv -o open.png >/dev/null || die "rows appended after an open last line"
echo "pictures: ok"
