#include "tlaloc/passes/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "tlaloc/distributed/collective.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/ir/formula.h"

namespace tlaloc::passes {
namespace {

// acc = acc (kind) v, as reduce and reduce_window combine: a NaN wins max and min.
void combine(ir::ReduceKind kind, double& acc, double v) {
  if (kind == ir::ReduceKind::sum)
    acc += v;
  else if (std::isnan(v) || std::isnan(acc))
    acc = NAN;
  else
    acc = kind == ir::ReduceKind::max ? std::max(acc, v) : std::min(acc, v);
}

using ir::Op;
using Dims = std::vector<int64_t>;
using Vals = std::vector<double>;

// Calls fn(index, flat) for every index of `shape` in row-major order.
template <typename Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  int64_t n = shape.numel();
  Dims idx(size_t(shape.rank()), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(idx, flat);
    for (int64_t d = shape.rank() - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[d]) break;
      idx[size_t(d)] = 0;
    }
  }
}

int64_t flat_of(const Dims& idx, const std::vector<int64_t>& strides) {
  int64_t f = 0;
  for (size_t i = 0; i < idx.size(); ++i) f += idx[i] * strides[i];
  return f;
}

// Wraps an integer result to the 32-bit dtype (two's complement for s32).
double wrap(DType t, int64_t v) {
  uint32_t u = uint32_t(uint64_t(v));
  return t == DType::s32 ? double(int32_t(u)) : double(u);
}

bool compare(ir::Comparison c, double a, double b) {
  switch (c) {
    case ir::Comparison::EQ:
      return a == b;
    case ir::Comparison::NE:
      return a != b;
    case ir::Comparison::LT:
      return a < b;
    case ir::Comparison::LE:
      return a <= b;
    case ir::Comparison::GT:
      return a > b;
    case ir::Comparison::GE:
      return a >= b;
  }
  return false;
}

// ---- elementwise ops in the host lane's compute types, with the shared scalar formulas ------

// Calls fn.template operator()<T>() with dtype t's compute type (float for f32 / bf16 / f16,
// uint8_t for i1), as the host lane computes.
template <class Fn>
void by_compute(DType t, Fn&& fn) {
  switch (t) {
    case DType::f64:
      return fn.template operator()<double>();
    case DType::s32:
      return fn.template operator()<int32_t>();
    case DType::u32:
      return fn.template operator()<uint32_t>();
    case DType::i1:
      return fn.template operator()<uint8_t>();
    default:
      return fn.template operator()<float>();
  }
}

template <class T>
constexpr int type_bit = std::is_floating_point_v<T>   ? ir::scalar::kF
                         : std::is_same_v<T, int32_t>  ? ir::scalar::kS
                         : std::is_same_v<T, uint32_t> ? ir::scalar::kU
                                                       : ir::scalar::kB;

template <class T>
std::vector<T> values(const Array& a) {
  std::vector<double> d = a.to_doubles();
  std::vector<T> v(d.size());
  for (size_t i = 0; i < d.size(); ++i) v[i] = T(d[i]);
  return v;
}

// An op with a scalar formula (ir/formula.h), element by element; nullopt for other ops.
std::optional<Vals> by_formula(const ir::Node& n, std::span<const Array* const> ops) {
  std::optional<Vals> out;
  ir::with_formula(n.op, [&]<class F>() {
    by_compute(ops[0]->dtype(), [&]<class T>() {
      if constexpr ((F::types & type_bit<T>) != 0) {
        const std::vector<T> a = values<T>(*ops[0]);
        Vals r(a.size());
        if constexpr (ir::kUnaryFormula<F>) {
          for (size_t i = 0; i < a.size(); ++i) r[i] = double(F::template f<T>(a[i]));
        } else {
          const std::vector<T> b = values<T>(*ops[1]);
          for (size_t i = 0; i < a.size(); ++i) r[i] = double(F::template f<T>(a[i], b[i]));
        }
        out = std::move(r);
      }
    });
  });
  return out;
}

