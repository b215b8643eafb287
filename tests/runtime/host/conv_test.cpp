// convolution and reverse kernels: convolution against the reference evaluator (passes/
// evaluate.cpp, f64 sums straight from the spec) on general cases: any dimension numbers (NHWC /
// HWIO, the kernel gradient's swapped roles), strides, negative padding, both dilations, feature
// and batch groups, 1-, 2- and 3-D, every float dtype, the GEMM paths (tlaloc's small GEMM,
// OpenBLAS, K split into chunks). run_all also checks fused / unfused and 1 / 2 threads give the
// same bits. reverse against hand values.
#include "kernel_test_util.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;

struct ConvCase {
  const char* label;
  Shape x, w;
  ir::ConvOptions o;
  double tol = 1e-5;
};

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> v;
  auto opts = [](std::vector<int64_t> st, std::vector<std::pair<int64_t, int64_t>> pad,
                 std::vector<int64_t> ld, std::vector<int64_t> rd, int64_t fg = 1, int64_t bg = 1) {
    ir::ConvOptions o;
    o.window_strides = std::move(st);
    o.padding = std::move(pad);
    o.lhs_dilation = std::move(ld);
    o.rhs_dilation = std::move(rd);
    o.feature_group_count = fg;
    o.batch_group_count = bg;
    return o;
  };
  v.push_back({"NCHW pad 1 (direct stores, small GEMM)",
               {3, 2, 9, 8},
               {5, 2, 3, 3},
               opts({}, {{1, 1}, {1, 1}}, {}, {})});
  ir::ConvOptions nhwc = opts({2, 1}, {{1, 1}, {0, 2}}, {}, {});
  nhwc.dimension_numbers = {0, 3, {1, 2}, 2, 3, {0, 1}, 0, 3, {1, 2}};
  v.push_back({"NHWC / HWIO, stride, padding", {2, 7, 6, 3}, {3, 2, 3, 4}, nhwc});
  v.push_back({"negative padding, lhs and rhs dilation",
               {2, 3, 6, 7},
               {4, 3, 2, 3},
               opts({1, 2}, {{-1, 0}, {2, -2}}, {2, 3}, {2, 1})});
  v.push_back(
      {"batch groups", {4, 3, 5, 5}, {6, 3, 3, 3}, opts({}, {{1, 1}, {1, 1}}, {}, {}, 1, 2)});
  v.push_back({"depthwise (feature groups)",
               {2, 4, 6, 6},
               {8, 1, 3, 3},
               opts({}, {{1, 1}, {1, 1}}, {}, {}, 4)});
  v.push_back({"1-D stride 3", {2, 3, 11}, {2, 3, 4}, opts({3}, {}, {}, {})});
  v.push_back(
      {"3-D", {1, 2, 4, 5, 3}, {3, 2, 2, 2, 2}, opts({}, {{1, 0}, {0, 1}, {1, 1}}, {}, {})});
  v.push_back(
      {"K > 512 (OpenBLAS)", {2, 64, 6, 6}, {8, 64, 3, 3}, opts({}, {{1, 1}, {1, 1}}, {}, {})});
  v.push_back({"small Q, tiles of several batch elements (scattered)",
               {5, 2, 4, 4},
               {3, 2, 3, 3},
               opts({}, {}, {}, {})});
  // The kernel gradient's shape: batch and feature roles swapped, a huge K summed in chunks.
  ir::ConvOptions grad = opts({}, {{2, 2}, {2, 2}}, {}, {});
  grad.dimension_numbers = {1, 0, {2, 3}, 0, 1, {2, 3}, 1, 0, {2, 3}};
  v.push_back(
      {"kernel-gradient layout, K in chunks", {64, 4, 10, 10}, {64, 8, 10, 10}, grad, 1e-4});
  return v;
}

KERNEL_TEST(convolution, matches_the_evaluator) {
  for (const ConvCase& c : conv_cases())
    for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
      if (t != DType::f32 && c.x.numel() > 2000) continue;
      SCOPED_TRACE(fmt::format("{} {}", c.label, name(t)));
      auto f = one_op({{t, c.x}, {t, c.w}},
                      [&](ir::Builder& b, auto& p) { return b.convolution(p[0], p[1], c.o); });
      const std::vector<Array> in{lcg_array(t, c.x, 11), lcg_array(t, c.w, 12)};
      const Array want = passes::interpret(f, in)[0];
      const double tol = t == DType::f64   ? 1e-12
                         : t == DType::f32 ? c.tol
                         : t == DType::f16 ? 4e-3
                                           : 2e-2;
      expect_values(run_all(f, in)[0], want.to_doubles(), tol);
    }
}

