// VJP rules of the structural ops (data movement, dot_general, reduce). Each is the transpose
// of the op's linear map in its differentiable operand (JAX's transpose rules, e.g.
// jax/_src/lax/slicing.py and lax.py): slice <-> pad, gather <-> scatter-add,
// broadcast <-> reduce-sum, dot_general <-> dot_general.
#include <algorithm>
#include <numeric>

#include "tlaloc/autodiff/rules.h"

namespace tlaloc::autodiff::detail {

using Dims = std::vector<int64_t>;
using ir::Op;
using ir::ReduceKind;

namespace {

std::vector<ValueId> index_operands(const RuleCtx& c, size_t first) {
  return {c.n.operands.begin() + long(first), c.n.operands.end()};
}

// Whether v is a constant whose entries all lie in [0, rows).
bool constant_rows_in_range(const RuleCtx& c, ValueId v, int64_t rows) {
  const ir::Node& n = c.b.function().nodes[size_t(v)];
  if (n.op != Op::constant) return false;
  for (int64_t i = 0; i < n.attrs.value->numel(); ++i) {
    double r = n.attrs.value->at(i);
    if (r < 0 || r >= double(rows)) return false;
  }
  return true;
}

bool is_identity(const Dims& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

// Permutation that brings a tensor whose dim p is operand dim res_dims[p] into operand order.
Dims to_operand_order(const Dims& res_dims) {
  Dims perm(res_dims.size());
  for (size_t p = 0; p < res_dims.size(); ++p) perm[size_t(res_dims[p])] = int64_t(p);
  return perm;
}

}  // namespace

Grads vjp_broadcast_in_dim(const RuleCtx& c) {
  const Dims& bd = c.n.attrs.broadcast_dimensions;
  const Shape os = c.type(c.operand(0)).shape;
  const Shape rs = c.type(c.out).shape;
  ValueId g = c.ct;
  Dims extra;
  for (int64_t d = 0; d < rs.rank(); ++d)
    if (std::find(bd.begin(), bd.end(), d) == bd.end()) extra.push_back(d);
  if (!extra.empty()) g = c.b.reduce(g, ReduceKind::sum, extra);
  // g's dims are now the result dims in bd, ascending; bring them into operand order.
  Dims sorted = bd;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != bd) {
    Dims perm;
    for (int64_t d : bd)
      perm.push_back(int64_t(std::find(sorted.begin(), sorted.end(), d) - sorted.begin()));
    g = c.b.transpose(g, perm);
  }
  Dims expanded;  // operand dims of size 1 broadcast to more
  for (size_t i = 0; i < bd.size(); ++i)
    if (os[int64_t(i)] == 1 && rs[bd[i]] != 1) expanded.push_back(int64_t(i));
  if (!expanded.empty()) g = c.b.reshape(c.b.reduce(g, ReduceKind::sum, expanded), os);
  return {g};
}

Grads vjp_reshape(const RuleCtx& c) { return {c.b.reshape(c.ct, c.type(c.operand(0)).shape)}; }

Grads vjp_transpose(const RuleCtx& c) {
  return {c.b.transpose(c.ct, to_operand_order(c.n.attrs.permutation))};
}

Grads vjp_slice(const RuleCtx& c) {
  const ir::Attrs& a = c.n.attrs;
  const ir::TensorType ot = c.type(c.operand(0));
  const Shape rs = c.type(c.out).shape;
  if (rs.numel() == 0) return {c.zeros(ot)};
  Dims lo, hi, interior;
  for (int64_t d = 0; d < rs.rank(); ++d) {
    size_t i = size_t(d);
    int64_t last = a.start_indices[i] + (rs[d] - 1) * a.strides[i];
    lo.push_back(a.start_indices[i]);
    hi.push_back(ot.shape[d] - last - 1);
    interior.push_back(a.strides[i] - 1);
  }
  return {c.b.pad(c.ct, c.b.scalar(ot.dtype, 0), lo, hi, interior)};
}

Grads vjp_concatenate(const RuleCtx& c) {
  int64_t dim = c.n.attrs.dimension, off = 0;
  const Shape rs = c.type(c.out).shape;
  Grads r;
  for (size_t k = 0; k < c.n.operands.size(); ++k) {
    int64_t size = c.type(c.operand(k)).shape[dim];
    if (c.need[k]) {
      Dims start(size_t(rs.rank()), 0), limit = rs.dims;
      start[size_t(dim)] = off;
      limit[size_t(dim)] = off + size;
      r.push_back(c.b.slice(c.ct, start, limit));
    } else {
      r.push_back(-1);
    }
    off += size;
  }
  return r;
}

Grads vjp_pad(const RuleCtx& c) {
  const ir::Attrs& a = c.n.attrs;
  const ir::TensorType ot = c.type(c.operand(0));
  ValueId inner;  // the cotangent at the operand's positions
  if (ot.shape.numel() == 0) {
    inner = c.zeros(ot);
  } else {
    Dims start, limit, strides;
    for (int64_t d = 0; d < ot.shape.rank(); ++d) {
      size_t i = size_t(d);
      start.push_back(a.edge_padding_low[i]);
      limit.push_back(a.edge_padding_low[i] + (ot.shape[d] - 1) * (a.interior_padding[i] + 1) + 1);
      strides.push_back(a.interior_padding[i] + 1);
    }
    inner = c.b.slice(c.ct, start, limit, strides);
  }
  ValueId gv = -1;
  if (c.need[1]) {  // the padding value receives everything not at an operand position
    Tensor total = trace::sum(c.ct_t());
    gv = ot.shape.numel() == 0 ? total.id() : (total - trace::sum(c.t(inner))).id();
  }
  return {c.need[0] ? inner : -1, gv};
}

Grads vjp_dynamic_slice(const RuleCtx& c) {
  const ir::TensorType ot = c.type(c.operand(0));
  Grads r(c.n.operands.size(), -1);
  r[0] = c.b.dynamic_update_slice(c.zeros(ot), c.ct, index_operands(c, 1));
  return r;
}

Grads vjp_dynamic_update_slice(const RuleCtx& c) {
  const ir::TensorType ut = c.type(c.operand(1));
  auto starts = index_operands(c, 2);
  Grads r(c.n.operands.size(), -1);
  if (c.need[0]) r[0] = c.b.dynamic_update_slice(c.ct, c.zeros(ut), starts);
  if (c.need[1]) r[1] = c.b.dynamic_slice(c.ct, starts, ut.shape.dims);
  return r;
}

Grads vjp_gather(const RuleCtx& c) {
  const ir::TensorType ot = c.type(c.operand(0));
  ValueId idx = c.operand(1);
  int64_t rows = ot.shape[0];
  if (!constant_rows_in_range(c, idx, rows)) {  // scatter skips rows gather clamped: clamp here
    DType it = c.type(idx).dtype;
    idx = c.b.clamp(c.b.scalar(it, 0), idx, c.b.scalar(it, double(rows - 1)));
  }
  return {c.b.scatter(c.zeros(ot), idx, c.ct), -1};
}

Grads vjp_scatter(const RuleCtx& c) {
  ValueId idx = c.operand(1);
  Grads r{c.need[0] ? c.ct : -1, -1, -1};
  if (!c.need[2]) return r;
  int64_t rows = c.type(c.operand(0)).shape[0];
  ValueId rows_g = c.b.gather(c.ct, idx);
  if (constant_rows_in_range(c, idx, rows)) {
    r[2] = rows_g;
    return r;
  }
  // Rows scatter skipped (out of range) contributed nothing: their updates get 0.
  Tensor i = c.t(idx);
  Tensor valid = (i >= trace::zeros_like(i)) & (i < trace::full_like(i, double(rows)));
  const ir::TensorType ut = c.type(c.operand(2));
  Dims dims(size_t(i.rank()));
  std::iota(dims.begin(), dims.end(), 0);
  ValueId vb = c.b.broadcast_in_dim(valid.id(), ut.shape, dims);
  r[2] = c.b.select(vb, rows_g, c.zeros(ut));
  return r;
}

namespace {

struct DotSide {
  Dims batch, contract, free;
};

Dims free_dims(int64_t rank, const Dims& batch, const Dims& contract) {
  Dims f;
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
        std::find(contract.begin(), contract.end(), i) == contract.end())
      f.push_back(i);
  return f;
}

// Cotangent of operand X of y = dot_general(...), from the other operand Y. In the cotangent,
// batch dims come first, then X's and Y's free dims; Y's sit at positions y_pos. Two dot_generals
// give it: dot(ct, Y) -> [batch, X free, X contract*] or dot(Y, ct) -> [batch, X contract*, X free]
// (* in Y's contracting-dim order, ascending); the one already in X's dim order is used,
// otherwise the first is followed by a transpose. A dot of bf16 / f16 operands with an f32
// result (preferred_element_type) takes its cotangent rounded to the operands' type, as
// PyTorch's autocast backward does, and its gradients come out in that type.
ValueId dot_operand_grad(const RuleCtx& c, ValueId y, const DotSide& xs, const DotSide& ys,
                         const Dims& y_pos) {
  const DType od = c.type(y).dtype;
  const ValueId ct = c.type(c.ct).dtype == od ? c.ct : c.b.convert(c.ct, od);
  Dims batch_ct(xs.batch.size());
  std::iota(batch_ct.begin(), batch_ct.end(), 0);
  Dims y_rest = ys.contract;  // Y dims left after contracting Y's free dims
  std::sort(y_rest.begin(), y_rest.end());
  Dims mapped;  // X dim of each y_rest entry
  for (int64_t d : y_rest) {
    size_t j = size_t(std::find(ys.contract.begin(), ys.contract.end(), d) - ys.contract.begin());
    mapped.push_back(xs.contract[j]);
  }
  Dims first = xs.batch, second = xs.batch;  // X dim at each result position
  first.insert(first.end(), xs.free.begin(), xs.free.end());
  first.insert(first.end(), mapped.begin(), mapped.end());
  second.insert(second.end(), mapped.begin(), mapped.end());
  second.insert(second.end(), xs.free.begin(), xs.free.end());
  if (!is_identity(to_operand_order(first)) && is_identity(to_operand_order(second)))
    return c.b.dot_general(y, ct, {ys.batch, batch_ct, ys.free, y_pos});
  ValueId g = c.b.dot_general(ct, y, {batch_ct, ys.batch, y_pos, ys.free});
  Dims perm = to_operand_order(first);
  return is_identity(perm) ? g : c.b.transpose(g, perm);
}

}  // namespace

