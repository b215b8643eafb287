// Decompositions of the composite ops (layer_norm's and cross_entropy's further down). Attention's
// is the textbook masked softmax:
//   s = scale·q·kᵀ, masked entries -inf; m = max s (0 for an empty row); e = exp(s - m);
//   l = Σe; out = e·v / l (0 when l = 0); lse = m + log l (-inf when l = 0).
// Its VJP (FlashAttention-2's backward, Dao 2023) recomputes p = exp(s - lse) and
//   dv = pᵀ·do, dp = do·vᵀ, ds = p ∘ (dp - rowsum(do ∘ out) + dlse), dq = scale·ds·k,
//   dk = scale·dsᵀ·q, summed over the query heads that share a kv head.
#include "tlaloc/trace/composite.h"

#include <cmath>
#include <numbers>

namespace tlaloc::trace {
namespace {

using ir::ValueId;

Tensor dot(const Tensor& a, const Tensor& b, ir::DotDims dims) {
  ir::Builder& bl = a.builder();
  return {&bl, bl.dot_general(a.id(), b.id(), std::move(dims))};
}

struct Dims {
  int64_t B, Hq, S, D, Hkv, T, Dv, G;
};

Dims dims_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  Dims d{q.dim(0), q.dim(1), q.dim(2), q.dim(3), k.dim(1), k.dim(2), v.dim(3), 0};
  d.G = d.Hq / d.Hkv;
  return d;
}

// Visibility i1 [B,Hkv,G,S,T] (or nullopt: everything visible).
std::optional<Tensor> visible(const Dims& d, const std::optional<Tensor>& key_mask, bool causal) {
  std::optional<Tensor> vis;
  Shape full{d.B, d.Hkv, d.G, d.S, d.T};
  if (causal) {
    Tensor i = iota(Shape{d.S, d.T}, 0), j = iota(Shape{d.S, d.T}, 1);
    vis = broadcast_to(i + double(d.T - d.S) >= j, full);
  }
  if (key_mask) {
    Tensor km = broadcast_to(reshape(*key_mask, {d.B, 1, 1, 1, d.T}), full);
    vis = vis ? (*vis & km) : km;
  }
  return vis;
}

// Scores scale·q·kᵀ [B,Hkv,G,S,T] with hidden entries -inf.
Tensor masked_scores(const Dims& d, const Tensor& q, const Tensor& k,
                     const std::optional<Tensor>& vis, double scale) {
  Tensor q5 = reshape(q, {d.B, d.Hkv, d.G, d.S, d.D});
  Tensor s = dot(q5, k, {{0, 1}, {0, 1}, {4}, {3}}) * scale;
  return vis ? where(*vis, s, full_like(s, -INFINITY)) : s;
}

Tensor attention_decomposed(const Tensor& q, const Tensor& k, const Tensor& v,
                            const std::optional<Tensor>& key_mask, double scale, bool causal) {
  Dims d = dims_of(q, k, v);
  Tensor s = masked_scores(d, q, k, visible(d, key_mask, causal), scale);
  Tensor m = max(s, {-1}, true);
  Tensor m0 = where(m > -INFINITY, m, zeros_like(m));
  Tensor e = exp(s - m0);
  Tensor l = sum(e, {-1}, true);
  Tensor nonempty = l > 0.0;
  Tensor l1 = where(nonempty, l, ones_like(l));
  Tensor o = dot(e / l1, v, {{0, 1}, {0, 1}, {4}, {2}});  // [B,Hkv,G,S,Dv]
  Tensor lse = where(nonempty, m0 + log(l1), full_like(l, -INFINITY));
  return concat({reshape(o, {d.B, d.Hq, d.S, d.Dv}), reshape(lse, {d.B, d.Hq, d.S, 1})}, 3);
}

Tensor attention_grad_decomposed(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& out, const Tensor& d_out,
                                 const std::optional<Tensor>& key_mask, double scale, bool causal) {
  Dims d = dims_of(q, k, v);
  auto heads5 = [&](const Tensor& x, int64_t w) { return reshape(x, {d.B, d.Hkv, d.G, d.S, w}); };
  Tensor o = heads5(slice(out, 3, 0, d.Dv), d.Dv);
  Tensor lse = heads5(slice(out, 3, d.Dv, d.Dv + 1), 1);
  Tensor dout = heads5(slice(d_out, 3, 0, d.Dv), d.Dv);
  Tensor dlse = heads5(slice(d_out, 3, d.Dv, d.Dv + 1), 1);
  Tensor s = masked_scores(d, q, k, visible(d, key_mask, causal), scale);
  Tensor lse0 = where(lse > -INFINITY, lse, zeros_like(lse));
  Tensor p = exp(s - lse0);                                    // hidden entries: exp(-inf) = 0
  Tensor dv = dot(p, dout, {{0, 1}, {0, 1}, {2, 3}, {2, 3}});  // [B,Hkv,T,Dv]
  Tensor dp = dot(dout, v, {{0, 1}, {0, 1}, {4}, {3}});        // [B,Hkv,G,S,T]
  Tensor delta = sum(dout * o, {-1}, true);
  Tensor ds = p * (dp - delta + dlse);
  Tensor dq = dot(ds, k, {{0, 1}, {0, 1}, {4}, {2}}) * scale;  // [B,Hkv,G,S,D]
  Tensor q5 = reshape(q, {d.B, d.Hkv, d.G, d.S, d.D});
  Tensor dk = dot(ds, q5, {{0, 1}, {0, 1}, {2, 3}, {2, 3}}) * scale;  // [B,Hkv,T,D]
  return concat({reshape(dq, {d.B, -1}), reshape(dk, {d.B, -1}), reshape(dv, {d.B, -1})}, 1);
}

}  // namespace

