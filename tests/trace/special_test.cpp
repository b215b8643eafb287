// erf and the erf form of GELU (trace/special.h) against std::erf in f64, and their autodiff
// derivatives against the analytic ones: d/dx erf = 2/√π·exp(−x²), d/dx GELU = Φ(x) + x·φ(x).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/special.h"

using namespace tlaloc;
using trace::Tensor;

namespace {

// -6 .. 6 in steps of 1/200 (0 included), then ±20.
std::vector<double> grid() {
  std::vector<double> x;
  for (int i = -1200; i <= 1200; ++i) x.push_back(i / 200.0);
  x.push_back(-20);
  x.push_back(20);
  return x;
}

// Value and derivative of fn at xs (dtype t): runs fn and vjp(fn) with cotangent 1.
std::pair<std::vector<double>, std::vector<double>> value_and_slope(Tensor (*fn)(const Tensor&),
                                                                    const std::vector<double>& xs,
                                                                    DType t = DType::f64) {
  const Shape s{int64_t(xs.size())};
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> x) { return std::vector<Tensor>{fn(x[0])}; }, {{t, s}});
  Array x = Array::from_doubles(t, s, xs);
  std::vector<Array> in{x};
  auto y = runtime::host::compile(f)->run(in)[0].to_doubles();
  in.push_back(Array::filled(t, s, 1.0));
  auto g = runtime::host::compile(autodiff::vjp(f, {0}))->run(in)[0].to_doubles();
  return {y, g};
}

double phi(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); }
double gelu_exact(double x) { return 0.5 * x * (1 + std::erf(x * (1 / std::numbers::sqrt2))); }

TEST(Erf, MatchesStdErfWithinTheAbramowitzStegunBound) {
  auto xs = grid();
  auto [y, g] = value_and_slope(trace::erf, xs);
  double worst = 0, worst_slope = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    worst = std::max(worst, std::fabs(y[i] - std::erf(xs[i])));
    double want = 2 / std::sqrt(std::numbers::pi) * std::exp(-xs[i] * xs[i]);
    worst_slope = std::max(worst_slope, std::fabs(g[i] - want));
  }
  EXPECT_LE(worst, 1.5e-7);        // A&S 7.1.26's bound
  EXPECT_LE(worst_slope, 7.5e-6);  // derivative of the approximation (7.2e-6 at x = 0)
  const size_t zero = 1200;
  ASSERT_EQ(xs[zero], 0.0);
  EXPECT_EQ(y[zero], 0.0);  // normalised coefficients: exactly 0, no jump
  for (size_t i = 0; i < 1200; ++i) EXPECT_EQ(y[i], -y[2400 - i]) << xs[i];  // odd
}

TEST(Erf, InfinitiesGiveOneAndF32StaysClose) {
  std::vector<double> xs{-INFINITY, -3, -0.5, 0.25, 2, INFINITY};
  auto [y, g] = value_and_slope(trace::erf, xs, DType::f32);
  EXPECT_EQ(y.front(), -1.0);
  EXPECT_EQ(y.back(), 1.0);
  for (size_t i = 1; i + 1 < xs.size(); ++i) {
    EXPECT_NEAR(y[i], std::erf(xs[i]), 5e-7) << xs[i];
    EXPECT_TRUE(std::isfinite(g[i]));
  }
}

TEST(GeluErf, MatchesTheExactFormulaAndItsDerivative) {
  auto xs = grid();
  auto [y, g] = value_and_slope(trace::gelu_erf, xs);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    EXPECT_NEAR(y[i], gelu_exact(x), 7.5e-8 * std::fabs(x) + 1e-16) << x;
    // Φ(x) + x·φ(x); measured within 5.4e-7.
    double want = 0.5 * (1 + std::erf(x * (1 / std::numbers::sqrt2))) + x * phi(x);
    EXPECT_NEAR(g[i], want, 6e-7) << x;
  }
}

TEST(GeluErf, F32IsCloseAndFiniteForHugeInputs) {
  std::vector<double> xs{-1e30, -10, -3, -1, -1e-3, 0, 1e-3, 0.7, 3, 1e30};
  auto [y, g] = value_and_slope(trace::gelu_erf, xs, DType::f32);
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_TRUE(std::isfinite(y[i]) && std::isfinite(g[i])) << xs[i];
    EXPECT_NEAR(y[i], gelu_exact(xs[i]), 4e-7 * std::max(1.0, std::fabs(xs[i]))) << xs[i];
  }
  EXPECT_EQ(g.front(), 0.0);
  EXPECT_EQ(g.back(), 1.0);
}

TEST(Erf, IntegerInputIsAnError) {
  EXPECT_THROW(trace::capture(
                   [](std::span<const Tensor> x) { return std::vector<Tensor>{trace::erf(x[0])}; },
                   {{DType::s32, Shape{2}}}),
               Error);
}

}  // namespace
