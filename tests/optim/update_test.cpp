// The in-program update (append_update), run by the IR reference interpreter
// (passes::interpret) and by the host lane (runtime::host, donated in place), against the host
// reference step (the oracle), the PyTorch fixtures and hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/fixture.h"
#include "optim/hand_cases.h"
#include "optim/stepper.h"
#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/optim/update.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::optim {
namespace {
using namespace testing;
using trace::Tensor;

constexpr double kTol = 1e-6;

class OptimUpdate : public ::testing::TestWithParam<Engine> {};

double worst_err(const std::vector<Array>& a, const std::vector<Array>& b) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].dtype(), b[i].dtype());
    w = std::max(w, max_rel_err(a[i].to_doubles(), b[i].to_doubles()));
  }
  return w;
}

TEST_P(OptimUpdate, InProgramMatchesReferenceAndTorch) {
  for (const json& c : torch_fixtures().at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const Optimizer opt = optimizer_from(c);
    const UpdateOptions options = options_from(c);
    const std::vector<Shape> shapes = shapes_from(c);
    Stepper prog(GetParam(), opt, options, arrays_from(c.at("init"), shapes));
    std::vector<Array> ref_params = arrays_from(c.at("init"), shapes);
    std::vector<Array> ref_state = init_state(prog.ts.state);
    const std::vector<double> lr = prog.ts.group_lr();
    double vs_ref = 0, vs_torch = 0;
    for (const json& s : c.at("steps")) {
      std::vector<Array> grads = arrays_from(s.at("grads"), shapes);
      StepInfo info = reference_step(opt, options, ref_params, grads, ref_state, lr);
      EXPECT_FALSE(prog.step(grads, lr));
      vs_ref =
          std::max({vs_ref, worst_err(prog.params, ref_params), worst_err(prog.state, ref_state)});
      EXPECT_TRUE(prog.state.back().bitwise_equal(ref_state.back())) << "step counts differ";
      if (options.max_norm) {
        double norm = prog.last[size_t(prog.ts.grad_norm_output())].at(0);
        EXPECT_NEAR(norm, info.grad_norm, kTol * info.grad_norm);
      }
      for (size_t i = 0; i < shapes.size(); ++i)
        vs_torch = std::max(vs_torch, max_rel_err(prog.params[i].to_doubles(),
                                                  s["params"][i].get<std::vector<double>>()));
    }
    EXPECT_LE(vs_ref, kTol);
    EXPECT_LE(vs_torch, kTol);
    std::printf("%-20s in-program vs reference %.3g, vs torch %.3g\n", name.c_str(), vs_ref,
                vs_torch);
  }
}

TEST_P(OptimUpdate, HandComputedConventions) {
  for (const HandCase& hc : hand_cases()) {
    SCOPED_TRACE(hc.name);
    std::vector<Array> init;
    for (const auto& v : hc.init)
      init.push_back(Array::from_doubles(DType::f32, Shape{int64_t(v.size())}, v));
    Stepper prog(GetParam(), hc.opt, hc.options, init);
    for (const auto& step : hc.grads) {
      std::vector<Array> grads;
      for (const auto& g : step)
        grads.push_back(Array::from_doubles(DType::f32, Shape{int64_t(g.size())}, g));
      EXPECT_FALSE(prog.step(grads, prog.ts.group_lr(), hc.grad_scale));
    }
    for (size_t i = 0; i < init.size(); ++i)
      EXPECT_LE(max_rel_err(prog.params[i].to_doubles(), hc.expect[i]), kTol)
          << "param " << i << " = " << prog.params[i].at(0) << ", expected " << hc.expect[i][0];
  }
}

