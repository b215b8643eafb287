// The Trainer's compiled step (forward, autodiff gradient, in-program Adam) against an oracle:
// the MLP's gradient written out by hand in f64 and optim::reference_step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "support/error_of.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/optim/optimizer.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using namespace tlaloc::train;
using tlaloc::testing::error_of;
namespace disc = tlaloc::recipes::disc;

namespace {

// Hand-written forward + backward of Sequential(Linear, ReLU, Linear, ReLU, Linear) with MSE,
// in f64. params: W1 [16,2], b1, W2 [16,16], b2, W3 [1,16], b3. Returns loss; fills grads.
double mlp_grad(const std::vector<std::vector<double>>& p, const Array& x, const Array& y,
                std::vector<std::vector<double>>& g) {
  const int64_t n = x.shape()[0];
  const int L = 3;
  const int64_t sizes[4] = {2, 16, 16, 1};
  g.assign(p.size(), {});
  for (size_t i = 0; i < p.size(); ++i) g[i].assign(p[i].size(), 0.0);
  double loss = 0;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<std::vector<double>> a(L + 1), z(L + 1);
    a[0] = {x.at(2 * r), x.at(2 * r + 1)};
    for (int l = 0; l < L; ++l) {
      const auto& W = p[size_t(2 * l)];
      const auto& b = p[size_t(2 * l + 1)];
      z[l + 1].assign(size_t(sizes[l + 1]), 0);
      for (int64_t o = 0; o < sizes[l + 1]; ++o) {
        double s = b[size_t(o)];
        for (int64_t i = 0; i < sizes[l]; ++i) s += W[size_t(o * sizes[l] + i)] * a[l][size_t(i)];
        z[l + 1][size_t(o)] = s;
      }
      a[l + 1] = z[l + 1];
      if (l + 1 < L)
        for (auto& v : a[l + 1]) v = v > 0 ? v : 0;
    }
    double diff = a[L][0] - y.at(r);
    loss += diff * diff / double(n);
    std::vector<double> d = {2 * diff / double(n)};
    for (int l = L - 1; l >= 0; --l) {
      auto& gW = g[size_t(2 * l)];
      auto& gb = g[size_t(2 * l + 1)];
      std::vector<double> da(size_t(sizes[l]), 0);
      for (int64_t o = 0; o < sizes[l + 1]; ++o) {
        gb[size_t(o)] += d[size_t(o)];
        for (int64_t i = 0; i < sizes[l]; ++i) {
          gW[size_t(o * sizes[l] + i)] += d[size_t(o)] * a[l][size_t(i)];
          da[size_t(i)] += d[size_t(o)] * p[size_t(2 * l)][size_t(o * sizes[l] + i)];
        }
      }
      if (l > 0)
        for (int64_t i = 0; i < sizes[l]; ++i) da[size_t(i)] *= z[l][size_t(i)] > 0 ? 1 : 0;
      d = da;
    }
  }
  return loss;
}

}  // namespace

TEST(Trainer, StepsMatchHandGradientAndReferenceAdam) {
  const int64_t n = 32;
  auto model = disc::make_model();
  model->init(random::key(3));
  disc::Data d = disc::make_data(random::key(4), n);
  optim::Adam adam{.lr = 0.01, .weight_decay = 0.001};
  Trainer t(*model, disc::mse_loss_fn(), disc::data_inputs(n), adam);
  t.set_resident("x", d.x);
  t.set_resident("y", d.y);

  // Oracle state.
  std::vector<Array> params;
  std::vector<ir::TensorType> types;
  for (auto& [name, a] : t.named_parameters()) {
    params.push_back(a);
    types.push_back({a.dtype(), a.shape()});
  }
  auto layout = optim::state_layout(adam, types);
  auto state = optim::init_state(layout);
  for (int s = 0; s < 5; ++s) {
    std::vector<std::vector<double>> p, g;
    for (auto& a : params) p.push_back(a.to_doubles());
    double loss = mlp_grad(p, d.x, d.y, g);
    std::vector<Array> grads;
    for (size_t i = 0; i < g.size(); ++i)
      grads.push_back(Array::from_doubles(DType::f64, params[i].shape(), g[i]).astype(DType::f32));
    std::vector<double> lr{adam.lr};
    optim::reference_step(adam, {}, params, grads, state, lr);

    t.step({});
    EXPECT_NEAR(t.read_last().loss, loss, 1e-6 * std::max(1.0, loss)) << "step " << s;
    auto got = t.named_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      auto want = params[i].to_doubles();
      auto have = got[i].second.to_doubles();
      for (size_t k = 0; k < want.size(); ++k)
        ASSERT_NEAR(have[k], want[k], 2e-5 * std::max(1.0, std::abs(want[k])))
            << got[i].first << "[" << k << "] step " << s;
    }
  }
  EXPECT_EQ(t.optimizer_step(), 5);
}

