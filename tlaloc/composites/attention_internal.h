// Internal to the attention composites (attention.cpp): their decompositions in plain ops
// (attention_decompose.cpp), the meaning the host kernels follow and what StableHLO carries.
#pragma once

#include <span>
#include <vector>

#include "tlaloc/ir/builder.h"

namespace tlaloc::composites::attention_detail {

enum Param { kScale, kCausal };  // the composites' params, in order

std::vector<ir::ValueId> decompose(ir::Builder& b, const ir::Node& n,
                                   std::span<const ir::ValueId> ops);
std::vector<ir::ValueId> decompose_grad(ir::Builder& b, const ir::Node& n,
                                        std::span<const ir::ValueId> ops);

}  // namespace tlaloc::composites::attention_detail
