// nn layers and losses against hand computations and PyTorch's definitions.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using trace::Tensor;

namespace {
std::vector<Array> run(const ir::Function& f, std::vector<Array> in) {
  return runtime::host::compile(f)->run(in);
}
}  // namespace

TEST(Linear, ForwardIsXWtPlusB) {
  nn::Linear lin(3, 2);
  lin.init(random::key(0));
  auto named = lin.named_parameters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].name, "weight");
  EXPECT_EQ(named[0].param->value.shape(), (Shape{2, 3}));
  // PyTorch default init bound 1/sqrt(in).
  for (double v : named[0].param->value.to_doubles()) EXPECT_LE(std::abs(v), 1 / std::sqrt(3.0));
  named[0].param->value = Array::from<float>({2, 3}, {1, 2, 3, -1, 0, 1});
  named[1].param->value = Array::from<float>({2}, {0.5f, -0.5f});
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> in) {
        lin.bind(in.subspan(1));
        return std::vector<Tensor>{lin(in[0])};
      },
      {{DType::f32, {2, 3}}, {DType::f32, {2, 3}}, {DType::f32, {2}}});
  auto out = run(f, {Array::from<float>({2, 3}, {1, 1, 1, 2, 0, -1}), named[0].param->value,
                     named[1].param->value});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{6.5f, -0.5f, -0.5f, -3.5f}));
}

// Linear::forward_fused (the fused QKV projection): x·Wᵢᵀ + bᵢ for widths 2, 1, 3 by hand, as one
// GEMM over the concatenated weights; a layer with a LoRA adapter makes the three run one by one.
TEST(Linear, ForwardFusedIsEachLayersXWtPlusB) {
  for (bool lora : {false, true}) {
    SCOPED_TRACE(lora ? "with LoRA" : "fused");
    nn::Linear a(3, 2), b(3, 1), c(3, 3);
    if (lora) b.add_lora(1, 2.0, 0.0);
    std::vector<Array> values = {
        Array::from<float>({2, 3}, {1, 2, 3, -1, 0, 1}), Array::from<float>({2}, {0.5f, -0.5f}),
        Array::from<float>({1, 3}, {0, 1, -2}), Array::from<float>({1}, {4})};
    if (lora) {  // lora_A [1, 3], lora_B [1, 1]: adds 2 · (x·Aᵀ)·Bᵀ = 2 · (x0 + x1 + x2)
      values.push_back(Array::from<float>({1, 3}, {1, 1, 1}));
      values.push_back(Array::from<float>({1, 1}, {1}));
    }
    values.push_back(Array::from<float>({3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}));
    values.push_back(Array::from<float>({3}, {0, 0, 1}));
    std::vector<ir::TensorType> types = {{DType::f32, {2, 3}}};
    for (const Array& v : values) types.push_back({v.dtype(), v.shape()});
    ir::Function f = trace::capture(
        [&](std::span<const Tensor> in) {
          const size_t nb = lora ? 4 : 2;
          a.bind(in.subspan(1, 2));
          b.bind(in.subspan(3, nb));
          c.bind(in.subspan(3 + nb, 2));
          std::array<nn::Linear*, 3> layers{&a, &b, &c};
          return nn::Linear::forward_fused(layers, in[0]);
        },
        types);
    int dots = 0;
    for (const ir::Node& n : f.nodes) dots += n.op == ir::Op::dot_general;
    EXPECT_EQ(dots, lora ? 5 : 1);
    std::vector<Array> in = {Array::from<float>({2, 3}, {1, 1, 1, 2, 0, -1})};
    for (Array& v : values) in.push_back(std::move(v));
    auto out = run(f, in);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{6.5f, -0.5f, -0.5f, -3.5f}));
    EXPECT_EQ(out[1].to_vector<float>(),
              (std::vector<float>{lora ? 9.0f : 3.0f, lora ? 8.0f : 6.0f}));
    EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{1, 1, 2, 2, 0, 0}));
  }
}

TEST(Sequential, DottedNamesAndPrintout) {
  auto m = nn::mlp({2, 16, 16, 1});
  auto named = m->named_parameters();
  std::vector<std::string> names;
  for (auto& p : named) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight",
                                             "4.bias"}));
  EXPECT_EQ(m->num_parameters(), 2 * 16 + 16 + 16 * 16 + 16 + 16 + 1);
  EXPECT_NE(m->to_string().find("(1): ReLU()"), std::string::npos) << m->to_string();
}

