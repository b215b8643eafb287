// ZeRO stage 1 (Rajbhandari et al., 2020, "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", section 5.1; DeepSpeed's stage 1): under data parallelism over N
// processes, the trained parameters seen as one flat vector (model order, each row-major) are
// split into N equal contiguous shards (the last padded); process r keeps the optimizer state
// of shard r only and updates only that part of the parameters, after which every process
// all-gathers the updated shards. The gradients are all-reduced whole first, so found-inf and
// clipping see the global gradient as without it, and the parameters after a step equal plain
// data parallelism's bit for bit (each element's update is the same arithmetic).
#pragma once

#include <cstdint>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/optim/optimizer.h"

namespace tlaloc::optim {

// One parameter's part of a shard: flat elements [lo, hi) of parameter `param`, which sit at
// [at, at + hi - lo) of the shard.
struct ShardPiece {
  int param;
  int64_t lo, hi, at;
};

struct ZeroShard {
  int rank = 0, replicas = 1;
  int64_t shard_size = 0;          // elements per shard (the flat total / N, rounded up)
  std::vector<int64_t> offset;     // each parameter's first element in the flat vector
  std::vector<int64_t> numel;      // each parameter's element count
  std::vector<ShardPiece> pieces;  // this rank's, in parameter order
  StateLayout full;                // the state plain data parallelism keeps
};

// The shard of `rank` of `replicas` for parameters of these master types (one dtype, all).
// Throws tlaloc::Error naming the parameters when their dtypes differ.
ZeroShard zero_shard(const Optimizer& opt, std::span<const ir::TensorType> masters,
                     std::span<const std::string> names, int rank, int replicas);
// The layout of this rank's state: for each piece, its slots (the full layout's kinds) of shape
// [hi - lo], named as the full slots; then the step count.
StateLayout shard_layout(const ZeroShard& z);

// Whole-state <-> shard-state. gather_state is a collective (every rank calls it; each gets the
// whole state, in z.full's order); shard_state cuts this rank's pieces out of a whole state.
std::vector<Array> gather_state(const ZeroShard& z, const StateLayout& local,
                                const std::vector<Array>& local_state);
std::vector<Array> shard_state(const ZeroShard& z, const StateLayout& local,
                               const std::vector<Array>& full_state);

}  // namespace tlaloc::optim