// convert as the host lane converts (ir/scalar.h): to bf16 / f16 with one rounding.
Vals convert_values(const Array& x, DType to) {
  Vals r(size_t(x.numel()));
  by_compute(x.dtype(), [&]<class S>() {
    const std::vector<S> v = values<S>(x);
    for (size_t i = 0; i < v.size(); ++i) {
      if (to == DType::bf16 || to == DType::f16) {
        if constexpr (std::is_same_v<S, float>)
          r[i] = v[i];
        else
          r[i] = ir::scalar::to_float_odd(double(v[i]));
        continue;
      }
      by_compute(to, [&]<class D>() { r[i] = double(ir::scalar::convert<D, S>(v[i])); });
    }
  });
  return r;
}

// clamp(lo, x, hi) = min(max(x, lo), hi) with the formulas' NaN and signed-zero rules; lo and hi
// may be scalars.
Vals clamp_values(std::span<const Array* const> ops) {
  Vals r(size_t(ops[1]->numel()));
  by_compute(ops[1]->dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, uint8_t>) {
      const std::vector<T> lo = values<T>(*ops[0]), x = values<T>(*ops[1]), hi = values<T>(*ops[2]);
      for (size_t i = 0; i < x.size(); ++i)
        r[i] = double(ir::scalar::Min::f<T>(ir::scalar::Max::f<T>(x[i], lo[lo.size() == 1 ? 0 : i]),
                                            hi[hi.size() == 1 ? 0 : i]));
    }
  });
  return r;
}

// Starts of a dynamic slice of `sizes` in `shape`, clamped to [0, dim - size].
Dims clamped_starts(std::span<const Array* const> ops, size_t first, const Shape& shape,
                    const Dims& sizes) {
  Dims s;
  for (int64_t d = 0; d < shape.rank(); ++d)
    s.push_back(std::clamp(int64_t(ops[first + size_t(d)]->at(0)), int64_t(0),
                           shape[d] - sizes[size_t(d)]));
  return s;
}

// StableHLO convolution, summed in f64: result[b, o, q...] = sum over the group's input features
// f and kernel positions k of lhs[b', f', x] * rhs[o, f, k], x the input position that window
// position q * stride + k * rhs_dilation - padding_low hits in the lhs-dilated input (none:
// padding or a dilation hole, contributing 0). Feature groups pick f' in o's group, batch groups
// b' = group * (batch / groups) + b.
Vals convolution(const ir::Node& n, const Shape& ls, const Shape& ks, const Vals& lhs,
                 const Vals& rhs) {
  const ir::Attrs& a = n.attrs;
  const ir::ConvDimensionNumbers& d = a.conv_dimension_numbers;
  const Shape& rs = n.type.shape;
  const size_t ns = d.input_spatial_dimensions.size();
  const int64_t kin = ks[d.kernel_input_feature_dimension];
  const int64_t kout = ks[d.kernel_output_feature_dimension];
  const int64_t groups = std::max(a.feature_group_count, a.batch_group_count);
  const int64_t out_batch = rs[d.output_batch_dimension];
  Shape window;
  for (int64_t k : d.kernel_spatial_dimensions) window.dims.push_back(ks[k]);
  const auto lst = ls.strides(), kst = ks.strides();
  Vals r(size_t(rs.numel()), 0.0);
  for_each_index(rs, [&](const Dims& i, int64_t flat) {
    const int64_t b = i[size_t(d.output_batch_dimension)];
    const int64_t o = i[size_t(d.output_feature_dimension)];
    const int64_t g = o / (kout / groups);
    const int64_t lb = a.batch_group_count > 1 ? g * out_batch + b : b;
    double acc = 0;
    for (int64_t f = 0; f < kin; ++f) {
      const int64_t lf = a.feature_group_count > 1 ? g * kin + f : f;
      for_each_index(window, [&](const Dims& k, int64_t) {
        int64_t lo =
            lb * lst[size_t(d.input_batch_dimension)] + lf * lst[size_t(d.input_feature_dimension)];
        int64_t ko = o * kst[size_t(d.kernel_output_feature_dimension)] +
                     f * kst[size_t(d.kernel_input_feature_dimension)];
        for (size_t s = 0; s < ns; ++s) {
          const int64_t q = i[size_t(d.output_spatial_dimensions[s])];
          const int64_t p = q * a.window_strides[s] + k[s] * a.rhs_dilation[s] - a.padding_low[s];
          const int64_t x = p / a.lhs_dilation[s];
          if (p < 0 || p % a.lhs_dilation[s] != 0 || x >= ls[d.input_spatial_dimensions[s]]) return;
          lo += x * lst[size_t(d.input_spatial_dimensions[s])];
          ko += k[s] * kst[size_t(d.kernel_spatial_dimensions[s])];
        }
        acc += lhs[size_t(lo)] * rhs[size_t(ko)];
      });
    }
    r[size_t(flat)] = acc;
  });
  return r;
}

