// Mixed precision in the compiled step (TrainerOptions::precision). Oracles: f64 sums on the
// bf16-rounded operands (the dots' values and gradients), and torch.cuda.amp.GradScaler's update
// rule written out below from its documentation (the f16 scaler's scale, skips and updates on a
// scripted run of overflows).
#include <gtest/gtest.h>

#include <cmath>

#include "support/error_of.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/fit.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::train;
using tlaloc::testing::error_of;

namespace {

double bf16(double v) { return bf16_to_f32(f32_to_bf16(float(v))); }

// loss = Σ Linear(x) ⊙ c over [n, out]; x [n, in] and c [n, out] per-step inputs.
LossFn weighted_sum() {
  return [](nn::Module& m, const Inputs& in) -> std::vector<trace::Tensor> {
    return {trace::sum(m(in["x"]) * in["c"])};
  };
}

Array filled(Shape s, uint64_t seed, double scale) {
  Array a(DType::f32, s);
  uint64_t z = seed;
  for (auto& v : a.span<float>()) {
    z = z * 6364136223846793005ULL + 1442695040888963407ULL;
    v = float((double(z >> 11) / double(1ULL << 53) - 0.5) * scale);
  }
  return a;
}

}  // namespace

// The gradient program under bf16: the loss is Σ (x_bf16 · w_bf16ᵀ) ⊙ c accumulated in f32,
// and dL/dw is (c_bf16ᵀ x_bf16) rounded to bf16 (PyTorch autocast's backward), both against f64
// on the rounded operands.
TEST(MixedPrecision, Bf16DotsAndTheirGradientsMatchF64OnRoundedOperands) {
  const int64_t n = 16, in = 40, out = 8;
  nn::Linear lin(in, out, false);
  lin.named_parameters()[0].param->value = filled(Shape{out, in}, 1, 2.0);
  std::vector<DataInput> data{{"x", {DType::f32, Shape{n, in}}},
                              {"c", {DType::f32, Shape{n, out}}}};
  const Array x = filled(Shape{n, in}, 2, 4.0), c = filled(Shape{n, out}, 3, 1.0);
  const Array& w = lin.named_parameters()[0].param->value;
  auto run = [&](DType compute) {
    ir::Function g = build_gradient(lin, weighted_sum(), data, nullptr, nullptr, compute);
    auto exe = runtime::host::compile(g);
    std::vector<Array> args{x, c, w};
    return exe->run(args);
  };
  const std::vector<Array> r = run(DType::bf16), f32 = run(DType::f32);
  double loss = 0, mass = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double y = 0;
      for (int64_t k = 0; k < in; ++k) {
        y += bf16(x.at(i * in + k)) * bf16(w.at(o * in + k));
        mass += std::abs(bf16(x.at(i * in + k)) * bf16(w.at(o * in + k)) * c.at(i * out + o));
      }
      loss += y * double(c.at(i * out + o));
    }
  EXPECT_NEAR(r[0].at(0), loss, 1e-6 * mass + 1e-6);
  int differs = 0;
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < in; ++k) {
      double g = 0, m = 0;
      for (int64_t i = 0; i < n; ++i) {
        g += bf16(c.at(i * out + o)) * bf16(x.at(i * in + k));
        m += std::abs(bf16(c.at(i * out + o)) * bf16(x.at(i * in + k)));
      }
      const double got = r[1].at(o * in + k);
      EXPECT_EQ(got, bf16(got)) << "dw[" << o << "," << k << "] is not a bf16 value";
      // One bf16 ulp of the f64 value (f32 accumulation then one rounding to bf16).
      EXPECT_NEAR(got, g, std::ldexp(std::max(std::abs(g), 1e-30), -7) + 1e-6 * m)
          << "dw[" << o << "," << k << "]";
      differs += got != f32[1].at(o * in + k);
    }
  EXPECT_GT(differs, out * in / 2) << "the bf16 gradient should differ from the f32 one";
}

