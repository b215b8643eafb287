#!/usr/bin/env bash
# Mixed precision on the host lane (issue "Mixed precision"): the train step with AdamW in the
# program in f32 and in bf16 (`tlaloc bench step --precision bf16`: matmuls with bf16 operands
# and f32 accumulation, f32 master weights), beside the same model in PyTorch under
# torch.autocast(bfloat16) (bench/llama_step_torch.py, bench/lm_step_torch.py --autocast bf16)
# at its best settings (bench_env.sh: OMP_WAIT_POLICY=passive, glibc keeping freed memory) at 1
# and 2 threads. Models: the benchmark LM (`--model lm`) and the Llama presets small and medium.
# Arms alternate (tlaloc f32, tlaloc bf16, torch bf16 1 thread, torch bf16 2 threads) for
# ROUNDS rounds; tlaloc runs on 2 threads. Per arm: median ms/step (median of the runs' medians)
# with min and max, and peak resident memory; per model: tlaloc f32 / tlaloc bf16 and PyTorch
# autocast's best / tlaloc bf16.
# Usage: bench/run_precision_bench.sh [ROUNDS=3] [MODELS="lm small medium"]
#   (steps per run: lm 200, small 12, medium 4; STEPS_SCALE=k multiplies them)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
models=${2:-lm small medium}
scale=${STEPS_SCALE:-1}
tlaloc=build/tlaloc
[ -x "$tlaloc" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. bench/bench_env.sh
declare -A steps=([lm]=200 [small]=12 [medium]=4)
declare -A warm=([lm]=20 [small]=10 [medium]=10)

for m in $models; do
  n=$((${steps[$m]} * scale))
  if [ "$m" = lm ]; then
    model=(--model lm)
    torch=(bench/lm_step_torch.py --device cpu)
  else
    model=(--model llama --preset "$m")
    torch=(bench/llama_step_torch.py --preset "$m")
  fi
  for r in $(seq 1 "$rounds"); do
    for p in f32 bf16; do
      echo "$m round $r: tlaloc $p" >&2
      OMP_NUM_THREADS=2 "$tlaloc" bench step "${model[@]}" --lane host --threads 2 \
        --precision "$p" --steps "$n" --warmup "${warm[$m]}" >"$out/log"
      grep '^RESULT' "$out/log" | tr '\n' ' ' >>"$out/${m}_tlaloc_$p"
      echo >>"$out/${m}_tlaloc_$p"
    done
    for th in 1 2; do
      echo "$m round $r: torch autocast bf16, $th thread(s)" >&2
      env "${torch_env[@]}" OMP_NUM_THREADS=$th /usr/bin/python3 "${torch[@]}" --autocast bf16 \
        --threads "$th" --steps "$n" --warmup 3 | grep '^RESULT' >>"$out/${m}_torch_$th"
    done
  done
done

/usr/bin/python3 - "$out" $models <<'PY'
import os, re, statistics, sys
out, models = sys.argv[1], sys.argv[2:]
for m in models:
    print(f"\n{m}: ms per step, median of the runs' medians [min, max]; peak RSS")
    arms = {}
    for arm in ("tlaloc_f32", "tlaloc_bf16", "torch_1", "torch_2"):
        med, rss = [], []
        for line in open(os.path.join(out, f"{m}_{arm}")):
            a = re.search(r"(?:lane_a_median_ms|median_ms)=([0-9.]+)", line)
            b = re.search(r"peak_rss_mib=([0-9.]+)", line)
            if a:
                med.append(float(a.group(1)))
                rss.append(float(b.group(1)))
        arms[arm] = statistics.median(med)
        label = {"tlaloc_f32": "tlaloc f32, 2 threads", "tlaloc_bf16": "tlaloc bf16, 2 threads",
                 "torch_1": "PyTorch autocast bf16, 1 thread",
                 "torch_2": "PyTorch autocast bf16, 2 threads"}[arm]
        print(f"  {label:34s} {arms[arm]:10.2f} [{min(med):.2f}, {max(med):.2f}] "
              f"{max(rss):8.1f} MiB")
    pt = min(arms["torch_1"], arms["torch_2"])
    print(f"{m}: tlaloc f32 / tlaloc bf16 = {arms['tlaloc_f32'] / arms['tlaloc_bf16']:.2f}x "
          f"(target >= 1.6x at small and medium); PyTorch autocast best / tlaloc bf16 = "
          f"{pt / arms['tlaloc_bf16']:.2f}x (target >= 1.5x)")
PY
