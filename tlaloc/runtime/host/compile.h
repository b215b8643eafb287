// The host lane: compiles an ir::Function once into a runtime::Executable that runs on the CPU.
// Buffers are planned by liveness, kernels chosen once, dot_general goes through OpenBLAS,
// elementwise chains are fused into one loop, and work is split over OpenMP threads with
// partitions that do not depend on scheduling, so outputs are bitwise reproducible run to run.
#pragma once

#include <memory>

#include "tlaloc/runtime/executable.h"

namespace tlaloc::runtime::host {

struct Options {
  int num_threads = 0;  // 0: OpenMP's default (OMP_NUM_THREADS or the core count)
  bool fuse = true;     // fuse elementwise chains (off: one kernel per op, for tests)
};

// Verifies `f` and compiles it. Throws tlaloc::Error if f fails verification.
std::unique_ptr<Executable> compile(const ir::Function& f, Options options = {});

// Number of executables compiled by this process (for "one compiled executable" checks).
int64_t compile_count();

}  // namespace tlaloc::runtime::host