// reduce_window / select_and_scatter: calls fn(j) with the flat operand index of every window
// element of result index `o` that lies in the operand (row-major window order); padding and
// base-dilation holes are skipped.
template <typename Fn>
void for_each_in_window(const ir::Attrs& a, const Shape& in, const Dims& o, bool dilated, Fn&& fn) {
  const Shape win(a.window_dimensions);
  const auto st = in.strides();
  for_each_index(win, [&](const Dims& w, int64_t) {
    int64_t j = 0;
    for (size_t d = 0; d < w.size(); ++d) {
      const int64_t bd = dilated ? a.base_dilations[d] : 1;
      const int64_t wd = dilated ? a.window_dilations[d] : 1;
      const int64_t p = o[d] * a.window_strides[d] + w[d] * wd - a.padding_low[d];
      if (p < 0 || p % bd != 0 || p / bd >= in[int64_t(d)]) return;
      j += p / bd * st[d];
    }
    fn(j);
  });
}

Vals structural(const ir::Node& n, std::span<const Array* const> ops, const std::vector<Vals>& in) {
  const ir::Attrs& a = n.attrs;
  const Shape& rs = n.type.shape;
  Vals r(size_t(rs.numel()), 0.0);
  auto shape = [&](size_t k) -> const Shape& { return ops[k]->shape(); };
  switch (n.op) {
    case Op::broadcast_in_dim: {
      auto st = shape(0).strides();
      for_each_index(rs, [&](const Dims& i, int64_t f) {
        int64_t o = 0;
        for (size_t d = 0; d < a.broadcast_dimensions.size(); ++d)
          if (shape(0)[int64_t(d)] != 1) o += i[size_t(a.broadcast_dimensions[d])] * st[d];
        r[size_t(f)] = in[0][size_t(o)];
      });
      return r;
    }
    case Op::reshape:
      return in[0];
    case Op::transpose: {
      auto st = shape(0).strides();
      for_each_index(rs, [&](const Dims& i, int64_t f) {
        int64_t o = 0;
        for (size_t d = 0; d < i.size(); ++d) o += i[d] * st[size_t(a.permutation[d])];
        r[size_t(f)] = in[0][size_t(o)];
      });
      return r;
    }
    case Op::slice: {
      auto st = shape(0).strides();
      for_each_index(rs, [&](const Dims& i, int64_t f) {
        int64_t o = 0;
        for (size_t d = 0; d < i.size(); ++d)
          o += (a.start_indices[d] + i[d] * a.strides[d]) * st[d];
        r[size_t(f)] = in[0][size_t(o)];
      });
      return r;
    }
    case Op::concatenate: {
      auto rst = rs.strides();
      int64_t off = 0;
      for (size_t k = 0; k < ops.size(); ++k) {
        for_each_index(shape(k), [&](const Dims& i, int64_t f) {
          Dims j = i;
          j[size_t(a.dimension)] += off;
          r[size_t(flat_of(j, rst))] = in[k][size_t(f)];
        });
        off += shape(k)[a.dimension];
      }
      return r;
    }
    case Op::pad: {
      std::fill(r.begin(), r.end(), in[1][0]);
      auto rst = rs.strides();
      for_each_index(shape(0), [&](const Dims& i, int64_t f) {
        Dims j(i.size());
        for (size_t d = 0; d < i.size(); ++d)
          j[d] = a.edge_padding_low[d] + i[d] * (a.interior_padding[d] + 1);
        r[size_t(flat_of(j, rst))] = in[0][size_t(f)];
      });
      return r;
    }
    case Op::dynamic_slice: {
      Dims s = clamped_starts(ops, 1, shape(0), a.slice_sizes);
      auto st = shape(0).strides();
      for_each_index(rs, [&](const Dims& i, int64_t f) {
        int64_t o = 0;
        for (size_t d = 0; d < i.size(); ++d) o += (s[d] + i[d]) * st[d];
        r[size_t(f)] = in[0][size_t(o)];
      });
      return r;
    }
    case Op::dynamic_update_slice: {
      r = in[0];
      Dims s = clamped_starts(ops, 2, shape(0), shape(1).dims);
      auto st = shape(0).strides();
      for_each_index(shape(1), [&](const Dims& i, int64_t f) {
        int64_t o = 0;
        for (size_t d = 0; d < i.size(); ++d) o += (s[d] + i[d]) * st[d];
        r[size_t(o)] = in[1][size_t(f)];
      });
      return r;
    }
    case Op::gather:
    case Op::scatter: {
      int64_t rows = shape(0)[0], row = rows ? shape(0).numel() / rows : 0;
      bool g = n.op == Op::gather;
      if (!g) r = in[0];
      for (size_t k = 0; k < in[1].size(); ++k) {
        int64_t j = int64_t(in[1][k]);
        if (g) j = std::clamp(j, int64_t(0), rows - 1);
        if (j < 0 || j >= rows) continue;
        for (int64_t e = 0; e < row; ++e) {
          if (g)
            r[size_t(int64_t(k) * row + e)] = in[0][size_t(j * row + e)];
          else
            r[size_t(j * row + e)] += in[2][size_t(int64_t(k) * row + e)];
        }
      }
      if (!g && is_integer(n.type.dtype))
        for (auto& v : r) v = wrap(n.type.dtype, int64_t(v));
      return r;
    }
    case Op::dot_general: {
      const Shape &ls = shape(0), &rsh = shape(1);
      auto &lb = a.lhs_batching_dimensions, &rb = a.rhs_batching_dimensions;
      auto &lc = a.lhs_contracting_dimensions, &rc = a.rhs_contracting_dimensions;
      auto free_dims = [](const Shape& s, const Dims& b, const Dims& c) {
        Dims f;
        for (int64_t i = 0; i < s.rank(); ++i)
          if (std::find(b.begin(), b.end(), i) == b.end() &&
              std::find(c.begin(), c.end(), i) == c.end())
            f.push_back(i);
        return f;
      };
      Dims lf = free_dims(ls, lb, lc), rf = free_dims(rsh, rb, rc);
      Shape cs;
      for (int64_t d : lc) cs.dims.push_back(ls[d]);
      auto lst = ls.strides(), rst = rsh.strides();
      for_each_index(rs, [&](const Dims& i, int64_t f) {
        int64_t lo = 0, ro = 0;
        size_t p = 0;
        for (size_t k = 0; k < lb.size(); ++k, ++p) {
          lo += i[p] * lst[size_t(lb[k])];
          ro += i[p] * rst[size_t(rb[k])];
        }
        for (int64_t d : lf) lo += i[p++] * lst[size_t(d)];
        for (int64_t d : rf) ro += i[p++] * rst[size_t(d)];
        double acc = 0;
        for_each_index(cs, [&](const Dims& c, int64_t) {
          int64_t l2 = lo, r2 = ro;
          for (size_t k = 0; k < c.size(); ++k) {
            l2 += c[k] * lst[size_t(lc[k])];
            r2 += c[k] * rst[size_t(rc[k])];
          }
          acc += in[0][size_t(l2)] * in[1][size_t(r2)];
        });
        r[size_t(f)] = acc;
      });
      return r;
    }
    case Op::convolution:
      return convolution(n, shape(0), shape(1), in[0], in[1]);
    case Op::reverse: {
      auto st = shape(0).strides();
      for_each_index(rs, [&](const Dims& i, int64_t f) {
        Dims j = i;
        for (int64_t d : a.dimensions) j[size_t(d)] = rs[d] - 1 - i[size_t(d)];
        r[size_t(f)] = in[0][size_t(flat_of(j, st))];
      });
      return r;
    }
    case Op::reduce: {
      DType t = n.type.dtype;
      double init = 0;
      if (a.reduce_kind != ir::ReduceKind::sum) {
        bool mx = a.reduce_kind == ir::ReduceKind::max;
        if (is_floating(t))
          init = mx ? -INFINITY : INFINITY;
        else if (t == DType::s32)
          init = mx ? -2147483648.0 : 2147483647.0;
        else
          init = mx ? 0.0 : 4294967295.0;
      }
      std::fill(r.begin(), r.end(), init);
      auto rst = rs.strides();
      for_each_index(shape(0), [&](const Dims& i, int64_t f) {
        Dims j;
        for (size_t d = 0; d < i.size(); ++d)
          if (std::find(a.dimensions.begin(), a.dimensions.end(), int64_t(d)) == a.dimensions.end())
            j.push_back(i[d]);
        double& acc = r[size_t(flat_of(j, rst))];
        combine(a.reduce_kind, acc, in[0][size_t(f)]);
      });
      if (is_integer(t))
        for (auto& v : r) v = wrap(t, int64_t(v));
      return r;
    }
    case Op::reduce_window: {
      const double init = a.reduce_kind == ir::ReduceKind::sum   ? 0.0
                          : a.reduce_kind == ir::ReduceKind::max ? -INFINITY
                                                                 : INFINITY;
      for_each_index(rs, [&](const Dims& o, int64_t f) {
        double acc = init;
        for_each_in_window(a, shape(0), o, true,
                           [&](int64_t j) { combine(a.reduce_kind, acc, in[0][size_t(j)]); });
        r[size_t(f)] = acc;
      });
      return r;
    }
    case Op::select_and_scatter: {
      // The pick a stays unless `a select b` fails for the next element b (StableHLO's select
      // body); source values add at the picks.
      for_each_index(shape(1), [&](const Dims& o, int64_t f) {
        int64_t pick = -1;
        for_each_in_window(a, shape(0), o, false, [&](int64_t j) {
          if (pick < 0 || !compare(a.comparison_direction, in[0][size_t(pick)], in[0][size_t(j)]))
            pick = j;
        });
        if (pick >= 0) r[size_t(pick)] += in[1][size_t(f)];
      });
      return r;
    }
    default:
      fail("evaluate: {} is not a structural op", ir::op_name(n.op));
  }
}

