// RMSNorm (torch.nn.RMSNorm semantics) against f64 hand computations written here.
#include <gtest/gtest.h>

#include <cmath>

#include "tlaloc/nn/norms.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using trace::Tensor;

namespace {

// Runs m(x) on the host lane with the module's parameters as inputs after x.
std::vector<Array> run_module(nn::Module& m, const Array& x) {
  std::vector<ir::TensorType> types{{x.dtype(), x.shape()}};
  std::vector<Array> in{x};
  for (auto& p : m.named_parameters()) {
    types.push_back({p.param->value.dtype(), p.param->value.shape()});
    in.push_back(p.param->value);
  }
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> t) {
        m.bind(t.subspan(1));
        return std::vector<Tensor>{m(t[0])};
      },
      types);
  return runtime::host::compile(f)->run(in);
}

// x / sqrt(mean(x²) + eps) · w over rows of length n, in f64.
std::vector<double> oracle(const std::vector<double>& x, const std::vector<double>& w, size_t n,
                           double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double ms = 0;
    for (size_t i = 0; i < n; ++i) ms += x[r * n + i] * x[r * n + i];
    double inv = 1 / std::sqrt(ms / double(n) + eps);
    for (size_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * w[i];
  }
  return y;
}

TEST(RMSNorm, MatchesF64OracleWithWeightAndDefaultEps) {
  nn::RMSNorm norm(3);
  EXPECT_EQ(norm.repr(), "RMSNorm((3,), eps=None, elementwise_affine=True)");
  auto named = norm.named_parameters();
  ASSERT_EQ(named.size(), 1u);  // weight only, no bias
  EXPECT_EQ(named[0].name, "weight");
  EXPECT_EQ(named[0].param->value.to_doubles(), (std::vector<double>{1, 1, 1}));
  std::vector<double> w{0.5, -2, 1.25};
  named[0].param->value = Array::from_doubles(DType::f32, {3}, w);
  std::vector<double> x{1, -2, 3, 0.1, 0.2, -0.3, 0, 0, 0};  // the zero row: eps keeps it 0
  auto y = run_module(norm, Array::from_doubles(DType::f32, {3, 3}, x))[0].to_doubles();
  auto want = oracle(x, w, 3, 0x1p-23);  // torch.finfo(torch.float32).eps
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 2e-7 * 4) << i;
  // In f64 (parameters too) the default eps is 2^-52 and the result matches to rounding.
  named[0].param->value = Array::from_doubles(DType::f64, {3}, w);
  auto y64 = run_module(norm, Array::from_doubles(DType::f64, {3, 3}, x))[0].to_doubles();
  auto want64 = oracle(x, w, 3, 0x1p-52);
  for (size_t i = 0; i < y64.size(); ++i) EXPECT_NEAR(y64[i], want64[i], 1e-15) << i;
}

// bf16 input: normalised in f32 with PyTorch's default eps there, f32's 2^-23 (rms_norm takes
// numeric_limits<opmath_t>::epsilon(); bf16's own 2^-7 would dominate a row of small values),
// then rounded to bf16. A row of values near 0.01 (mean square ~1e-4) shows the difference.
TEST(RMSNorm, Bf16InputUsesF32EpsAndRoundsOnce) {
  nn::RMSNorm norm(4, std::nullopt, false);
  const std::vector<double> x{0.01, -0.02, 0.015, -0.01};
  const Array xb = Array::from_doubles(DType::bf16, {1, 4}, x);
  auto y = run_module(norm, xb)[0];
  ASSERT_EQ(y.dtype(), DType::bf16);
  std::vector<double> xr = xb.to_doubles();  // the bf16 values, exactly
  auto want = oracle(xr, {1, 1, 1, 1}, 4, 0x1p-23);
  for (size_t i = 0; i < 4; ++i)  // within one bf16 rounding (2^-8 relative)
    EXPECT_NEAR(y.at(int64_t(i)), want[i], std::fabs(want[i]) * 0x1p-8) << i;
}

TEST(RMSNorm, LargeMeanRowIsAccurateInF32) {
  nn::RMSNorm norm(4, 1e-5);
  std::vector<double> x{40000, 40001, 40002, 40003};
  auto y = run_module(norm, Array::from_doubles(DType::f32, {1, 4}, x))[0].to_doubles();
  auto want = oracle(x, {1, 1, 1, 1}, 4, 1e-5);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], want[i], 3e-7 * want[i]) << i;
  // The four outputs still differ as the inputs do (1/40001.5 apart, far above f32's ulp).
  for (size_t i = 1; i < 4; ++i) EXPECT_NEAR(y[i] - y[i - 1], want[i] - want[i - 1], 3e-7);
}

TEST(RMSNorm, NormalizesOverTrailingDimsWithoutAffine) {
  nn::RMSNorm norm(std::vector<int64_t>{2, 2}, 0.5, false);
  EXPECT_TRUE(norm.named_parameters().empty());
  EXPECT_EQ(norm.repr(), "RMSNorm((2, 2), eps=0.5, elementwise_affine=False)");
  std::vector<double> x{1, 2, 3, 4, -1, 0, 0, 1};  // two [2, 2] blocks
  auto y = run_module(norm, Array::from_doubles(DType::f32, {2, 2, 2}, x))[0].to_doubles();
  auto want = oracle(x, {1, 1, 1, 1}, 4, 0.5);  // by hand: block 0 rms² = 30/4 + 0.5 = 8
  EXPECT_NEAR(want[0], 1 / std::sqrt(8.0), 1e-15);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 4e-7) << i;
}

TEST(RMSNorm, BadShapesAndEpsAreErrors) {
  EXPECT_THROW(nn::RMSNorm(0), Error);
  EXPECT_THROW(nn::RMSNorm(std::vector<int64_t>{}), Error);
  EXPECT_THROW(nn::RMSNorm(4, 0.0), Error);
  nn::RMSNorm norm(4);
  try {
    run_module(norm, Array(DType::f32, {2, 3}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2,3]"), std::string::npos) << e.what();
  }
}

}  // namespace
