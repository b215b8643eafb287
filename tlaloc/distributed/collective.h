// The IR collectives (ir all_reduce / all_gather) over world(): shared by the evaluator
// (passes/evaluate.cpp) and the host lane's kernels (runtime/host/collective.cpp). Call them
// from the thread that runs the program (MPI is initialised FUNNELED), every rank in the same
// order.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tlaloc/core/dtype.h"
#include "tlaloc/distributed/communicator.h"

namespace tlaloc::distributed {

using ReplicaGroups = std::vector<std::vector<int64_t>>;

// How `op`'s replica_groups run on world(): false when every group has one replica (the op is
// a copy), true for one group of every rank in rank order ({{0, ..., size() - 1}}). Anything
// else throws tlaloc::Error naming the op, the groups and the process count, e.g. "all_reduce
// over replica groups [[0, 1]] (2 replicas), but this process group has 1 process (run it
// with mpirun -np 2)".
bool runs_across_world(std::string_view op, const ReplicaGroups& groups);

// data[0, count) of `dtype` becomes its reduction over the ranks of world() (rank order, the
// same bits on every rank). f32, f64, s32, u32 as Communicator::all_reduce; bf16 / f16 are
// widened to f32, reduced, and rounded back once (the sum of N half values rounds once, not
// N - 1 times); i1 for max / min.
void all_reduce_widened(void* data, int64_t count, DType dtype, Reduction op);

// all_gather along one dimension: `in` is [outer, inner_bytes] (outer = the product of the dims
// before the gathered one, inner_bytes = the bytes of the rest), `out` is
// [outer, size(), inner_bytes] with out[o, r] = rank r's in[o]. `scratch` holds size() * outer
// * inner_bytes bytes (unused when outer == 1: gathered straight into out).
void all_gather_along(const void* in, void* out, int64_t outer, int64_t inner_bytes, void* scratch);

}  // namespace tlaloc::distributed