// found-inf: a non-finite value anywhere in any gradient leaves params, moments and the step
// count bit-identical, for every optimizer; the next finite step then matches a first step.
TEST_P(OptimUpdate, FoundInfSkipsEverythingBitwise) {
  const std::vector<Optimizer> opts{SGD{.lr = 0.1, .momentum = 0.9},
                                    Adam{.lr = 0.1, .weight_decay = 0.1, .amsgrad = true},
                                    AdamW{.lr = 0.1}};
  const std::vector<Shape> shapes{{2, 3}, {4}};
  auto grads_with = [&](int param, int64_t index, double bad) {
    std::vector<Array> g{Array::from_doubles(DType::f32, shapes[0], {1, -2, 3, -4, 5, -6}),
                         Array::from_doubles(DType::f32, shapes[1], {0.5, 0.25, -1, 2})};
    if (param >= 0) {
      std::vector<double> v = g[size_t(param)].to_doubles();
      v[size_t(index)] = bad;
      g[size_t(param)] = Array::from_doubles(DType::f32, shapes[size_t(param)], v);
    }
    return g;
  };
  for (const Optimizer& opt : opts) {
    SCOPED_TRACE(name(opt));
    std::vector<Array> init{Array::from_doubles(DType::f32, shapes[0], {1, 2, 3, 4, 5, 6}),
                            Array::from_doubles(DType::f32, shapes[1], {-1, -2, -3, -4})};
    UpdateOptions o;
    o.max_norm = 10.0;
    Stepper prog(GetParam(), opt, o, init);
    std::vector<double> lr = prog.ts.group_lr();
    for (double bad : {double(INFINITY), -double(INFINITY), double(NAN)})
      for (auto [param, index] : {std::pair{0, 0}, {0, 5}, {1, 2}}) {
        std::vector<Array> p0 = prog.params, s0 = prog.state;
        EXPECT_TRUE(prog.step(grads_with(param, index, bad), lr)) << bad;
        EXPECT_TRUE(bitwise_equal_all(prog.params, p0));
        EXPECT_TRUE(bitwise_equal_all(prog.state, s0));
      }
    // With loss scaling on, an inf gradient is still caught and the step count stays 0.
    EXPECT_TRUE(prog.step(grads_with(1, 0, INFINITY), lr, 65536.0));
    EXPECT_EQ(prog.state.back().at(0), 0);
    // The next finite step behaves like the first: compare with a fresh reference.
    std::vector<Array> ref = init;
    std::vector<Array> ref_state = init_state(prog.ts.state);
    reference_step(opt, o, ref, grads_with(-1, 0, 0), ref_state, lr);
    EXPECT_FALSE(prog.step(grads_with(-1, 0, 0), lr));
    EXPECT_LE(worst_err(prog.params, ref), kTol);
    EXPECT_LE(worst_err(prog.state, ref_state), kTol);
    EXPECT_EQ(prog.state.back().at(0), 1);
  }
}

// found-inf over gradients of several dtypes concatenated (bf16 / f16 / f32 gradients, f32 or
// f64 parameters, an empty one): true iff some gradient holds an inf or NaN, wherever it is.
TEST_P(OptimUpdate, FoundInfAcrossGradientDtypesAndAnEmptyParameter) {
  const std::vector<Shape> shapes{{0}, {3}, {2, 2}};
  for (DType g : {DType::bf16, DType::f16, DType::f32, DType::f64})
    for (DType p : {DType::f32, DType::f64}) {
      SCOPED_TRACE(fmt::format("grads {} params {}", name(g), name(p)));
      std::vector<Array> init;
      for (const Shape& s : shapes) init.push_back(Array::filled(p, s, 1.0));
      Stepper prog(GetParam(), SGD{.lr = 0.1}, {}, init, g, p);
      const std::vector<double> lr = prog.ts.group_lr();
      auto grads = [&](size_t param, int64_t index, double bad) {
        std::vector<Array> out;
        for (size_t i = 0; i < shapes.size(); ++i) {
          std::vector<double> v(size_t(shapes[i].numel()), -0.5);
          if (i == param) v[size_t(index)] = bad;
          out.push_back(Array::from_doubles(g, shapes[i], v));
        }
        return out;
      };
      EXPECT_FALSE(prog.step(grads(9, 0, 0), lr));
      for (double bad : {double(INFINITY), -double(INFINITY), double(NAN)})
        for (auto [param, index] : {std::pair<size_t, int64_t>{1, 0}, {1, 2}, {2, 3}})
          EXPECT_TRUE(prog.step(grads(param, index, bad), lr)) << bad << " " << param;
      EXPECT_FALSE(prog.step(grads(9, 0, 0), lr));
    }
}