// GradScaler's rule (torch.cuda.amp.GradScaler docs, _amp_update_scale_): inf / NaN in the
// scaled gradients skips optimizer.step() and multiplies the scale by backoff_factor (the
// tracker to 0); else the tracker counts up and at growth_interval the scale is multiplied by
// growth_factor (the tracker to 0).
TEST(MixedPrecision, F16LossScalerFollowsGradScalerOnScriptedOverflows) {
  const int64_t n = 2, in = 4;
  auto make = [&](nn::Linear& lin) {
    Array w(DType::f32, Shape{1, in});
    for (int64_t k = 0; k < in; ++k) w.data<float>()[k] = float(0.25 * double(k + 1));
    lin.named_parameters()[0].param->value = w;
    TrainerOptions o;
    o.precision = DType::f16;
    o.update.loss_scaling = optim::UpdateOptions::LossScaling{
        .init_scale = 1024, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 3};
    return o;
  };
  std::vector<DataInput> data{{"x", {DType::f32, Shape{n, in}}}, {"c", {DType::f32, Shape{n, 1}}}};
  // Gradient of w: S · Σ_rows x, rounded to f16 (overflows past 65504). "big" rows sum to 80.
  auto batch = [&](bool big) {
    Array x(DType::f32, Shape{n, in}), c(DType::f32, Shape{n, 1});
    for (int64_t i = 0; i < n * in; ++i) x.data<float>()[i] = big ? 40.0f : float(i % 3) + 0.5f;
    for (int64_t i = 0; i < n; ++i) c.data<float>()[i] = 1.0f;
    return Batch{{"x", x}, {"c", c}};
  };
  const bool script[] = {false, false, false, true,  true,  true, false, false,
                         false, false, true,  false, false, true, true};
  nn::Linear lin(in, 1, false);
  Trainer t(lin, weighted_sum(), data, optim::SGD{.lr = 0.0625}, make(lin));
  // The oracle's state.
  double scale = 1024, w[in];
  for (int64_t k = 0; k < in; ++k) w[k] = 0.25 * double(k + 1);
  int tracker = 0, steps = 0;
  for (size_t s = 0; s < std::size(script); ++s) {
    Batch b = batch(script[s]);
    const Array x = b[0].second;
    double loss = 0;
    bool inf = false;
    double g[in];
    for (int64_t k = 0; k < in; ++k) {
      double col = 0;
      for (int64_t i = 0; i < n; ++i) {
        col += x.at(i * in + k);
        loss += x.at(i * in + k) * w[k];
      }
      inf |= scale * col >= 65520;  // rounds to f16 inf
      g[k] = col;
    }
    t.step(b);
    const StepReport r = t.read_last();
    EXPECT_EQ(r.loss, loss) << "step " << s << ": the reported loss is unscaled";
    EXPECT_EQ(r.found_inf, inf) << "step " << s;
    if (inf) {
      scale *= 0.5;
      tracker = 0;
    } else {
      for (int64_t k = 0; k < in; ++k) w[k] -= 0.0625 * g[k];
      ++steps;
      if (++tracker == 3) {
        scale *= 2;
        tracker = 0;
      }
    }
    EXPECT_EQ(t.loss_scale(), scale) << "step " << s;
    EXPECT_EQ(t.optimizer_step(), steps) << "step " << s;
    const auto p = t.named_parameters();
    for (int64_t k = 0; k < in; ++k) EXPECT_EQ(p[0].second.at(k), w[k]) << "step " << s;
  }
  // The scaler's state is checkpointed under GradScaler's names, and a resumed trainer goes on
  // with the same bits.
  auto state = t.optimizer_state();
  bool has_scale = false, has_tracker = false;
  for (const auto& [name, a] : state) {
    if (name == "scaler.scale") has_scale = a.at(0) == scale;
    if (name == "scaler.growth_tracker") has_tracker = a.at(0) == tracker;
  }
  EXPECT_TRUE(has_scale && has_tracker);
  nn::Linear lin2(in, 1, false);
  Trainer u(lin2, weighted_sum(), data, optim::SGD{.lr = 0.0625}, make(lin2));
  std::vector<Array> params, st;
  for (auto& [name, a] : t.named_parameters()) params.push_back(a);
  for (auto& [name, a] : state) st.push_back(a);
  u.load_state(params, st, t.steps_taken());
  for (bool big : {true, false, false, true}) {
    t.step(batch(big));
    u.step(batch(big));
    EXPECT_EQ(t.loss_scale(), u.loss_scale());
    EXPECT_EQ(t.named_parameters()[0].second.at(0), u.named_parameters()[0].second.at(0));
  }
}

