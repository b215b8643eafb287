// The host lane: compiles an ir::Function once into a runtime::Executable that runs on the CPU.
//
// compile() verifies the function, folds transposes into dot_general operands (CBLAS transpose
// flags), then plans once: every node gets its kernel (a function pointer chosen here, never a
// per-run lookup); elementwise nodes (with broadcast_in_dim / transpose / slice / reshape
// feeding them read through index maps, and full reductions of their results) are fused into
// register programs that run block by block, one pass over the data, with any number of
// outputs; intermediate buffers share one pre-allocated arena by liveness. A run allocates
// only its outputs. dot_general goes through OpenBLAS sgemm / dgemm (bf16 / f16: f32 GEMM,
// rounded back).
//
// Determinism: work is split over OpenMP threads in pieces fixed by the shapes (blocks,
// reduction chunks, GEMM tiles; OpenBLAS runs each tile single-threaded), so the same inputs
// give bitwise the same outputs on every run and for every num_threads, fused or not.
//
// Semantics are StableHLO's (https://openxla.org/stablehlo/spec). Where it leaves a result
// implementation-defined, tlaloc follows XLA's CPU backend: integer x / 0 = -1 (s32) or
// 0xffffffff (u32), INT_MIN / -1 = INT_MIN, integer x % 0 = x, INT_MIN % -1 = 0; shifts by
// >= 32 give 0; float -> integer convert truncates toward zero, saturates, NaN -> 0; integer
// arithmetic wraps. bf16 / f16 compute in f32 and round to nearest even after every op (so
// fused and unfused results agree). Reductions accumulate in the compute type in a fixed order
// (16 interleaved lanes per 8192-element chunk, chunks combined in order).
//
// Executables are not thread-safe: run one call at a time per executable.
// Threads are OpenMP's. On a machine shared with other busy processes, set
// OMP_WAIT_POLICY=passive: spinning workers otherwise make multi-threaded steps many times
// slower (single-threaded runs are unaffected).
// TLALOC_HOST_PROFILE=1 in the environment makes each executable print, when destroyed, its time
// per run by step kind (fused, dot_general, ...) and its 25 slowest steps to stderr;
// TLALOC_HOST_PROFILE=cpu times the calling thread's CPU time instead of wall time.
#pragma once

#include <memory>

#include "tlaloc/runtime/executable.h"

namespace tlaloc::runtime::host {

struct Options {
  // 0: OpenMP's default (OMP_NUM_THREADS or the core count) as it was at the process's first
  // compile, which sets the calling thread's OpenMP thread count to 1 (OpenBLAS's OpenMP build
  // runs single-threaded that way; tlaloc splits GEMMs over its own threads).
  int num_threads = 0;
  bool fuse = true;  // fuse elementwise chains (off: one kernel per op, for tests)
};

// Verifies `f` and compiles it. Throws tlaloc::Error if f fails verification or an input is
// donated to two outputs. Every run throws tlaloc::Error naming the input (index and name) on
// a wrong input count, an empty (already donated) input, or a dtype or shape that differs;
// a donating run also when two donated inputs share storage. The host lane's buffers are the
// Arrays themselves: upload() and a donating run(buffers) move them, never copy. A donated
// output is updated in place when every read of its input happens before (or element-wise
// within) the loop writing it; otherwise it is computed aside and copied into the donated
// storage, which it then owns either way.
std::unique_ptr<Executable> compile(const ir::Function& f, Options options = {});

// Number of executables compiled by this process (for "one compiled executable" checks).
int64_t compile_count();

// The threads a host executable runs on (Options::num_threads resolved). Throws tlaloc::Error
// if `e` is not a host-lane executable.
int num_threads_of(const Executable& e);

}  // namespace tlaloc::runtime::host
