// The attention composites' decompositions (attention.cpp's header states them): the masked
// softmax in plain ops, as JAX and PyTorch write it where every row sees a key, guarded by
// selects against empty rows elsewhere; the query heads that share a kv head in a 5-D
// [B, Hkv, G, S, *] layout, the operands' own 4-D one when each kv head serves one query head;
// bf16 q, k, v with preferred-f32 dots and the bf16 roundings of the mixed-precision rule.
#include <cmath>
#include <optional>

#include "tlaloc/composites/attention_internal.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::composites::attention_detail {
namespace {

using ir::ValueId;
using trace::Tensor;

struct Dims {
  int64_t B, Hq, S, D, Hkv, T, Dv, G;
  // Grouped layout [B, Hkv, G, S, w] when G > 1, else [B, Hq, S, w]: g is the extra dim's count,
  // so a query-side tensor's S dim is 2 + g.
  int64_t g() const { return G > 1 ? 1 : 0; }
  Shape rows(int64_t w) const { return G > 1 ? Shape{B, Hkv, G, S, w} : Shape{B, Hq, S, w}; }
  // The (G, S) dims a kv-side result sums over.
  std::vector<int64_t> group_rows() const {
    return G > 1 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{2};
  }
};

// bf16 operands accumulate and return f32 (preferred_element_type).
Tensor dot(const Tensor& a, const Tensor& b, ir::DotDims dims) {
  ir::Builder& bl = a.builder();
  std::optional<DType> pref;
  if (a.dtype() == DType::bf16) pref = DType::f32;
  return {&bl, bl.dot_general(a.id(), b.id(), std::move(dims), pref)};
}

// x rounded to bf16 when the attention runs in bf16 (v's dtype), else x.
Tensor like_v(const Tensor& x, const Tensor& v) {
  return v.dtype() == DType::bf16 ? astype(x, DType::bf16) : x;
}

Dims dims_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  Dims d{q.dim(0), q.dim(1), q.dim(2), q.dim(3), k.dim(1), k.dim(2), v.dim(3), 0};
  d.G = d.Hq / d.Hkv;
  return d;
}

// Visibility i1 rows(T) (or nullopt: everything visible).
std::optional<Tensor> visible(const Dims& d, const std::optional<Tensor>& key_mask, bool causal) {
  std::optional<Tensor> vis;
  const Shape full = d.rows(d.T);
  if (causal) {
    Tensor i = trace::iota(Shape{d.S, d.T}, 0), j = trace::iota(Shape{d.S, d.T}, 1);
    vis = broadcast_to(i + double(d.T - d.S) >= j, full);
  }
  if (key_mask) {
    std::vector<int64_t> km_dims(size_t(full.rank()), 1);
    km_dims.front() = d.B;
    km_dims.back() = d.T;
    Tensor km = broadcast_to(reshape(*key_mask, km_dims), full);
    vis = vis ? (*vis & km) : km;
  }
  return vis;
}

// Scores scale·q·kᵀ rows(T) with hidden entries -inf; `qr` is q in rows(D).
Tensor masked_scores(const Dims& d, const Tensor& qr, const Tensor& k,
                     const std::optional<Tensor>& vis, double scale) {
  Tensor s = dot(qr, k, {{0, 1}, {0, 1}, {3 + d.g()}, {3}}) * scale;
  return vis ? where(*vis, s, full_like(s, -INFINITY)) : s;
}

}  // namespace

