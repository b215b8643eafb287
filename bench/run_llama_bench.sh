#!/usr/bin/env bash
# The LlamaDecoder benchmark matrix (issue 19): the Llama train step with AdamW in the program at
# the presets tiny (2 layers x 128, ctx 64, batch 8), small (4 x 256, ctx 256, batch 8) and medium
# (8 x 512, ctx 512, batch 4) (tlaloc/recipes/llama_presets.h): `tlaloc bench step --model llama
# --lane host` at 1 and 2 threads beside the same model in PyTorch (bench/llama_step_torch.py,
# Debian's python3-torch) at its best settings (OMP_WAIT_POLICY=passive, glibc keeping freed
# memory: MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_) at 1 and 2 threads. Arms alternate
# (tlaloc 1, torch 1, tlaloc 2, torch 2, ...) for ROUNDS rounds. Per arm: median ms/step (the
# median of the runs' medians) with min and max, tokens/s, achieved GFLOP/s (PaLM's model-FLOP
# count, llama_bench.h), peak resident memory; per size: tlaloc's best arm against PyTorch's
# best arm, tlaloc's 2-thread speed-up, and the memory ratio.
# Usage: bench/run_llama_bench.sh [ROUNDS=3] [PRESETS="tiny small medium"]
#   (steps per run: tiny 60, small 12, medium 4; STEPS_SCALE=k multiplies them)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
presets=${2:-tiny small medium}
scale=${STEPS_SCALE:-1}
tlaloc=build/tlaloc
[ -x "$tlaloc" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. bench/bench_env.sh
declare -A steps=([tiny]=60 [small]=12 [medium]=4)
declare -A warm=([tiny]=10 [small]=10 [medium]=10)

for p in $presets; do
  n=$((${steps[$p]} * scale))
  for r in $(seq 1 "$rounds"); do
    for th in 1 2; do
      echo "$p round $r threads $th: tlaloc, torch" >&2
      OMP_NUM_THREADS=$th "$tlaloc" bench step --model llama --preset "$p" --lane host \
        --threads "$th" --steps "$n" --warmup "${warm[$p]}" >"$out/log"
      grep -m1 '^LlamaDecoder' "$out/log" >"$out/title_$p"
      grep '^RESULT' "$out/log" | tr '\n' ' ' >>"$out/${p}_tlaloc_$th"
      echo >>"$out/${p}_tlaloc_$th"
      env "${torch_env[@]}" OMP_NUM_THREADS=$th /usr/bin/python3 bench/llama_step_torch.py \
        --preset "$p" --threads "$th" --steps "$n" --warmup 3 | grep '^RESULT' >>"$out/${p}_torch_$th"
    done
  done
done

/usr/bin/python3 - "$out" $presets <<'PY'
import os, re, statistics, sys
out, presets = sys.argv[1], sys.argv[2:]
for p in presets:
    title = open(os.path.join(out, f"title_{p}")).read().strip()
    m = re.search(r"ctx (\d+), batch (\d+).*?(\d+) parameters, ([0-9.]+) GFLOP", title)
    ctx, batch, params, gflop = int(m.group(1)), int(m.group(2)), int(m.group(3)), float(m.group(4))
    print(f"\n{title}")
    print(f"{'arm':10s} {'median ms':>10s} {'min':>9s} {'max':>9s} {'tokens/s':>9s} "
          f"{'GFLOP/s':>8s} {'peak RSS MiB':>13s}")
    arms = {}
    for side in ("tlaloc", "torch"):
        for th in (1, 2):
            med, rss, tparams = [], [], None
            for line in open(os.path.join(out, f"{p}_{side}_{th}")):
                a = re.search(r"(?:lane_a_median_ms|median_ms)=([0-9.]+)", line)
                b = re.search(r"peak_rss_mib=([0-9.]+)", line)
                c = re.search(r"params=(\d+)", line)
                if c:
                    tparams = int(c.group(1))
                if a:
                    med.append(float(a.group(1)))
                    rss.append(float(b.group(1)))
            if tparams is not None and tparams != params:
                sys.exit(f"{p}: PyTorch's model has {tparams} parameters, tlaloc's {params}")
            t = statistics.median(med)
            arms[(side, th)] = (t, max(rss))
            print(f"{side}_{th:<4d} {t:10.1f} {min(med):9.1f} {max(med):9.1f} "
                  f"{batch * ctx / t * 1e3:9.0f} {gflop / t * 1e3:8.2f} {max(rss):13.1f}")
    tl = min((arms[("tlaloc", th)][0], th) for th in (1, 2))
    pt = min((arms[("torch", th)][0], th) for th in (1, 2))
    print(f"{p}: tlaloc best {tl[0]:.1f} ms ({tl[1]} thread(s)), PyTorch best {pt[0]:.1f} ms "
          f"({pt[1]} thread(s)): PyTorch best / tlaloc best = {pt[0] / tl[0]:.2f}x (target >= 1.5x)")
    print(f"{p}: tlaloc 2 threads vs 1: {arms[('tlaloc', 1)][0] / arms[('tlaloc', 2)][0]:.2f}x "
          f"(target >= 1.6x at small and medium); PyTorch: "
          f"{arms[('torch', 1)][0] / arms[('torch', 2)][0]:.2f}x")
    print(f"{p}: peak memory, tlaloc best arm / PyTorch best arm = "
          f"{arms[('tlaloc', tl[1])][1]:.0f} / {arms[('torch', pt[1])][1]:.0f} MiB "
          f"= {arms[('tlaloc', tl[1])][1] / arms[('torch', pt[1])][1]:.2f} (target <= 1)")
PY