TEST_P(OptimUpdate, StepCountPast2To24) {
  // β2 = 1 − 1e-8 so the bias correction still matters at t ≈ 2^24 (1 − β2^t ≈ 0.155): an f32
  // step count would stop at 2^24 and an f32 β2 would be 1.
  const Optimizer opt = Adam{.lr = 0.1, .betas = {0.9, 1 - 1e-8}};
  std::vector<Array> init{Array::from<float>(Shape{3}, {1.f, 2.f, 3.f})};
  Stepper prog(GetParam(), opt, {}, init);
  const int32_t start = (1 << 24) - 2;
  prog.state.back() = Array::scalar<int32_t>(start);
  std::vector<Array> ref = init, ref_state = init_state(prog.ts.state);
  ref_state.back() = Array::scalar<int32_t>(start);
  for (int k = 1; k <= 6; ++k) {
    std::vector<Array> g{Array::from<float>(Shape{3}, {0.5f, -1.f, float(k)})};
    prog.step(g, prog.ts.group_lr());
    reference_step(opt, {}, ref, g, ref_state, prog.ts.group_lr());
    EXPECT_EQ(prog.state.back().data<int32_t>()[0], start + k);
    EXPECT_LE(worst_err(prog.params, ref), kTol);
    EXPECT_LE(worst_err(prog.state, ref_state), kTol);
  }
}

TEST_P(OptimUpdate, HalfPrecisionGradientsWithF32Masters) {
  for (DType half : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(name(half)));
    const std::vector<Shape> shapes{{5}};
    std::vector<Array> init{Array::from<float>(shapes[0], {0.1f, -0.2f, 0.3f, 0.4f, -0.5f})};
    UpdateOptions o;
    Stepper prog(GetParam(), AdamW{.lr = 0.01}, o, init, half, half);
    EXPECT_EQ(prog.ts.fn.input_type(prog.ts.param_input(0)).dtype, DType::f32);
    std::vector<Array> ref = init, ref_state = init_state(prog.ts.state);
    for (int k = 0; k < 10; ++k) {
      std::vector<Array> g{
          Array::from<float>(shapes[0], {0.5f, -1.f, 0.25f * float(k), 3.f, -0.125f}).astype(half)};
      EXPECT_FALSE(prog.step(g, prog.ts.group_lr(), 8.0));
      reference_step(AdamW{.lr = 0.01}, o, ref, g, ref_state, prog.ts.group_lr(), 8.0);
    }
    // Large finite gradients whose sum overflows the 16-bit type (f16 max 65504) are not
    // non-finite: the check sums in f32. Scaled by 2^16 they are ordinary values.
    const double big = half == DType::f16 ? 6e4 : 1e20;
    std::vector<Array> g{Array::filled(DType::f32, shapes[0], big).astype(half)};
    EXPECT_FALSE(prog.step(g, prog.ts.group_lr(), 65536.0));
    reference_step(AdamW{.lr = 0.01}, o, ref, g, ref_state, prog.ts.group_lr(), 65536.0);
    EXPECT_EQ(prog.state.back().at(0), 11);
    EXPECT_LE(worst_err(prog.params, ref), kTol);
    EXPECT_LE(worst_err(prog.state, ref_state), kTol);
  }
}

