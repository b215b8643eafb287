// Internal: layout rewrites applied before planning, so GEMMs read and write their operands
// where they already are (CBLAS transpose flags) instead of going through transposes:
//   dot(transpose(x), y) -> dot(x, y) with x's dims remapped (when the result layout is kept);
//   transpose(dot(a, b)) swapping the lhs-free and rhs-free dims -> dot(b, a).
// Nodes left unused are skipped by the planner (dead code). Value ids do not change.
#pragma once

#include "tlaloc/ir/ir.h"

namespace tlaloc::runtime::host {

ir::Function fold_transposes_into_dots(const ir::Function& f);

// reduce(concatenate(x_1, ..., x_n)) over its one dim (a full reduction of a rank-1
// concatenation, as the train step's found-inf) -> the x_i reduced one by one, combined in
// order by the reduction's op. StableHLO leaves a reduction's order to the implementation, so
// this is the same value; each x_i is then reduced inside the loop that produces it instead of
// being copied into the concatenation. A bf16 / f16 sum is left whole (it rounds once, at the
// end; partial sums would each round). Returns f itself when nothing matches; value ids are
// renumbered otherwise (inputs, results, names and aliases kept).
ir::Function split_reductions_of_concatenations(const ir::Function& f);

}  // namespace tlaloc::runtime::host