// A run whose gradients overflow at every scale stops with one clear error after
// max_consecutive_skips skipped steps instead of training nothing forever.
TEST(MixedPrecision, FitStopsWhenEveryStepOverflows) {
  const int64_t n = 2, in = 4;
  nn::Linear lin(in, 1, false);
  lin.init(random::key(1));
  std::vector<DataInput> data{{"x", {DType::f32, Shape{n, in}}}, {"c", {DType::f32, Shape{n, 1}}}};
  TrainerOptions o;
  o.precision = DType::f16;  // GradScaler's defaults: scale 65536
  Trainer t(lin, weighted_sum(), data, optim::SGD{.lr = 0.1}, o);
  FitOptions f;
  f.steps = 100;
  f.progress = false;
  f.max_consecutive_skips = 6;
  FitCallbacks cb;
  cb.batch = [&](const StepPosition&) {
    Array x(DType::f32, Shape{n, in}), c(DType::f32, Shape{n, 1});
    for (auto& v : x.span<float>()) v = 60000.0f;  // S · 120000 overflows f16 for S >= 1
    for (auto& v : c.span<float>()) v = 1.0f;
    return Batch{{"x", x}, {"c", c}};
  };
  const std::string e = error_of([&] { fit(t, f, cb); });
  EXPECT_NE(e.find("the last 6 steps all had inf or NaN gradients"), std::string::npos) << e;
  EXPECT_NE(e.find("--precision bf16"), std::string::npos) << e;
  EXPECT_EQ(t.steps_taken(), 6);
  EXPECT_EQ(t.optimizer_step(), 0);
}

TEST(MixedPrecision, BadPolicyIsRefused) {
  nn::Linear lin(4, 1, false);
  lin.init(random::key(1));
  std::vector<DataInput> data{{"x", {DType::f32, Shape{2, 4}}}, {"c", {DType::f32, Shape{2, 1}}}};
  TrainerOptions o;
  o.precision = DType::f64;
  EXPECT_NE(error_of([&] {
              Trainer(lin, weighted_sum(), data, optim::SGD{.lr = 0.1}, o);
            }).find("compute type f64 is not bf16, f16 or f32"),
            std::string::npos);
  o.precision = DType::f16;
  o.update.loss_scaling = optim::UpdateOptions::LossScaling{.backoff_factor = 1.5};
  EXPECT_NE(error_of([&] {
              Trainer(lin, weighted_sum(), data, optim::SGD{.lr = 0.1}, o);
            }).find("backoff_factor 1.5 must be in (0, 1)"),
            std::string::npos);
}

// A checkpoint records its precision; one from before the option (no field) counts as f32.
TEST(MixedPrecision, ResumeNeedsTheSamePrecision) {
  io::Checkpoint c;
  c.user = {{"recipe", "lm"}, {"precision", "bf16"}};
  EXPECT_NE(error_of([&] {
              check_resume_fields(c, "k.st", {{"recipe", "lm"}, {"precision", "f32"}}, 0);
            }).find("it was trained with precision=bf16, this run has f32"),
            std::string::npos);
  c.user.erase("precision");
  EXPECT_NO_THROW(check_resume_fields(c, "k.st", {{"recipe", "lm"}, {"precision", "f32"}}, 0));
  EXPECT_NE(error_of([&] {
              check_resume_fields(c, "k.st", {{"recipe", "lm"}, {"precision", "f16"}}, 0);
            }).find("precision=f32 (it records none), this run has f16"),
            std::string::npos);
}
