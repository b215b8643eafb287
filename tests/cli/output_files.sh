#!/usr/bin/env bash
# Files on disk (issue 18): a --save, --metrics, picture (--plot, --boundary, --confusion,
# plot -o) or export --output that is a device or a FIFO, a
# folder, an empty name, or lies in a missing or read-only folder is refused before any work
# with one line naming the option and the path, and left as it was; a checkpoint replaces
# only a tlaloc checkpoint and an export only an earlier export; temporaries have unique
# names, a second Ctrl-C during a save leaves none, a killed run's are removed by the next save
# of that file (and nothing else is); two runs cannot write one checkpoint.
# Runs as root or not: as root, device nodes are made in the scratch folder (never /dev/null
# itself) and the read-only folder case runs as nobody through setpriv (skipped without it).
# shellcheck source=tests/cli/lib.bash
source "$(dirname "$0")/lib.bash"
disc=(train disc --points 16 --steps 2 --threads 1)
fmnist=(train fmnist --limit 256 --epochs 1 --batch 64 --threads 1)
printf 'the cat sat on the mat. %.0s' $(seq 60) >"$tmp/corpus.txt"
lm=(train lm --text "$tmp/corpus.txt" --layers 1 --d-model 16 --heads 2 --kv-heads 2 --context 8
  --d-ff 32 --threads 1)

# 1. Devices and FIFOs: refused by every command that writes, never replaced.
mkfifo "$tmp/fifo"
targets=("$tmp/fifo:a FIFO (named pipe)")
if [ "$(id -u)" -eq 0 ]; then
  if mknod "$tmp/null" c 1 3 2>/dev/null && mknod "$tmp/full" c 1 7 2>/dev/null; then
    targets+=("$tmp/null:a character device" "$tmp/full:a character device")
  else
    echo "skipped: device nodes (root without mknod)"
  fi
else
  for d in /dev/null /dev/full; do [ -c "$d" ] && targets+=("$d:a character device"); done