TEST(Losses, CrossEntropyIsStableForHugeAndInfiniteLogits) {
  // Row 0: logits ±1e8 -> loss 0 for label 0, 2e8 for label 1. Row 1: -inf on wrong classes.
  ir::Function f = trace::capture(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{nn::cross_entropy_per_row(in[0], in[1])};
      },
      {{DType::f32, {3, 3}}, {DType::s32, {3}}});
  float inf = INFINITY;
  auto out = run(f, {Array::from<float>({3, 3}, {1e8f, -1e8f, 0, 1e8f, -1e8f, 0, -inf, 2, -inf}),
                     Array::from<int32_t>({3}, {0, 1, 1})});
  auto v = out[0].to_vector<float>();
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_FLOAT_EQ(v[1], 2e8f);
  EXPECT_EQ(v[2], 0.0f);
}

TEST(Losses, CrossEntropyMatchesHandValue) {
  ir::Function f = trace::capture(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{nn::cross_entropy(in[0], in[1])};
      },
      {{DType::f32, {2, 3}}, {DType::s32, {2}}});
  auto out =
      run(f, {Array::from<float>({2, 3}, {1, 2, 3, 0, 0, 0}), Array::from<int32_t>({2}, {2, 0})});
  double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;
  double l1 = std::log(3.0);
  EXPECT_NEAR(out[0].at(0), (l0 + l1) / 2, 1e-6);
}

TEST(Losses, WeightedCrossEntropyIgnoresMaskedRows) {
  ir::Function f = trace::capture(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{nn::cross_entropy(in[0], in[1], in[2])};
      },
      {{DType::f32, {2, 2}}, {DType::s32, {2}}, {DType::f32, {2}}});
  auto out = run(f, {Array::from<float>({2, 2}, {0, 0, 50, -50}), Array::from<int32_t>({2}, {1, 1}),
                     Array::from<float>({2}, {1, 0})});
  EXPECT_NEAR(out[0].at(0), std::log(2.0), 1e-6);
}

// PyTorch 1.13: F.cross_entropy(x, y, weight=w) with x f64 [[1,2,3],[0,0,0],[2,-1,0.5]],
// y [2,0,1], w [0.25,0.5,0.125] is sum(w[y]·loss) / sum(w[y]) = 2.22429653262989, its
// gradient below; with weight zeros the loss and every gradient entry are NaN. Row weights
// w[y] = [0.125, 0.25, 0.5] sum to 0.875: a mean over max(sum, 1) gave 1.946 instead.
TEST(Losses, WeightedCrossEntropyMeanIsOverTheWeightSumAsPyTorch) {
  ir::Function f = trace::capture(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{nn::cross_entropy(in[0], in[1], in[2])};
      },
      {{DType::f64, {3, 3}}, {DType::s32, {3}}, {DType::f64, {3}}});
  auto vg = runtime::host::compile(autodiff::value_and_grad(f, {0}));
  Array x = Array::from<double>({3, 3}, {1, 2, 3, 0, 0, 0, 2, -1, 0.5});
  Array y = Array::from<int32_t>({3}, {2, 0, 1});
  std::vector<Array> in = {x, y, Array::from<double>({3}, {0.125, 0.25, 0.5})};
  auto out = vg->run(in);
  EXPECT_NEAR(out[0].at(0), 2.22429653262989, 1e-13);
  const std::vector<double> torch_grad = {0.0128615105,  0.0349612102,  -0.0478227206,
                                          -0.1904761905, 0.0952380952,  0.0952380952,
                                          0.4489125912,  -0.5490785296, 0.1001659384};
  for (int64_t i = 0; i < 9; ++i) EXPECT_NEAR(out[1].at(i), torch_grad[size_t(i)], 1e-10) << i;
  in[2] = Array::from<double>({3}, {0, 0, 0});
  out = vg->run(in);
  EXPECT_TRUE(std::isnan(out[0].at(0)));
  for (int64_t i = 0; i < 9; ++i) EXPECT_TRUE(std::isnan(out[1].at(i))) << i;
}

TEST(Losses, MseMismatchIsAnError) {
  EXPECT_THROW(trace::capture(
                   [](std::span<const Tensor> in) {
                     return std::vector<Tensor>{nn::mse_loss(in[0], in[1])};
                   },
                   {{DType::f32, {2, 1}}, {DType::f32, {2}}}),
               Error);
}