// all_reduce / all_gather over distributed::world() (a copy for groups of one replica), as the
// host lane's kernels run them.
Array evaluate_collective(const ir::Node& n, const Array& x) {
  const ir::Attrs& a = n.attrs;
  const bool across = distributed::runs_across_world(ir::op_name(n.op), a.replica_groups);
  Array r(n.type.dtype, n.type.shape);
  const int64_t copies = n.op == Op::all_gather ? int64_t(a.replica_groups[0].size()) : 1;
  if (x.dtype() != r.dtype() || x.numel() * copies != r.numel())
    fail("evaluate: {} of a {} value, expected {} / {} copies", ir::op_name(n.op),
         ir::to_string({x.dtype(), x.shape()}), ir::to_string(n.type), copies);
  if (!across || n.op == Op::all_reduce) {
    if (x.nbytes() > 0) std::memcpy(r.raw(), x.raw(), x.nbytes());
    if (!across) return r;
    const auto op = a.reduce_kind == ir::ReduceKind::sum   ? distributed::Reduction::sum
                    : a.reduce_kind == ir::ReduceKind::max ? distributed::Reduction::max
                                                           : distributed::Reduction::min;
    distributed::all_reduce_widened(r.raw(), r.numel(), r.dtype(), op);
    return r;
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < a.dimension; ++d) outer *= x.shape()[d];
  const int64_t inner = outer == 0 ? 0 : int64_t(x.nbytes()) / outer;
  std::vector<char> scratch(r.nbytes());
  distributed::all_gather_along(x.raw(), r.raw(), outer, inner, scratch.data());
  return r;
}

}  // namespace

