// Internal to autodiff and the composites (tlaloc/composites): the VJP rule signature, helpers,
// and the rule functions the registry (registry.cpp) lists.
#pragma once

#include <vector>

#include "tlaloc/ir/builder.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::autodiff::detail {

using ir::ValueId;
using trace::Tensor;

// What a rule sees: the forward node (operand ids are valid in b), its value, the cotangent of
// that value, and which operands need a cotangent. A multi-result node (ir.h) has its results
// in outs and their cotangents in cts (-1: none flows into that result; at least one does);
// out / ct are the first of them.
struct RuleCtx {
  ir::Builder& b;
  const ir::Node& n;
  ValueId out;
  ValueId ct;
  std::vector<char> need;
  std::vector<ValueId> outs, cts;

  ir::TensorType type(ValueId v) const { return b.type(v); }  // a copy: b grows
  ValueId operand(size_t k) const { return n.operands[k]; }
  Tensor t(ValueId v) const { return Tensor(&b, v); }
  Tensor ct_t() const { return t(ct); }
  Tensor x(size_t k) const { return t(n.operands[k]); }
  Tensor out_t() const { return t(out); }
  // Zeros / a constant splat of v's type.
  ValueId zeros(const ir::TensorType& type) const { return full(type, 0.0); }
  ValueId full(const ir::TensorType& type, double v) const;
};

// One cotangent per operand; -1 means zero (or none needed).
using Grads = std::vector<ValueId>;
using VjpRule = Grads (*)(const RuleCtx&);

// The registry: the rule for `op`, or nullptr when the op carries no cotangent.
VjpRule vjp_rule(ir::Op op);

// Rules (rules_elementwise.cpp).
Grads vjp_convert(const RuleCtx& c);
Grads vjp_unary(const RuleCtx& c);  // negate abs exponential log log_plus_one tanh ...
Grads vjp_zero(const RuleCtx& c);   // sign, floor: derivative 0
Grads vjp_add_sub(const RuleCtx& c);
Grads vjp_multiply(const RuleCtx& c);
Grads vjp_divide(const RuleCtx& c);
Grads vjp_max_min(const RuleCtx& c);
Grads vjp_power(const RuleCtx& c);
Grads vjp_remainder(const RuleCtx& c);
Grads vjp_select(const RuleCtx& c);
Grads vjp_clamp(const RuleCtx& c);

// Rules (rules_structural.cpp).
Grads vjp_broadcast_in_dim(const RuleCtx& c);
Grads vjp_reshape(const RuleCtx& c);
Grads vjp_transpose(const RuleCtx& c);
Grads vjp_slice(const RuleCtx& c);
Grads vjp_concatenate(const RuleCtx& c);
Grads vjp_pad(const RuleCtx& c);
Grads vjp_dynamic_slice(const RuleCtx& c);
Grads vjp_dynamic_update_slice(const RuleCtx& c);
Grads vjp_gather(const RuleCtx& c);
Grads vjp_scatter(const RuleCtx& c);
Grads vjp_dot_general(const RuleCtx& c);
Grads vjp_reduce(const RuleCtx& c);
Grads vjp_reduce_window(const RuleCtx& c);  // rules_window.cpp
// all_reduce sum: the cotangent all_reduce'd (sum) over the same replica groups (JAX's psum
// transpose); max / min throw (backward() refuses them first).
Grads vjp_all_reduce(const RuleCtx& c);

// Rules (rules_conv.cpp): JAX's transpose rules of conv_general_dilated and rev.
Grads vjp_convolution(const RuleCtx& c);
Grads vjp_reverse(const RuleCtx& c);
// The two gradient convolutions of a forward convolution with attrs a, input shape xs, kernel
// shape ks and cotangent (output) shape gs, in JAX's formulation: the input's cotangent from
// (ct, kernel w) and the kernel's from (input x, ct; gs non-empty). Also the decompositions of
// the tlaloc.conv_input_grad / conv_kernel_grad composites (composites/conv_grad.cpp), which
// the rule emits for 2-D NCHW f32 instances (conv_fits_composites).
ValueId conv_input_grad_jax(ir::Builder& b, const ir::Attrs& a, const Shape& xs, const Shape& ks,
                            const Shape& gs, ValueId ct, ValueId w);
ValueId conv_kernel_grad_jax(ir::Builder& b, const ir::Attrs& a, const Shape& xs, const Shape& ks,
                             const Shape& gs, ValueId x, ValueId ct);

// The VJP of the node's decomposition (ir/composite.h), inlined: the rule of composites that
// declare none (rules_composite.cpp). Results without a cotangent get zeros.
Grads vjp_by_decomposition(const RuleCtx& c);

}  // namespace tlaloc::autodiff::detail
