#!/usr/bin/env bash
# Data parallelism on this machine: 2 ranks x 1 thread (mpirun -np 2 ... --threads 1) against
# 1 rank x 2 threads (--threads 2), the same global batch, arms alternated (A B A B ...), on
# the default `train fmnist` epoch (MLP, batch 128), on the default `train lm` step (the
# benchmark LM) and on a larger LM step (4 blocks of width 256, context 256, batch 8: 3.4 M
# parameters, 2048 tokens a step). Per arm: the median and spread of the epoch time / the step time (from the
# metrics file's wall clock, steps after the first), the peak memory (max RSS, per rank), and
# for 2 ranks the time rank 0 spent in all-reduce / all-gather (waiting for the other rank
# included). Prints the ratio 1x2 / 2x1 (> 1: data parallelism is faster).
# Usage: bench/run_dp_bench.sh [ROUNDS=3] [LM_STEPS=40] [LARGE_STEPS=12]
#        (needs build/ with MPI, and mpirun)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
lm_steps=${2:-40}
large_steps=${3:-12}
tlaloc=$PWD/build/tlaloc
[ -x "$tlaloc" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "no mpirun (Debian's openmpi-bin)" >&2; exit 1; }
. bench/bench_env.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpi=(mpirun --oversubscribe --allow-run-as-root -np 2 -x OMP_WAIT_POLICY -x OPENBLAS_CORETYPE)
# Each process's max RSS (KiB) into $out/rss.<rank>.
timed() { /usr/bin/time -f "%M" -o "$out/rss.${OMPI_COMM_WORLD_RANK:-0}" "$@"; }
export -f timed
export out

job() {  # job NAME ARM: one run, its numbers appended to $out/NAME_ARM
  local name=$1 arm=$2 args
  if [ "$name" = fmnist ]; then
    args=(train fmnist --epochs 1 --metrics "$out/m.csv")
  elif [ "$name" = lm ]; then
    args=(train lm --steps "$lm_steps" --log-every 1 --metrics "$out/m.csv")
  else
    args=(train lm --steps "$large_steps" --log-every 1 --metrics "$out/m.csv" --layers 4
      --d-model 256 --heads 4 --kv-heads 4 --d-ff 1024 --context 256 --batch 8)
  fi
  rm -f "$out/m.csv" "$out"/rss.*
  if [ "$arm" = 1x2 ]; then
    OMP_NUM_THREADS=2 bash -c 'timed "$@"' _ "$tlaloc" "${args[@]}" --threads 2 >"$out/log"
  else
    OMP_NUM_THREADS=1 "${mpi[@]}" bash -c 'timed "$@"' _ "$tlaloc" "${args[@]}" --threads 1 >"$out/log"
  fi
  /usr/bin/python3 - "$name" "$out" >>"$out/${name}_$arm" <<'PY'
import csv, glob, re, sys
name, out = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(f"{out}/m.csv")))
if name == "fmnist":
    t = float(next(r for r in rows if r["kind"] == "epoch")["wall_s"])  # evaluation included
else:
    w = [float(r["wall_s"]) for r in rows if r["kind"] == "step"]
    t = (w[-1] - w[0]) / (len(w) - 1)
log = open(f"{out}/log").read()
m = re.search(r"data parallel: ([0-9.]+) s of ([0-9.]+) s in all-reduce", log)
coll = m.group(1) if m else "-"
rss = max(int(open(p).read().split()[-1]) for p in glob.glob(f"{out}/rss.*"))
print(t, coll, rss)
PY
}

for r in $(seq 1 "$rounds"); do
  for name in fmnist lm lm_large; do
    for arm in 1x2 2x1; do job "$name" "$arm"; done
  done
done

/usr/bin/python3 - "$out" <<'PY'
import statistics, sys
out = sys.argv[1]
for name, unit in (("fmnist", "s/epoch"), ("lm", "ms/step"), ("lm_large", "ms/step")):
    med = {}
    for arm in ("1x2", "2x1"):
        rows = [l.split() for l in open(f"{out}/{name}_{arm}")]
        k = 1 if name == "fmnist" else 1000
        t = [float(r[0]) * k for r in rows]
        coll = [r[1] for r in rows]
        rss = max(int(r[2]) for r in rows) / 1024
        med[arm] = statistics.median(t)
        label = "1 rank x 2 threads" if arm == "1x2" else "2 ranks x 1 thread"
        print(f"{name:8s} {label}: {' '.join(f'{x:.2f}' for x in t)} {unit}; median {med[arm]:.2f}, "
              f"spread {max(t) - min(t):.2f}; peak RSS per process {rss:.0f} MiB"
              + ("" if arm == "1x2" else f"; rank 0 in all-reduce / all-gather: {' '.join(coll)} s"))
    print(f"{name:8s} ratio (1x2 / 2x1): {med['1x2'] / med['2x1']:.2f}")
PY
