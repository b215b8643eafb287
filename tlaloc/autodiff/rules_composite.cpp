// VJP rules of the composite ops. attention's cotangent is the fused attention_grad composite
// (FlashAttention's backward: recompute from the saved log-sum-exp), layer_norm's the fused
// layer_norm_grad, cross_entropy's the fused cross_entropy_grad, gelu's the fused gelu_grad (and
// gelu_grad's a rule of its own, see there); the other _grad composites (second derivatives) are
// differentiated through their decomposition (trace/composite.h), MLX's fallback for fused ops.
#include <cmath>
#include <numbers>

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

// gelu_grad(x, y, d_y), y = gelu(x) as vjp_gelu emits it. d_y's cotangent is gelu_grad(x, y, ct);
// x's is ct·d_y·gelu''(x) with t = tanh(u) recomputed from x, gelu''(x) = (1 - t²)(u' - x·t·u'²
// + 3·0.044715·√(2/π)·x²), u = √(2/π)(x + 0.044715x³), u' = √(2/π)(1 + 3·0.044715x²) (the
// derivative of 0.5(1 + t) + 0.5x(1 - t²)u'); y's is 0. Through the decomposition instead, x's
// total second derivative was the sum of 2/x-sized terms through q = 2y / x that cancel: off by
// ~eps / |x| (f32: all bits lost below |x| ~ 1e-6), and half of gelu''(0) where q is the constant
// 1 (|x| < 2^-60, x = 0 included).
Grads vjp_gelu_grad(const RuleCtx& c) {
  Grads out(3, -1);
  if (c.need[2]) out[2] = c.b.gelu_grad(c.operand(0), c.operand(1), c.ct);
  if (c.need[0]) {
    const double k = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
    const Tensor x = c.x(0), x2 = x * x;
    const Tensor t = tanh(k * (x + a * x2 * x)), du = k * (1.0 + (3 * a) * x2);
    const Tensor h = (1.0 - t * t) * (du - x * t * (du * du) + (3 * a * k) * x2);
    out[0] = (c.ct_t() * c.x(2) * h).id();
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