Array evaluate(const ir::Node& n, std::span<const Array* const> ops) {
  if (n.op == Op::parameter) fail("evaluate: a parameter has no value");
  if (ops.size() != n.operands.size())
    fail("evaluate: {} has {} operands, got {} values", ir::op_name(n.op), n.operands.size(),
         ops.size());
  const DType t = n.type.dtype;
  const Shape& rs = n.type.shape;
  if (n.op == Op::constant) return *n.attrs.value;
  if (ir::is_composite(n.op)) return evaluate_results(n, ops)[0];
  if (n.op == Op::result) fail("evaluate: a result node's value is its composite's");
  if (ir::is_collective(n.op)) return evaluate_collective(n, *ops[0]);
  std::vector<Vals> in;
  for (const Array* a : ops) in.push_back(a->to_doubles());
  Vals r(size_t(rs.numel()));
  // Element i of operand k, where scalars broadcast (select pred, clamp bounds).
  auto el = [&](size_t k, size_t i) { return in[k].size() == 1 ? in[k][0] : in[k][i]; };
  switch (ir::op_kind(n.op)) {
    case ir::OpKind::Nullary:  // iota
      for_each_index(rs, [&](const Dims& i, int64_t f) {
        r[size_t(f)] = double(i[size_t(n.attrs.dimension)]);
      });
      break;
    case ir::OpKind::Unary:
    case ir::OpKind::Binary:
      if (n.op == Op::convert) {
        r = convert_values(*ops[0], t);
      } else if (n.op == Op::compare) {
        for (size_t i = 0; i < r.size(); ++i)
          r[i] = compare(n.attrs.comparison_direction, in[0][i], in[1][i]);
      } else if (auto v = by_formula(n, ops)) {
        r = std::move(*v);
      } else {
        fail("evaluate: {} on {} has no formula", ir::op_name(n.op), name(ops[0]->dtype()));
      }
      break;
    case ir::OpKind::Ternary:
      if (n.op == Op::select) {
        for (size_t i = 0; i < r.size(); ++i) r[i] = el(0, i) != 0 ? in[1][i] : in[2][i];
      } else {
        r = clamp_values(ops);
      }
      break;
    case ir::OpKind::Structural:
      r = structural(n, ops, in);
      break;
    case ir::OpKind::Parameter:
    case ir::OpKind::Result:
    case ir::OpKind::Composite:
      break;
  }
  return Array::from_doubles(t, rs, r);
}

