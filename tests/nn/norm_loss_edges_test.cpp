// LayerNorm and cross_entropy (the fused composites) through the rest of the pipeline: f64
// finite differences (tests/autodiff/harness.h) through nn::LayerNorm without bias, with D = 1,
// the weighted nn::cross_entropy with a label outside [0, C), second derivatives (the _grad
// composites differentiated through their decomposition), the StableHLO round trip of a value
// and gradient, and constant folding of composites with constant operands against hand values.
#include "autodiff/harness.h"
#include "support/stablehlo_roundtrip.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/passes/passes.h"

using namespace tlaloc;
using namespace tlaloc::testing;
using trace::Tensor;

namespace {

ir::Function capture_layer_norm(nn::LayerNorm& ln, const Shape& xs) {
  std::vector<ir::TensorType> types = {{DType::f64, xs}};
  for (auto& p : ln.named_parameters()) {
    p.param->value = uniform(p.param->value.shape(), types.size() + 10, 0.5, 1.5);
    types.push_back({DType::f64, p.param->value.shape()});
  }
  return trace::capture(
      [&](std::span<const Tensor> t) {
        ln.bind(t.subspan(1));
        return std::vector<Tensor>{ln(t[0])};
      },
      types);
}

void fd_layer_norm(nn::LayerNorm& ln, const Shape& xs) {
  ir::Function f = capture_layer_norm(ln, xs);
  std::vector<Array> in = {uniform(xs, 1, -2, 2)};
  std::vector<int> wrt = {0};
  for (auto& p : ln.named_parameters()) {
    wrt.push_back(int(in.size()));
    in.push_back(p.param->value);
  }
  expect_vjp_matches_fd(f, in, wrt);
}

TEST(NormLossEdges, LayerNormFdWithoutBiasAndOneFeature) {
  nn::LayerNorm no_bias(4, 1e-5, false);
  fd_layer_norm(no_bias, {2, 3, 4});
  nn::LayerNorm one(1, 1e-3);  // y = bias: every gradient but d_bias is 0
  fd_layer_norm(one, {3, 1});
  nn::LayerNorm rank1(6, 0.5);
  fd_layer_norm(rank1, {6});
}

TEST(NormLossEdges, WeightedCrossEntropyFd) {
  ir::Function f = trace::capture(
      [](std::span<const Tensor> t) {
        return std::vector<Tensor>{nn::cross_entropy(t[0], t[1], t[2])};
      },
      {{DType::f64, {4, 5}}, {DType::s32, {4}}, {DType::f64, {4}}});
  std::vector<Array> in = {uniform({4, 5}, 2, -3, 3),
                           Array::from(Shape{4}, std::vector<int32_t>{1, 4, -1, 2}),
                           f64({4}, {0.5, 2, 1, 0.25})};
  expect_vjp_matches_fd(f, in, {0, 2});
}

// grad of sum(layer_norm(x)³) and of sum(cross_entropy(x)²), then FD of that gradient.
TEST(NormLossEdges, SecondDerivativesThroughTheDecomposition) {
  ir::Function ln = trace::capture(
      [](std::span<const Tensor> t) {
        Tensor y = composites::layer_norm(t[0], t[1], t[2], 1e-3);
        return std::vector<Tensor>{trace::sum(y * y * y)};
      },
      {{DType::f64, {3, 4}}, {DType::f64, {4}}, {DType::f64, {4}}});
  std::vector<Array> lin = {uniform({3, 4}, 3, -2, 2), uniform({4}, 4, 0.5, 1.5), uniform({4}, 5)};
  expect_vjp_matches_fd(autodiff::grad(ln, {0, 1, 2}), lin, {0, 1, 2}, 1e-5, 1e-5);
  ir::Function ce = trace::capture(
      [](std::span<const Tensor> t) {
        Tensor r = composites::cross_entropy(t[0], t[1]);
        return std::vector<Tensor>{trace::sum(r * r)};
      },
      {{DType::f64, {3, 4}}, {DType::s32, {3}}});
  std::vector<Array> cin = {uniform({3, 4}, 6, -2, 2),
                            Array::from(Shape{3}, std::vector<int32_t>{0, 3, 7})};
  expect_vjp_matches_fd(autodiff::grad(ce, {0}), cin, {0}, 1e-5, 1e-5);
}

TEST(NormLossEdges, StableHloRoundTripOfValueAndGrad) {
  for (DType dt : {DType::f32, DType::f64}) {
    ir::Function f = trace::capture(
        [](std::span<const Tensor> t) {
          Tensor h = composites::layer_norm(t[0], t[2], t[3], 1e-5);
          return std::vector<Tensor>{nn::cross_entropy(h, t[1])};
        },
        {{dt, {6, 5}}, {DType::s32, {6}}, {dt, {5}}, {dt, {5}}}, {"x", "labels", "w", "b"});
    ir::Function g = autodiff::value_and_grad(f, {0, 2, 3});
    expect_stablehlo_roundtrip(g, sample_inputs(g, 3));
  }
}

// Constant operands fold: x = [1, 2, 3, 4], weight 2, bias 1, eps 0 -> xc = [-1.5 .. 1.5],
// var 1.25, y = 2·xc/sqrt(1.25) + 1; logits [0, log 3] with label 1: loss log(4/3), and label 5
// (outside [0, 2)): -0.
TEST(NormLossEdges, ConstantOperandsFold) {
  ir::Function f = trace::capture(
      [](std::span<const Tensor> t) {
        Tensor x = trace::constant(Array::from_doubles(DType::f64, {1, 4}, {1, 2, 3, 4}));
        Tensor w = trace::full({4}, 2, DType::f64), b = trace::full({4}, 1, DType::f64);
        Tensor l = trace::constant(
            Array::from_doubles(DType::f64, {2, 2}, {0, std::log(3.0), 0, std::log(3.0)}));
        Tensor lab = trace::constant(Array::from(Shape{2}, std::vector<int32_t>{1, 5}));
        return std::vector<Tensor>{composites::layer_norm(x, w, b, 0) + t[0],
                                   composites::cross_entropy(l, lab) + t[0]};
      },
      {{DType::f64, {}}});
  ir::Function s = passes::simplify(f);
  for (const auto& n : s.nodes) EXPECT_FALSE(ir::is_composite(n.op)) << ir::op_name(n.op);
  std::vector<Array> out = execute(s, {f64({}, {0})});
  const double r = 1 / std::sqrt(1.25);
  const double want[] = {-3 * r + 1, -r + 1, r + 1, 3 * r + 1};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[0].at(i), want[i], 1e-15);
  EXPECT_NEAR(out[1].at(0), std::log(4.0 / 3.0), 1e-15);
  EXPECT_EQ(out[1].at(1), 0.0);
}

}  // namespace
