# Sourced by the CPU benchmark runners (run_llama_bench.sh, run_finetune_bench.sh): the settings
# both sides run with. PyTorch's best on these machines: OMP_WAIT_POLICY=passive, and glibc keeping
# freed tensor memory (torch_env, for the PyTorch arms).
export OMP_WAIT_POLICY=passive
# OpenBLAS (tlaloc's and Debian PyTorch's GEMMs) runs its AVX2 (Haswell) kernels on CPUs it does
# not know, such as this machine's AVX-512 Zen 5, and this machine's environment also sets
# OPENBLAS_CORETYPE=Haswell; its SkylakeX kernels run both sides' steps ~1.4x faster here, so
# the matrix uses them on AVX-512 CPUs (BENCH_CORETYPE=NAME picks another, "" keeps the
# environment's).
coretype=${BENCH_CORETYPE-auto}
if [ "$coretype" = auto ]; then
  coretype=${OPENBLAS_CORETYPE:-}
  grep -qw avx512bw /proc/cpuinfo && coretype=SkylakeX
fi
[ -z "$coretype" ] || export OPENBLAS_CORETYPE=$coretype
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} (both sides)" >&2
torch_env=(MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736)
