#!/usr/bin/env bash
# The pjrt lane on a GPU machine, in one run of under 8 minutes: the pjrt tests, `tlaloc bench
# step` (three lanes), `tlaloc train disc|fmnist --lane pjrt` (with the host/device cross-check),
# and the benchmark LM in JAX + Optax (jax.jit, donate_argnums) and PyTorch (fused AdamW) on the
# same GPU, and on two of the CPU's cores against PyTorch on the CPU; then step times and ratios. Runs the PREBUILT binaries in build/ (carried from the
# build machine after scripts/bundle-runtime-libs.sh: no compiler, no apt, no network needed
# here; carry build/tlaloc, build/tests/test_runtime_pjrt, build/tests/fake_pjrt and
# build/runtime-libs with the source tree).
#
# Needs: x86-64, an NVIDIA GPU with CUDA 13, Python 3.12 with jax, jax-cuda13-pjrt (tlaloc finds
# its plugin in site-packages, or set TLALOC_PJRT_PLUGIN), optax and torch.
# Usage: scripts/device-check.sh [REPORT.md]   (default: device-check-<UTC time>.md)
# Env:   PYTHON (python3), FMNIST_DIR (/usr/share/datasets/fashion-mnist), BUDGET_S (450)
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
# field NAME KEY: the value of KEY=... on the RESULT line of stage NAME's log (empty if none).
field() {
  [ -f "$logs/$1.log" ] || return 0
  grep -h '^RESULT' "$logs/$1.log" | grep -o "$2=[^ ]*" | head -1 | cut -d= -f2 || true
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
if build/tlaloc bench step --help >/dev/null 2>&1; then
  stage bench_step 100 build/tlaloc bench step --model lm
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
stage lm_jax_optax 75 "${peer_env[@]}" "$py" bench/lm_step_jax.py --steps 200
# The two programs' GEMMs and transposes before XLA (tests/recipes/stablehlo_steps_test.cpp
# bounds tlaloc's by JAX's counts derived from its rules; these are JAX's own).
stage lm_ops_jax 60 "$py" bench/lm_step_jax.py --count-ops
stage lm_ops_tlaloc 30 bash -c "build/tlaloc export lm | grep -oE '\"stablehlo\.(dot_general|transpose)\"' | sort | uniq -c"
stage lm_jax_optax_if_finite 75 "${peer_env[@]}" "$py" bench/lm_step_jax.py --steps 200 \
  --apply-if-finite
stage lm_torch_fused_adamw 75 "${peer_env[@]}" "$py" bench/lm_step_torch.py --device cuda \
  --steps 200

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
c=$(field bench_step lane_c_median_ms)
b=$(field bench_step lane_b_median_ms)
a=$(field bench_step lane_a_median_ms)
j=$(field lm_jax_optax median_ms)
jf=$(field lm_jax_optax_if_finite median_ms)
t=$(field lm_torch_fused_adamw median_ms)
ratio() { if [ -n "$1" ] && [ -n "$2" ]; then awk -v x="$1" -v y="$2" 'BEGIN {printf "%.2f", x / y}'; else echo "n/a"; fi; }
say "| run | median ms |"
say "| --- | --- |"
say "| tlaloc (a) host lane | ${a:-n/a} |"
say "| tlaloc (b) pjrt, grads downloaded + host AdamW | ${b:-n/a} |"
say "| tlaloc (c) pjrt, AdamW in the program | ${c:-n/a} |"
say "| JAX + Optax (jit, donated) | ${j:-n/a} |"
say "| JAX + Optax, apply_if_finite (skips non-finite updates, as tlaloc's found-inf) | ${jf:-n/a} |"
say "| PyTorch, fused AdamW | ${t:-n/a} |"
say ""
say "- (b) / (c): $(ratio "$b" "$c")  (goal >= 5)"
if [[ "$title" == *LM* ]]; then
  say "- JAX / (c): $(ratio "$j" "$c")  (goal >= 1: tlaloc no slower)"
  say "- JAX apply_if_finite / (c): $(ratio "$jf" "$c")  (the same skip-on-non-finite contract)"
  say "- PyTorch / (c): $(ratio "$t" "$c")"
else
  say "- JAX / (c), PyTorch / (c): n/a (tlaloc bench step timed another model than the benchmark LM)"
fi
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
