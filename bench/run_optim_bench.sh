#!/usr/bin/env bash
# The host AdamW update (bench_optim: the adam_update kernel) against torch.optim.AdamW(foreach=True), alternating
# the arms A B A B ... for ROUNDS rounds at 1 and 2 threads, then prints per size and thread
# count, each as median [min, max] over the rounds: the copy bandwidth measured alongside
# tlaloc's steps, tlaloc's GB/s at 28 B/element, its fraction of the copy bandwidth (median of
# step / adjacent copy pairs), torch's GB/s and the tlaloc/torch ratio of each round's pair.
# Usage: bench/run_optim_bench.sh [BUILD_DIR] (default build); ROUNDS=3 by default.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
rounds="${ROUNDS:-3}"
exe="$build/bench/bench_optim"
[[ -x "$exe" ]] || { echo "run_optim_bench: $exe not built (ninja -C $build bench_optim)" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export OMP_WAIT_POLICY=passive
for r in $(seq 1 "$rounds"); do
  for t in 1 2; do
    echo "round $r threads $t: tlaloc" >&2
    OMP_NUM_THREADS=$t "$exe" --benchmark_filter='BM_AdamWProgram/n:[0-9]+/check_finite:1' \
      --benchmark_format=json --benchmark_min_time=1 >"$out/A.$r.$t.json"
    echo "round $r threads $t: torch" >&2
    # PyTorch's best setting here: glibc keeps freed tensor memory.
    MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 OMP_NUM_THREADS=$t \
      /usr/bin/python3 "$here/bench_optim_torch.py" --threads "$t" >"$out/B.$r.$t.txt"
  done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
a, b, frac, copy = {}, {}, {}, {}
for r in range(1, rounds + 1):
    for t in (1, 2):
        for bm in json.load(open(f"{out}/A.{r}.{t}.json"))["benchmarks"]:
            n = int(re.search(r"n:(\d+)", bm["name"]).group(1))
            a.setdefault((n, t), []).append(bm["GBps"])
            frac.setdefault((n, t), []).append(bm["frac_of_copy"])
            copy.setdefault((n, t), []).append(bm["copy_GBps"])
        for line in open(f"{out}/B.{r}.{t}.txt"):
            f = dict(kv.split("=") for kv in line.split()[1:])
            b.setdefault((int(f["n"]), t), []).append(float(f["GBps"]))
def s(v):
    return f"{statistics.median(v):6.2f} [{min(v):.2f}, {max(v):.2f}]"
print(f"{'elements':>9} {'thr':>3} | {'copy GB/s':>21} | {'tlaloc GB/s':>21} | {'of copy':>21} "
      f"| {'torch foreach GB/s':>21} | tlaloc/torch")
for key in sorted(a):
    ratios = [x / y for x, y in zip(a[key], b[key])]
    print(f"{key[0]:>9} {key[1]:>3} | {s(copy[key]):>21} | {s(a[key]):>21} | {s(frac[key]):>21} "
          f"| {s(b[key]):>21} | {s(ratios)}")
PY