TEST(Trainer, ScheduleChangesLrWithoutRecompiling) {
  auto model = disc::make_model();
  model->init(random::key(3));
  disc::Data d = disc::make_data(random::key(4), 16);
  TrainerOptions o;
  o.schedule = optim::parse_schedule("cosine", 100);
  Trainer t(*model, disc::mse_loss_fn(), disc::data_inputs(16), optim::Adam{.lr = 0.01}, o);
  t.set_resident("x", d.x);
  t.set_resident("y", d.y);
  int64_t before = runtime::host::compile_count();
  double first_lr = t.current_lr();
  for (int s = 0; s < 100; ++s) t.step({});
  EXPECT_EQ(runtime::host::compile_count(), before);
  EXPECT_DOUBLE_EQ(first_lr, 0.01);
  EXPECT_LT(t.current_lr(), 1e-6);
}

// The schedule runs in the step: SGD on loss = Σ w ⊙ c (gradient c whatever w) moves w by
// -c · lr_s each step, lr_s = 0.05 · factor(s), summed here in double from the schedule's
// formula (schedule_test checks factor() by hand).
TEST(Trainer, InProgramScheduleSetsEachStepsLr) {
  nn::Linear lin(3, 2, false);
  lin.init(random::key(1));
  const Array w0 = lin.named_parameters()[0].param->value;
  const std::vector<double> c = {0.5, -1, 2, 0.25, 1.5, -0.75};
  LossFn loss = [&](nn::Module& m, const Inputs&) -> std::vector<trace::Tensor> {
    const trace::Tensor w = m.named_parameters()[0].param->bound;
    return {trace::sum(w * trace::constant(Array::from_doubles(DType::f32, {2, 3}, c)))};
  };
  TrainerOptions o;
  o.schedule = optim::parse_schedule("warmup-cosine", 12, 3);
  Trainer t(lin, loss, {}, optim::SGD{.lr = 0.05}, o);
  EXPECT_TRUE(t.train_step().has_schedule_step);
  double total = 0;
  for (int64_t s = 0; s < 15; ++s) {
    EXPECT_DOUBLE_EQ(t.current_lr(), 0.05 * o.schedule.factor(s));
    t.step({});
    total += 0.05 * o.schedule.factor(s);
  }
  const Array w = t.named_parameters()[0].second;
  for (size_t i = 0; i < c.size(); ++i)
    EXPECT_NEAR(w.to_doubles()[i], w0.to_doubles()[i] - c[i] * total, 1e-6) << i;
}

TEST(Trainer, BadInputsAreClearErrors) {
  auto model = disc::make_model();
  model->init(random::key(3));
  Trainer t(*model, disc::mse_loss_fn(), disc::data_inputs(16), optim::Adam{});
  EXPECT_THROW(t.step({}), Error);  // resident data never set
  EXPECT_THROW(t.set_resident("x", Array(DType::f32, Shape{16, 3})), Error);
  EXPECT_THROW(t.set_resident("z", Array(DType::f32, Shape{16, 2})), Error);
  auto bad_loss = [](nn::Module& m, const Inputs& d) {
    return std::vector<trace::Tensor>{m(d["x"])};  // [16,1], not a scalar
  };
  EXPECT_THROW(Trainer(*model, bad_loss, disc::data_inputs(16), optim::Adam{}), Error);
  for (double scale : {0.0, -1.0, std::nan(""), -3.0}) {
    TrainerOptions o;
    if (scale == -3.0)
      o.num_threads = -3;
    else
      o.grad_scale = scale;
    EXPECT_THROW(Trainer(*model, disc::mse_loss_fn(), disc::data_inputs(16), optim::Adam{}, o),
                 Error);
  }
}

