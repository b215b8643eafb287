// The shape of the train-step program append_update builds (the values are checked by running
// it in update_test.cpp).
#include <gtest/gtest.h>

#include "tlaloc/ir/builder.h"
#include "tlaloc/optim/update.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::optim {
namespace {
using trace::Tensor;

// G(x [3], w [3] of `pdtype`, b [] f32) = (loss = sum(w·x) + b, aux = loss, dw = x, db = 1).
ir::Function toy_grad_fn(DType pdtype = DType::f32, DType gdtype = DType::f32) {
  return trace::capture(
      [&](std::span<const Tensor> in) {
        Tensor x = in[0], w = astype(in[1], DType::f32), b = in[2];
        Tensor loss = sum(w * x) + b;
        return std::vector<Tensor>{loss, loss * 2.0, astype(x, gdtype), trace::scalar(1.0)};
      },
      {{DType::f32, Shape{3}}, {pdtype, Shape{3}}, {DType::f32, Shape{}}}, {"x", "w", "b"},
      {"loss", "twice", "dw", "db"});
}

TEST(OptimProgram, LayoutAndAliases) {
  TrainStep ts = append_update(Adam{.amsgrad = true}, toy_grad_fn(), 2, {});
  const ir::Function& f = ts.fn;
  EXPECT_EQ(ts.num_other_inputs, 1);
  EXPECT_EQ(ts.num_aux, 1);
  ASSERT_EQ(ts.state.size(), 7);  // 2 × (exp_avg, exp_avg_sq, max_exp_avg_sq) + step
  EXPECT_EQ(ts.state.slots[0].name, "w.exp_avg");
  EXPECT_EQ(ts.state.slots[5].name, "b.max_exp_avg_sq");
  EXPECT_EQ(ts.state.slots[6].name, "step");
  // Inputs: x, w, b, 7 state, lr, grad_scale.
  ASSERT_EQ(f.num_inputs(), 12);
  EXPECT_EQ(f.input_names[size_t(ts.lr_input(0))], "lr");
  EXPECT_EQ(f.input_names[size_t(ts.grad_scale_input())], "grad_scale");
  EXPECT_EQ(f.input_type(ts.lr_input(0)), (ir::TensorType{DType::f64, Shape{}}));
  EXPECT_EQ(f.input_type(ts.state_input(6)), (ir::TensorType{DType::s32, Shape{}}));
  // Outputs: loss, twice, w', b', 7 state, found_inf.
  ASSERT_EQ(f.num_outputs(), 12);
  EXPECT_EQ(f.output_names[0], "loss");
  EXPECT_EQ(f.output_names[1], "twice");
  EXPECT_EQ(ts.found_inf_output(), 11);
  EXPECT_EQ(f.output_type(11), (ir::TensorType{DType::i1, Shape{}}));
  EXPECT_EQ(ts.grad_norm_output(), -1);
  ASSERT_EQ(f.aliases.size(), 9u);
  EXPECT_EQ(f.aliases[0], (ir::Alias{ts.param_output(0), ts.param_input(0)}));
  EXPECT_EQ(f.aliases[8], (ir::Alias{ts.state_output(6), ts.state_input(6)}));
  for (const ir::Alias& a : f.aliases) EXPECT_EQ(f.output_type(a.output), f.input_type(a.input));
}

TEST(OptimProgram, GroupsClippingAndScalars) {
  UpdateOptions o;
  o.max_norm = 1.0;
  o.groups = {{"decay", {0}, 0.5, std::nullopt}, {"no_decay", {1}, std::nullopt, 0.0}};
  TrainStep ts = append_update(SGD{.lr = 0.1, .momentum = 0.9}, toy_grad_fn(), 2, o);
  EXPECT_EQ(ts.fn.input_names[size_t(ts.lr_input(0))], "lr.decay");
  EXPECT_EQ(ts.fn.input_names[size_t(ts.lr_input(1))], "lr.no_decay");
  EXPECT_EQ(ts.grad_norm_output(), ts.fn.num_outputs() - 1);
  std::vector<double> lr = ts.group_lr(0.5);
  EXPECT_EQ(lr, (std::vector<double>{0.25, 0.05}));
  std::vector<Array> s = ts.scalar_inputs(lr, 1024);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].at(0), 1024);
  EXPECT_THROW(ts.scalar_inputs(std::vector<double>{0.1}), Error);
  EXPECT_THROW(ts.scalar_inputs(lr, 0), Error);
}

TEST(OptimProgram, HalfPrecisionParamsGetF32Masters) {
  TrainStep ts = append_update(AdamW{}, toy_grad_fn(DType::bf16, DType::bf16), 2, {});
  EXPECT_EQ(ts.fn.input_type(ts.param_input(0)), (ir::TensorType{DType::f32, Shape{3}}));
  EXPECT_EQ(ts.fn.output_type(ts.param_output(0)), (ir::TensorType{DType::f32, Shape{3}}));
  EXPECT_EQ(ts.state.slots[0].type, (ir::TensorType{DType::f32, Shape{3}}));
}

TEST(OptimProgram, RejectsMismatchedGradients) {
  // Gradient of the wrong shape for parameter w.
  ir::Function bad = trace::capture(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{sum(in[0]), reshape(in[0], {3, 1})};
      },
      {{DType::f32, Shape{3}}}, {"w"});
  try {
    append_update(Adam{}, bad, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(append_update(Adam{}, toy_grad_fn(), 4), Error);
  UpdateOptions o;
  o.max_norm = 0;
  EXPECT_THROW(append_update(Adam{}, toy_grad_fn(), 2, o), Error);
}

}  // namespace
}  // namespace tlaloc::optim
