#!/usr/bin/env bash
# tlaloc train fmnist vs the same job in PyTorch (bench/fmnist_torch.py) on this machine, in one
# run, arms alternated (A B A B ...). PyTorch at its best settings: OMP_WAIT_POLICY=passive with
# 1 and 2 threads; tlaloc with 1 and 2 threads. Prints every epoch time, the median and spread
# per arm, the ratio of tlaloc's best to PyTorch's best, and tlaloc's achieved GFLOP/s over the
# step's matrix FLOPs beside the sgemm rate measured here.
# PyTorch also runs with glibc keeping freed tensor memory (MALLOC_MMAP_THRESHOLD_ /
# MALLOC_TRIM_THRESHOLD_), part of its best setting on these machines.
# With TLALOC_BASELINE=/path/to/an/older/tlaloc, that binary's epochs run too, alternated with
# this build's arm for arm (base_1, base_2), and the ratio baseline best / this build's best is
# printed: >= 1 means this build is no slower.
# MODEL=cnn runs both sides with `--model cnn` (two conv blocks 32, 64 with batch norm) instead of
# the MLP, and prints each arm's peak memory (max RSS) beside its times.
# Usage: [MODEL=mlp|cnn] bench/run_fmnist_bench.sh [ROUNDS=2] [EPOCHS=2]   (needs build/)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
epochs=${2:-2}
model=${MODEL:-mlp}
tlaloc=build/tlaloc
[ -x "$tlaloc" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
base=${TLALOC_BASELINE:-}
[ -z "$base" ] || [ -x "$base" ] || { echo "TLALOC_BASELINE=$base is not an executable" >&2; exit 1; }
epoch_line='s/^epoch \([0-9]*\): .*test accuracy \([0-9.]*\)% *(\([0-9.]*\) s.*/\1 \3 \2/p'

for r in $(seq 1 "$rounds"); do
  for th in 1 2; do
    OMP_NUM_THREADS=$th /usr/bin/time -f "%M" -o "$out/rss" "$tlaloc" train fmnist --model "$model" \
      --epochs "$epochs" --threads "$th" --save "$out/ck.safetensors" | sed -n "$epoch_line" >>"$out/tlaloc_$th"
    cat "$out/rss" >>"$out/mem_tlaloc_$th"
    if [ -n "$base" ]; then
      OMP_NUM_THREADS=$th "$base" train fmnist --epochs "$epochs" --threads "$th" \
        --save "$out/base.safetensors" | sed -n "$epoch_line" >>"$out/base_$th"
    fi
    OMP_WAIT_POLICY=passive MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 \
      OMP_NUM_THREADS=$th /usr/bin/time -f "%M" -o "$out/rss" /usr/bin/python3 bench/fmnist_torch.py \
      --model "$model" --epochs "$epochs" --threads "$th" \
      | sed -n 's/^epoch \([0-9]*\) time \([0-9.]*\) test_accuracy \([0-9.]*\)/\1 \2 \3/p' \
      >>"$out/torch_$th"
    cat "$out/rss" >>"$out/mem_torch_$th"
  done
done

sgemm=$(build/bench/bench_sgemm --benchmark_format=csv 2>/dev/null | awk -F, '/BM_SgemmStepShapes/ {print $NF}' | tail -1)
/usr/bin/python3 - "$out" "$epochs" "${sgemm:-}" "$model" <<'PY'
import os, statistics, sys
out, epochs, sgemm, model = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
arms = {}
for name in sorted(os.listdir(out)):
    if not (name.startswith('tlaloc_') or name.startswith('torch_') or name.startswith('base_')):
        continue
    rows = [l.split() for l in open(os.path.join(out, name)) if l.strip()]
    times = [float(r[1]) for r in rows]
    acc = [float(r[2]) for r in rows]
    arms[name] = (times, acc)
    pct = [a * 100 if a <= 1 else a for a in acc]  # torch prints a fraction, tlaloc a percent
    print(f"{name:10s} epoch times (s): {' '.join(f'{t:.3f}' for t in times)}   test accuracy per epoch (%): {' '.join(f'{a:.2f}' for a in pct)}")
def med(t): return statistics.median(t)
print()
for name, (t, acc) in arms.items():
    accs = [a if a <= 1 else a / 100 for a in acc]
    mem = os.path.join(out, 'mem_' + name)
    peak = max(int(l) for l in open(mem)) / 1024 if os.path.exists(mem) else float('nan')
    print(f"{name:10s} median {med(t):.3f} s  min {min(t):.3f}  max {max(t):.3f}  last-epoch accuracy {accs[-1]*100:.2f}%  peak RSS {peak:.0f} MiB")
tl = min(med(arms[k][0]) for k in arms if k.startswith('tlaloc'))
tb = min(med(arms[k][0]) for k in arms if k.startswith('torch'))
print(f"\nratio: PyTorch best / tlaloc best = {tb / tl:.2f}x  (target >= 1.5x)")
if any(k.startswith('base') for k in arms):
    bb = min(med(arms[k][0]) for k in arms if k.startswith('base'))
    print(f"baseline best {bb:.3f} s per epoch, this build {tl:.3f} s: "
          f"ratio baseline / this build = {bb / tl:.3f}x  (>= 1: no slower)")
if model != 'mlp':
    sys.exit(0)
# Matrix FLOPs per epoch: forward 2·B·Σ in·out; backward dW for every layer + dX for all but
# the first: 2·B·Σ in·out + 2·B·Σ_{l>0} in·out.
B, n = 128, 60000
sizes = [784, 256, 10]
pairs = list(zip(sizes[:-1], sizes[1:]))
steps = (n + B - 1) // B
flops = steps * 2 * B * (2 * sum(i * o for i, o in pairs) + sum(i * o for i, o in pairs[1:]))
print(f"tlaloc: {flops / tl / 1e9:.1f} GFLOP/s of matrix work per epoch", end="")
print(f"; sgemm at the step's shapes here: {float(sgemm) / 1e9:.1f} GFLOP/s" if sgemm else "")
PY
