// Reverse-mode automatic differentiation as an IR-to-IR transform: the gradient of a function
// is another ir::Function built from one VJP (vector-Jacobian product) rule per op, all in one
// registry (autodiff/registry.cpp). The result is itself differentiable (rules emit only
// differentiable ops where a cotangent flows), so second derivatives compose.
//
// What gets a cotangent: floating values that depend on a `wrt` input through differentiable
// ops. Integer / i1 values, compare, and/or/xor/shifts, iota and constants get none (no error);
// select's pred and the index operands of gather / scatter / dynamic_slice /
// dynamic_update_slice get none. Zero cotangents are skipped symbolically; fan-out is summed
// with add; dead code is removed at the end (passes::dce). Output aliases are dropped.
//
// Conventions at non-differentiable points (PyTorch / JAX):
// * relu'(0) = 0 (trace::relu selects x only where x > 0 or NaN); abs'(0) = 0 (abs' = sign);
//   sign and floor have derivative 0; remainder(a, b): d/da = 1, d/db = -trunc(a/b).
// * maximum / minimum and reduce max / min: at ties the cotangent is split equally between the
//   tied entries (JAX's reduce-max rule; torch.maximum also gives each side half).
// * reduce_window max / min (max pooling): the whole cotangent of a window goes to its first
//   maximum / minimum in row-major window order (select_and_scatter GE / LE; PyTorch's and
//   JAX's max-pool gradient). select_and_scatter has no VJP in its source: differentiating
//   through it again (second derivatives of max / min pooling) throws tlaloc::Error.
// * all_reduce sum: the cotangent all_reduce'd (sum) over the same replica groups (JAX's psum
//   transpose). all_reduce max / min and all_gather have no VJP: differentiating through them
//   throws tlaloc::Error.
// * clamp(lo, x, hi) = min(max(x, lo), hi): x receives the cotangent where lo <= x <= hi (ties
//   go to x, as torch.clamp), lo where x < lo (and lo <= hi), hi elsewhere; scalar bounds
//   receive the sum over all elements.
// * power(a, b): d/da = b a^(b-1), taken as 0 where b = 0; d/db = a^b log(a), taken as 0
//   where a = 0 (JAX's convention).
// * gather's cotangent scatters into the clamped rows gather read; scatter's updates get the
//   rows of the cotangent, 0 for rows scatter skipped (out of range).
#pragma once

#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::autodiff {

// VJP function of f. Inputs: f's inputs, then one cotangent per output of f (the output's type;
// named "ct.<output name>" when f has names). Outputs: the cotangent of each input listed in
// `wrt` (input indices; repeats allowed), zeros of the input's type where the input does not
// influence any output. Throws tlaloc::Error if f fails ir::verify or a wrt index is out of
// range (naming the index and the input count).
ir::Function vjp(const ir::Function& f, std::vector<int> wrt);

// Gradient of f's first output, which must be a floating scalar (tlaloc::Error naming its
// type otherwise). The result has f's inputs (names kept) and outputs d out0 / d input for
// each wrt index, named "grad.<input name>" when f's inputs are named.
ir::Function grad(const ir::Function& f, std::vector<int> wrt);

// Like grad, but the outputs are all of f's outputs (names kept) followed by the gradients:
// (batch, params...) -> (loss, aux..., grads...).
ir::Function value_and_grad(const ir::Function& f, std::vector<int> wrt);

// Whether the registry has a VJP rule for `op` (sign and floor have one: their derivative is
// 0). Ops without one never carry a cotangent.
bool differentiable(ir::Op op);

}  // namespace tlaloc::autodiff
