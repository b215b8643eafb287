#!/usr/bin/env bash
# Data parallelism under mpirun (2 ranks on this machine): `train fmnist` and `train lm` follow
# the one-process trajectory at the same global batch (losses within 1e-6 relative, 200 steps);
# two 2-rank runs are bitwise equal; ZeRO-1 gives the parameters of plain data parallelism with
# each rank holding half the optimizer state; a resumed 2-rank run is bitwise the uninterrupted
# one; another process count is named on resume; a rank killed mid-run ends the others within
# seconds and the last checkpoint loads; a batch that does not split is refused.
set -euo pipefail
: "${TLALOC:?set TLALOC to the tlaloc binary}"
. "$(dirname "$0")/lib.bash"
# Export: one replica's step of N (StableHLO all_reduce on the loss and the 4 gradients of the
# MLP, the module for 2 replicas); a batch that does not split and a recipe that is not split are
# refused by name.
"$TLALOC" export fmnist --replicas 2 -o "$tmp/fm2.mlir"
grep -q "mhlo.num_replicas = 2 : i32" "$tmp/fm2.mlir" || die "no mhlo.num_replicas = 2 in the export"
[ "$(grep -c '"stablehlo.all_reduce"' "$tmp/fm2.mlir")" -eq 5 ] || die "not 5 all_reduce ops in the export"
grep -q "replica_groups = dense<\[\[0, 1\]\]> : tensor<1x2xi64>" "$tmp/fm2.mlir" || die "no replica_groups [[0, 1]]"
refused "fmnist: a batch of 128 does not split over 3 replicas" export fmnist --replicas 3
refused "tlaloc export disc: --replicas 2: the disc demo trains on one process (its points are not split)" \
  export disc --replicas 2

if ! command -v mpirun >/dev/null; then
  echo "skipped: no mpirun (Debian's openmpi-bin)"
  exit 0
fi
mpi=(mpirun --oversubscribe --allow-run-as-root -np 2)
data=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")

# Losses of the "step" rows of two metrics files agree to `tol` relative (0: bitwise).
same_losses() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import csv, sys
def losses(p):
    return [float(r["train_loss"]) for r in csv.DictReader(open(p)) if r["kind"] == "step"]
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{len(a)} losses, largest relative difference {worst:.3e}")
sys.exit(0 if worst <= tol else 1)
PY
}

# fmnist: 200 steps of batch 32 (6400 rows), one process vs two.
fm=(train fmnist --data "$data" --limit 6400 --batch 32 --epochs 1 --log-every 1 --threads 1)
"$TLALOC" "${fm[@]}" --metrics "$tmp/fm1.csv" --save "$tmp/fm1.safetensors" >"$tmp/fm1.log"
"${mpi[@]}" "$TLALOC" "${fm[@]}" --metrics "$tmp/fm2.csv" --save "$tmp/fm2.safetensors" >"$tmp/fm2.log"
grep -q "^data parallel: MPI (.*), 2 ranks" "$tmp/fm2.log" || die "no data-parallel line: $(head -5 "$tmp/fm2.log")"
same_losses "$tmp/fm1.csv" "$tmp/fm2.csv" 1e-6 || die "fmnist: 2 ranks leave the one-process trajectory"
"${mpi[@]}" "$TLALOC" "${fm[@]}" --metrics "$tmp/fm2b.csv" --save "$tmp/fm2b.safetensors" >/dev/null
same_losses "$tmp/fm2.csv" "$tmp/fm2b.csv" 0 || die "fmnist: two 2-rank runs differ"
/usr/bin/python3 "$here/tensors_equal.py" "$tmp/fm2.safetensors" "$tmp/fm2b.safetensors"

# ZeRO-1: the same parameters and whole optimizer state as plain data parallelism; each rank
# holds half the state.
"${mpi[@]}" "$TLALOC" "${fm[@]}" --zero 1 --save "$tmp/fmz.safetensors" >"$tmp/fmz.log"
/usr/bin/python3 "$here/tensors_equal.py" "$tmp/fm2.safetensors" "$tmp/fmz.safetensors"
held=$(sed -n 's/.*optimizer state elements held per rank: \([0-9]*\), \([0-9]*\) (\([0-9]*\) in all, ZeRO-1)$/\1 \2 \3/p' "$tmp/fmz.log")
read -r h0 h1 all <<<"$held" || die "no ZeRO-1 line: $(head -5 "$tmp/fmz.log")"
[ $((h0 + h1)) -eq "$all" ] && [ $((h0 - h1)) -le 1 ] && [ $((h1 - h0)) -le 1 ] ||
  die "ZeRO-1 split $held is not half and half"

# Resume: stopped at step 77 and resumed, bitwise the uninterrupted 2-rank run; with one
# process the changed count is named.
"${mpi[@]}" "$TLALOC" "${fm[@]}" --stop-after 77 --save "$tmp/part.safetensors" >/dev/null
"${mpi[@]}" "$TLALOC" "${fm[@]}" --resume "$tmp/part.safetensors" --save "$tmp/res.safetensors" >/dev/null
/usr/bin/python3 "$here/tensors_equal.py" "$tmp/fm2.safetensors" "$tmp/res.safetensors"
"$TLALOC" "${fm[@]}" --resume "$tmp/part.safetensors" --save "$tmp/res1.safetensors" >"$tmp/res1.log"
grep -q "trained by 2 processes, this run has 1: the global batch is kept" "$tmp/res1.log" ||
  die "no note of the changed process count: $(grep -i note "$tmp/res1.log")"

