// Reference evaluation of IR on host Arrays, for constant folding (and as a small interpreter
// for tests). Plain loops, no speed goals. Semantics are StableHLO's
// (https://openxla.org/stablehlo/spec) as narrowed in ir/builder.h:
// * elementwise ops with a scalar formula (ops.def, ir/scalar.h) apply it in the dtype's compute
//   type (float for f32 / bf16 / f16), as the host lane's loops do, so folding and kernels agree
//   bit for bit; convert and clamp use the same shared semantics;
// * s32 / u32 arithmetic wraps; integer x / 0 = -1 (all ones for u32) and x % 0 = x; s32
//   INT_MIN / -1 = INT_MIN; shifts by >= 32 (as unsigned) give 0;
// * convert float -> integer truncates toward zero and saturates, NaN -> 0; x -> i1 is x != 0;
// * dynamic_slice / dynamic_update_slice clamp starts to [0, dim - size]; gather clamps rows to
//   [0, N-1]; scatter skips out-of-range rows;
// * composites evaluate their decomposition (ir/composite.h).
// * all_reduce / all_gather run across distributed::world() as the host lane's kernels do
//   (distributed/collective.h): a copy for replica groups of one replica, a tlaloc::Error for
//   groups the process group does not have.
#pragma once

#include <span>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::passes {

// Evaluates node `n` on operand values (one per n.operands, of the operand types). Throws
// tlaloc::Error for a parameter node or when an operand's dtype/shape is not what `n` needs.
Array evaluate(const ir::Node& n, std::span<const Array* const> operands);
// Every result of node `n` (several for a multi-result composite, see ir.h).
std::vector<Array> evaluate_results(const ir::Node& n, std::span<const Array* const> operands);

// Runs a whole function on inputs (one per input, of the input types) and returns its outputs.
// Throws tlaloc::Error naming the input when the count, a dtype or a shape disagrees.
std::vector<Array> interpret(const ir::Function& f, std::span<const Array> inputs);

}  // namespace tlaloc::passes