Tensor attention_with_lse(const Tensor& q, const Tensor& k, const Tensor& v,
                          const std::optional<Tensor>& key_mask, double scale, bool causal) {
  ir::Builder& b = q.builder();
  return {&b, b.attention(q.id(), k.id(), v.id(), key_mask ? key_mask->id() : -1, scale, causal)};
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const std::optional<Tensor>& key_mask, double scale, bool causal) {
  Tensor r = attention_with_lse(q, k, v, key_mask, scale, causal);
  return slice(r, 3, 0, r.dim(3) - 1);
}

namespace {

// x - mean(x) over the last dim, corrected two-pass (Chan, Golub & LeVeque 1983): the rounding
// error of the first mean, mean(x - mean(x)), subtracted too (equal in exact arithmetic).
Tensor centred(const Tensor& x) {
  Tensor xc = x - mean(x, {-1}, true);
  return xc - mean(xc, {-1}, true);
}

// layer_norm as LayerNorm's plain ops; its VJP with xhat = (x - mean)·rstd, g = d_y·weight:
//   d_x = rstd·(g - mean(g) - xhat·mean(g·xhat)), d_weight = Σrows d_y·xhat, d_bias = Σrows d_y.
Tensor layer_norm_decomposed(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
                             double eps) {
  Tensor xc = centred(x);  // two-pass: the variance of centred values
  Tensor y = xc * rsqrt(mean(square(xc), {-1}, true) + eps) * w;
  return b ? y + *b : y;
}

Tensor layer_norm_grad_decomposed(const Tensor& x, const Tensor& w, const Tensor& dy, double eps) {
  const int64_t D = x.dim(-1);
  int64_t R = 1;
  std::vector<int64_t> rows;  // the leading dims, summed over for d_weight and d_bias
  for (int64_t i = 0; i + 1 < x.rank(); ++i) {
    R *= x.dim(i);
    rows.push_back(i);
  }
  Tensor xc = centred(x);
  Tensor rstd = rsqrt(mean(square(xc), {-1}, true) + eps);
  Tensor xhat = xc * rstd, g = dy * w;
  Tensor dx = rstd * (g - mean(g, {-1}, true) - xhat * mean(g * xhat, {-1}, true));
  Tensor dw = dy * xhat, db = dy;
  if (!rows.empty()) {
    dw = sum(dw, rows);
    db = sum(db, rows);
  }
  return concat({reshape(dx, {R, D}), reshape(dw, {1, D}), reshape(db, {1, D})}, 0);
}

// cross_entropy as nn::cross_entropy_per_row's plain ops; its VJP with s = x - max (0 for a
// max of -inf) and lse = log Σ exp(s): d_x = d_loss · (exp(s - lse) - one_hot(label)), and 0
// in a row whose label is outside [0, C) (its loss is the constant -0).
Tensor is_label(const Tensor& logits, const Tensor& labels) {
  return equal(broadcast_to(expand_dims(labels, 1), logits.shape()),
               iota(logits.shape(), 1, DType::s32));
}

Tensor shifted(const Tensor& x) {
  Tensor m = max(x, {1}, true);
  return x - where(equal(m, full_like(m, -INFINITY)), zeros_like(m), m);
}

Tensor cross_entropy_decomposed(const Tensor& x, const Tensor& labels) {
  Tensor s = shifted(x), ls = s - log(sum(exp(s), {1}, true));
  return -sum(where(is_label(x, labels), ls, zeros_like(ls)), {1});
}

Tensor cross_entropy_grad_decomposed(const Tensor& x, const Tensor& labels, const Tensor& dl) {
  Tensor s = shifted(x), p = exp(s - log(sum(exp(s), {1}, true)));
  Tensor hot = where(is_label(x, labels), ones_like(p), zeros_like(p));
  Tensor in =
      broadcast_to(expand_dims((labels > -1.0) & (labels < double(x.dim(1))), 1), x.shape());
  return where(in, broadcast_to(expand_dims(dl, 1), x.shape()) * (p - hot), zeros_like(p));
}

// gelu_grad: with q = 1 + t = 2y / x (y = gelu(x); 1 for |x| < 2^-60, where 1 + t rounds to 1),
// d_y·(0.5q + 0.5x·q(2 - q)·√(2/π)(1 + 3·0.044715x²)). x is replaced by 1 where q is 1, so the
// unselected 2y / 0 leaks no NaN into second derivatives.
Tensor gelu_grad_decomposed(const Tensor& x, const Tensor& y, const Tensor& dy) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  Tensor small = abs(x) < std::ldexp(1.0, -60), one = ones_like(x);
  Tensor q = where(small, one, (y + y) / where(small, one, x));
  Tensor du = c * (1.0 + (3 * 0.044715) * (x * x));
  return dy * (0.5 * q + ((0.5 * x) * (q * (2.0 - q))) * du);
}

}  // namespace