TEST(Trainer, DataInputsGoByNameAndMisnamedOnesAreClearErrors) {
  auto model = disc::make_model();
  model->init(random::key(3));
  LossFn loss = [](nn::Module& m, const Inputs& d) {
    trace::Tensor x = trace::take_rows(d["x"], d["idx"]), y = trace::take_rows(d["y"], d["idx"]);
    return std::vector<trace::Tensor>{nn::mse_loss(m(x), y)};
  };
  std::vector<DataInput> data{{"x", {DType::f32, Shape{16, 2}}, true},
                              {"y", {DType::f32, Shape{16, 1}}, true},
                              {"idx", {DType::s32, Shape{4}}, false}};
  Trainer t(*model, loss, data, optim::Adam{});
  disc::Data d = disc::make_data(random::key(4), 16);
  Array idx = Array::from<int32_t>({4}, {0, 5, 9, 15});
  t.set_resident("x", d.x);
  EXPECT_EQ(error_of([&] {
              t.step({{"idx", idx}});
            }),
            "Trainer::step: resident input 'y' was never set");
  EXPECT_EQ(error_of([&] { t.set_resident("idx", idx); }),
            "Trainer::set_resident: 'idx' is not a resident input (resident: x, y)");
  EXPECT_EQ(error_of([&] { t.set_resident("y", d.x); }),
            "Trainer::set_resident: 'y' is f32[16,2] but the step takes f32[16,1]");
  t.set_resident("y", d.y);
  EXPECT_EQ(error_of([&] { t.step({}); }), "Trainer::step: input 'idx' is missing (it takes idx)");
  EXPECT_EQ(error_of([&] {
              t.step({{"idx", idx.astype(DType::f32)}});
            }),
            "Trainer::step: input 'idx' is f32[4], expected s32[4]");
  EXPECT_EQ(error_of([&] {
              t.step({{"idx", idx}, {"idx", idx}});
            }),
            "Trainer::step: input 'idx' is given twice");
  EXPECT_EQ(error_of([&] {
              t.step({{"x", d.x}});
            }),
            "Trainer::step: 'x' is a resident input: set it once with set_resident()");
  EXPECT_EQ(error_of([&] {
              t.step({{"idx", idx}, {"rows", idx}});
            }),
            "Trainer::step: no input is named 'rows' (it takes idx)");
  EXPECT_EQ(t.steps_taken(), 0);
  t.step({{"idx", idx}});
  EXPECT_EQ(t.steps_taken(), 1);

  // Evaluations take their inputs by name too, and give them back.
  int e = t.add_eval(disc::predict_fn(), {{"x", {DType::f32, Shape{16, 2}}}});
  Batch in{{"x", d.x}};
  EXPECT_EQ(t.run_eval(e, in)[0].shape(), (Shape{16, 1}));
  EXPECT_TRUE(in[0].second.bitwise_equal(d.x));
  Batch wrong{{"y", d.y}};
  EXPECT_EQ(error_of([&] { t.run_eval(e, wrong); }),
            "Trainer::run_eval: no input is named 'y' (it takes x)");

  // The loss function's lookups and the names themselves are checked when capturing.
  LossFn typo = [](nn::Module& m, const Inputs& d) {
    return std::vector<trace::Tensor>{nn::mse_loss(m(d["points"]), d["y"])};
  };
  EXPECT_NE(error_of([&] {
              Trainer(*model, typo, data, optim::Adam{});
            }).find("no data input is named 'points' (the inputs are x, y, idx)"),
            std::string::npos);
  data.push_back({"x", {DType::f32, Shape{1}}, false});
  EXPECT_NE(error_of([&] {
              Trainer(*model, loss, data, optim::Adam{});
            }).find("two data inputs are named 'x'"),
            std::string::npos);
}

