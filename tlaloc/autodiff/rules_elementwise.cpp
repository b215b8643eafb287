// VJP rules of the elementwise ops: with y = op(x...) and cotangent g of y, each rule returns
// g * dy/dx_k for the operands that need one. Formulas: standard calculus; tie conventions as
// documented in autodiff.h.
#include "tlaloc/autodiff/rules.h"

namespace tlaloc::autodiff::detail {

using ir::Op;

ValueId RuleCtx::full(const ir::TensorType& type, double v) const {
  ValueId s = b.scalar(type.dtype, v);
  if (type.shape.rank() == 0) return s;
  return b.broadcast_in_dim(s, type.shape, {});
}

Grads vjp_convert(const RuleCtx& c) {
  DType from = c.type(c.operand(0)).dtype;
  if (!is_floating(from)) return {-1};
  if (from == c.type(c.ct).dtype) return {c.ct};
  return {c.b.convert(c.ct, from)};
}

Grads vjp_unary(const RuleCtx& c) {
  Tensor g = c.ct_t(), x = c.x(0), y = c.out_t();
  switch (c.n.op) {
    case Op::negate:
      return {(-g).id()};
    case Op::abs:  // sign(0) = 0, so abs'(0) = 0
      return {(g * trace::sign(x)).id()};
    case Op::exponential:
      return {(g * y).id()};
    case Op::log:
      return {(g / x).id()};
    case Op::log_plus_one:
      return {(g / (x + 1.0)).id()};
    case Op::tanh:
      return {(g * (1.0 - y * y)).id()};
    case Op::logistic:
      return {(g * (y * (1.0 - y))).id()};
    case Op::sqrt:  // d sqrt(x) = 1 / (2 sqrt(x))
      return {(g / (y * 2.0)).id()};
    case Op::rsqrt:  // d x^(-1/2) = -x^(-1/2) / (2x)
      return {((g * y) / (x * -2.0)).id()};
    case Op::cosine:
      return {(-(g * trace::sin(x))).id()};
    case Op::sine:
      return {(g * trace::cos(x)).id()};
    default:
      fail("autodiff: vjp_unary has no rule for {}", ir::op_name(c.n.op));
  }
}

Grads vjp_zero(const RuleCtx&) { return {-1}; }

Grads vjp_add_sub(const RuleCtx& c) {
  ValueId gb = -1;
  if (c.need[1]) gb = c.n.op == Op::add ? c.ct : c.b.unary(Op::negate, c.ct);
  return {c.need[0] ? c.ct : -1, gb};
}

Grads vjp_multiply(const RuleCtx& c) {
  Tensor g = c.ct_t();
  return {c.need[0] ? (g * c.x(1)).id() : -1, c.need[1] ? (g * c.x(0)).id() : -1};
}

Grads vjp_divide(const RuleCtx& c) {
  // y = a / b: dy/da = 1/b, dy/db = -a/b^2 = -y/b.
  Tensor q = c.ct_t() / c.x(1);
  return {c.need[0] ? q.id() : -1, c.need[1] ? (-(q * c.out_t())).id() : -1};
}

Grads vjp_max_min(const RuleCtx& c) {
  bool mx = c.n.op == Op::maximum;
  Tensor g = c.ct_t(), a = c.x(0), b = c.x(1);
  Tensor z = trace::zeros_like(g);
  // The cotangent share of p against q: all of g where p wins, half at a tie.
  auto share = [&](const Tensor& p, const Tensor& q) {
    return trace::where(mx ? p > q : p < q, g, trace::where(trace::equal(p, q), g * 0.5, z));
  };
  Grads r{-1, -1};
  if (c.need[0]) r[0] = share(a, b).id();
  if (c.need[1]) r[1] = c.need[0] ? (g - c.t(r[0])).id() : share(b, a).id();
  return r;
}

Grads vjp_power(const RuleCtx& c) {
  Tensor g = c.ct_t(), a = c.x(0), b = c.x(1), y = c.out_t();
  Grads r{-1, -1};
  if (c.need[0]) {
    Tensor z = trace::zeros_like(a);
    r[0] = trace::where(trace::equal(b, z), z, g * (b * trace::pow(a, b - 1.0))).id();
  }
  if (c.need[1]) {
    Tensor safe_a = trace::where(trace::equal(a, trace::zeros_like(a)), trace::ones_like(a), a);
    r[1] = (g * (y * trace::log(safe_a))).id();
  }
  return r;
}

Grads vjp_remainder(const RuleCtx& c) {
  // y = a - b trunc(a/b): dy/da = 1, dy/db = -trunc(a/b) = -(a - y) / b.
  Tensor g = c.ct_t();
  ValueId gb = -1;
  if (c.need[1]) gb = (-(g * ((c.x(0) - c.out_t()) / c.x(1)))).id();
  return {c.need[0] ? c.ct : -1, gb};
}

Grads vjp_select(const RuleCtx& c) {
  ValueId z = c.zeros(c.type(c.ct));
  ValueId p = c.operand(0);
  return {-1, c.need[1] ? c.b.select(p, c.ct, z) : -1, c.need[2] ? c.b.select(p, z, c.ct) : -1};
}

Grads vjp_clamp(const RuleCtx& c) {
  Tensor g = c.ct_t(), x = c.x(1);
  Tensor lo = trace::broadcast_to(c.x(0), x.shape()), hi = trace::broadcast_to(c.x(2), x.shape());
  Tensor z = trace::zeros_like(g);
  Tensor inside = (x >= lo) & (x <= hi);  // ties go to x, as torch.clamp
  Tensor below = (x < lo) & (lo <= hi);
  auto bound = [&](size_t k, const Tensor& t) {
    if (c.type(c.operand(k)).shape.rank() == 0 && x.rank() > 0) return trace::sum(t).id();
    return t.id();
  };
  Grads r{-1, -1, -1};
  if (c.need[1]) r[1] = trace::where(inside, g, z).id();
  if (c.need[0]) r[0] = bound(0, trace::where(below, g, z));
  if (c.need[2]) r[2] = bound(2, trace::where(inside | below, z, g));
  return r;
}

}  // namespace tlaloc::autodiff::detail