std::vector<Array> evaluate_results(const ir::Node& n, std::span<const Array* const> ops) {
  if (!ir::is_composite(n.op)) return {evaluate(n, ops)};
  // The meaning of a composite is its decomposition.
  ir::Builder b("composite");
  std::vector<ir::ValueId> params;
  std::vector<Array> args;
  for (const Array* a : ops) {
    params.push_back(b.parameter({a->dtype(), a->shape()}));
    args.push_back(*a);
  }
  ir::Function g = b.build(ir::composite(n.op).decompose(b, n, params));
  return interpret(g, args);
}

std::vector<Array> interpret(const ir::Function& f, std::span<const Array> inputs) {
  if (int(inputs.size()) != f.num_inputs())
    fail("interpret {}: {} inputs for {} parameters", f.name, inputs.size(), f.num_inputs());
  std::vector<Array> vals(f.nodes.size());
  for (int i = 0; i < f.num_inputs(); ++i) {
    const Array& x = inputs[size_t(i)];
    if (x.dtype() != f.input_type(i).dtype || x.shape() != f.input_type(i).shape)
      fail("interpret {}: input {} is {}, expected {}", f.name, i, describe(x),
           ir::to_string(f.input_type(i)));
    vals[size_t(f.inputs[size_t(i)])] = x;
  }
  std::vector<const Array*> ops;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const ir::Node& n = f.nodes[i];
    if (n.op == Op::parameter || n.op == Op::result) continue;  // results: set with their node
    ops.clear();
    for (ir::ValueId o : n.operands) ops.push_back(&vals[size_t(o)]);
    if (ir::is_multi_result(f, ir::ValueId(i))) {
      std::vector<Array> rs = evaluate_results(n, ops);
      for (ir::ValueId r : ir::results_of(f, ir::ValueId(i))) {  // each result node by its index
        const int64_t k = f.nodes[size_t(r)].attrs.index;
        if (k < 0 || size_t(k) >= rs.size())
          fail("interpret {}: %{} is result #{} of {} results", f.name, r, k, rs.size());
        vals[size_t(r)] = rs[size_t(k)];
      }
    } else {
      vals[i] = evaluate(n, ops);
    }
  }
  std::vector<Array> out;
  for (ir::ValueId r : f.results) out.push_back(vals[size_t(r)]);
  return out;
}

}  // namespace tlaloc::passes
