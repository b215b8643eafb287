// tlaloc.conv_input_grad and tlaloc.conv_kernel_grad: the two gradients of a 2-D NCHW
// convolution (StableHLO convolution with NCHW input, OIHW kernel, NCHW output, feature groups
// G, no lhs dilation), which the convolution VJP (autodiff/rules_conv.cpp) emits for f32.
//
// params (both): strides sh, sw; padding top, bottom, left, right (>= 0); rhs dilation dh, dw;
//   groups G; the forward input's H, W; conv_kernel_grad also the kernel's kh, kw.
// conv_input_grad (d_y [N, O, Ho, Wo], w [O, C / G, kh, kw]) -> d_x [N, C, H, W]
// conv_kernel_grad (x [N, C, H, W], d_y [N, O, Ho, Wo]) -> d_w [O, C / G, kh, kw]
//   Ho, Wo as the forward computes them; float dtypes, all operands alike.
// Decompositions: JAX's gradient convolutions (conv_input_grad_jax / conv_kernel_grad_jax), so
// StableHLO export and the evaluator see exactly the plain VJP. Their own VJPs are their
// decompositions'. Host kernels: f32 through oneDNN (runtime/host/conv_dnnl.h:
// convolution_backward_data / _weights per fixed batch chunk; the weights' partial sums added
// in chunk order), none for other dtypes (the decomposition runs).
#include "tlaloc/autodiff/rules.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/runtime/host/conv_dnnl.h"

