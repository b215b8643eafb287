#!/usr/bin/env bash
# The pjrt lane on a GPU machine, in one run of under 8 minutes: the pjrt tests, `tlaloc bench
# step` (three lanes), `tlaloc train disc|fmnist --lane pjrt` (with the host/device cross-check),
# and the benchmark LM in JAX + Optax (jax.jit, donate_argnums) and PyTorch (fused AdamW) on the
# same GPU, and on two of the CPU's cores against PyTorch on the CPU; then step times and ratios
# in two modes (latency: every step waited for; throughput: runs of steps dispatched back to
# back, one wait each) and the kernels XLA made of tlaloc's and JAX's programs
# (bench/hlo_kernels.py on their optimized-HLO dumps). Runs the PREBUILT binaries in build/ (carried from the
# build machine after scripts/bundle-runtime-libs.sh: no compiler, no apt, no network needed
# here; carry build/tlaloc, build/tests/test_runtime_pjrt, build/tests/fake_pjrt and
# build/runtime-libs with the source tree).
#
# Needs: x86-64, an NVIDIA GPU with CUDA 13, Python 3.12 with jax, jax-cuda13-pjrt (tlaloc finds
# its plugin in site-packages, or set TLALOC_PJRT_PLUGIN), optax and torch.
# Usage: scripts/device-check.sh [REPORT.md]   (default: device-check-<UTC time>.md)
# Env:   PYTHON (python3), FMNIST_DIR (/usr/share/datasets/fashion-mnist), BUDGET_S (450),
#        HLO_DUMP_DIR (where XLA's dumps are kept; default: a temporary folder, removed)
# The report is Markdown, ready to paste into docs/benchmarks.md. Every stage has a timeout; a
# failing stage is reported and the script goes on; the exit code is 1 if any stage failed.
set -euo pipefail
cd "$(dirname "$0")/.."
report=${1:-device-check-$(date -u +%Y%m%dT%H%M%SZ).md}
py=${PYTHON:-python3}
fmnist=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
budget=${BUDGET_S:-450}
start=$(date +%s)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=()

say() { printf '%s\n' "$*" | tee -a "$report"; }
# stage NAME LIMIT_S CMD...: runs CMD with a timeout (LIMIT_S, cut to what the budget leaves),
# its output in a fenced block of the report and on the terminal; never stops the script.
stage() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - ($(date +%s) - start)))
  ((limit > left)) && limit=$left
  say ""
  say "### $name"
  say ""
  if ((limit < 5)); then
    say "skipped: the time budget (${budget} s) is used up"
    failed+=("$name (no time)")
    return 0
  fi
  say '```'
  say "\$ $* (timeout ${limit} s)"
  local rc=0
  timeout --kill-after=5 "$limit" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  tee -a "$report" <"$logs/$name.log"
  say '```'
  if ((rc == 124 || rc == 137)); then
    say "**$name: timed out after ${limit} s**"
    failed+=("$name (timeout)")
  elif ((rc != 0)); then
    say "**$name: failed with exit code $rc**"
    failed+=("$name (exit $rc)")
  fi
  return 0
}

: >"$report"
say "## device check $(date -u '+%Y-%m-%d %H:%M UTC')"
say ""
say "- machine: $(uname -m), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
gpu=$(timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1 || true)
say "- GPU: ${gpu:-nvidia-smi not found}"
say "- python: $(command -v "$py" || echo "$py not found") $("$py" --version 2>&1 || true)"
versions=$(timeout 60 "$py" - <<'PY' 2>&1 || true
import importlib
out = []
for m in ("jax", "jaxlib", "optax", "torch"):
    try:
        out.append(f"{m} {importlib.import_module(m).__version__}")
    except Exception as e:
        out.append(f"{m} missing ({type(e).__name__})")
print(", ".join(out))
PY
)
say "- packages: $versions"
# A tree carried without its .git names its commit in a COMMIT file.
if [ -f COMMIT ]; then commit=$(cat COMMIT); else commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown); fi
say "- commit: $commit"