// 2-D NCHW f32 instances: the oneDNN kernel (its label says so), against the evaluator, the same
// bits at 1 and 2 threads (run_all); batches that are not a multiple of the chunk.
KERNEL_TEST(convolution, onednn_nchw_f32) {
  auto opts = [](std::vector<int64_t> st, std::vector<std::pair<int64_t, int64_t>> pad,
                 std::vector<int64_t> rd, int64_t fg = 1) {
    ir::ConvOptions o;
    o.window_strides = std::move(st);
    o.padding = std::move(pad);
    o.rhs_dilation = std::move(rd);
    o.feature_group_count = fg;
    return o;
  };
  const std::vector<ConvCase> cases{
      {"fmnist conv1, N 37", {37, 1, 28, 28}, {8, 1, 3, 3}, opts({}, {{1, 1}, {1, 1}}, {})},
      {"stride 2, uneven padding, N 19",
       {19, 6, 13, 12},
       {10, 6, 3, 3},
       opts({2, 2}, {{1, 2}, {0, 1}}, {})},
      {"dilation 2, N 5", {5, 3, 11, 10}, {4, 3, 3, 2}, opts({}, {{2, 2}, {1, 1}}, {2, 3})},
      {"depthwise, N 9", {9, 8, 7, 7}, {8, 1, 3, 3}, opts({}, {{1, 1}, {1, 1}}, {}, 8)},
      {"groups 2, N 70", {70, 4, 6, 6}, {6, 2, 3, 3}, opts({1, 2}, {{0, 0}, {1, 1}}, {}, 2)},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.label);
    auto f = one_op({{DType::f32, c.x}, {DType::f32, c.w}},
                    [&](ir::Builder& b, auto& p) { return b.convolution(p[0], p[1], c.o); });
    const auto k = runtime::host::make_conv(f, f.results[0], 2);
    EXPECT_TRUE(k->label.starts_with("convolution onednn forward")) << k->label;
    const std::vector<Array> in{lcg_array(DType::f32, c.x, 21), lcg_array(DType::f32, c.w, 22)};
    expect_values(run_all(f, in)[0], passes::interpret(f, in)[0].to_doubles(), 1e-5);
  }
  // Outside oneDNN's instances (negative padding, f64): the general kernel.
  auto g = one_op({{DType::f32, {2, 3, 6, 7}}, {DType::f32, {4, 3, 2, 3}}},
                  [&](ir::Builder& b, auto& p) {
                    return b.convolution(p[0], p[1], opts({}, {{-1, 0}, {0, 0}}, {}));
                  });
  EXPECT_TRUE(runtime::host::make_conv(g, g.results[0], 2)->label.starts_with("convolution rows"));
}

// The gradient composites' oneDNN kernels (convolution_backward_data / _weights) against the
// evaluator (their decompositions, JAX's gradient convolutions): stride, uneven padding,
// dilation, groups, depthwise, batches that are not a multiple of the chunk; run_all checks the
// same bits at 1 and 2 threads (the weights' per-chunk sums added in chunk order).
TEST(HostKernel, conv_grad_composites_onednn) {
  struct Case {
    const char* label;
    Shape x, w;
    std::vector<double> p;  // sh sw top bottom left right dh dw groups (H W kh kw appended)
  };
  const std::vector<Case> cases{
      {"fmnist conv2, N 37", {37, 4, 14, 14}, {8, 4, 5, 5}, {1, 1, 2, 2, 2, 2, 1, 1, 1}},
      {"stride 2, uneven padding, dilation, groups 2, N 19",
       {19, 6, 13, 12},
       {10, 3, 3, 2},
       {2, 2, 1, 2, 0, 1, 2, 3, 2}},
      {"depthwise, N 70", {70, 8, 7, 7}, {8, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 8}},
  };
  auto out = [](int64_t in, int64_t k, double s, double lo, double hi, double d) {
    return (in + int64_t(lo + hi) - (int64_t(d) * (k - 1) + 1)) / int64_t(s) + 1;
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const Shape y{c.x[0], c.w[0], out(c.x[2], c.w[2], c.p[0], c.p[2], c.p[3], c.p[6]),
                  out(c.x[3], c.w[3], c.p[1], c.p[4], c.p[5], c.p[7])};
    std::vector<double> pi = c.p;
    pi.insert(pi.end(), {double(c.x[2]), double(c.x[3])});
    std::vector<double> pk = pi;
    pk.insert(pk.end(), {double(c.w[2]), double(c.w[3])});
    const ir::TensorType xt{DType::f32, c.x}, wt{DType::f32, c.w}, yt{DType::f32, y};
    auto fi = one_op({yt, wt}, [&](ir::Builder& b, auto& p) {
      return b.composite(Op::conv_input_grad, {p[0], p[1]}, pi)[0];
    });
    auto fk = one_op({xt, yt}, [&](ir::Builder& b, auto& p) {
      return b.composite(Op::conv_kernel_grad, {p[0], p[1]}, pk)[0];
    });
    EXPECT_TRUE(runtime::host::make_composite(fi, fi.results[0], 2)
                    ->label.starts_with("convolution onednn input_grad"));
    EXPECT_TRUE(runtime::host::make_composite(fk, fk.results[0], 2)
                    ->label.starts_with("convolution onednn kernel_grad"));
    const Array dy = lcg_array(DType::f32, y, 31);
    const std::vector<Array> in_i{dy, lcg_array(DType::f32, c.w, 32)};
    const std::vector<Array> in_k{lcg_array(DType::f32, c.x, 33), dy};
    expect_values(run_all(fi, in_i)[0], passes::interpret(fi, in_i)[0].to_doubles(), 1e-5);
    // d_w sums N * Ho * Wo f32 products (7252 in the first case): 1e-4, as the general
    // kernel's kernel-gradient case above.
    expect_values(run_all(fk, in_k)[0], passes::interpret(fk, in_k)[0].to_doubles(), 1e-4);
  }
}