// Frozen parameters (requires_grad false): step inputs with no gradient, no optimizer state and
// no update. The trained ones follow the hand gradient and reference Adam as above; the frozen
// ones stay bitwise equal over 100 steps; no dot_general of W1's shape (its weight gradient)
// is in the step.
TEST(Trainer, FrozenParametersGetNoGradientStateOrUpdate) {
  const int64_t n = 32;
  auto model = disc::make_model();
  model->init(random::key(3));
  EXPECT_EQ(nn::freeze(*model, {"0.*", "4.bias"}), 3);
  EXPECT_NE(error_of([&] { nn::freeze(*model, {"9.*"}); }).find("'9.*' matches no parameter"),
            std::string::npos);
  disc::Data d = disc::make_data(random::key(4), n);
  optim::Adam adam{.lr = 0.01};
  Trainer t(*model, disc::mse_loss_fn(), disc::data_inputs(n), adam);
  t.set_resident("x", d.x);
  t.set_resident("y", d.y);
  const auto frozen0 = t.frozen_parameters();
  ASSERT_EQ(frozen0.size(), 3u);
  EXPECT_EQ(frozen0[0].first, "0.weight");
  EXPECT_EQ(frozen0[2].first, "4.bias");
  std::vector<std::string> trained;
  for (auto& [name, a] : t.named_parameters()) trained.push_back(name);
  EXPECT_EQ(trained, (std::vector<std::string>{"2.weight", "2.bias", "4.weight"}));
  for (auto& [name, type] : t.state_specs())
    EXPECT_TRUE(name == "optimizer.step" || name.find("optimizer.2.") == 0 ||
                name == "optimizer.4.weight.exp_avg" || name == "optimizer.4.weight.exp_avg_sq")
        << name;
  for (const ir::Node& node : t.step_function().nodes)
    EXPECT_FALSE(node.op == ir::Op::dot_general && (node.type.shape == Shape{16, 2}));

  // All six as the hand gradient sees them, model order; updates only for 2.*, 4.weight.
  std::vector<Array> all;
  for (auto& p : model->named_parameters()) all.push_back(p.param->value);
  const std::vector<size_t> train_idx = {2, 3, 4};
  std::vector<ir::TensorType> types;
  for (size_t i : train_idx) types.push_back({all[i].dtype(), all[i].shape()});
  auto state = optim::init_state(optim::state_layout(adam, types));
  for (int s = 0; s < 5; ++s) {
    std::vector<std::vector<double>> p, g;
    for (auto& a : all) p.push_back(a.to_doubles());
    mlp_grad(p, d.x, d.y, g);
    std::vector<Array> params, grads;
    for (size_t i : train_idx) {
      params.push_back(all[i]);
      grads.push_back(Array::from_doubles(DType::f64, all[i].shape(), g[i]).astype(DType::f32));
    }
    std::vector<double> lr{adam.lr};
    optim::reference_step(adam, {}, params, grads, state, lr);
    for (size_t k = 0; k < train_idx.size(); ++k) all[train_idx[k]] = params[k];
    t.step({});
    auto got = t.named_parameters();
    for (size_t k = 0; k < train_idx.size(); ++k) {
      auto want = params[k].to_doubles(), have = got[k].second.to_doubles();
      for (size_t e = 0; e < want.size(); ++e)
        ASSERT_NEAR(have[e], want[e], 2e-5 * std::max(1.0, std::abs(want[e])))
            << got[k].first << "[" << e << "] step " << s;
    }
  }
  for (int s = 5; s < 100; ++s) t.step({});
  const auto frozen = t.frozen_parameters();
  for (size_t k = 0; k < frozen.size(); ++k)
    EXPECT_EQ(std::memcmp(frozen[k].second.raw(), frozen0[k].second.raw(),
                          size_t(frozen0[k].second.nbytes())),
              0)
        << frozen[k].first;
  nn::freeze(*model, {"*"});
  EXPECT_NE(error_of([&] {
              Trainer(*model, disc::mse_loss_fn(), disc::data_inputs(n), adam);
            }).find("every parameter of the model is frozen"),
            std::string::npos);
}
