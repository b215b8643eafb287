#!/usr/bin/env bash
# The host convolution kernel (bench_conv) against PyTorch's F.conv2d / convolution_backward
# (bench/conv_torch.py, oneDNN) at the Fashion-MNIST CNN's sizes, alternating the arms A B A B
# ... for ROUNDS rounds at 1 and 2 threads; prints per case, pass and thread count the median
# GFLOP/s of each side over the rounds and tlaloc / torch.
# Usage: bench/run_conv_bench.sh [BUILD_DIR] (default build); ROUNDS=3, RUNS=20 by default.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
rounds="${ROUNDS:-3}"
runs="${RUNS:-20}"
exe="$build/bench/bench_conv"
[[ -x "$exe" ]] || { echo "run_conv_bench: $exe not built (ninja -C $build bench_conv)" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
source "$here/bench_env.sh"
for r in $(seq 1 "$rounds"); do
  for t in 1 2; do
    echo "round $r threads $t: tlaloc" >&2
    OMP_NUM_THREADS=$t "$exe" "$t" "$runs" >>"$out/A.txt"
    echo "round $r threads $t: torch" >&2
    env "${torch_env[@]}" OMP_NUM_THREADS=$t /usr/bin/python3 "$here/conv_torch.py" "$t" "$runs" >>"$out/B.txt"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import statistics, sys
out = sys.argv[1]
def read(path):
    d = {}
    for line in open(path):
        if not line.startswith("RESULT"):
            continue
        f = dict(kv.split("=") for kv in line.split()[1:])
        d.setdefault((f["case"], f["pass"], int(f["threads"])), []).append(float(f["gflops"]))
    return d
a, b = read(f"{out}/A.txt"), read(f"{out}/B.txt")
print(f"{'case':22} {'pass':12} thr  tlaloc GFLOP/s  torch GFLOP/s  ratio")
for k in sorted(a):
    ma, mb = statistics.median(a[k]), statistics.median(b.get(k, [float('nan')]))
    print(f"{k[0]:22} {k[1]:12} {k[2]:3}  {ma:14.1f}  {mb:13.1f}  {ma / mb:5.2f}")
PY
