// Runs append_update's train step on gradients a test gives (tests/optim): the program
// G(grads..., params...) = (loss, grads...), by the IR interpreter or the host lane.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <vector>

#include "tlaloc/optim/update.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::optim::testing {

using trace::Tensor;

// G(grads..., params...) = (loss = Σ sum(p·g), grads...): the gradients enter as inputs, so a
// test can feed any gradient (fixtures, inf, NaN). Params of `pdtype`, grads of `gdtype`.
inline ir::Function given_grads_fn(const std::vector<Shape>& shapes, DType pdtype = DType::f32,
                                   DType gdtype = DType::f32) {
  std::vector<ir::TensorType> in;
  for (const Shape& s : shapes) in.push_back({gdtype, s});
  for (const Shape& s : shapes) in.push_back({pdtype, s});
  const size_t n = shapes.size();
  return trace::capture(
      [n](std::span<const Tensor> x) {
        Tensor loss = trace::scalar(0.0);
        for (size_t i = 0; i < n; ++i)
          loss = loss + sum(astype(x[i], DType::f32) * astype(x[n + i], DType::f32));
        std::vector<Tensor> out{loss};
        for (size_t i = 0; i < n; ++i) out.push_back(x[i]);
        return out;
      },
      in);
}

enum class Engine { interpreter, host };

// Runs a program: the interpreter reads its inputs; the host lane consumes the donated ones.
struct Runner {
  Engine engine;
  std::unique_ptr<runtime::Executable> exe;
  Runner(Engine e, const ir::Function& f) : engine(e) {
    if (e == Engine::host) exe = runtime::host::compile(f);
  }
  std::vector<Array> operator()(const ir::Function& f, std::vector<Array>& in) {
    if (engine == Engine::interpreter) return passes::interpret(f, in);
    std::vector<Array> out = exe->run_donated(in);
    for (const ir::Alias& a : f.aliases)
      EXPECT_TRUE(in[size_t(a.input)].empty()) << "input " << a.input << " was not donated";
    return out;
  }
};

// Runs a TrainStep built from given_grads_fn.
struct Stepper {
  TrainStep ts;
  std::unique_ptr<Runner> run;
  std::vector<Array> params, state;
  std::vector<Array> last;  // outputs of the last step (params and state moved out)

  Stepper(Engine e, const Optimizer& opt, const UpdateOptions& o, std::vector<Array> init,
          DType gdtype = DType::f32, DType pdtype = DType::f32) {
    std::vector<Shape> shapes;
    for (const Array& a : init) shapes.push_back(a.shape());
    ts = append_update(opt, given_grads_fn(shapes, pdtype, gdtype), int(shapes.size()), o);
    run = std::make_unique<Runner>(e, ts.fn);
    params = std::move(init);
    state = init_state(ts.state);
  }
  // One step; returns found_inf.
  bool step(const std::vector<Array>& grads, std::span<const double> lr, double grad_scale = 1) {
    std::vector<Array> in = ts.inputs(grads, params, state, lr, grad_scale);
    last = (*run)(ts.fn, in);
    ts.take_updated(last, params, state);
    return last[size_t(ts.found_inf_output())].at(0) != 0;
  }
};

}  // namespace tlaloc::optim::testing