namespace tlaloc::composites {
namespace {

using ir::Op;
using ir::TensorType;
using ir::ValueId;
enum Param {
  kSh,
  kSw,
  kPadTop,
  kPadBottom,
  kPadLeft,
  kPadRight,
  kDh,
  kDw,
  kGroups,
  kH,
  kW,
  kKh,
  kKw
};

int64_t param(const ir::Attrs& a, Param p) { return int64_t(a.params[size_t(p)]); }

// The forward convolution's attrs.
ir::Attrs forward_attrs(const ir::Attrs& a) {
  ir::Attrs f;
  f.window_strides = {param(a, kSh), param(a, kSw)};
  f.padding_low = {param(a, kPadTop), param(a, kPadLeft)};
  f.padding_high = {param(a, kPadBottom), param(a, kPadRight)};
  f.lhs_dilation = {1, 1};
  f.rhs_dilation = {param(a, kDh), param(a, kDw)};
  f.feature_group_count = param(a, kGroups);
  f.batch_group_count = 1;
  return f;
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t lo, int64_t hi, int64_t d) {
  const int64_t span = in + lo + hi - (d * (k - 1) + 1);
  return span < 0 ? 0 : span / s + 1;
}

// The shapes x, w, y of the forward from the operands; checks them.
struct Shapes {
  Shape x, w, y;
};
Shapes check(std::span<const TensorType> in, const ir::Attrs& a, bool kernel) {
  for (size_t i = 0; i < a.params.size(); ++i)
    if (a.params[i] != double(int64_t(a.params[i])))
      fail("param {} = {} must be an integer", i, a.params[i]);
  const int64_t sh = param(a, kSh), sw = param(a, kSw), dh = param(a, kDh), dw = param(a, kDw);
  const int64_t G = param(a, kGroups);
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || G < 1)
    fail("strides, dilations, groups must be >= 1");
  for (Param p : {kPadTop, kPadBottom, kPadLeft, kPadRight})
    if (param(a, p) < 0) fail("padding must be >= 0, got {}", param(a, p));
  if (in[0].dtype != in[1].dtype || !is_floating(in[0].dtype))
    fail("operands must be of one float dtype, got {} and {}", to_string(in[0]), to_string(in[1]));
  for (const TensorType& t : in)
    if (t.shape.rank() != 4) fail("operands must be 4-D, got {}", to_string(t));
  const Shape& dy = kernel ? in[1].shape : in[0].shape;
  Shapes s;
  const int64_t N = dy[0], O = dy[1];
  if (kernel) {
    s.x = in[0].shape;
    if (s.x[0] != N)
      fail("x {} and d_y {} disagree on the batch", to_string(in[0]), to_string(in[1]));
    if (s.x[1] % G != 0) fail("x's features {} must be a multiple of groups {}", s.x[1], G);
    s.w = Shape{O, s.x[1] / G, param(a, kKh), param(a, kKw)};
  } else {
    s.w = in[1].shape;
    if (s.w[0] != O)
      fail("w {} and d_y {} disagree on the features", to_string(in[1]), to_string(in[0]));
    s.x = Shape{N, s.w[1] * G, param(a, kH), param(a, kW)};
  }
  if (s.x[2] != param(a, kH) || s.x[3] != param(a, kW))
    fail("x {} disagrees with params H, W = {}, {}", to_string(s.x), param(a, kH), param(a, kW));
  if (O % G != 0) fail("output features {} must be a multiple of groups {}", O, G);
  s.y = Shape{N, O, out_size(s.x[2], s.w[2], sh, param(a, kPadTop), param(a, kPadBottom), dh),
              out_size(s.x[3], s.w[3], sw, param(a, kPadLeft), param(a, kPadRight), dw)};
  if (s.y != dy) fail("d_y must be {}, got {}", to_string(s.y), to_string(dy));
  return s;
}

std::vector<TensorType> infer_input(std::span<const TensorType> in, const ir::Attrs& a) {
  return {{in[0].dtype, check(in, a, false).x}};
}
std::vector<TensorType> infer_kernel(std::span<const TensorType> in, const ir::Attrs& a) {
  return {{in[0].dtype, check(in, a, true).w}};
}

std::vector<TensorType> types(ir::Builder& b, std::span<const ValueId> ops) {
  return {b.type(ops[0]), b.type(ops[1])};
}

std::vector<ValueId> decompose_input(ir::Builder& b, const ir::Node& n,
                                     std::span<const ValueId> ops) {
  const Shapes s = check(types(b, ops), n.attrs, false);
  return {autodiff::detail::conv_input_grad_jax(b, forward_attrs(n.attrs), s.x, s.w, s.y, ops[0],
                                                ops[1])};
}
std::vector<ValueId> decompose_kernel(ir::Builder& b, const ir::Node& n,
                                      std::span<const ValueId> ops) {
  const Shapes s = check(types(b, ops), n.attrs, true);
  return {autodiff::detail::conv_kernel_grad_jax(b, forward_attrs(n.attrs), s.x, s.w, s.y, ops[0],
                                                 ops[1])};
}

std::unique_ptr<runtime::host::Kernel> make_kernel(const ir::Function& f, ValueId id,
                                                   int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  if (n.type.dtype != DType::f32) return nullptr;
  const bool kernel = n.op == Op::conv_kernel_grad;
  const std::vector<TensorType> in{f.type(n.operands[0]), f.type(n.operands[1])};
  const Shapes s = check(in, n.attrs, kernel);
  if (s.x.numel() == 0 || s.w.numel() == 0 || s.y.numel() == 0) return nullptr;
  const ir::Attrs& a = n.attrs;
  runtime::host::Conv2d c;
  c.N = s.x[0], c.C = s.x[1], c.H = s.x[2], c.W = s.x[3];
  c.O = s.w[0], c.G = param(a, kGroups), c.kh = s.w[2], c.kw = s.w[3];
  c.Ho = s.y[2], c.Wo = s.y[3];
  c.sh = param(a, kSh), c.sw = param(a, kSw);
  c.pt = param(a, kPadTop), c.pb = param(a, kPadBottom);
  c.pl = param(a, kPadLeft), c.pr = param(a, kPadRight);
  c.dh = param(a, kDh), c.dw = param(a, kDw);
  return runtime::host::make_conv2d_dnnl(
      c, kernel ? runtime::host::Conv2dPass::kernel_grad : runtime::host::Conv2dPass::input_grad,
      n.operands[0], n.operands[1], id, num_threads);
}

// ---- examples for the record-walking tests --------------------------------------------------

ir::Attrs attrs(std::vector<double> p) {
  ir::Attrs a;
  a.params = std::move(p);
  return a;
}
// x [5, 4, 7, 6], w [6, 2, 3, 2], stride 2 x 1, padding (1, 0, 0, 1), dilation 1 x 2, G 2:
// y [5, 6, 3, 5]; and an f64 depthwise one (the decomposition on the host).
std::vector<ir::CompositeExample> examples_input() {
  const ir::Attrs a = attrs({2, 1, 1, 0, 0, 1, 1, 2, 2, 7, 6});
  const ir::Attrs d = attrs({1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 4});
  return {{{{DType::f32, Shape{5, 6, 3, 5}}, {DType::f32, Shape{6, 2, 3, 2}}}, a},
          {{{DType::f64, Shape{2, 3, 4, 4}}, {DType::f64, Shape{3, 1, 3, 3}}}, d}};
}
std::vector<ir::CompositeExample> examples_kernel() {
  const ir::Attrs a = attrs({2, 1, 1, 0, 0, 1, 1, 2, 2, 7, 6, 3, 2});
  const ir::Attrs d = attrs({1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 4, 3, 3});
  return {{{{DType::f32, Shape{5, 4, 7, 6}}, {DType::f32, Shape{5, 6, 3, 5}}}, a},
          {{{DType::f64, Shape{2, 3, 4, 4}}, {DType::f64, Shape{2, 3, 4, 4}}}, d}};
}

}  // namespace
}  // namespace tlaloc::composites

#define TLALOC_CONV_GRAD_PARAMS                                                           \
  "stride_h", "stride_w", "pad_top", "pad_bottom", "pad_left", "pad_right", "dilation_h", \
      "dilation_w", "groups", "height", "width"
TLALOC_COMPOSITE_RECORD(conv_input_grad, "tlaloc.conv_input_grad", 2, 2, {TLALOC_CONV_GRAD_PARAMS},
                        composites::infer_input, composites::decompose_input, nullptr,
                        composites::make_kernel, composites::examples_input)
TLALOC_COMPOSITE_RECORD(conv_kernel_grad, "tlaloc.conv_kernel_grad", 2, 2,
                        {TLALOC_CONV_GRAD_PARAMS, "kernel_h", "kernel_w"}, composites::infer_kernel,
                        composites::decompose_kernel, nullptr, composites::make_kernel,
                        composites::examples_kernel)
