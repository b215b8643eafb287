// Internal to the attention composites (attention.cpp): their decompositions in plain ops
// (attention_decompose.cpp), the meaning the host kernels follow and what StableHLO carries.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tlaloc/ir/builder.h"

namespace tlaloc::composites::attention_detail {

enum Param { kScale, kCausal };  // the composites' params, in order

// Whether every query row sees a key: no key mask, T >= 1, and not causal or S <= T (row i sees
// keys j <= i + T - S, so key 0). Such instances decompose to the plain softmax, without the
// guards for empty rows (attention.cpp's header).
inline bool no_empty_rows(bool key_mask, bool causal, int64_t S, int64_t T) {
  return !key_mask && T >= 1 && (!causal || S <= T);
}

std::vector<ir::ValueId> decompose(ir::Builder& b, const ir::Node& n,
                                   std::span<const ir::ValueId> ops);
std::vector<ir::ValueId> decompose_grad(ir::Builder& b, const ir::Node& n,
                                        std::span<const ir::ValueId> ops);

}  // namespace tlaloc::composites::attention_detail