// A conv layer's bias add (add(convolution, bias [O] broadcast along dim 1)), which the host
// planner folds into the oneDNN forward kernel: the same bits as the convolution alone followed
// by the add done here by hand in f32, at 1 and 2 threads; N 19 leaves a tail chunk.
TEST(HostKernel, conv_bias_add_folded) {
  const Shape xs{19, 3, 10, 9}, ws{5, 3, 3, 3}, ys{19, 5, 8, 7};
  const ir::TensorType xt{DType::f32, xs}, wt{DType::f32, ws}, bt{DType::f32, Shape{5}};
  auto conv = one_op({xt, wt}, [](ir::Builder& b, auto& p) { return b.convolution(p[0], p[1]); });
  ir::Builder b("conv_bias");
  auto x = b.parameter(xt, "x"), w = b.parameter(wt, "w"), bias = b.parameter(bt, "bias");
  auto y = b.convolution(x, w);
  ir::Function f = b.build({b.binary(Op::add, y, b.broadcast_in_dim(bias, ys, {1}))});
  const Array xv = lcg_array(DType::f32, xs, 41), wv = lcg_array(DType::f32, ws, 42),
              bv = lcg_array(DType::f32, Shape{5}, 43);
  Array want = run_all(conv, {xv, wv})[0];
  float* p = want.data<float>();
  const int64_t plane = ys[2] * ys[3];
  for (int64_t i = 0; i < want.numel(); ++i) p[i] += bv.data<float>()[(i / plane) % ys[1]];
  const Array got = run_all(f, {xv, wv, bv})[0];
  EXPECT_TRUE(got.bitwise_equal(want));
}

KERNEL_TEST(convolution, hand_values) {
  // x [1, 1, 3] = 1 2 3, w [1, 1, 2] = 1 10, padding (1, 0): windows 0 1 | 1 2 | 2 3.
  auto f = one_op({{DType::f32, {1, 1, 3}}, {DType::f32, {1, 1, 2}}}, [](ir::Builder& b, auto& p) {
    ir::ConvOptions o;
    o.padding = {{1, 0}};
    return b.convolution(p[0], p[1], o);
  });
  expect_values(run_all(f, {Array::from<float>({1, 1, 3}, {1, 2, 3}),
                            Array::from<float>({1, 1, 2}, {1, 10})})[0],
                {10, 21, 32});
}

KERNEL_TEST(reverse, dims_and_dtypes) {
  auto f =
      one_op({{DType::f32, {2, 3}}}, [](ir::Builder& b, auto& p) { return b.reverse(p[0], {1}); });
  expect_values(run_all(f, {Array::from<float>({2, 3}, {1, 2, 3, 4, 5, 6})})[0],
                {3, 2, 1, 6, 5, 4});
  auto g = one_op({{DType::s32, {2, 2, 2}}}, [](ir::Builder& b, auto& p) {
    return b.reverse(p[0], {0, 2});
  });
  expect_values(run_all(g, {Array::from<int32_t>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})})[0],
                {5, 4, 7, 6, 1, 0, 3, 2});
  auto h =
      one_op({{DType::bf16, {4}}}, [](ir::Builder& b, auto& p) { return b.reverse(p[0], {}); });
  expect_values(run_all(h, {Array::from_doubles(DType::bf16, {4}, {1, 2, 3, 4})})[0], {1, 2, 3, 4});
}

}  // namespace
}  // namespace tlaloc::host_test
