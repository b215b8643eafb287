// The host reference step against PyTorch 1.13 trajectories (tests/optim/make_fixtures.py).
#include <gtest/gtest.h>

#include "optim/fixture.h"
#include "optim/hand_cases.h"

namespace tlaloc::optim {
namespace {
using namespace testing;

constexpr double kTol = 1e-6;

TEST(OptimReference, MatchesTorchFixtures) {
  const json& cases = torch_fixtures().at("cases");
  ASSERT_GE(cases.size(), 20u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const Optimizer opt = optimizer_from(c);
    const UpdateOptions options = options_from(c);
    const std::vector<Shape> shapes = shapes_from(c);
    std::vector<Array> params = arrays_from(c.at("init"), shapes);
    std::vector<ir::TensorType> types;
    for (const Shape& s : shapes) types.push_back({DType::f32, s});
    const StateLayout layout = state_layout(opt, types);
    std::vector<Array> state = init_state(layout);
    const std::vector<double> lr = [&] {
      std::vector<double> out;
      for (const ParamGroup& g : resolve_groups(opt, options.groups, int(shapes.size())))
        out.push_back(*g.lr);
      return out;
    }();
    const json& steps = c.at("steps");
    ASSERT_GE(steps.size(), 10u);
    double worst = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const json& s = steps[k];
      std::vector<Array> grads = arrays_from(s.at("grads"), shapes);
      StepInfo info = reference_step(opt, options, params, grads, state, lr);
      EXPECT_FALSE(info.found_inf);
      EXPECT_EQ(state[size_t(layout.step_index())].data<int32_t>()[0], int32_t(k + 1));
      if (s.contains("grad_norm")) {
        EXPECT_NEAR(info.grad_norm, s["grad_norm"].get<double>(), kTol * info.grad_norm);
      }
      for (size_t i = 0; i < shapes.size(); ++i)
        worst = std::max(
            worst, max_rel_err(params[i].to_doubles(), s["params"][i].get<std::vector<double>>()));
      int torch_tensors = 0;
      for (const auto& [key, per_param] : s.at("state").items()) {
        for (size_t i = 0; i < shapes.size(); ++i) {
          int slot = layout.find(int(i), kind_from(key));
          ASSERT_GE(slot, 0) << key;
          worst = std::max(worst, max_rel_err(state[size_t(slot)].to_doubles(),
                                              per_param[i].get<std::vector<double>>()));
          ++torch_tensors;
        }
      }
      EXPECT_EQ(torch_tensors + 1, layout.size()) << "state tensors differ from torch's";
    }
    EXPECT_LE(worst, kTol);
    std::printf("%-20s max relative error vs torch: %.3g\n", c["name"].get<std::string>().c_str(),
                worst);
  }
}

TEST(OptimReference, HandComputedConventions) {
  for (const HandCase& hc : hand_cases()) {
    SCOPED_TRACE(hc.name);
    std::vector<Array> params;
    std::vector<ir::TensorType> types;
    for (const auto& v : hc.init) {
      params.push_back(Array::from_doubles(DType::f32, Shape{int64_t(v.size())}, v));
      types.push_back({DType::f32, params.back().shape()});
    }
    std::vector<Array> state = init_state(state_layout(hc.opt, types));
    std::vector<double> lr;
    for (const ParamGroup& g : resolve_groups(hc.opt, hc.options.groups, int(params.size())))
      lr.push_back(*g.lr);
    for (const auto& step : hc.grads) {
      std::vector<Array> grads;
      for (const auto& g : step)
        grads.push_back(Array::from_doubles(DType::f32, Shape{int64_t(g.size())}, g));
      EXPECT_FALSE(
          reference_step(hc.opt, hc.options, params, grads, state, lr, hc.grad_scale).found_inf);
    }
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_LE(max_rel_err(params[i].to_doubles(), hc.expect[i]), kTol)
          << "param " << i << " = " << params[i].at(0) << ", expected " << hc.expect[i][0];
  }
}

TEST(OptimReference, FoundInfLeavesEverythingAndNextStepIsFirst) {
  for (double bad : {INFINITY, -INFINITY, NAN}) {
    const Optimizer opt = Adam{.lr = 0.1, .amsgrad = true};
    std::vector<Array> params{Array::from<float>(Shape{2}, {1.f, -2.f}),
                              Array::from<float>(Shape{}, {3.f})};
    std::vector<ir::TensorType> types{{DType::f32, Shape{2}}, {DType::f32, Shape{}}};
    std::vector<Array> state = init_state(state_layout(opt, types));
    std::vector<Array> p0 = params, s0 = state;
    std::vector<Array> bad_grads{Array::from<float>(Shape{2}, {0.5f, 1.f}),
                                 Array::from<float>(Shape{}, {float(bad)})};
    std::vector<double> lr{0.1};
    StepInfo info = reference_step(opt, {}, params, bad_grads, state, lr);
    EXPECT_TRUE(info.found_inf);
    EXPECT_TRUE(bitwise_equal_all(params, p0));
    EXPECT_TRUE(bitwise_equal_all(state, s0));
    // The next finite step is a first step (bias corrections at t = 1): |Δp| = lr.
    std::vector<Array> good{Array::from<float>(Shape{2}, {0.5f, -1.f}),
                            Array::from<float>(Shape{}, {2.f})};
    EXPECT_FALSE(reference_step(opt, {}, params, good, state, lr).found_inf);
    EXPECT_NEAR(params[0].at(0), 0.9, 1e-6);
    EXPECT_NEAR(params[0].at(1), -1.9, 1e-6);
    EXPECT_NEAR(params[1].at(0), 2.9, 1e-6);
    EXPECT_EQ(state.back().data<int32_t>()[0], 1);
  }
}

TEST(OptimReference, StepCountPast2To24) {
  // Step count 2^24 + 3 and beyond: an f32 counter would stick at 2^24 (torch 1.13 keeps a float
  // step). bc corrections at t = 2^24 + k are 1 to f64 precision, so Δp = lr·sign(g)·m̂/√v̂.
  const Optimizer opt = Adam{.lr = 0.1};
  std::vector<Array> params{Array::from<float>(Shape{1}, {1.f})};
  std::vector<ir::TensorType> types{{DType::f32, Shape{1}}};
  std::vector<Array> state = init_state(state_layout(opt, types));
  const int32_t start = (1 << 24) + 3;
  state.back() = Array::scalar<int32_t>(start);
  std::vector<double> lr{0.1};
  for (int k = 1; k <= 5; ++k) {
    std::vector<Array> g{Array::from<float>(Shape{1}, {1.f})};
    reference_step(opt, {}, params, g, state, lr);
    EXPECT_EQ(state.back().data<int32_t>()[0], start + k);
  }
}

TEST(OptimReference, RejectsBadInput) {
  std::vector<Array> params{Array::from<float>(Shape{2}, {1.f, 2.f})};
  std::vector<ir::TensorType> types{{DType::f32, Shape{2}}};
  const Optimizer opt = Adam{};
  std::vector<Array> state = init_state(state_layout(opt, types));
  std::vector<double> lr{0.1};
  std::vector<Array> wrong{Array::from<float>(Shape{3}, {1.f, 2.f, 3.f})};
  EXPECT_THROW(reference_step(opt, {}, params, wrong, state, lr), Error);
  std::vector<Array> g{Array::from<float>(Shape{2}, {1.f, 2.f})};
  std::vector<double> two_lr{0.1, 0.2};
  EXPECT_THROW(reference_step(opt, {}, params, g, state, two_lr), Error);
  EXPECT_THROW(validate(Adam{.betas = {0.9, 1.0}}), Error);
  EXPECT_THROW(validate(SGD{.momentum = 0, .nesterov = true}), Error);
  EXPECT_THROW(validate(SGD{.lr = -1}), Error);
  EXPECT_THROW(resolve_groups(opt, {{"a", {0, 0}, {}, {}}}, 1), Error);
  EXPECT_THROW(resolve_groups(opt, {{"a", {0}, {}, {}}}, 2), Error);
}

TEST(OptimReference, DecayGroupsSkipBiasesAndNorms) {
  std::vector<std::string> names{"0.weight", "0.bias", "ln_f.weight", "blocks.0.norm1.weight",
                                 "embed.weight"};
  std::vector<Shape> shapes{{4, 3}, {4}, {4}, {4}, {10, 4}};
  auto g = decay_groups(names, shapes, 0.1);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].name, "decay");
  EXPECT_EQ(g[0].params, (std::vector<int>{0, 4}));
  EXPECT_EQ(*g[0].weight_decay, 0.1);
  EXPECT_EQ(g[1].name, "no_decay");
  EXPECT_EQ(g[1].params, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(*g[1].weight_decay, 0.0);
}

}  // namespace
}  // namespace tlaloc::optim
