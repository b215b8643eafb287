// IR-to-IR clean-up passes. Each takes a verified function and returns an equivalent one with
// the same inputs (order, types, names), outputs (order, names) and aliases; value ids are
// renumbered. Results are checked with ir::verify (a failure is a tlaloc::Error naming the
// function). Passes use only ir and core (the evaluator's collectives also distributed).
#pragma once

#include <cstdint>

#include "tlaloc/ir/ir.h"

namespace tlaloc::passes {

// Dead-code elimination: drops nodes no output depends on. Every parameter is kept (unused
// inputs stay inputs).
ir::Function dce(const ir::Function& f);

// Common-subexpression elimination: nodes with the same op, result type, operands and attrs
// (constants compared by contents) become one. Operands of commutative ops (add, multiply,
// maximum, minimum, and, or, xor, compare EQ/NE) are compared as unordered pairs. Leaves the
// duplicates dead (run dce). Collectives (all_reduce, all_gather) are never merged.
ir::Function cse(const ir::Function& f);

// Largest result (in elements) that fold_constants materialises as a constant, and largest
// operand it reads (bounds the evaluator's work).
inline constexpr int64_t kMaxFoldElements = 4096;
inline constexpr int64_t kMaxFoldOperandElements = 16 * kMaxFoldElements;

// Constant folding and cheap algebraic simplification:
// * a node whose operands are all constants is evaluated (passes/evaluate.h) when its result
//   has <= kMaxFoldElements elements and each operand <= kMaxFoldOperandElements; iota and
//   the collectives (all_reduce, all_gather: not a function of the operand alone) are left as
//   is;
// * a broadcast_in_dim of a scalar constant ("splat") stays a broadcast, and elementwise ops,
//   reshape, transpose and broadcast_in_dim of splats give splats of any size;
// * x*1, 1*x, x/1, x+0, 0+x, x-0 -> x (1 and 0: constants or splats with every element equal;
//   x+0 -> x also for x = -0.0, as XLA does); negate(negate(x)) -> x;
//   convert to the same dtype, reshape to the same shape, identity transpose / broadcast /
//   slice / zero pad -> x; reshape of reshape, transpose of transpose and broadcast of
//   broadcast compose into one op; select with a constant/splat pred, or with equal branches,
//   -> the chosen branch;
// * add(pad(a, 0), pad(b, 0)) with a and b side by side along one dim (no interior padding)
//   -> pad(concatenate(a, b), 0) (the cotangent of a value sliced in pieces, such as a fused
//   QKV projection's, becomes one concatenation); a concatenate of a concatenate along the
//   same dim -> one concatenate.
// Leaves replaced nodes dead (run dce).
ir::Function fold_constants(const ir::Function& f);

// A forward composite node whose value a gradient composite node also yields
// (ir/composite.h: Composite::forward; cross_entropy's loss, yielded by cross_entropy_grad) is
// read from that result instead, when the gradient's operands do not depend on the forward (the
// gradient node moves up to the forward's first reader). Leaves the forward dead (run dce).
ir::Function merge_forward_into_grad(const ir::Function& f);

// cse, fold_constants, merge_forward_into_grad and dce repeated until nothing changes (at most
// 32 rounds).
ir::Function simplify(const ir::Function& f);

}  // namespace tlaloc::passes
