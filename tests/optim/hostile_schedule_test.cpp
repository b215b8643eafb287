// Hostile checks of the in-program schedule (Schedule::factor_in_program) and the cosine / sine
// ops: every kind and a spread of horizons, warm-ups and step sizes bit for bit with the host
// factor() far past the horizon; the fused and unfused host kernels and the evaluator; the
// StableHLO text; cos / sin values against libm, their VJPs against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "support/stablehlo_roundtrip.h"
#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/optim/schedule.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

using namespace tlaloc;
using namespace tlaloc::optim;

namespace {

ir::Function factor_fn(const Schedule& s) {
  return trace::capture(
      [&](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
        return {s.factor_in_program(in[0])};
      },
      {{DType::s32, {}}}, {"step"});
}

std::vector<Schedule> schedules() {
  std::vector<Schedule> all;
  for (int64_t T : {1, 2, 3, 7, 100, 1000, 12345}) {
    all.push_back(parse_schedule("cosine", T));
    all.push_back(parse_schedule("constant", T, 0));
    for (int64_t W : {1, 3, 50}) {
      if (W < T) all.push_back(parse_schedule("warmup-cosine", T, W));
      all.push_back(parse_schedule("constant", T, W));
    }
    all.push_back(parse_schedule("step", T));
    all.push_back(parse_schedule("step:1:0.9", T));
    all.push_back(parse_schedule("step:7:0.1", T));
    all.push_back(parse_schedule("step:3:1.5", T));  // gamma > 1
    all.push_back(parse_schedule("step:1:1e-300", T));
  }
  Schedule floor = parse_schedule("cosine", 999);
  floor.min_factor = 1.0 / 3;
  all.push_back(floor);
  Schedule one = parse_schedule("warmup-cosine", 50, 10);
  one.min_factor = 1;
  all.push_back(one);
  return all;
}

std::string all_fields(const Schedule& s) {
  return std::string(name(s.kind)) + " T=" + std::to_string(s.total_steps) +
         " W=" + std::to_string(s.warmup_steps) + " size=" + std::to_string(s.step_size) +
         " gamma=" + std::to_string(s.gamma) + " min=" + std::to_string(s.min_factor);
}

}  // namespace

TEST(HostileSchedule, EveryKindEqualsTheHostsBitsPastTheHorizon) {
  for (const Schedule& s : schedules()) {
    SCOPED_TRACE(all_fields(s));
    const ir::Function f = factor_fn(s);
    for (bool fuse : {true, false}) {
      auto exe = runtime::host::compile(f, {.num_threads = 0, .fuse = fuse});
      std::vector<int64_t> steps;
      for (int64_t k = 0; k < std::min<int64_t>(s.total_steps + 60, 2000); ++k) steps.push_back(k);
      for (int64_t k : {s.total_steps - 1, s.total_steps, s.total_steps + 1, int64_t(1) << 20,
                        int64_t(2147483646), int64_t(2147483647)})
        if (k >= 0) steps.push_back(k);
      int bad = 0;
      for (int64_t k : steps) {
        const std::vector<Array> in{Array::scalar<int32_t>(int32_t(k))};
        const double got = exe->run(in)[0].at(0);
        const double want = s.factor(k);
        const double folded = passes::interpret(f, in)[0].at(0);
        if (!(std::memcmp(&got, &want, 8) == 0) && bad++ < 3)
          ADD_FAILURE() << "step " << k << (fuse ? " fused" : " unfused") << ": program " << got
                        << " host " << want;
        if (!(std::memcmp(&folded, &want, 8) == 0) && bad++ < 3)
          ADD_FAILURE() << "step " << k << " interpret " << folded << " host " << want;
      }
    }
  }
}

TEST(HostileSchedule, StableHloRoundTrip) {
  for (const Schedule& s : {parse_schedule("warmup-cosine", 30, 7),
                            parse_schedule("step:3:0.5", 20), parse_schedule("constant", 10, 4)}) {
    SCOPED_TRACE(all_fields(s));
    for (int32_t k : {0, 5, 29, 40})
      tlaloc::testing::expect_stablehlo_roundtrip(factor_fn(s),
                                                  std::vector<Array>{Array::scalar<int32_t>(k)});
  }
}

