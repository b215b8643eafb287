// VJP rules of the composite ops. attention's cotangent is the fused attention_grad composite
// (FlashAttention's backward: recompute from the saved log-sum-exp); any other composite
// (attention_grad, for second derivatives) is differentiated through its decomposition
// (trace/composite.h), MLX's fallback for fused ops.
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
