// A model mixing f64 and f32 parameters, one without elements and a rank-0 one, and its
// Trainer: the hostile flat-state tests' model on the host and pjrt lanes.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/nn/module.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train_test {

inline constexpr int64_t kMixedRows = 8;

// 0.5·sin(0.7·k + phase) for element k (row-major).
inline Array ramp(DType dt, const Shape& s, double phase) {
  std::vector<double> v(size_t(s.numel()));
  for (size_t k = 0; k < v.size(); ++k) v[k] = 0.5 * std::sin(0.7 * double(k) + phase);
  return Array::from_doubles(dt, s, v);
}

// Parameters (registration order): w64 f64 [2,3], e32 f32 [0] (no elements), s64 f64 [],
// w32 f32 [3,1], b32 f32 [1]. x f32 [n, 2] -> f32 [n, 1].
class MixedModule : public nn::Module {
 public:
  MixedModule() {
    register_parameter("w64", ramp(DType::f64, Shape{2, 3}, 0.1));
    register_parameter("e32", Array(DType::f32, Shape{0}));
    register_parameter("s64", Array::from_doubles(DType::f64, Shape{}, {0.25}));
    register_parameter("w32", ramp(DType::f32, Shape{3, 1}, 1.3));
    register_parameter("b32", Array::from_doubles(DType::f32, Shape{1}, {-0.1}));
  }
  trace::Tensor forward(const trace::Tensor& x) override {
    const int64_t n = x.type().shape[0];
    trace::Tensor h = tanh(trace::matmul(astype(x, DType::f64), param("w64")) +
                           broadcast_to(param("s64"), Shape{n, 3}));
    trace::Tensor y = trace::matmul(astype(h, DType::f32), param("w32")) +
                      broadcast_to(reshape(param("b32"), {1, 1}), Shape{n, 1});
    return y + broadcast_to(sum(param("e32")), Shape{n, 1});
  }
  std::string repr() const override { return "MixedModule()"; }
};

// mean((model(x) - y)²) of data inputs "x" and "y".
inline train::LossFn mse_loss() {
  return [](nn::Module& m, const train::Inputs& d) {
    trace::Tensor e = m(d["x"]) - d["y"];
    return std::vector<trace::Tensor>{mean(e * e)};
  };
}

// The MixedModule's Trainer on resident x f32 [8, 2], y f32 [8, 1] (ramps): groups "late"
// {w32, w64} (lr 0.05, weight decay 0.1) and `second_group` {b32, e32, s64} (0.02, 0), out of
// order, each mixing f64 and f32; clipping at 0.2; warm-up cosine over 12 steps. `o`'s other
// fields (lane, client, flat_state) as given.
inline std::unique_ptr<train::Trainer> mixed_trainer(MixedModule& m, train::TrainerOptions o,
                                                     optim::Optimizer opt,
                                                     std::string second_group = "early") {
  std::vector<train::DataInput> data = {{"x", {DType::f32, Shape{kMixedRows, 2}}, true},
                                        {"y", {DType::f32, Shape{kMixedRows, 1}}, true}};
  o.update.groups = {{"late", {3, 0}, 0.05, 0.1}, {std::move(second_group), {4, 1, 2}, 0.02, 0.0}};
  o.update.max_norm = 0.2;
  o.schedule = optim::parse_schedule("warmup-cosine", 12, 2);
  auto t = std::make_unique<train::Trainer>(m, mse_loss(), data, std::move(opt), o);
  t->set_resident("x", ramp(DType::f32, Shape{kMixedRows, 2}, 0.3));
  t->set_resident("y", ramp(DType::f32, Shape{kMixedRows, 1}, 2.0));
  return t;
}

}  // namespace tlaloc::train_test
