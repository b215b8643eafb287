// VJP rules of the composite ops. attention's cotangent is the fused attention_grad composite
// (FlashAttention's backward: recompute from the saved log-sum-exp), layer_norm's the fused
// layer_norm_grad, cross_entropy's the fused cross_entropy_grad, gelu's the fused gelu_grad; any
// other composite (the _grad ones, for second derivatives) is differentiated through its
// decomposition (trace/composite.h), MLX's fallback for fused ops.
#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/autodiff/rules.h"
#include "tlaloc/trace/composite.h"

namespace tlaloc::autodiff::detail {

Grads vjp_attention(const RuleCtx& c) {
  const ir::Node& n = c.n;
  ValueId mask = n.operands.size() == 4 ? c.operand(3) : -1;
  ValueId g = c.b.attention_grad(c.operand(0), c.operand(1), c.operand(2), c.out, c.ct, mask,
                                 n.attrs.scale, n.attrs.causal);
  Tensor gt = c.t(g);
  Grads out(n.operands.size(), -1);
  int64_t at = 0;
  for (size_t i = 0; i < 3; ++i) {
    ir::TensorType t = c.type(c.operand(i));
    int64_t len = t.shape.numel() / t.shape[0];
    if (c.need[i]) out[i] = trace::reshape(trace::slice(gt, 1, at, at + len), t.shape.dims).id();
    at += len;
  }
  return out;
}

// layer_norm: one layer_norm_grad composite [R + 2, D], sliced into d_x, d_weight, d_bias.
Grads vjp_layer_norm(const RuleCtx& c) {
  const ir::Node& n = c.n;
  ValueId g = c.b.layer_norm_grad(c.operand(0), c.operand(1), c.ct, n.attrs.epsilon);
  Tensor gt = c.t(g);
  const ir::TensorType xt = c.type(c.operand(0));
  const int64_t D = xt.shape[xt.shape.rank() - 1], R = gt.dim(0) - 2;
  Grads out(n.operands.size(), -1);
  if (c.need[0]) out[0] = trace::reshape(trace::slice(gt, 0, 0, R), xt.shape.dims).id();
  for (size_t i = 1; i < n.operands.size(); ++i)
    if (c.need[i])
      out[i] = trace::reshape(trace::slice(gt, 0, R + int64_t(i) - 1, R + int64_t(i)), {D}).id();
  return out;
}

// cross_entropy: the logits' cotangent is one cross_entropy_grad composite; labels get none.
Grads vjp_cross_entropy(const RuleCtx& c) {
  Grads out(c.n.operands.size(), -1);
  if (c.need[0]) out[0] = c.b.cross_entropy_grad(c.operand(0), c.operand(1), c.ct);
  return out;
}

// gelu: x's cotangent is one gelu_grad composite, reading the forward's result.
Grads vjp_gelu(const RuleCtx& c) {
  Grads out(1, -1);
  if (c.need[0]) out[0] = c.b.gelu_grad(c.operand(0), c.out, c.ct);
  return out;
}

Grads vjp_by_decomposition(const RuleCtx& c) {
  const ir::Node& n = c.n;
  ir::Builder db("decomposition");
  std::vector<ValueId> params;
  std::vector<int> wrt;
  for (size_t i = 0; i < n.operands.size(); ++i) {
    ir::TensorType t = c.type(c.operand(i));
    params.push_back(db.parameter(t));
    if (is_floating(t.dtype) && c.need[i]) wrt.push_back(int(i));
  }
  Grads out(n.operands.size(), -1);
  if (wrt.empty()) return out;
  ir::Function g = db.build({trace::decompose(db, n, params)});
  ir::Function gv = vjp(g, wrt);  // inputs: operands..., cotangent
  std::vector<ValueId> args(n.operands.begin(), n.operands.end());
  args.push_back(c.ct);
  std::vector<ValueId> res = trace::inline_function(c.b, gv, args);
  for (size_t j = 0; j < wrt.size(); ++j) out[size_t(wrt[j])] = res[j];
  return out;
}

}  // namespace tlaloc::autodiff::detail