// f64 parameters (gradient checks) keep f64 masters and state; the program then agrees with the
// f64 reference to ~1e-15 instead of f32 rounding.
TEST_P(OptimUpdate, F64ParametersStayF64) {
  const std::vector<Shape> shapes{{4}};
  std::vector<Array> init{Array::from<double>(shapes[0], {0.1, -0.2, 0.3, 0.4})};
  const Optimizer opt = AdamW{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true};
  Stepper prog(GetParam(), opt, {}, init, DType::f64, DType::f64);
  EXPECT_EQ(prog.ts.state.slots[0].type.dtype, DType::f64);
  std::vector<Array> ref = init, ref_state = init_state(prog.ts.state);
  for (int k = 0; k < 10; ++k) {
    std::vector<Array> g{Array::from<double>(shapes[0], {0.5, -1.0, 0.25 * k, 3.0 / (k + 1)})};
    EXPECT_FALSE(prog.step(g, prog.ts.group_lr()));
    reference_step(opt, {}, ref, g, ref_state, prog.ts.group_lr());
  }
  EXPECT_LE(worst_err(prog.params, ref), 1e-14);
  EXPECT_LE(worst_err(prog.state, ref_state), 1e-14);
}

// Clipping f64 gradients whose squares overflow f32 (~1e30 per element): the norm is summed
// in f64, as torch.nn.utils.clip_grad_norm_ sums f64 gradients, so the update clips to max_norm
// like the reference (in f32 the norm was inf and the gradient clipped to 0).
TEST_P(OptimUpdate, ClipNormOfHugeF64GradientsDoesNotOverflow) {
  const std::vector<Shape> shapes{{4}};
  std::vector<Array> init{Array::from<double>(shapes[0], {0.1, -0.2, 0.3, 0.4})};
  UpdateOptions clip;
  clip.max_norm = 1.0;
  const Optimizer opt = SGD{.lr = 0.1};
  Stepper prog(GetParam(), opt, clip, init, DType::f64, DType::f64);
  std::vector<Array> ref = init, ref_state = init_state(prog.ts.state);
  std::vector<Array> g{Array::from<double>(shapes[0], {1e30, -2e30, 1.5e30, 0.5e30})};
  EXPECT_FALSE(prog.step(g, prog.ts.group_lr()));
  const StepInfo info = reference_step(opt, clip, ref, g, ref_state, prog.ts.group_lr());
  EXPECT_NEAR(prog.last[size_t(prog.ts.grad_norm_output())].at(0), info.grad_norm,
              1e-6 * info.grad_norm);
  EXPECT_LE(worst_err(prog.params, ref), 1e-12);
  EXPECT_NE(prog.params[0].at(0), init[0].at(0));  // moved, not clipped to a zero gradient
}