Tensor gelu_decomposed(const Tensor& x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  ir::Builder& b = logits.builder();
  return {&b, b.cross_entropy(logits.id(), labels.id())};
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                  double eps) {
  ir::Builder& b = x.builder();
  return {&b, b.layer_norm(x.id(), weight.id(), bias ? bias->id() : -1, eps)};
}

ValueId decompose(ir::Builder& b, const ir::Node& n, std::span<const ValueId> operands) {
  BuilderScope scope(b);
  auto t = [&](size_t i) { return Tensor(&b, operands[i]); };
  const ir::Attrs& a = n.attrs;
  switch (n.op) {
    case ir::Op::attention: {
      std::optional<Tensor> mask;
      if (operands.size() == 4) mask = t(3);
      return attention_decomposed(t(0), t(1), t(2), mask, a.scale, a.causal).id();
    }
    case ir::Op::attention_grad: {
      std::optional<Tensor> mask;
      if (operands.size() == 6) mask = t(5);
      return attention_grad_decomposed(t(0), t(1), t(2), t(3), t(4), mask, a.scale, a.causal).id();
    }
    case ir::Op::layer_norm: {
      std::optional<Tensor> bias;
      if (operands.size() == 3) bias = t(2);
      return layer_norm_decomposed(t(0), t(1), bias, a.epsilon).id();
    }
    case ir::Op::layer_norm_grad:
      return layer_norm_grad_decomposed(t(0), t(1), t(2), a.epsilon).id();
    case ir::Op::cross_entropy:
      return cross_entropy_decomposed(t(0), t(1)).id();
    case ir::Op::cross_entropy_grad:
      return cross_entropy_grad_decomposed(t(0), t(1), t(2)).id();
    case ir::Op::gelu:
      return gelu_decomposed(t(0)).id();
    case ir::Op::gelu_grad:
      return gelu_grad_decomposed(t(0), t(1), t(2)).id();
    default:
      fail("decompose: {} is not a composite op", ir::op_name(n.op));
  }
}

ir::Function expand_composites(const ir::Function& f) {
  bool any = false;
  for (const auto& n : f.nodes) any = any || ir::is_composite(n.op);
  if (!any) return f;
  ir::Builder b(f.name);
  BuilderScope scope(b);
  std::vector<ValueId> map(f.nodes.size(), -1);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    std::string nm = i < f.input_names.size() ? f.input_names[i] : "";
    map[size_t(f.inputs[i])] = b.parameter(f.input_type(int(i)), nm);
  }
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const ir::Node& n = f.nodes[i];
    if (n.op == ir::Op::parameter) continue;
    std::vector<ValueId> ops;
    for (ValueId o : n.operands) ops.push_back(map[size_t(o)]);
    if (ir::is_composite(n.op)) {
      map[i] = decompose(b, n, ops);
    } else {
      ir::Node c = n;
      c.operands = std::move(ops);
      map[i] = b.add(std::move(c));
    }
  }
  std::vector<ValueId> results;
  for (ValueId r : f.results) results.push_back(map[size_t(r)]);
  ir::Function g = b.build(results, f.output_names);
  g.aliases = f.aliases;
  return g;
}

std::vector<ValueId> inline_function(ir::Builder& b, const ir::Function& g,
                                     std::span<const ValueId> args) {
  if (args.size() != g.inputs.size())
    fail("inline {}: {} arguments for {} inputs", g.name, args.size(), g.inputs.size());
  std::vector<ValueId> map(g.nodes.size(), -1);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (b.type(args[i]) != g.input_type(int(i)))
      fail("inline {}: argument {} is {}, input is {}", g.name, i, to_string(b.type(args[i])),
           to_string(g.input_type(int(i))));
    map[size_t(g.inputs[i])] = args[i];
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op == ir::Op::parameter) continue;
    ir::Node c = n;
    for (auto& o : c.operands) o = map[size_t(o)];
    map[i] = b.add(std::move(c));
  }
  std::vector<ValueId> out;
  for (ValueId r : g.results) out.push_back(map[size_t(r)]);
  return out;
}

}  // namespace tlaloc::trace
