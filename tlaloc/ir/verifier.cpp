// Shape and dtype inference for every op, and whole-function verification.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/ir/scalar.h"
#include "tlaloc/ir/verifier_rules.h"

namespace tlaloc::ir {
namespace {

using namespace verifier;

using Dims = std::vector<int64_t>;

bool numeric(DType t) { return t != DType::i1; }

// The dtype rule of an elementwise op with a scalar formula: the formula's `types` mask.
void check_formula_dtype(const Ctx& c, Op op, DType t) {
  const int types = op_record(op).dtypes;
  const int k = is_floating(t)    ? scalar::kF
                : t == DType::s32 ? scalar::kS
                : t == DType::u32 ? scalar::kU
                                  : scalar::kB;
  if (types & k) return;
  using namespace scalar;
  const char* what = types == kF               ? "a floating dtype"
                     : types == (kF | kS)      ? "a signed numeric dtype"
                     : types == (kF | kS | kU) ? "a numeric dtype"
                     : types == (kS | kU | kB) ? "an integer or i1 dtype"
                     : types == (kS | kU)      ? "an integer dtype"
                                               : "another dtype";
  c.error("needs {}, got {}", what, name(t));
}

// A composite's operand count and result types (its record's type rule).
std::vector<TensorType> infer_composite(const Ctx& c, const Attrs& a) {
  const Composite& rec = composite(c.op);
  const int n = int(c.in.size());
  if (n < rec.min_operands || n > rec.max_operands) {
    if (rec.min_operands == rec.max_operands)
      c.error("expects {} operands, got {}", rec.min_operands, n);
    c.error("expects {} to {} operands, got {}", rec.min_operands, rec.max_operands, n);
  }
  if (a.params.size() != rec.params.size())
    c.error("has {} attributes, expects {} ({})", a.params.size(), rec.params.size(),
            fmt::join(rec.params, ", "));
  try {
    return rec.infer(c.in, a);
  } catch (const Error& e) {
    fail("{}: {} (operands {})", op_name(c.op), e.what(), types_str(c.in));
  }
}

TensorType infer_structural(const Ctx& c, const Attrs& a, const TensorType& declared) {
  auto& in = c.in;
  switch (c.op) {
    case Op::broadcast_in_dim: {
      c.arity(1);
      const Shape& s = declared.shape;
      auto& bd = a.broadcast_dimensions;
      if (int64_t(bd.size()) != in[0].shape.rank())
        c.error("broadcast_dimensions {} has {} entries for an operand of rank {}", bd, bd.size(),
                in[0].shape.rank());
      c.axes(bd, s.rank(), "broadcast_dimensions");
      for (size_t i = 0; i < bd.size(); ++i) {
        int64_t od = in[0].shape[int64_t(i)], rd = s[bd[i]];
        if (od != 1 && od != rd)
          c.error("operand dim {} (size {}) cannot broadcast to result dim {} (size {}) of {}", i,
                  od, bd[i], rd, to_string(s));
      }
      return {in[0].dtype, s};
    }
    case Op::reshape:
      c.arity(1);
      if (declared.shape.numel() != in[0].shape.numel())
        c.error("cannot reshape to {}: {} vs {} elements", to_string(declared.shape),
                declared.shape.numel(), in[0].shape.numel());
      return {in[0].dtype, declared.shape};
    case Op::transpose: {
      c.arity(1);
      int64_t r = in[0].shape.rank();
      if (int64_t(a.permutation.size()) != r)
        c.error("permutation {} for rank {}", a.permutation, r);
      c.axes(a.permutation, r, "permutation");
      Shape s;
      for (int64_t p : a.permutation) s.dims.push_back(in[0].shape[p]);
      return {in[0].dtype, s};
    }
    case Op::slice: {
      c.arity(1);
      int64_t r = in[0].shape.rank();
      auto& st = a.start_indices;
      auto& li = a.limit_indices;
      auto& sd = a.strides;
      if (int64_t(st.size()) != r || int64_t(li.size()) != r || int64_t(sd.size()) != r)
        c.error("start {} limit {} strides {} must each have rank {} entries", st, li, sd, r);
      Shape s;
      for (int64_t i = 0; i < r; ++i) {
        if (st[i] < 0 || st[i] > li[i] || li[i] > in[0].shape[i] || sd[i] < 1)
          c.error("bad bounds on dim {}: start {} limit {} stride {} for size {}", i, st[i], li[i],
                  sd[i], in[0].shape[i]);
        s.dims.push_back((li[i] - st[i] + sd[i] - 1) / sd[i]);
      }
      return {in[0].dtype, s};
    }
    case Op::concatenate: {
      if (in.empty()) c.error("needs at least one operand");
      int64_t r = in[0].shape.rank(), d = a.dimension;
      if (d < 0 || d >= r) c.error("dimension {} out of range for rank {}", d, r);
      Shape s = in[0].shape;
      for (size_t k = 1; k < in.size(); ++k) {
        if (in[k].dtype != in[0].dtype || in[k].shape.rank() != r) c.error("operand {} differs", k);
        for (int64_t i = 0; i < r; ++i)
          if (i != d && in[k].shape[i] != s[i]) c.error("operand {} differs on dim {}", k, i);
        s[d] += in[k].shape[d];
      }
      return {in[0].dtype, s};
    }
    case Op::pad: {
      c.arity(2);
      int64_t r = in[0].shape.rank();
      if (in[1].shape.rank() != 0 || in[1].dtype != in[0].dtype)
        c.error("padding value must be a scalar of the operand's dtype");
      auto& lo = a.edge_padding_low;
      auto& hi = a.edge_padding_high;
      auto& it = a.interior_padding;
      if (int64_t(lo.size()) != r || int64_t(hi.size()) != r || int64_t(it.size()) != r)
        c.error("low {} high {} interior {} must each have rank {} entries", lo, hi, it, r);
      Shape s;
      for (int64_t i = 0; i < r; ++i) {
        if (lo[i] < 0 || hi[i] < 0 || it[i] < 0)
          c.error("negative padding on dim {} (low {} high {} interior {})", i, lo[i], hi[i],
                  it[i]);
        int64_t n = in[0].shape[i];
        s.dims.push_back(lo[i] + hi[i] + n + std::max<int64_t>(n - 1, 0) * it[i]);
      }
      return {in[0].dtype, s};
    }
    case Op::dynamic_slice: {
      int64_t r = in.empty() ? 0 : in[0].shape.rank();
      c.arity(size_t(r) + 1);
      if (int64_t(a.slice_sizes.size()) != r)
        c.error("slice_sizes {} for rank {}", a.slice_sizes, r);
      for (int64_t i = 0; i < r; ++i) {
        if (in[size_t(i) + 1].shape.rank() != 0 || !is_integer(in[size_t(i) + 1].dtype))
          c.error("start index {} must be an integer scalar", i);
        if (a.slice_sizes[size_t(i)] < 0 || a.slice_sizes[size_t(i)] > in[0].shape[i])
          c.error("slice size {} on dim {} of size {}", a.slice_sizes[size_t(i)], i,
                  in[0].shape[i]);
      }
      return {in[0].dtype, Shape(a.slice_sizes)};
    }
    case Op::dynamic_update_slice: {
      int64_t r = in.empty() ? 0 : in[0].shape.rank();
      c.arity(size_t(r) + 2);
      if (in[1].dtype != in[0].dtype || in[1].shape.rank() != r)
        c.error("update must have the operand's dtype and rank");
      for (int64_t i = 0; i < r; ++i) {
        if (in[size_t(i) + 2].shape.rank() != 0 || !is_integer(in[size_t(i) + 2].dtype))
          c.error("start index {} must be an integer scalar", i);
        if (in[1].shape[i] > in[0].shape[i]) c.error("update larger than operand on dim {}", i);
      }
      return in[0];
    }
    case Op::gather: {
      c.arity(2);
      if (in[0].shape.rank() < 1) c.error("operand must have rank >= 1");
      if (!is_integer(in[1].dtype)) c.error("indices must be s32 or u32");
      Shape s = in[1].shape;
      for (int64_t i = 1; i < in[0].shape.rank(); ++i) s.dims.push_back(in[0].shape[i]);
      return {in[0].dtype, s};
    }
    case Op::scatter: {
      c.arity(3);
      if (in[0].shape.rank() < 1) c.error("operand must have rank >= 1");
      if (!is_integer(in[1].dtype)) c.error("indices must be s32 or u32");
      if (!numeric(in[0].dtype)) c.error("needs a numeric dtype");
      Shape s = in[1].shape;
      for (int64_t i = 1; i < in[0].shape.rank(); ++i) s.dims.push_back(in[0].shape[i]);
      if (in[2].dtype != in[0].dtype || in[2].shape != s)
        c.error("updates must be {}{}", name(in[0].dtype), to_string(s));
      return in[0];
    }
    case Op::dot_general: {
      c.arity(2);
      auto &l = in[0], &r = in[1];
      if (l.dtype != r.dtype || !is_floating(l.dtype)) c.error("needs equal floating dtypes");
      auto &lb = a.lhs_batching_dimensions, &rb = a.rhs_batching_dimensions;
      auto &lc = a.lhs_contracting_dimensions, &rc = a.rhs_contracting_dimensions;
      if (lb.size() != rb.size() || lc.size() != rc.size())
        c.error("batching {} vs {} or contracting {} vs {} differ in length", lb, rb, lc, rc);
      Dims la = lb, ra = rb;
      la.insert(la.end(), lc.begin(), lc.end());
      ra.insert(ra.end(), rc.begin(), rc.end());
      c.axes(la, l.shape.rank(), "lhs batching+contracting dimensions");
      c.axes(ra, r.shape.rank(), "rhs batching+contracting dimensions");
      for (size_t i = 0; i < lb.size(); ++i)
        if (l.shape[lb[i]] != r.shape[rb[i]])
          c.error("batch dim lhs {} (size {}) vs rhs {} (size {})", lb[i], l.shape[lb[i]], rb[i],
                  r.shape[rb[i]]);
      for (size_t i = 0; i < lc.size(); ++i)
        if (l.shape[lc[i]] != r.shape[rc[i]])
          c.error("contracting dim lhs {} (size {}) vs rhs {} (size {})", lc[i], l.shape[lc[i]],
                  rc[i], r.shape[rc[i]]);
      Shape s;
      for (int64_t d : lb) s.dims.push_back(l.shape[d]);
      for (int64_t i = 0; i < l.shape.rank(); ++i)
        if (std::find(la.begin(), la.end(), i) == la.end()) s.dims.push_back(l.shape[i]);
      for (int64_t i = 0; i < r.shape.rank(); ++i)
        if (std::find(ra.begin(), ra.end(), i) == ra.end()) s.dims.push_back(r.shape[i]);
      if (auto p = a.preferred_element_type; p && *p != l.dtype) {
        if (*p != DType::f32 || (l.dtype != DType::bf16 && l.dtype != DType::f16))
          c.error("preferred_element_type {} of {} operands: only bf16 / f16 -> f32", name(*p),
                  name(l.dtype));
        return {*p, s};
      }
      return {l.dtype, s};
    }
    case Op::reduce: {
      c.arity(1);
      if (!numeric(in[0].dtype)) c.error("needs a numeric dtype");
      c.axes(a.dimensions, in[0].shape.rank(), "dimensions");
      Shape s;
      for (int64_t i = 0; i < in[0].shape.rank(); ++i)
        if (std::find(a.dimensions.begin(), a.dimensions.end(), i) == a.dimensions.end())
          s.dims.push_back(in[0].shape[i]);
      return {in[0].dtype, s};
    }
    case Op::convolution:
      return infer_convolution(c, a);
    case Op::reverse:
      c.arity(1);
      c.axes(a.dimensions, in[0].shape.rank(), "dimensions");
      return in[0];
    case Op::reduce_window: {
      c.arity(1);
      if (!is_floating(in[0].dtype)) c.error("needs a floating dtype");
      const Dims& bd = a.base_dilations;
      const Dims& wd = a.window_dilations;
      window_checks(c, in[0].shape.rank(), a, true);
      Shape s;
      for (int64_t i = 0; i < in[0].shape.rank(); ++i) {
        const size_t k = size_t(i);
        s.dims.push_back(num_windows(c, in[0].shape[i], bd[k], a.padding_low[k], a.padding_high[k],
                                     a.window_dimensions[k], wd[k], a.window_strides[k]));
      }
      return {in[0].dtype, s};
    }
    case Op::select_and_scatter: {
      c.arity(2);
      if (!is_floating(in[0].dtype)) c.error("needs a floating dtype");
      if (in[1].dtype != in[0].dtype) c.error("source dtype differs from the operand's");
      const auto cmp = a.comparison_direction;
      if (cmp != Comparison::GE && cmp != Comparison::GT && cmp != Comparison::LE &&
          cmp != Comparison::LT)
        c.error("select direction {} (GE, GT, LE or LT)", name(cmp));
      window_checks(c, in[0].shape.rank(), a, false);
      Shape want;
      for (int64_t i = 0; i < in[0].shape.rank(); ++i) {
        const size_t k = size_t(i);
        want.dims.push_back(num_windows(c, in[0].shape[i], 1, a.padding_low[k], a.padding_high[k],
                                        a.window_dimensions[k], 1, a.window_strides[k]));
      }
      if (in[1].shape != want)
        c.error("source shape {} must be the window count {}", in[1].shape.dims, want.dims);
      return in[0];
    }
    case Op::all_reduce:
    case Op::all_gather: {
      c.arity(1);
      const int64_t n = replica_group_checks(c, a);
      const DType t = in[0].dtype;
      const int64_t r = in[0].shape.rank(), d = a.dimension;
      if (c.op == Op::all_reduce && !is_floating(t) && t != DType::s32 && t != DType::u32 &&
          (t != DType::i1 || a.reduce_kind == ReduceKind::sum))
        c.error("no {} reduction of {} values", name(a.reduce_kind), name(t));
      if (c.op == Op::all_reduce) return in[0];
      if (d < 0 || d >= r) c.error("dimension (all_gather_dim) {} out of range for rank {}", d, r);
      Shape s = in[0].shape;  // the gathered dim may overflow; other sizes check_size's
      if (__builtin_mul_overflow(s.dims[size_t(d)], n, &s.dims[size_t(d)]))
        c.error("gathered dim {} overflows int64", d);
      return {t, s};
    }
    default:
      c.error("is not a structural op");
  }
}

// Every value may get a buffer: its byte size must fit in int64 (a wrapped size would allocate a
// few bytes that kernels then write far past).
void check_size(const Ctx& c, const TensorType& t) {
  try {
    checked_nbytes(t.dtype, t.shape);
  } catch (const Error& e) {
    c.error("result {}", e.what());
  }
}

TensorType infer_unchecked(Op op, std::span<const TensorType> in, const Attrs& a,
                           const TensorType& declared) {
  Ctx c{op, in};
  switch (op_kind(op)) {
    case OpKind::Parameter:
      c.arity(0);
      return declared;
    case OpKind::Nullary:
      c.arity(0);
      if (op == Op::constant) {
        if (!a.value) c.error("has no value");
        return {a.value->dtype(), a.value->shape()};
      }
      if (declared.shape.rank() == 0 || a.dimension < 0 || a.dimension >= declared.shape.rank())
        c.error("iota_dimension {} out of range for {}", a.dimension, to_string(declared));
      if (declared.dtype == DType::i1) c.error("cannot produce i1");
      return declared;
    case OpKind::Unary:
      c.arity(1);
      if (op_record(op).formula) check_formula_dtype(c, op, in[0].dtype);
      return {op == Op::convert ? declared.dtype : in[0].dtype, in[0].shape};
    case OpKind::Binary:
      c.arity(2);
      if (in[0] != in[1]) c.error("operand types differ");
      if (op_record(op).formula) check_formula_dtype(c, op, in[0].dtype);
      return {op == Op::compare ? DType::i1 : in[0].dtype, in[0].shape};
    case OpKind::Ternary: {
      c.arity(3);
      if (op == Op::select) {
        if (in[0].dtype != DType::i1) c.error("pred must be i1");
        if (in[1] != in[2]) c.error("on_true and on_false types differ");
        if (in[0].shape.rank() != 0 && in[0].shape != in[1].shape)
          c.error("pred must be a scalar or of the operands' shape");
        return in[1];
      }
      for (int k : {0, 2})
        if (in[size_t(k)].dtype != in[1].dtype ||
            (in[size_t(k)].shape.rank() != 0 && in[size_t(k)].shape != in[1].shape))
          c.error("min and max must be scalars or of the operand's type");
      if (!numeric(in[1].dtype)) c.error("needs a numeric dtype");
      return in[1];
    }
    case OpKind::Structural:
      return infer_structural(c, a, declared);
    case OpKind::Composite:
      return infer_composite(c, a)[0];
    case OpKind::Result:
      c.error("needs its composite node: use result_types");
  }
  c.error("unknown op");
}

}  // namespace

TensorType infer_type(Op op, std::span<const TensorType> in, const Attrs& a,
                      const TensorType& declared) {
  TensorType t = infer_unchecked(op, in, a, declared);
  check_size(Ctx{op, in}, t);
  return t;
}

std::vector<TensorType> result_types(Op op, std::span<const TensorType> in, const Attrs& a) {
  if (op_kind(op) != OpKind::Composite) return {infer_type(op, in, a, {})};
  std::vector<TensorType> ts = infer_composite(Ctx{op, in}, a);
  for (const TensorType& t : ts) check_size(Ctx{op, in}, t);
  return ts;
}

void verify(const Function& f) {
  std::vector<TensorType> ops;
  std::vector<int> is_input(f.nodes.size(), 0);
  for (ValueId v : f.inputs) {
    if (v < 0 || size_t(v) >= f.nodes.size() || f.nodes[size_t(v)].op != Op::parameter)
      fail("function {}: input {} is not a parameter node", f.name, v);
    if (is_input[size_t(v)]++) fail("function {}: parameter %{} listed twice", f.name, v);
  }
  // Result types of the multi-result node being followed by its `result` nodes.
  std::vector<TensorType> multi;
  ValueId multi_id = -1;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const Node& n = f.nodes[i];
    if (n.op == Op::parameter && !is_input[i])
      fail("function {}: parameter %{} is not among the inputs", f.name, i);
    ops.clear();
    for (ValueId o : n.operands) {
      if (o < 0 || size_t(o) >= i)
        fail("function {}: %{} = {} uses %{} before it is defined", f.name, i, op_name(n.op), o);
      if (n.op != Op::result && is_multi_result(f, o))
        fail(
            "function {}: %{} = {} reads %{}, a node with several results (read its result "
            "nodes)",
            f.name, i, op_name(n.op), o);
      ops.push_back(f.nodes[size_t(o)].type);
    }
    const int64_t pending = multi_id >= 0 ? int64_t(multi.size()) - (int64_t(i) - multi_id - 1) : 0;
    if (n.op == Op::result) {
      const int64_t k = int64_t(i) - multi_id - 1;
      if (pending <= 0 || n.operands.size() != 1 || n.operands[0] != multi_id || n.attrs.index != k)
        fail(
            "function {}: %{} = result must follow its composite directly, in order (result #{} "
            "of %{})",
            f.name, i, n.attrs.index, n.operands.empty() ? -1 : n.operands[0]);
      if (n.type != multi[size_t(k)])
        fail("function {}: %{} = result #{} is declared {} but the composite gives {}", f.name, i,
             k, to_string(n.type), to_string(multi[size_t(k)]));
      continue;
    }
    if (pending > 0)
      fail("function {}: %{} ({}) has {} results but only {} result nodes follow it", f.name,
           multi_id, op_name(f.nodes[size_t(multi_id)].op), multi.size(), multi.size() - pending);
    std::vector<TensorType> ts;
    try {
      ts = op_kind(n.op) == OpKind::Composite ? result_types(n.op, ops, n.attrs)
                                              : std::vector{infer_type(n.op, ops, n.attrs, n.type)};
    } catch (const Error& e) {
      fail("function {}: %{}: {}", f.name, i, e.what());
    }
    if (ts[0] != n.type)
      fail("function {}: %{} = {} is declared {} but infers {}", f.name, i, op_name(n.op),
           to_string(n.type), to_string(ts[0]));
    multi_id = -1;
    multi.clear();
    if (ts.size() > 1) {
      multi_id = ValueId(i);
      multi = std::move(ts);
    }
  }
  if (multi_id >= 0 && int64_t(f.nodes.size()) - multi_id - 1 < int64_t(multi.size()))
    fail("function {}: %{} ({}) has {} results but not every result node follows it", f.name,
         multi_id, op_name(f.nodes[size_t(multi_id)].op), multi.size());
  for (ValueId r : f.results)
    if (r >= 0 && size_t(r) < f.nodes.size() && is_multi_result(f, r))
      fail("function {}: output %{} is a node with several results (return its result nodes)",
           f.name, r);
  for (ValueId r : f.results)
    if (r < 0 || size_t(r) >= f.nodes.size()) fail("function {}: result %{} undefined", f.name, r);
  std::vector<int> aliased_out(size_t(f.num_outputs()), 0), aliased_in(size_t(f.num_inputs()), 0);
  for (const Alias& al : f.aliases) {
    if (al.output < 0 || al.output >= f.num_outputs() || al.input < 0 || al.input >= f.num_inputs())
      fail("function {}: alias output {} -> input {} out of range", f.name, al.output, al.input);
    if (f.output_type(al.output) != f.input_type(al.input))
      fail("function {}: alias output {} {} vs input {} {}", f.name, al.output,
           to_string(f.output_type(al.output)), al.input, to_string(f.input_type(al.input)));
    if (aliased_out[size_t(al.output)]++)
      fail("function {}: output {} is aliased to more than one input", f.name, al.output);
    if (aliased_in[size_t(al.input)]++)
      fail("function {}: input {} is donated to more than one output", f.name, al.input);
  }
}

}  // namespace tlaloc::ir
