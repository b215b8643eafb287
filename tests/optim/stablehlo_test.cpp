// The train-step programs leave the host lane intact through StableHLO: emit -> parse -> run on
// the host gives bitwise the outputs of the original program (the pjrt lane runs the same text).
#include <gtest/gtest.h>

#include "support/stablehlo_roundtrip.h"
#include "tlaloc/optim/update.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::optim {
namespace {
using trace::Tensor;

// G(g0, g1, p0, p1) = (Σ p·g, g0, g1) with gradients of `gdtype`.
ir::Function given_grads(DType gdtype) {
  return trace::capture(
      [](std::span<const Tensor> x) {
        Tensor loss = sum(astype(x[0], DType::f32) * x[2]) + sum(astype(x[1], DType::f32) * x[3]);
        return std::vector<Tensor>{loss, x[0], x[1]};
      },
      {{gdtype, Shape{2, 3}},
       {gdtype, Shape{3}},
       {DType::f32, Shape{2, 3}},
       {DType::f32, Shape{3}}},
      {"g0", "g1", "0.weight", "0.bias"});
}

std::vector<Array> inputs_for(const TrainStep& ts, DType gdtype, double bad = 0) {
  std::vector<Array> in{
      Array::from_doubles(gdtype, Shape{2, 3}, {0.5, -1, 0.25, 2, -0.125, bad == 0 ? 1 : bad}),
      Array::from_doubles(gdtype, Shape{3}, {0.1, -0.2, 0.3}),
      Array::from_doubles(DType::f32, Shape{2, 3}, {1, -2, 3, -4, 5, -6}),
      Array::from_doubles(DType::f32, Shape{3}, {0.5, 0.25, -0.5})};
  for (const StateSlot& s : ts.state.slots)
    in.push_back(s.kind == StateKind::step ? Array::scalar<int32_t>(7)
                                           : Array::filled(s.type.dtype, s.type.shape, 0.01));
  for (Array& s : ts.scalar_inputs(ts.group_lr(0.5), 4.0)) in.push_back(std::move(s));
  return in;
}

TEST(OptimStablehlo, TrainStepsRoundTripBitwise) {
  UpdateOptions clip_groups;
  clip_groups.max_norm = 1.0;
  clip_groups.groups = decay_groups(std::vector<std::string>{"0.weight", "0.bias"},
                                    std::vector<Shape>{{2, 3}, {3}}, 0.1);
  struct Case {
    Optimizer opt;
    UpdateOptions options;
    DType gdtype;
  };
  const std::vector<Case> cases{
      {SGD{.lr = 0.1, .momentum = 0.9, .nesterov = true}, {}, DType::f32},
      {SGD{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, clip_groups,
       DType::f32},
      {Adam{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true, .maximize = true}, {}, DType::f32},
      {AdamW{.lr = 0.01}, clip_groups, DType::bf16},
      {AdamW{.lr = 0.01, .amsgrad = true}, {}, DType::f16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c.opt) + " grads " + std::string(tlaloc::name(c.gdtype)));
    TrainStep ts = append_update(c.opt, given_grads(c.gdtype), 2, c.options);
    tlaloc::testing::expect_stablehlo_roundtrip(ts.fn, inputs_for(ts, c.gdtype));
    // The skip path too: an inf gradient.
    tlaloc::testing::expect_stablehlo_roundtrip(ts.fn, inputs_for(ts, c.gdtype, INFINITY));
  }
}

}  // namespace
}  // namespace tlaloc::optim
