// VJP rules of convolution and reverse, in JAX's formulation (jax/_src/lax/convolution.py:
// the transpose rules of conv_general_dilated; lax.rev), so the gradient program is the one JAX
// would hand to XLA: the input's cotangent is a convolution of the cotangent with the kernel
// (spatially reversed, input / output features swapped, lhs_dilation = the forward strides), the
// kernel's a convolution of the input with the cotangent (batch and feature roles swapped,
// rhs_dilation = the forward strides). Feature groups of the forward become batch groups of the
// kernel's cotangent and the reverse.
#include <numeric>

#include "tlaloc/autodiff/rules.h"

namespace tlaloc::autodiff::detail {

using Dims = std::vector<int64_t>;
using ir::ConvDimensionNumbers;

namespace {

int64_t dilate(int64_t size, int64_t d) { return size == 0 ? 0 : 1 + d * (size - 1); }

// Splits axis src of x into [size1, size / size1] (JAX's _reshape_axis_out_of).
ValueId axis_out_of(ir::Builder& b, int64_t src, int64_t size1, ValueId x) {
  Shape s = b.type(x).shape;
  Dims d = s.dims;
  d[size_t(src)] = s[src] / size1;
  d.insert(d.begin() + src, size1);
  return b.reshape(x, Shape(d));
}

// Merges axis src of x into axis dst (numbered with src removed) as its major part (JAX's
// _reshape_axis_into: a transpose that puts src just before dst, then a reshape).
ValueId axis_into(ir::Builder& b, int64_t src, int64_t dst, ValueId x) {
  const Shape s = b.type(x).shape;
  Dims perm;
  for (int64_t i = 0; i < s.rank(); ++i)
    if (i != src) perm.push_back(i);
  perm.insert(perm.begin() + dst, src);
  Dims shape;
  for (int64_t i = 0; i < s.rank(); ++i)
    if (i != src) shape.push_back(s[i]);
  shape[size_t(dst)] *= s[src];
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  if (!identity) x = b.transpose(x, perm);
  return b.reshape(x, Shape(shape));
}

Dims sizes(const Shape& s, const Dims& dims) {
  Dims v;
  for (int64_t d : dims) v.push_back(s[d]);
  return v;
}

}  // namespace

ValueId conv_input_grad_jax(ir::Builder& b, const ir::Attrs& a, const Shape& ls, const Shape& ks,
                            const Shape& gs, ValueId ct, ValueId w) {
  const ConvDimensionNumbers& dn = a.conv_dimension_numbers;
  const Dims in_sp = sizes(ls, dn.input_spatial_dimensions);
  const Dims k_sp = sizes(ks, dn.kernel_spatial_dimensions);
  const Dims out_sp = sizes(gs, dn.output_spatial_dimensions);
  const size_t ns = in_sp.size();
  const int64_t fg = a.feature_group_count, bg = a.batch_group_count;
  int64_t groups = 1;
  if (fg > 1 || bg > 1) {  // the group axis moves from the output into the input features
    groups = std::max(fg, bg);
    w = axis_out_of(b, dn.kernel_output_feature_dimension, groups, w);
    w = axis_into(b, dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension, w);
  }
  ir::ConvOptions o;
  o.dimension_numbers = {dn.output_batch_dimension,         dn.output_feature_dimension,
                         dn.output_spatial_dimensions,      dn.kernel_output_feature_dimension,
                         dn.kernel_input_feature_dimension, dn.kernel_spatial_dimensions,
                         dn.input_batch_dimension,          dn.input_feature_dimension,
                         dn.input_spatial_dimensions};
  for (size_t i = 0; i < ns; ++i) {
    const int64_t before = dilate(k_sp[i], a.rhs_dilation[i]) - a.padding_low[i] - 1;
    const int64_t after = dilate(in_sp[i], a.lhs_dilation[i]) + dilate(k_sp[i], a.rhs_dilation[i]) -
                          1 - dilate(out_sp[i], a.window_strides[i]) - before;
    o.padding.push_back({before, after});
  }
  o.window_strides = a.lhs_dilation;
  o.lhs_dilation = a.window_strides;
  o.rhs_dilation = a.rhs_dilation;
  o.feature_group_count = groups;
  ValueId rev = b.reverse(w, dn.kernel_spatial_dimensions);
  ValueId g = b.convolution(ct, rev, o);
  if (bg > 1) {  // batch groups come back out of the features into the batch
    g = axis_out_of(b, dn.input_feature_dimension, bg, g);
    g = axis_into(b, dn.input_feature_dimension, dn.input_batch_dimension, g);
  }
  return g;
}

ValueId conv_kernel_grad_jax(ir::Builder& b, const ir::Attrs& a, const Shape& ls, const Shape& ks,
                             const Shape& gs, ValueId lhs, ValueId ct) {
  const ConvDimensionNumbers& dn = a.conv_dimension_numbers;
  const Dims in_sp = sizes(ls, dn.input_spatial_dimensions);
  const Dims k_sp = sizes(ks, dn.kernel_spatial_dimensions);
  const Dims out_sp = sizes(gs, dn.output_spatial_dimensions);
  const int64_t fg = a.feature_group_count, bg = a.batch_group_count;
  ir::ConvOptions o;
  o.feature_group_count = bg > 1 ? bg : 1;
  o.batch_group_count = bg > 1 ? 1 : fg;
  o.dimension_numbers = {dn.input_feature_dimension,        dn.input_batch_dimension,
                         dn.input_spatial_dimensions,       dn.output_batch_dimension,
                         dn.output_feature_dimension,       dn.output_spatial_dimensions,
                         dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension,
                         dn.kernel_spatial_dimensions};
  for (size_t i = 0; i < in_sp.size(); ++i) {
    const int64_t lo = a.padding_low[i];
    const int64_t hi = dilate(out_sp[i], a.window_strides[i]) -
                       dilate(in_sp[i], a.lhs_dilation[i]) + dilate(k_sp[i], a.rhs_dilation[i]) -
                       lo - 1;
    o.padding.push_back({lo, hi});
  }
  o.window_strides = a.rhs_dilation;
  o.lhs_dilation = a.lhs_dilation;
  o.rhs_dilation = a.window_strides;
  return b.convolution(lhs, ct, o);
}

namespace {

// 2-D f32 NCHW / OIHW / NCHW, no lhs dilation or batch groups, padding >= 0, every size > 0:
// the gradients are the conv_input_grad / conv_kernel_grad composites (oneDNN on the host).
bool conv_fits_composites(const ir::Attrs& a, const ir::TensorType& x, const Shape& ks,
                          const Shape& gs) {
  if (x.dtype != DType::f32 || x.shape.rank() != 4 || a.batch_group_count != 1 ||
      a.conv_dimension_numbers != ConvDimensionNumbers{})
    return false;
  for (size_t i = 0; i < 2; ++i)
    if (a.lhs_dilation[i] != 1 || a.padding_low[i] < 0 || a.padding_high[i] < 0) return false;
  return x.shape.numel() > 0 && ks.numel() > 0 && gs.numel() > 0;
}

}  // namespace

Grads vjp_convolution(const RuleCtx& c) {
  const ir::Attrs a = c.n.attrs;  // a copy: the builder grows
  const ValueId lhs = c.operand(0), rhs = c.operand(1);
  const ir::TensorType lt = c.type(lhs);
  const Shape ls = lt.shape, ks = c.type(rhs).shape, gs = c.type(c.ct).shape;
  Grads r{-1, -1};
  if (conv_fits_composites(a, lt, ks, gs)) {
    // strides, padding (top, bottom, left, right), rhs dilation, groups, H, W [, kh, kw]
    std::vector<double> p{double(a.window_strides[0]),
                          double(a.window_strides[1]),
                          double(a.padding_low[0]),
                          double(a.padding_high[0]),
                          double(a.padding_low[1]),
                          double(a.padding_high[1]),
                          double(a.rhs_dilation[0]),
                          double(a.rhs_dilation[1]),
                          double(a.feature_group_count),
                          double(ls[2]),
                          double(ls[3])};
    if (c.need[0]) r[0] = c.b.composite(ir::Op::conv_input_grad, {c.ct, rhs}, p)[0];
    p.push_back(double(ks[2]));
    p.push_back(double(ks[3]));
    if (c.need[1]) r[1] = c.b.composite(ir::Op::conv_kernel_grad, {lhs, c.ct}, p)[0];
    return r;
  }
  if (c.need[0]) r[0] = conv_input_grad_jax(c.b, a, ls, ks, gs, c.ct, rhs);
  if (c.need[1])
    r[1] = gs.numel() == 0 ? c.zeros(c.type(rhs))
                           : conv_kernel_grad_jax(c.b, a, ls, ks, gs, lhs, c.ct);
  return r;
}

Grads vjp_reverse(const RuleCtx& c) { return {c.b.reverse(c.ct, c.n.attrs.dimensions)}; }

}  // namespace tlaloc::autodiff::detail