Grads vjp_dot_general(const RuleCtx& c) {
  const ir::Attrs& a = c.n.attrs;
  ValueId lhs = c.operand(0), rhs = c.operand(1);
  int64_t lr = c.type(lhs).shape.rank(), rr = c.type(rhs).shape.rank();
  DotSide l{a.lhs_batching_dimensions, a.lhs_contracting_dimensions, {}};
  DotSide r{a.rhs_batching_dimensions, a.rhs_contracting_dimensions, {}};
  l.free = free_dims(lr, l.batch, l.contract);
  r.free = free_dims(rr, r.batch, r.contract);
  int64_t nb = int64_t(l.batch.size()), nl = int64_t(l.free.size());
  Dims l_pos(l.free.size(), 0), r_pos(r.free.size(), 0);
  std::iota(l_pos.begin(), l_pos.end(), nb);
  std::iota(r_pos.begin(), r_pos.end(), nb + nl);
  Grads g{-1, -1};
  if (c.need[0]) g[0] = dot_operand_grad(c, rhs, l, r, r_pos);
  if (c.need[1]) g[1] = dot_operand_grad(c, lhs, r, l, l_pos);
  return g;
}

Grads vjp_reduce(const RuleCtx& c) {
  const ir::Attrs& a = c.n.attrs;
  const ir::TensorType ot = c.type(c.operand(0));
  Dims kept;
  for (int64_t d = 0; d < ot.shape.rank(); ++d)
    if (std::find(a.dimensions.begin(), a.dimensions.end(), d) == a.dimensions.end())
      kept.push_back(d);
  auto back = [&](ValueId v) { return c.b.broadcast_in_dim(v, ot.shape, kept); };
  if (a.reduce_kind == ReduceKind::sum) return {back(c.ct)};
  // max / min: the cotangent goes to the entries equal to the result, split equally at ties.
  Tensor x = c.x(0);
  Tensor hit = trace::equal(x, c.t(back(c.out)));
  Tensor z = trace::zeros_like(x);
  Tensor count = c.t(
      c.b.reduce(trace::where(hit, trace::ones_like(x), z).id(), ReduceKind::sum, a.dimensions));
  Tensor share = c.t(back((c.ct_t() / count).id()));
  return {trace::where(hit, share, z).id()};
}

Grads vjp_all_reduce(const RuleCtx& c) {
  if (c.n.attrs.reduce_kind != ir::ReduceKind::sum)
    fail("autodiff: no VJP of all_reduce {}", ir::name(c.n.attrs.reduce_kind));
  return {c.b.add(ir::Node{ir::Op::all_reduce, {}, {c.ct}, c.n.attrs})};
}

}  // namespace tlaloc::autodiff::detail