// cos and sin in f32 / f64 / bf16 / f16 on the host lane (fused and not) and in the evaluator,
// at hostile arguments: huge, tiny, ±0, ±inf, NaN, multiples of pi.
TEST(HostileSchedule, CosSinValuesAgainstLibm) {
  const std::vector<double> xs = {
      0.0,  -0.0, 1e-30,  1.5707963267948966, 3.141592653589793, -2.5, 100.0,
      1e6,  1e22, -1e300, INFINITY,           -INFINITY,         NAN,  6.2831853,
      1e-8, 33.0};
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    const int64_t n = int64_t(xs.size());
    ir::Function f = trace::capture(
        [&](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
          return {trace::cos(in[0]), trace::sin(in[0]), trace::cos(in[0]) * trace::sin(in[0])};
        },
        {{t, Shape{n}}}, {"x"});
    const Array x = Array::from_doubles(t, Shape{n}, xs);
    const std::vector<double> xr = x.to_doubles();  // rounded to t
    for (bool fuse : {true, false}) {
      auto out =
          runtime::host::compile(f, {.num_threads = 0, .fuse = fuse})->run(std::vector<Array>{x});
      auto ev = passes::interpret(f, std::vector<Array>{x});
      for (int k = 0; k < 2; ++k) {
        const std::vector<double> got = out[size_t(k)].to_doubles(),
                                  evv = ev[size_t(k)].to_doubles();
        for (size_t i = 0; i < xs.size(); ++i) {
          double want;
          if (t == DType::f64)
            want = k == 0 ? std::cos(xr[i]) : std::sin(xr[i]);
          else
            want = k == 0 ? double(std::cos(float(xr[i]))) : double(std::sin(float(xr[i])));
          want = Array::from_doubles(t, Shape{1}, {want}).to_doubles()[0];
          const bool same = (std::isnan(want) && std::isnan(got[i])) || want == got[i];
          EXPECT_TRUE(same) << name(t) << (k ? " sin(" : " cos(") << xr[i] << ") = " << got[i]
                            << " want " << want << (fuse ? " fused" : "");
          const bool same_ev = (std::isnan(evv[i]) && std::isnan(got[i])) || evv[i] == got[i];
          EXPECT_TRUE(same_ev) << name(t) << (k ? " sin(" : " cos(") << xr[i] << ") kernel "
                               << got[i] << " evaluator " << evv[i];
        }
      }
    }
    if (t == DType::f32 || t == DType::f64)
      tlaloc::testing::expect_stablehlo_roundtrip(f, std::vector<Array>{x});
  }
}

// d/dx Σ (cos(x)·a + sin(x)·b) by the VJP against central differences in f64.
TEST(HostileSchedule, CosSinVjpAgainstFiniteDifferences) {
  const std::vector<double> xs = {-3.0, -1.2, 0.0, 0.4, 1.5707963267948966, 2.9, 10.0, 1e3};
  const int64_t n = int64_t(xs.size());
  auto body = [&](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
    return {trace::sum(trace::cos(in[0]) * 0.7 + trace::sin(in[0]) * -1.3 +
                       trace::cos(trace::sin(in[0])))};
  };
  ir::Function f = trace::capture(body, {{DType::f64, Shape{n}}}, {"x"});
  ir::Function g = autodiff::grad(f, {0});
  auto exe = runtime::host::compile(g, {});
  auto fe = runtime::host::compile(f, {});
  const std::vector<double> got =
      exe->run(std::vector<Array>{Array::from_doubles(DType::f64, Shape{n}, xs)})[0].to_doubles();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double h = 1e-6 * std::max(1.0, std::fabs(xs[i]));
    std::vector<double> p = xs, m = xs;
    p[i] += h;
    m[i] -= h;
    const double fd =
        (fe->run(std::vector<Array>{Array::from_doubles(DType::f64, Shape{n}, p)})[0].at(0) -
         fe->run(std::vector<Array>{Array::from_doubles(DType::f64, Shape{n}, m)})[0].at(0)) /
        (2 * h);
    EXPECT_NEAR(got[i], fd, 1e-6 * std::max(1.0, std::fabs(fd))) << "x = " << xs[i];
  }
  tlaloc::testing::expect_stablehlo_roundtrip(
      g, std::vector<Array>{Array::from_doubles(DType::f64, Shape{n}, xs)});
}
