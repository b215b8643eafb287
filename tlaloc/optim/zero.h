// ZeRO stage 1 (Rajbhandari et al., 2020, "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", section 5.1; DeepSpeed's stage 1): under data parallelism over N
// processes, every trained parameter (flattened, row-major) is split into N equal contiguous
// chunks (the last ones short or empty); process r keeps the optimizer state of its chunk of
// each parameter only and updates only that chunk, after which the updated chunks of each
// parameter are all-gathered. Gathering per parameter keeps the step's temporaries to one
// parameter's size. The gradients are all-reduced whole first, so found-inf and clipping see the
// global gradient as without it, and the parameters after a step equal plain data parallelism's
// bit for bit (each element's update is the same arithmetic).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/optim/optimizer.h"

namespace tlaloc::optim {

// This rank's chunk of parameter `param`: its flat elements [lo, hi) (hi > lo).
struct ShardPiece {
  int param;
  int64_t lo, hi;
};

struct ZeroShard {
  int rank = 0, replicas = 1;
  std::vector<int64_t> numel;      // each parameter's element count
  std::vector<int64_t> chunk;      // each parameter's chunk: ceil(numel / replicas)
  std::vector<ShardPiece> pieces;  // this rank's non-empty chunks, in parameter order
  StateLayout full;                // the state plain data parallelism keeps
  // This rank's piece of parameter i, or null when its chunk is empty.
  const ShardPiece* piece(int param) const;
};

// The shards of `rank` of `replicas` for parameters of these master types.
ZeroShard zero_shard(const Optimizer& opt, std::span<const ir::TensorType> masters,
                     std::span<const std::string> names, int rank, int replicas);
// The layout of this rank's state: for each piece, its slots (the full layout's kinds) of shape
// [hi - lo], named as the full slots; then the step count.
StateLayout shard_layout(const ZeroShard& z);

// Whole-state <-> shard-state. gather_state is a collective (every rank calls it; each gets the
// whole state, in z.full's order); shard_state cuts this rank's pieces out of a whole state.
// `local(j)` gives this rank's state slot j (read one slot at a time: no second copy of the
// whole local state is held while the whole state is built).
std::vector<Array> gather_state(const ZeroShard& z, const StateLayout& local,
                                const std::function<Array(int)>& local_slot);
std::vector<Array> shard_state(const ZeroShard& z, const StateLayout& local,
                               const std::vector<Array>& full_state);

}  // namespace tlaloc::optim