fi
for t in "${targets[@]}"; do
  path=${t%%:*} kind=${t#*:}
  regular="not a regular file (tlaloc writes only regular files)"
  refused "train disc: --save $path is $kind, $regular" "${disc[@]}" --save "$path"
  refused "train fmnist: --save $path is $kind, $regular" "${fmnist[@]}" --save "$path"
  refused "train lm: --save $path is $kind, $regular" "${lm[@]}" --save "$path"
  refused "train disc: --metrics $path is $kind, $regular" "${disc[@]}" --metrics "$path"
  refused "export: --output $path is $kind, $regular" export disc -o "$path"
  refused "train disc: --plot $path is $kind, $regular" "${disc[@]}" --plot "$path"
  refused "train disc: --boundary $path is $kind, $regular" "${disc[@]}" --boundary "$path"
  refused "train fmnist: --confusion $path is $kind, $regular" "${fmnist[@]}" --confusion "$path"
  refused "eval: --confusion $path is $kind, $regular" eval "$tmp/none.st" --confusion "$path"
  refused "plot: -o $path is $kind, $regular" plot "$tmp/none.csv" -o "$path"
  [ -p "$path" ] || [ -c "$path" ] || die "$path was replaced: $(ls -l "$path")"
done

# Folders, empty names, missing folders: refused before the work.
refused "export: --output $tmp is a folder; give a file name" export disc -o "$tmp"
refused "export: --output is empty" export disc -o ""
refused "export: --output $tmp/no/e.mlir: folder $tmp/no does not exist" export disc -o "$tmp/no/e.mlir"
refused "train disc: --save $tmp/no/d.st: folder $tmp/no does not exist" "${disc[@]}" --save "$tmp/no/d.st"
# A checkpoint replaces only a tlaloc checkpoint, an export only an earlier export: a text, a
# dataset or another program's safetensors is left as it was.
echo "my notes" >"$tmp/notes.txt"
cp /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz "$tmp/labels.gz"
printf '\x10\0\0\0\0\0\0\0{"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' >"$tmp/other.safetensors"
for f in notes.txt labels.gz other.safetensors; do
  cp "$tmp/$f" "$tmp/$f.orig"
  refused "train disc: --save $tmp/$f exists and is not a tlaloc checkpoint" "${disc[@]}" --save "$tmp/$f"
  refused "export: --output $tmp/$f exists and is not a StableHLO module" export disc -o "$tmp/$f"
  cmp -s "$tmp/$f" "$tmp/$f.orig" || die "$f changed"
done
"$TLALOC" "${disc[@]}" --save "$tmp/d.st" >/dev/null
"$TLALOC" "${disc[@]}" --save "$tmp/d.st" >/dev/null || die "a checkpoint did not replace its own"
"$TLALOC" export disc -o "$tmp/e.mlir" && "$TLALOC" export disc -o "$tmp/e.mlir" ||
  die "an export did not replace an earlier one"
refused "export: --output $tmp/d.st exists and is not a StableHLO module" export disc -o "$tmp/d.st"
rm -f "$tmp/d.st" "$tmp/e.mlir"

# A read-only folder (root writes any folder: the case runs as nobody).
mkdir "$tmp/ro"
chmod 555 "$tmp/ro"
if as_nobody "read-only folder"; then
  refused "train disc: --save $tmp/ro/d.st: folder $tmp/ro is not writable: Permission denied" \
    "${disc[@]}" --save "$tmp/ro/d.st"
  refused "export: --output $tmp/ro/e.mlir: folder $tmp/ro is not writable: Permission denied" \
    export disc -o "$tmp/ro/e.mlir"
  run_as=()
  chmod 700 "$tmp"
fi

# 2. Temporaries. A killed run's ".NAME.tmp.XXXXXX" is removed by the next save of NAME; a
# live writer's (locked), other names and other targets' are not.
for f in .c.st.tmp.AbC123 .c.st.tmp.LiVe12 .c.st.tmp.AbC12 .d.st.tmp.AbC123 c.st.tmp.AbC123; do
  : >"$tmp/$f"
done
exec 9<"$tmp/.c.st.tmp.LiVe12"
flock -x 9
"$TLALOC" "${lm[@]}" --steps 2 --save "$tmp/c.st" >/dev/null 9<&-
exec 9<&-
[ ! -e "$tmp/.c.st.tmp.AbC123" ] || die "a killed run's temporary was not removed"
for f in .c.st.tmp.LiVe12 .c.st.tmp.AbC12 .d.st.tmp.AbC123 c.st.tmp.AbC123; do
  [ -e "$tmp/$f" ] || die "$f was removed (not a stale temporary of c.st)"
done

# export: a unique temporary (a file of the user's named e.mlir.tmp is not touched), and four
# exports at once write one whole file.
echo "the user's file" >"$tmp/e.mlir.tmp"
"$TLALOC" export lm >"$tmp/reference.mlir"
pids=()
for _ in 1 2 3 4; do
  "$TLALOC" export lm -o "$tmp/e.mlir" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "a concurrent export failed"; done
cmp -s "$tmp/e.mlir" "$tmp/reference.mlir" || die "concurrent exports left a spliced file"
[ "$(cat "$tmp/e.mlir.tmp")" = "the user's file" ] || die "export wrote over e.mlir.tmp"
[ -z "$(find "$tmp" -name '.e.mlir.tmp.*')" ] || die "an export left its temporary"

# A second Ctrl-C during a save (a model of ~80 MB saved every step) exits 130 at once and
# leaves no temporary.
big=(train lm --text "$tmp/corpus.txt" --layers 2 --d-model 512 --heads 8 --kv-heads 8 --context 8
  --d-ff 2048 --steps 100000 --save-every 1 --log-every 1000 --threads 1)
for round in 1 2; do
  "$TLALOC" "${big[@]}" --save "$tmp/big.st" >"$tmp/big.out" 2>&1 &
  pid=$!
  wait_for_line "^saved" "$tmp/big.out" "$pid"
  kill -INT "$pid"
  sleep 0.05
  kill -INT "$pid" 2>/dev/null || true
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || die "two Ctrl-Cs: exit $rc, not 130: $(tail -2 "$tmp/big.out")"
  [ -z "$(find "$tmp" -name '.big.st.tmp.*')" ] || die "round $round: two Ctrl-Cs left a temporary"
done
rm -f "$tmp/big.st"

# 3. Two runs cannot write one checkpoint: the second fails at its start naming the file and
# the first run's process; once the first is gone (even SIGKILLed), the file is free.
"$TLALOC" "${lm[@]}" --steps 100000000 --log-every 1000 --save "$tmp/l.st" >"$tmp/first.out" &
first=$!
wait_for_line "^IR:" "$tmp/first.out" "$first"
refused "train lm: --save $tmp/l.st is being written by another run (process $first)" \
  "${lm[@]}" --steps 2 --save "$tmp/l.st"
refused "train fmnist: --save $tmp/l.st is being written by another run" \
  "${fmnist[@]}" --save "$tmp/l.st"
kill -KILL "$first"
wait "$first" 2>/dev/null || true
"$TLALOC" "${lm[@]}" --steps 2 --save "$tmp/l.st" >/dev/null || die "the lock outlived its run"
echo "output_files: ok"