# The binaries must exist and find their shared libraries (OpenBLAS, OpenMP, fmt, zlib come
# from the build machine's Debian packages; put copies in build/runtime-libs/ if absent here).
[ -d build/runtime-libs ] && export LD_LIBRARY_PATH="$PWD/build/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The pjrt tests find the fake plugins under the build folder, wherever it was carried to.
export TLALOC_TEST_BINARY_DIR="$PWD/build"
for bin in build/tlaloc build/tests/test_runtime_pjrt; do
  if [ ! -x "$bin" ]; then
    say "error: $bin is missing: build tlaloc on the build machine (scripts/build.sh) and carry build/"
    exit 2
  fi
  missing=$(ldd "$bin" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
  if [ -n "$missing" ]; then
    say "error: $bin cannot load: $missing(run scripts/bundle-runtime-libs.sh on the build machine)"
    exit 2
  fi
done
if ! err=$(build/tlaloc --version 2>&1); then
  say "error: build/tlaloc does not start here: $err"
  exit 2
fi
say "- lane: $(build/tlaloc train disc --lane auto --steps 1 --log-every 1 --points 8 2>&1 | grep '^lane:' || echo 'lane: ?')"

stage test_runtime_pjrt 90 build/tests/test_runtime_pjrt --gtest_brief=1
# The emitted StableHLO read by jaxlib's own MLIR parser and compiled by JAX's XLA client: says
# whether a refused program is the text's fault or the PJRT client's.
check_exports() {
  local r
  for r in disc fmnist lm; do build/tlaloc export "$r" -o "$logs/$r.mlir" || return 1; done
  "$py" bench/stablehlo_check_jax.py "$logs/disc.mlir" "$logs/fmnist.mlir" "$logs/lm.mlir"
}
export -f check_exports
export py logs
stage stablehlo_jax_check 60 bash -c check_exports
# XLA's optimized programs are dumped as text (one folder per run) for bench/hlo_kernels.py.
hlo=${HLO_DUMP_DIR:-$logs/hlo}
# A kept folder's older dumps would count.
rm -rf "$hlo/tlaloc" "$hlo/tlaloc_per_param" "$hlo/jax" "$hlo/jax_if_finite"
mkdir -p "$hlo"
dump() { echo "XLA_FLAGS=${XLA_FLAGS:+$XLA_FLAGS }--xla_dump_to=$hlo/$1 --xla_dump_hlo_as_text"; }
if build/tlaloc bench step --help >/dev/null 2>&1; then
  stage bench_step 100 env "$(dump tlaloc)" build/tlaloc bench step --model lm --mode both
else
  say ""
  say "### bench_step"
  say ""
  say "skipped: this build has no \`tlaloc bench step\`"
fi
stage train_disc_pjrt 45 build/tlaloc train disc --lane pjrt
stage train_disc_pjrt_highest 45 build/tlaloc train disc --lane pjrt --matmul-precision highest --deterministic --steps 100
if [ -f "$fmnist/train-images-idx3-ubyte.gz" ]; then
  stage train_fmnist_pjrt 120 build/tlaloc train fmnist --lane pjrt --epochs 1 --data "$fmnist" \
    --save "$logs/fmnist.safetensors"
else
  say ""
  say "### train_fmnist_pjrt"
  say ""
  say "skipped: no Fashion-MNIST in $fmnist (set FMNIST_DIR to the folder of the idx .gz files)"
fi
# The Python peers run with glibc keeping freed memory, part of PyTorch's best setting on these
# machines (the CPU arm below has it too); the JAX arms get the same, so no peer runs without it.
peer_env=(env MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736)
stage lm_jax_optax 75 "${peer_env[@]}" "$(dump jax)" "$py" bench/lm_step_jax.py --steps 200 \
  --mode both
# The two programs' GEMMs and transposes before XLA (tests/recipes/stablehlo_steps_test.cpp
# bounds tlaloc's by JAX's counts derived from its rules; these are JAX's own).
stage lm_ops_jax 60 "${peer_env[@]}" "$py" bench/lm_step_jax.py --count-ops
stage lm_ops_tlaloc 30 bash -c "build/tlaloc export lm | grep -oE '\"stablehlo\.(dot_general|transpose)\"' | sort | uniq -c"
stage lm_jax_optax_if_finite 75 "${peer_env[@]}" "$(dump jax_if_finite)" "$py" \
  bench/lm_step_jax.py --steps 200 --mode both --apply-if-finite
# The kernels XLA made of each program (the largest module of each dump: the train step).
for d in tlaloc jax jax_if_finite; do
  stage "hlo_kernels_$d" 30 "$py" bench/hlo_kernels.py "$hlo/$d"
done
stage lm_torch_fused_adamw 75 "${peer_env[@]}" "$py" bench/lm_step_torch.py --device cuda \
  --steps 200
# The same tlaloc step with per-parameter optimizer state (the pjrt lane's default is flat):
# its times and kernels beside the flat layout's, to judge the layout on a GPU (after the
# peers, so a short budget cuts this first).
stage bench_step_per_param 80 env "$(dump tlaloc_per_param)" build/tlaloc bench step \
  --model lm --mode both --steps 100 --repeats 3 --flat-state off
stage hlo_kernels_tlaloc_per_param 30 "$py" bench/hlo_kernels.py "$hlo/tlaloc_per_param"

# Issue 7's host-lane target measured on this machine's CPU too, pinned to two CPUs on distinct
# cores (a 2-core host): tlaloc's host lane and PyTorch on the CPU, 1 and 2 threads, passive
# waiting, glibc keeping freed tensor memory (PyTorch's best setting), alternated, two rounds.
# Python runs without build/runtime-libs on its library path (Debian's CPU torch hung in its
# OpenMP pool with the carried libgomp).
cpus=$(lscpu -p=CPU,CORE,SOCKET 2>/dev/null | grep -v '^#' |
  awk -F, '$3 == 0 && !seen[$2]++ {print $1}' | head -2 | paste -sd, - || true)
if [[ "$cpus" == *,* ]] && command -v taskset >/dev/null; then
  for r in 1 2; do
    for th in 1 2; do
      stage "host_lm_${th}t_r$r" 40 env OMP_WAIT_POLICY=passive taskset -c "$cpus" \
        build/tlaloc bench step --model lm --lane host --threads "$th" --steps 300
      stage "torch_cpu_lm_${th}t_r$r" 60 env -u LD_LIBRARY_PATH OMP_WAIT_POLICY=passive \
        "${peer_env[@]}" OMP_NUM_THREADS="$th" taskset -c "$cpus" "$py" bench/lm_step_torch.py --device cpu \
        --threads "$th" --steps 300
    done
  done
fi

say ""
say "### summary (step time, median ms)"
say ""
title=$(grep -m1 -E '^[a-zA-Z].*step \(' "$logs/bench_step.log" 2>/dev/null || true)
say "tlaloc rows: ${title:-no tlaloc bench step output}"
say ""
ratio() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v x="$1" -v y="$2" 'BEGIN {printf "%.2f", x / y}'; else echo "n/a"; fi; }
# Both modes' table and ratios from the RESULT lines of the logs (a missing line: n/a).
summary=$("$py" - "$logs" <<'PY' 2>&1 || echo "summary failed"
import os, sys

logs = sys.argv[1]


def fields(stage):
    """key=value pairs of a stage's RESULT lines (the first of each key)."""
    out = {}
    try:
        with open(os.path.join(logs, stage + ".log"), errors="replace") as f:
            for line in f:
                if line.startswith("RESULT"):
                    for tok in line.split():
                        k, eq, v = tok.partition("=")
                        if eq:
                            out.setdefault(k, v)
    except OSError:
        pass
    return out


def num(d, k):
    try:
        return float(d[k])
    except (KeyError, ValueError):
        return None


def cell(d, p):
    m = num(d, p + "median_ms")
    if m is None:
        return "n/a"
    lo, hi = num(d, p + "min_ms"), num(d, p + "max_ms")
    return f"{m:.4f}" + (f" ({lo:.4f}-{hi:.4f})" if lo is not None and hi is not None else "")


def ratio(x, y):
    return f"{x / y:.2f}" if x is not None and y else "n/a"


t, j, jf, pt, pp = (fields(s) for s in ("bench_step", "lm_jax_optax", "lm_jax_optax_if_finite",
                                       "lm_torch_fused_adamw", "bench_step_per_param"))
sync = "= latency (synchronous)"
print("| run | latency: median ms (min-max) | throughput: median ms per step (min-max) |")
print("| --- | --- | --- |")
print(f"| tlaloc (a) host lane | {cell(t, 'lane_a_')} | {sync} |")
print(f"| tlaloc (b) pjrt, grads downloaded + host AdamW | {cell(t, 'lane_b_')} | {sync} |")
print(f"| tlaloc (c) pjrt, AdamW in the program | {cell(t, 'lane_c_latency_')} | "
      f"{cell(t, 'lane_c_throughput_')} |")
print(f"| tlaloc (c), optimizer state per parameter (--flat-state off) | "
      f"{cell(pp, 'lane_c_latency_')} | {cell(pp, 'lane_c_throughput_')} |")
print(f"| JAX + Optax (jit, donated) | {cell(j, 'latency_')} | {cell(j, 'throughput_')} |")
print(f"| JAX + Optax, apply_if_finite (as tlaloc's found-inf) | {cell(jf, 'latency_')} | "
      f"{cell(jf, 'throughput_')} |")
print(f"| PyTorch, fused AdamW | {cell(pt, '')} | n/a |")
print()
runs = (f"throughput: {t.get('lane_c_throughput_repeats', '?')} runs of "
        f"{t.get('lane_c_throughput_steps', '?')} steps (tlaloc), "
        f"{j.get('throughput_repeats', '?')} of {j.get('throughput_steps', '?')} (JAX)")
print(f"- {runs}")
c_lat, c_thr = num(t, "lane_c_latency_median_ms"), num(t, "lane_c_throughput_median_ms")
print(f"- (b) / (c), latency: {ratio(num(t, 'lane_b_median_ms'), c_lat)}  (goal >= 5)")
for name, d in (("JAX", j), ("JAX apply_if_finite", jf)):
    print(f"- (c) / {name}: latency {ratio(c_lat, num(d, 'latency_median_ms'))}, throughput "
          f"{ratio(c_thr, num(d, 'throughput_median_ms'))}  (<= 1: tlaloc no slower)")
print(f"- PyTorch / (c), latency: {ratio(num(pt, 'median_ms'), c_lat)}")
print(f"- (c) flat / (c) per parameter: latency "
      f"{ratio(c_lat, num(pp, 'lane_c_latency_median_ms'))}, throughput "
      f"{ratio(c_thr, num(pp, 'lane_c_throughput_median_ms'))}  (< 1: flat state faster)")
PY
)
say "$summary"
[[ "$title" == *LM* ]] || say "- the JAX and PyTorch ratios are n/a: tlaloc bench step did not time the benchmark LM"
if [[ "$cpus" == *,* ]]; then
  # best_of PREFIX KEY: the smallest KEY over the stages named PREFIX*.
  best_of() {
    grep -h '^RESULT' "$logs"/$1*.log 2>/dev/null | grep -o "$2=[^ ]*" | cut -d= -f2 |
      sort -g | head -1 || true
  }
  hl=$(best_of host_lm_ lane_a_median_ms)
  tc=$(best_of torch_cpu_lm_ median_ms)
  say "- host lane on CPUs $cpus (2 cores): tlaloc best ${hl:-n/a} ms, PyTorch CPU best ${tc:-n/a} ms, ratio $(ratio "$tc" "$hl")  (issue 7: >= 2, tlaloc <= 2.5 ms)"
fi
say "- wall time: $(($(date +%s) - start)) s"
if ((${#failed[@]})); then
  say "- FAILED: ${failed[*]}"
  echo "report: $report" >&2
  exit 1
fi
say "- all stages passed"
echo "report: $report" >&2