std::vector<ValueId> decompose(ir::Builder& b, const ir::Node& n, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor q(&b, ops[0]), k(&b, ops[1]), v(&b, ops[2]);
  std::optional<Tensor> mask;
  if (ops.size() == 4) mask = Tensor(&b, ops[3]);
  const Dims d = dims_of(q, k, v);
  const bool causal = n.attrs.params[kCausal] != 0;
  Tensor s = masked_scores(d, reshape(q, d.rows(d.D).dims), k, visible(d, mask, causal),
                           n.attrs.params[kScale]);
  Tensor m = max(s, {-1}, true);
  const auto pv = [&](const Tensor& p) {  // rows(Dv)
    return dot(like_v(p, v), v, {{0, 1}, {0, 1}, {3 + d.g()}, {2}});
  };
  std::optional<Tensor> o, lse;
  if (no_empty_rows(mask.has_value(), causal, d.S, d.T)) {  // the plain softmax
    Tensor e = exp(s - m);
    Tensor l = sum(e, {-1}, true);
    o = pv(e / l);
    lse = m + log(l);
  } else {  // guarded: an empty row (max -inf, sum 0) gives out 0 and log-sum-exp -inf
    Tensor m0 = where(m > -INFINITY, m, zeros_like(m));
    Tensor e = exp(s - m0);
    Tensor l = sum(e, {-1}, true);
    Tensor nonempty = l > 0.0;
    Tensor l1 = where(nonempty, l, ones_like(l));
    o = pv(e / l1);
    lse = where(nonempty, m0 + log(l1), full_like(l, -INFINITY));
  }
  return {reshape(*o, {d.B, d.Hq, d.S, d.Dv}).id(), reshape(*lse, {d.B, d.Hq, d.S}).id()};
}

std::vector<ValueId> decompose_grad(ir::Builder& b, const ir::Node& n,
                                    std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor q(&b, ops[0]), k(&b, ops[1]), v(&b, ops[2]);
  std::optional<Tensor> mask;
  if (ops.size() == 7) mask = Tensor(&b, ops[6]);
  const Dims d = dims_of(q, k, v);
  auto rows = [&](ValueId x, int64_t w) { return reshape(Tensor(&b, x), d.rows(w).dims); };
  Tensor o = rows(ops[3], d.Dv), lse = rows(ops[4], 1), dout = rows(ops[5], d.Dv);
  const Tensor qr = reshape(q, d.rows(d.D).dims);
  const bool causal = n.attrs.params[kCausal] != 0;
  Tensor s = masked_scores(d, qr, k, visible(d, mask, causal), n.attrs.params[kScale]);
  // Hidden entries: exp(-inf) = 0. Guarded, a log-sum-exp of -inf (an empty row) shifts by 0,
  // so that row's p is 0.
  Tensor p = no_empty_rows(mask.has_value(), causal, d.S, d.T)
                 ? exp(s - lse)
                 : exp(s - where(lse > -INFINITY, lse, zeros_like(lse)));
  const Tensor dout_v = like_v(dout, v);
  const std::vector<int64_t> gs = d.group_rows();
  const int64_t last = 3 + d.g();
  Tensor dv = dot(like_v(p, v), dout_v, {{0, 1}, {0, 1}, gs, gs});  // [B,Hkv,T,Dv]
  Tensor dp = dot(dout_v, v, {{0, 1}, {0, 1}, {last}, {3}});        // rows(T)
  Tensor delta = sum(dout * o, {-1}, true);
  const double scale = n.attrs.params[kScale];
  Tensor dq, dk;
  if (v.dtype() == DType::bf16) {  // scale·ds rounded once for both dots
    Tensor ds = astype(p * (dp - delta) * scale, DType::bf16);
    dq = astype(dot(ds, k, {{0, 1}, {0, 1}, {last}, {2}}), DType::bf16);
    dk = astype(dot(ds, qr, {{0, 1}, {0, 1}, gs, gs}), DType::bf16);
    dv = astype(dv, DType::bf16);
  } else {
    Tensor ds = p * (dp - delta);
    dq = dot(ds, k, {{0, 1}, {0, 1}, {last}, {2}}) * scale;  // rows(D)
    dk = dot(ds, qr, {{0, 1}, {0, 1}, gs, gs}) * scale;      // [B,Hkv,T,D]
  }
  return {reshape(dq, {d.B, d.Hq, d.S, d.D}).id(), dk.id(), dv.id()};
}

}  // namespace tlaloc::composites::attention_detail