// The whole pipeline: value_and_grad of a linear regression, append_update with decay groups
// from parameter names, against the reference step fed the closed-form gradient
// dL/dw = 2/N·xᵀr, dL/db = 2/N·Σr with r = x·w + b − y, N = 4.
TEST_P(OptimUpdate, OnAutodiffGradientOfLinearRegression) {
  const std::vector<double> x{0.5, -1, 2, 1, 0.25, -0.5, -1.5, 2, 1, 0, 1, 3};  // [4,3]
  const std::vector<double> y{1, -2, 0.5, 3};                                   // [4,1]
  ir::Function f = trace::capture(
      [](std::span<const Tensor> in) {
        Tensor r = matmul(in[0], in[2]) + in[3] - in[1];
        return std::vector<Tensor>{mean(square(r))};
      },
      {{DType::f32, Shape{4, 3}},
       {DType::f32, Shape{4, 1}},
       {DType::f32, Shape{3, 1}},
       {DType::f32, Shape{1}}},
      {"x", "y", "0.weight", "0.bias"}, {"loss"});
  const std::vector<std::string> names{"0.weight", "0.bias"};
  const std::vector<Shape> shapes{{3, 1}, {1}};
  UpdateOptions o;
  o.groups = decay_groups(names, shapes, 0.1);
  const Optimizer opt = AdamW{.lr = 0.05};
  TrainStep ts = append_update(opt, autodiff::value_and_grad(f, {2, 3}), 2, o);
  ASSERT_EQ(ts.groups.size(), 2u);
  std::vector<Array> params{Array::from<float>(shapes[0], {0.1f, -0.2f, 0.3f}),
                            Array::from<float>(shapes[1], {0.5f})};
  std::vector<Array> state = init_state(ts.state);
  std::vector<Array> ref = params, ref_state = state;
  Runner run(GetParam(), ts.fn);
  const Array xa = Array::from_doubles(DType::f32, Shape{4, 3}, x);
  const Array ya = Array::from_doubles(DType::f32, Shape{4, 1}, y);
  for (int k = 0; k < 5; ++k) {
    // Closed-form gradient at the reference parameters.
    std::vector<double> w = ref[0].to_doubles(), r(4), gw(3, 0.0);
    double b = ref[1].at(0), gb = 0, loss = 0;
    for (int i = 0; i < 4; ++i) {
      r[size_t(i)] = b - y[size_t(i)];
      for (int j = 0; j < 3; ++j) r[size_t(i)] += x[size_t(3 * i + j)] * w[size_t(j)];
      loss += r[size_t(i)] * r[size_t(i)] / 4;
      gb += 2 * r[size_t(i)] / 4;
      for (int j = 0; j < 3; ++j) gw[size_t(j)] += 2 * x[size_t(3 * i + j)] * r[size_t(i)] / 4;
    }
    std::vector<Array> grads{Array::from_doubles(DType::f32, shapes[0], gw),
                             Array::from_doubles(DType::f32, shapes[1], {gb})};
    reference_step(opt, o, ref, grads, ref_state, ts.group_lr());
    std::vector<Array> in = ts.inputs({xa, ya}, params, state, ts.group_lr());
    std::vector<Array> out = run(ts.fn, in);
    EXPECT_NEAR(out[0].at(0), loss, 1e-6 * loss);
    ts.take_updated(out, params, state);
    EXPECT_LE(worst_err(params, ref), 1e-6) << "step " << k;
    EXPECT_LE(worst_err(state, ref_state), 1e-6) << "step " << k;
  }
}

TEST(OptimUpdateHost, LrChangesEveryStepWithOneExecutable) {
  const std::vector<Shape> shapes{{8}};
  std::vector<Array> init{Array::filled(DType::f32, shapes[0], 1.0)};
  const int64_t before = runtime::host::compile_count();
  Stepper prog(Engine::host, AdamW{.lr = 0.01}, {}, init);
  std::vector<Array> ref = init, ref_state = init_state(prog.ts.state);
  double worst = 0;
  for (int k = 0; k < 100; ++k) {
    std::vector<double> lr{0.01 * (1 + std::cos(0.07 * k))};  // a new value every step
    std::vector<Array> g{Array::filled(DType::f32, shapes[0], std::sin(0.3 * k))};
    prog.step(g, lr);
    reference_step(AdamW{.lr = 0.01}, {}, ref, g, ref_state, lr);
    worst = std::max(worst, worst_err(prog.params, ref));
  }
  EXPECT_EQ(runtime::host::compile_count() - before, 1);
  EXPECT_LE(worst, kTol);
  EXPECT_EQ(prog.state.back().at(0), 100);
}

TEST(OptimUpdateHost, ReusingADonatedBufferIsAnError) {
  const std::vector<Shape> shapes{{4}};
  Stepper prog(Engine::host, Adam{}, {}, {Array::filled(DType::f32, shapes[0], 1.0)});
  std::vector<Array> in = prog.ts.inputs({Array::filled(DType::f32, shapes[0], 0.5)}, prog.params,
                                         prog.state, prog.ts.group_lr());
  std::vector<Array> out = prog.run->exe->run_donated(in);
  EXPECT_TRUE(in[size_t(prog.ts.param_input(0))].empty());
  // The same inputs again: the params and state were donated by the first call.
  try {
    prog.run->exe->run_donated(in);
    FAIL() << "reusing a donated input did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("donated"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, OptimUpdate, ::testing::Values(Engine::interpreter, Engine::host),
                         [](const auto& info) {
                           return info.param == Engine::host ? "host" : "interpreter";
                         });

}  // namespace
}  // namespace tlaloc::optim
