#!/usr/bin/env bash
# The benchmark LM's train step (issue 7: 2 layers, d_model 128, 4 heads, MLP 512 GELU, ctx 16,
# batch 4x16, AdamW in the program): `tlaloc bench step --model lm --lane host` against the same
# model in PyTorch (bench/lm_step_torch.py, Debian's python3-torch) on this machine, in one run.
# Arms alternate (A B A B ...) for ROUNDS rounds at 1 and 2 threads with OMP_WAIT_POLICY=passive
# (PyTorch's best setting on a busy machine), plus both with OpenMP's defaults (spin-waiting, all
# cores), which can be best on a quiet machine; the ratio takes each side's best arm. Prints each run's median step time, the
# median and spread per arm, tlaloc's best median against PyTorch's best median as a ratio, and
# each process's peak resident memory, and the 2.5 ms target scaled by PyTorch's speed here.
# PyTorch also runs with glibc keeping freed tensor memory (MALLOC_MMAP_THRESHOLD_ /
# MALLOC_TRIM_THRESHOLD_), part of its best setting on these machines.
# With TLALOC_BASELINE=/path/to/an/older/tlaloc, that binary runs too, alternated with this
# build's arm for arm (base_1, base_2), and the ratio baseline best / this build's best is
# printed: >= 1 means this build is no slower (e.g. a worktree of an earlier commit built with
# scripts/build.sh tlaloc_cli).
# Usage: bench/run_lm_bench.sh [ROUNDS=3] [STEPS=300]   (needs build/ from scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-300}
tlaloc=build/tlaloc
[ -x "$tlaloc" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_WAIT_POLICY=passive
torch_env=(MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736)
base=${TLALOC_BASELINE:-}
[ -z "$base" ] || [ -x "$base" ] || { echo "TLALOC_BASELINE=$base is not an executable" >&2; exit 1; }

for r in $(seq 1 "$rounds"); do
  for th in 1 2; do
    echo "round $r threads $th: tlaloc, torch" >&2
    OMP_NUM_THREADS=$th "$tlaloc" bench step --model lm --lane host --threads "$th" --steps "$steps" \
      | grep '^RESULT' | tr '\n' ' ' >>"$out/tlaloc_$th"
    echo >>"$out/tlaloc_$th"
    if [ -n "$base" ]; then
      OMP_NUM_THREADS=$th "$base" bench step --model lm --lane host --threads "$th" \
        --steps "$steps" | grep '^RESULT' | tr '\n' ' ' >>"$out/base_$th"
      echo >>"$out/base_$th"
    fi
    env "${torch_env[@]}" OMP_NUM_THREADS=$th /usr/bin/python3 bench/lm_step_torch.py --device cpu \
      --threads "$th" --steps "$steps" | grep '^RESULT' >>"$out/torch_$th"
  done
  env -u OMP_WAIT_POLICY "$tlaloc" bench step --model lm --lane host --steps "$steps" \
    | grep '^RESULT' | tr '\n' ' ' >>"$out/tlaloc_defaults"
  echo >>"$out/tlaloc_defaults"
  # PyTorch with its own defaults too (spin-waiting OpenMP, every core): its best on a quiet
  # machine may be this one.
  env -u OMP_WAIT_POLICY "${torch_env[@]}" /usr/bin/python3 bench/lm_step_torch.py --device cpu \
    --steps "$steps" | grep '^RESULT' >>"$out/torch_defaults"
done

/usr/bin/python3 - "$out" <<'PY'
import os, re, statistics, sys
out = sys.argv[1]
arms = {}
for name in sorted(os.listdir(out)):
    med, rss = [], []
    for line in open(os.path.join(out, name)):
        m = re.search(r"(?:lane_a_median_ms|median_ms)=([0-9.]+)", line)
        k = re.search(r"peak_rss_mib=([0-9.]+)", line)
        if m:
            med.append(float(m.group(1)))
            rss.append(float(k.group(1)) if k else float("nan"))
    arms[name] = (med, rss)
print(f"{'arm':16s} {'per-run median step ms':34s} {'median':>8s} {'min':>8s} {'max':>8s} {'peak RSS MiB':>13s}")
for name, (t, rss) in arms.items():
    runs = " ".join(f"{x:.3f}" for x in t)
    print(f"{name:16s} {runs:34s} {statistics.median(t):8.3f} {min(t):8.3f} {max(t):8.3f} {max(rss):13.1f}")
best = lambda p: min((statistics.median(t), k) for k, (t, _) in arms.items() if k.startswith(p))
tl, tk = best("tlaloc")
pb, pk = best("torch")
print(f"\ntlaloc best: {tl:.3f} ms ({tk}); PyTorch best: {pb:.3f} ms ({pk})")
print(f"ratio PyTorch best / tlaloc best = {pb / tl:.2f}x  (targets: >= 2x, tlaloc <= 2.5 ms)")
if any(k.startswith("base") for k in arms):
    bb, bk = best("base")
    tb = min((statistics.median(arms[k][0]), k) for k in ("tlaloc_1", "tlaloc_2"))
    print(f"baseline best: {bb:.3f} ms ({bk}); this build, same arms: {tb[0]:.3f} ms ({tb[1]})")
    print(f"ratio baseline best / this build best = {bb / tb[0]:.3f}x  (>= 1: no slower)")
# Issue 7 sets 2.5 ms on a host where PyTorch's best took about 5 ms: the same speed relative
# to PyTorch, on this machine as fast as it is during this run, is 2.5 ms x (PyTorch best / 5).
print(f"machine speed: PyTorch best {pb:.3f} ms here against about 5 ms on issue 7's host; "
      f"2.5 ms there is {2.5 * pb / 5:.2f} ms here (tlaloc: {tl:.3f} ms)")
PY
