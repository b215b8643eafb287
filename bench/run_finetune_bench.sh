#!/usr/bin/env bash
# The fine-tuning benchmark: at the Llama presets small and medium (recipes/llama_presets.h),
# tlaloc's full fine-tuning step (`tlaloc bench step --model llama --preset P`, every weight
# trained, AdamW in the step) and its LoRA step (`--lora`: r 8, alpha 16 on q_proj and v_proj,
# the base frozen) beside the same LoRA in PyTorch (bench/llama_step_torch.py --lora, PEFT's
# lora.Linear equations) at its best settings (bench/bench_env.sh: OMP_WAIT_POLICY=passive, and
# MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ in torch_env), tlaloc at 2 threads and both
# LoRA arms at 1 and 2; arms alternated within each round. Per arm: the median of the rounds'
# medians, [min, max] of them, peak resident memory. Reports LoRA / full (target <= 0.6, with less
# memory) and PyTorch's best LoRA arm / tlaloc's best (target >= 1.5).
#   bench/run_finetune_bench.sh [ROUNDS] [PRESETS]   (default 1 round, "small medium")
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-1}
presets=${2:-small medium}
tlaloc=build/tlaloc
[ -x "$tlaloc" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. bench/bench_env.sh
declare -A steps=([tiny]=60 [small]=12 [medium]=4)

for p in $presets; do
  n=${steps[$p]}
  for r in $(seq 1 "$rounds"); do
    for arm in tlaloc_full_2 tlaloc_lora_1 torch_lora_1 tlaloc_lora_2 torch_lora_2; do
      echo "$p round $r: $arm" >&2
      IFS=_ read -r side kind th <<<"$arm"
      lora=()
      [ "$kind" = lora ] && lora=(--lora)
      if [ "$side" = tlaloc ]; then
        OMP_NUM_THREADS=$th "$tlaloc" bench step --model llama --preset "$p" --lane host \
          --threads "$th" --steps "$n" --warmup 10 "${lora[@]}" >"$out/log"
        [ "$kind" = lora ] && grep -m1 '^LlamaDecoder' "$out/log" >"$out/title_$p"
        grep '^RESULT' "$out/log" | tr '\n' ' ' >>"$out/${p}_$arm"
        echo >>"$out/${p}_$arm"
      else
        env "${torch_env[@]}" OMP_NUM_THREADS=$th /usr/bin/python3 bench/llama_step_torch.py \
          --preset "$p" --threads "$th" --steps "$n" --warmup 3 "${lora[@]}" |
          grep '^RESULT' >>"$out/${p}_$arm"
      fi
    done
  done
done

/usr/bin/python3 - "$out" $presets <<'PY'
import os, re, statistics, sys
out, presets = sys.argv[1], sys.argv[2:]
arms = ["tlaloc_full_2", "tlaloc_lora_1", "tlaloc_lora_2", "torch_lora_1", "torch_lora_2"]
for p in presets:
    title = open(os.path.join(out, f"title_{p}")).read().strip()
    trained = int(re.search(r": (\d+) trained", title).group(1))
    print(f"\n{title}")
    print(f"{'arm':14s} {'median ms':>10s} {'min':>9s} {'max':>9s} {'peak RSS MiB':>13s}")
    r = {}
    for arm in arms:
        med, rss = [], []
        for line in open(os.path.join(out, f"{p}_{arm}")):
            a = re.search(r"(?:lane_a_median_ms|median_ms)=([0-9.]+)", line)
            b = re.search(r"peak_rss_mib=([0-9.]+)", line)
            c = re.search(r"trained=(\d+)", line)
            if c and int(c.group(1)) != trained:
                sys.exit(f"{p}: PyTorch trains {c.group(1)} parameters, tlaloc {trained}")
            med.append(float(a.group(1)))
            rss.append(float(b.group(1)))
        r[arm] = (statistics.median(med), max(rss))
        print(f"{arm:14s} {r[arm][0]:10.1f} {min(med):9.1f} {max(med):9.1f} {max(rss):13.1f}")
    tl = min((r[f"tlaloc_lora_{t}"][0], t) for t in (1, 2))
    pt = min((r[f"torch_lora_{t}"][0], t) for t in (1, 2))
    full = r["tlaloc_full_2"]
    lora = r[f"tlaloc_lora_{tl[1]}"]
    print(f"{p}: tlaloc LoRA step / full step = {lora[0]:.1f} / {full[0]:.1f} ms = "
          f"{lora[0] / full[0]:.2f} (target <= 0.6); peak memory {lora[1]:.0f} / {full[1]:.0f} MiB")
    print(f"{p}: LoRA, PyTorch best {pt[0]:.1f} ms ({pt[1]} thread(s)) / tlaloc best {tl[0]:.1f} ms "
          f"({tl[1]} thread(s)) = {pt[0] / tl[0]:.2f}x (target >= 1.5x)")
PY
