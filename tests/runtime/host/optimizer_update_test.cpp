// The optimizer update composites (composites/optimizer_update.cpp) on the optimizer's own
// programs (optim::append_update): Adam and AdamW with and without weight decay, amsgrad,
// maximize, two parameter groups, bf16 parameters (f32 masters), loss scaling and clipping, SGD,
// and a skipped non-finite step. Four steps each: adam_update's host kernel is bitwise its
// decomposition run as plain ops (fused or not, 1 and 2 threads, donated), and both are close
// to optim::reference_step (f64 per element from the published formulas).
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "tlaloc/optim/update.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/plan.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::optim {
namespace {
using trace::Tensor;

// G(grads..., params...) = (Σ sum(p·g), grads...): gradients are inputs.
ir::Function given_grads_fn(const std::vector<Shape>& shapes, DType pdtype) {
  std::vector<ir::TensorType> in;
  for (const Shape& s : shapes) in.push_back({DType::f32, s});
  for (const Shape& s : shapes) in.push_back({pdtype, s});
  const size_t n = shapes.size();
  return trace::capture(
      [n](std::span<const Tensor> x) {
        Tensor loss = trace::scalar(0.0);
        for (size_t i = 0; i < n; ++i) loss = loss + sum(x[i] * astype(x[n + i], DType::f32));
        std::vector<Tensor> out{loss};
        for (size_t i = 0; i < n; ++i) out.push_back(x[i]);
        return out;
      },
      in);
}

Array wave(const Shape& s, double a, double w, double c) {
  std::vector<double> x;
  for (int64_t i = 0; i < s.numel(); ++i) x.push_back(c + a * std::sin(double(i) * w + 0.3));
  return Array::from_doubles(DType::f32, s, x);
}

struct Case {
  std::string name;
  Optimizer opt;
  UpdateOptions options;
  DType pdtype = DType::f32;
  double grad_scale = 1;
};

// Steps of f's plan that are the adam_update kernel.
int adam_kernels(const ir::Function& f) {
  int n = 0;
  for (const auto& k :
       runtime::host::make_plan(runtime::host::expand_for_host(f), {.num_threads = 1}).steps)
    n += k->label.starts_with("tlaloc.adam_update");
  return n;
}

TEST(HostOptimizerUpdate, KernelIsItsDecompositionBitwiseAndNearTheReference) {
  const std::vector<Shape> shapes = {Shape{1000}, Shape{37, 300}, Shape{}};
  UpdateOptions groups;
  groups.groups = {{"a", {0, 2}, 0.003, 0.0}, {"b", {1}, std::nullopt, 0.05}};
  UpdateOptions clip;
  clip.max_norm = 0.5;
  const std::vector<Case> cases = {
      {"adam", Adam{.lr = 0.01}, {}, DType::f32, 1},
      {"adam_l2", Adam{.lr = 0.01, .weight_decay = 0.1}, {}, DType::f32, 1},
      {"adamw", AdamW{.lr = 0.01, .weight_decay = 0.1}, {}, DType::f32, 1},
      {"adamw_wd0", AdamW{.lr = 0.01, .weight_decay = 0}, {}, DType::f32, 1},
      {"amsgrad", AdamW{.lr = 0.01, .amsgrad = true}, {}, DType::f32, 1},
      {"maximize", Adam{.lr = 0.01, .maximize = true}, {}, DType::f32, 1},
      {"groups", AdamW{.lr = 0.01}, groups, DType::f32, 1},
      {"bf16", AdamW{.lr = 0.01}, {}, DType::bf16, 1},
      {"scaled_clipped", Adam{.lr = 0.01}, clip, DType::f32, 256},
      {"sgd_momentum", SGD{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}, {}, DType::f32, 1},
      {"sgd_nesterov", SGD{.lr = 0.05, .momentum = 0.9, .nesterov = true}, {}, DType::f32, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TrainStep ts = append_update(c.opt, given_grads_fn(shapes, c.pdtype), 3, c.options);
    const bool sgd = std::holds_alternative<SGD>(c.opt);
    const ir::Function decomposed = passes::expand_composites(ts.fn);
    EXPECT_EQ(adam_kernels(ts.fn), sgd ? 0 : 3);
    EXPECT_EQ(adam_kernels(decomposed), 0);
    const std::vector<double> lr = ts.group_lr();
    std::vector<Array> init = {wave(shapes[0], 0.5, 0.37, 0), wave(shapes[1], 0.2, 0.011, 0.1),
                               wave(shapes[2], 1, 0, 0)};
    std::vector<Array> ref_params = init, ref_state = init_state(ts.state);
    struct Run {
      std::unique_ptr<runtime::Executable> exe;
      std::vector<Array> params, state;
    };
    std::vector<Run> runs;
    for (const ir::Function* f : std::vector<const ir::Function*>{&ts.fn, &decomposed})
      for (bool fuse : {true, false})
        for (int threads : {1, 2})
          runs.push_back({runtime::host::compile(*f, {.num_threads = threads, .fuse = fuse}), init,
                          init_state(ts.state)});
    for (int step = 0; step < 4; ++step) {
      SCOPED_TRACE(fmt::format("step {}", step));
      std::vector<Array> grads = {wave(shapes[0], 3, 0.71 + step, 0.1),
                                  wave(shapes[1], 0.01, 0.3 * step + 0.05, 0),
                                  wave(shapes[2], 1, 0, 0.5)};
      if (step == 2) static_cast<float*>(grads[1].raw())[77] = NAN;  // skipped step
      std::vector<Array> scaled = grads;
      for (Array& g : scaled)
        for (int64_t i = 0; i < g.numel(); ++i)
          static_cast<float*>(g.raw())[i] = float(g.at(i) * c.grad_scale);
      StepInfo info = reference_step(c.opt, c.options, ref_params, grads, ref_state, lr);
      EXPECT_EQ(info.found_inf, step == 2);
      std::vector<Array> first;
      for (size_t r = 0; r < runs.size(); ++r) {
        std::vector<Array> in = ts.inputs(scaled, runs[r].params, runs[r].state, lr, c.grad_scale);
        std::vector<Array> out = runs[r].exe->run_donated(in);
        EXPECT_EQ(out[size_t(ts.found_inf_output())].at(0) != 0, step == 2);
        ts.take_updated(out, runs[r].params, runs[r].state);
        std::vector<Array> now = runs[r].params;
        for (const Array& s : runs[r].state) now.push_back(s);
        if (r == 0) {
          first = now;
          continue;
        }
        for (size_t k = 0; k < now.size(); ++k)
          EXPECT_TRUE(now[k].bitwise_equal(first[k])) << "run " << r << " tensor " << k;
      }
      std::vector<Array> ref = ref_params;
      for (const Array& s : ref_state) ref.push_back(s);
      for (size_t k = 0; k < ref.size(); ++k) {
        double worst = 0;
        for (int64_t i = 0; i < ref[k].numel(); ++i) {
          const double w = ref[k].at(i), got = first[k].at(i);
          worst = std::max(worst, std::fabs(got - w) / std::max(1e-3, std::fabs(w)));
        }
        EXPECT_LT(worst, 1e-4) << "tensor " << k;
      }
    }
  }
}

// adam_update's results donated crossed (p' into m's storage, m' into p's, v' into v's, and a
// rotation): a skipped step still gives every result its own old value, and a taken one equals
// the run without donation.
TEST(HostOptimizerUpdate, CrossedDonationsKeepEachValue) {
  const int64_t n = 37;
  const std::vector<std::vector<ir::Alias>> pairings = {{{0, 2}, {1, 0}, {2, 3}},
                                                        {{0, 3}, {1, 0}, {2, 2}}};
  for (const auto& aliases : pairings) {
    for (bool skip : {true, false}) {
      SCOPED_TRACE(fmt::format("alias of p' to input {}, skip {}", aliases[0].input, skip));
      ir::Builder b("adam");
      std::vector<ir::ValueId> in;
      for (int k = 0; k < 4; ++k) in.push_back(b.parameter({DType::f32, {n}}));
      in.push_back(b.parameter({DType::s32, {}}));
      in.push_back(b.parameter({DType::f64, {}}));
      in.push_back(b.parameter({DType::f64, {}}));
      in.push_back(b.parameter({DType::i1, {}}));
      ir::Function f = b.build(b.composite(ir::Op::adam_update, in, {0.9, 0.99, 1e-8, 0, 0, 0, 0}));
      std::vector<Array> args = {
          wave({n}, 0.5, 0.3, 0),     wave({n}, 1, 0.7, 0.1),
          wave({n}, 0.2, 0.1, 0),     wave({n}, 0.1, 0.2, 0.2),
          Array::scalar<int32_t>(3),  Array::scalar<double>(0.01),
          Array::scalar<double>(1.0), Array::from(Shape{}, std::vector<bool>{skip})};
      const std::vector<Array> want = runtime::host::compile(f)->run(args);
      for (int r = 0; r < 3 && skip; ++r)  // p, m, v unchanged
        EXPECT_TRUE(want[size_t(r)].bitwise_equal(args[size_t(r == 0 ? 0 : r + 1)]));
      f.aliases = aliases;
      std::vector<Array> donated = args;
      const std::vector<Array> got = runtime::host::compile(f)->run_donated(donated);
      for (int r = 0; r < 3; ++r)
        EXPECT_TRUE(got[size_t(r)].bitwise_equal(want[size_t(r)])) << "result " << r;
    }
  }
}

}  // namespace
}  // namespace tlaloc::optim