# lm: 200 steps, one process vs two, and bitwise twice.
printf 'the quick brown fox jumps over the lazy dog %d\n' $(seq 1 400) >"$tmp/corpus.txt"
lm=(train lm --text "$tmp/corpus.txt" --steps 200 --batch 8 --layers 1 --d-model 32 --heads 2 --kv-heads 2
  --context 32 --d-ff 64 --log-every 1 --threads 1)
"$TLALOC" "${lm[@]}" --metrics "$tmp/lm1.csv" >/dev/null
"${mpi[@]}" "$TLALOC" "${lm[@]}" --metrics "$tmp/lm2.csv" >/dev/null
same_losses "$tmp/lm1.csv" "$tmp/lm2.csv" 1e-6 || die "lm: 2 ranks leave the one-process trajectory"
"${mpi[@]}" "$TLALOC" "${lm[@]}" --metrics "$tmp/lm2b.csv" >/dev/null
same_losses "$tmp/lm2.csv" "$tmp/lm2b.csv" 0 || die "lm: two 2-rank runs differ"

# A rank killed mid-run: the other ends within seconds (mpirun ends the job), and the last
# checkpoint (saved every 20 steps) loads.
long=(train fmnist --data "$data" --limit 6400 --batch 32 --epochs 50 --threads 1 --save-every 20)
"${mpi[@]}" "$TLALOC" "${long[@]}" --save "$tmp/killed.safetensors" >"$tmp/killed.log" 2>&1 &
job=$!
for _ in $(seq 1 600); do [ -f "$tmp/killed.safetensors" ] && break; sleep 0.1; done
[ -f "$tmp/killed.safetensors" ] || die "no checkpoint before the kill: $(tail -5 "$tmp/killed.log")"
victim=$(pgrep -f "tlaloc train fmnist.*killed.safetensors" | tail -1)
kill -9 "$victim"
start=$SECONDS
for _ in $(seq 1 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
kill -0 $job 2>/dev/null && die "the other rank still runs 30 s after one was killed"
wait $job && die "mpirun succeeded although a rank was killed" || true
echo "the job ended $((SECONDS - start)) s after a rank was killed"
"$TLALOC" eval "$tmp/killed.safetensors" --data "$data" >"$tmp/killed_eval.log" ||
  die "the last checkpoint does not load: $(cat "$tmp/killed_eval.log")"

# Processes started differently (mpirun's MPMD form), or from different states under the same
# arguments (a relative --resume in each rank's own folder): refused before any step.
rc=0
mpirun --oversubscribe --allow-run-as-root -np 1 "$TLALOC" "${fm[@]}" --seed 1 : \
  -np 1 "$TLALOC" "${fm[@]}" --seed 2 >"$tmp/out" 2>"$tmp/err" || rc=$?
[ $rc -ne 0 ] || die "processes with different --seed were accepted"
grep -q "the processes were started with different arguments (rank 1's differ from rank 0's)" "$tmp/err" ||
  die "no clear line for different arguments: $(cat "$tmp/err")"
mkdir -p "$tmp/rank0" "$tmp/rank1"
cp "$tmp/part.safetensors" "$tmp/rank0/ck.safetensors"
cp "$tmp/fm2.safetensors" "$tmp/rank1/ck.safetensors"  # another step, other parameters
rc=0
"${mpi[@]}" bash -c 'cd "$0/rank$OMPI_COMM_WORLD_RANK" && exec "$@"' "$tmp" "$(realpath "$TLALOC")" \
  train fmnist --data "$data" --limit 6400 --batch 32 --epochs 2 --threads 1 --resume ck.safetensors \
  >"$tmp/out" 2>"$tmp/err" || rc=$?
[ $rc -ne 0 ] || die "ranks resuming different checkpoints were accepted"
grep -q "data parallel: rank 1 starts from other parameters than rank 0" "$tmp/err" ||
  die "no clear line for different starting states: $(cat "$tmp/err")"

# Recipes that do not split their batches say so; auto picks the host lane.
"${mpi[@]}" "$TLALOC" train disc --steps 20 --threads 1 --lane auto >"$tmp/disc.log"
grep -q "every process runs the whole batch (this job does not split it)" "$tmp/disc.log" ||
  die "disc does not say it runs the whole batch: $(grep "data parallel" "$tmp/disc.log")"
grep -q "^lane: host (data parallelism over 2 processes)" "$tmp/disc.log" || die "--lane auto: $(head -3 "$tmp/disc.log")"

# A batch that does not split over the processes: one line.
rc=0
"${mpi[@]}" "$TLALOC" train fmnist --data "$data" --limit 640 --batch 33 --epochs 1 >"$tmp/out" 2>"$tmp/err" || rc=$?
[ $rc -ne 0 ] || die "--batch 33 over 2 processes was accepted"
grep -q "tlaloc: error: \[rank [01] of 2\] train fmnist: --batch 33 does not split over 2 processes" "$tmp/err" ||
  die "no clear line for --batch 33: $(cat "$tmp/err")"
rc=0
"${mpi[@]}" "$TLALOC" train lm --text "$tmp/corpus.txt" --batch 7 --steps 2 >"$tmp/out" 2>"$tmp/err" || rc=$?
grep -q "train lm: --batch 7 does not split over 2 processes" "$tmp/err" || die "lm --batch 7: $(cat "$tmp/err")"
echo "1 passed, 0 failed"
