#include "tlaloc/trace/conv.h"

namespace tlaloc::trace {

Tensor convolution(const Tensor& lhs, const Tensor& rhs, const ir::ConvOptions& options) {
  ir::Builder& b = lhs.builder();
  return Tensor(&b, b.convolution(lhs.id(), rhs.id(), options));
}

namespace {

Tensor conv2d_padded(const Tensor& x, const Tensor& weight, Size2 stride, Size2 lo, Size2 hi,
                     Size2 dilation, int64_t groups) {
  if (x.rank() != 4 || weight.rank() != 4)
    fail("conv2d: x {} and weight {} must both have rank 4 ([N, C, H, W], [O, C/groups, kH, kW])",
         ir::to_string(x.type()), ir::to_string(weight.type()));
  if (groups < 1) fail("conv2d: groups {} must be positive", groups);
  if (stride.h < 1 || stride.w < 1 || dilation.h < 1 || dilation.w < 1)
    fail("conv2d: stride ({}, {}) and dilation ({}, {}) must be positive", stride.h, stride.w,
         dilation.h, dilation.w);
  if (lo.h < 0 || lo.w < 0 || hi.h < 0 || hi.w < 0)
    fail("conv2d: padding ({}, {}) must not be negative", lo.h, lo.w);
  if (x.dim(1) != weight.dim(1) * groups || weight.dim(0) % groups != 0)
    fail(
        "conv2d: x {} has {} channels but weight {} with groups={} expects {} (and out "
        "channels divisible by groups)",
        ir::to_string(x.type()), x.dim(1), ir::to_string(weight.type()), groups,
        weight.dim(1) * groups);
  for (int d = 0; d < 2; ++d) {
    const int64_t in = x.dim(2 + d) + (d ? lo.w + hi.w : lo.h + hi.h);
    const int64_t k = (weight.dim(2 + d) - 1) * (d ? dilation.w : dilation.h) + 1;
    if (k > in)
      fail("conv2d: the (dilated) kernel {} is larger than the padded input {} on dim {}", k, in,
           2 + d);
  }
  ir::ConvOptions o;
  o.window_strides = {stride.h, stride.w};
  o.padding = {{lo.h, hi.h}, {lo.w, hi.w}};
  o.rhs_dilation = {dilation.h, dilation.w};
  o.feature_group_count = groups;
  return convolution(x, weight, o);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, Size2 stride, Size2 padding, Size2 dilation,
              int64_t groups) {
  return conv2d_padded(x, weight, stride, padding, padding, dilation, groups);
}

std::string_view name(Padding p) { return p == Padding::same ? "same" : "valid"; }

Tensor conv2d(const Tensor& x, const Tensor& weight, Size2 stride, Padding padding, Size2 dilation,
              int64_t groups) {
  if (padding == Padding::valid) return conv2d_padded(x, weight, stride, 0, 0, dilation, groups);
  if (stride != Size2(1)) fail("conv2d: padding='same' needs stride 1 (as PyTorch)");
  if (weight.rank() != 4) fail("conv2d: weight {} must have rank 4", ir::to_string(weight.type()));
  const int64_t th = dilation.h * (weight.dim(2) - 1), tw = dilation.w * (weight.dim(3) - 1);
  return conv2d_padded(x, weight, stride, {th / 2, tw / 2}, {th - th / 2, tw - tw / 2}, dilation,
                       groups);
}

}  // namespace tlaloc::trace
