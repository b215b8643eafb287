// Internal: layout rewrites applied before planning, so GEMMs read and write their operands
// where they already are (CBLAS transpose flags) instead of going through transposes:
//   dot(transpose(x), y) -> dot(x, y) with x's dims remapped (when the result layout is kept);
//   transpose(dot(a, b)) swapping the lhs-free and rhs-free dims -> dot(b, a).
// Nodes left unused are skipped by the planner (dead code). Value ids do not change.
#pragma once

#include "tlaloc/ir/ir.h"

namespace tlaloc::runtime::host {

ir::Function fold_transposes_into_dots(const ir::Function& f);

}  // namespace tlaloc::runtime::host
