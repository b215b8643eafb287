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

Grads vjp_convolution(const RuleCtx& c) {
  const ir::Attrs a = c.n.attrs;  // a copy: the builder grows
  const ConvDimensionNumbers& dn = a.conv_dimension_numbers;
  const ValueId lhs = c.operand(0), rhs = c.operand(1);
  const Shape ls = c.type(lhs).shape, ks = c.type(rhs).shape, gs = c.type(c.ct).shape;
  const Dims in_sp = sizes(ls, dn.input_spatial_dimensions);
  const Dims k_sp = sizes(ks, dn.kernel_spatial_dimensions);
  const Dims out_sp = sizes(gs, dn.output_spatial_dimensions);
  const size_t ns = in_sp.size();
  const int64_t fg = a.feature_group_count, bg = a.batch_group_count;
  Grads r{-1, -1};
  if (c.need[0]) {
    ValueId w = rhs;
    int64_t groups = 1;
    if (fg > 1 || bg > 1) {  // the group axis moves from the output into the input features
      groups = std::max(fg, bg);
      w = axis_out_of(c.b, dn.kernel_output_feature_dimension, groups, w);
      w = axis_into(c.b, dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension, w);
    }
    ir::ConvOptions o;
    o.dimension_numbers = {dn.output_batch_dimension,         dn.output_feature_dimension,
                           dn.output_spatial_dimensions,      dn.kernel_output_feature_dimension,
                           dn.kernel_input_feature_dimension, dn.kernel_spatial_dimensions,
                           dn.input_batch_dimension,          dn.input_feature_dimension,
                           dn.input_spatial_dimensions};
    for (size_t i = 0; i < ns; ++i) {
      const int64_t before = dilate(k_sp[i], a.rhs_dilation[i]) - a.padding_low[i] - 1;
      const int64_t after = dilate(in_sp[i], a.lhs_dilation[i]) +
                            dilate(k_sp[i], a.rhs_dilation[i]) - 1 -
                            dilate(out_sp[i], a.window_strides[i]) - before;
      o.padding.push_back({before, after});
    }
    o.window_strides = a.lhs_dilation;
    o.lhs_dilation = a.window_strides;
    o.rhs_dilation = a.rhs_dilation;
    o.feature_group_count = groups;
    ValueId rev = c.b.reverse(w, dn.kernel_spatial_dimensions);
    ValueId g = c.b.convolution(c.ct, rev, o);
    if (bg > 1) {  // batch groups come back out of the features into the batch
      g = axis_out_of(c.b, dn.input_feature_dimension, bg, g);
      g = axis_into(c.b, dn.input_feature_dimension, dn.input_batch_dimension, g);
    }
    r[0] = g;
  }
  if (c.need[1]) {
    if (gs.numel() == 0) {
      r[1] = c.zeros(c.type(rhs));
    } else {
      ir::ConvOptions o;
      o.feature_group_count = bg > 1 ? bg : 1;
      o.batch_group_count = bg > 1 ? 1 : fg;
      o.dimension_numbers = {dn.input_feature_dimension,        dn.input_batch_dimension,
                             dn.input_spatial_dimensions,       dn.output_batch_dimension,
                             dn.output_feature_dimension,       dn.output_spatial_dimensions,
                             dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension,
                             dn.kernel_spatial_dimensions};
      for (size_t i = 0; i < ns; ++i) {
        const int64_t lo = a.padding_low[i];
        const int64_t hi = dilate(out_sp[i], a.window_strides[i]) -
                           dilate(in_sp[i], a.lhs_dilation[i]) +
                           dilate(k_sp[i], a.rhs_dilation[i]) - lo - 1;
        o.padding.push_back({lo, hi});
      }
      o.window_strides = a.rhs_dilation;
      o.lhs_dilation = a.lhs_dilation;
      o.rhs_dilation = a.window_strides;
      r[1] = c.b.convolution(lhs, c.ct, o);
    }
  }
  return r;
}

Grads vjp_reverse(const RuleCtx& c) { return {c.b.reverse(c.ct, c.n.attrs.dimensions)}; }

}  // namespace tlaloc::autodiff::detail
