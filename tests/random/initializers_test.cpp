// Initialisers against JAX's documented outputs, hand-computed fans and PyTorch's bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tlaloc/random/initializers.h"

using namespace tlaloc;
using namespace tlaloc::random;

namespace {

nlohmann::json docs_fixture() {
  std::ifstream f(TLALOC_SOURCE_DIR "/tests/fixtures/jax_docs_examples.json");
  EXPECT_TRUE(f.good()) << "missing tests/fixtures/jax_docs_examples.json";
  return nlohmann::json::parse(f);
}

// Distance in f32 units in the last place.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return a == b ? 0 : INT64_MAX;
  return std::llabs(int64_t(ia) - int64_t(ib));
}

void expect_close(const Array& got, const std::vector<double>& want, int64_t max_ulps,
                  const std::string& what) {
  ASSERT_EQ(got.numel(), int64_t(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LE(ulps(float(got.at(int64_t(i))), float(want[i])), max_ulps)
        << what << " element " << i << ": " << got.at(int64_t(i)) << " vs " << want[i];
}

}  // namespace

// JAX's docstring examples were printed with legacy bits (PRNGKey(42), shape (2, 3)). Uniform
// based values are exact up to the 8 printed digits; normal-based ones depend on the backend's
// log1p / erf (see random.h), so a few ulp are allowed.
TEST(Initializers, MatchJaxDocumentedExamples) {
  const auto j = docs_fixture();
  const Key k = key(j["seed"].get<uint64_t>());
  const Shape s{2, 3};
  const Mode m = Mode::legacy;
  auto want = [&](const char* n) { return j[n].get<std::vector<double>>(); };
  Array u = uniform(k, s, DType::f32, 0, 1, m);
  Array u10 = Array::from_doubles(DType::f32, s, [&] {
    auto v = u.to_doubles();
    for (double& x : v) x = double(float(x) * 10.0f);
    return v;
  }());
  expect_close(u10, want("uniform(10.0)"), 1, "uniform(10.0)");
  expect_close(glorot_uniform(k, s, DType::f32, m), want("glorot_uniform"), 1, "glorot_uniform");
  expect_close(lecun_uniform(k, s, DType::f32, m), want("lecun_uniform"), 1, "lecun_uniform");
  expect_close(he_uniform(k, s, DType::f32, m), want("he_uniform"), 1, "he_uniform");

  auto times5 = [&](const Array& a) {
    auto v = a.to_doubles();
    for (double& x : v) x = double(float(x) * 5.0f);
    return Array::from_doubles(DType::f32, s, v);
  };
  expect_close(times5(normal(k, s, DType::f32, m)), want("normal(5.0)"), 8, "normal(5.0)");
  expect_close(times5(truncated_normal(k, -2, 2, s, DType::f32, m)), want("truncated_normal(5.0)"),
               8, "truncated_normal(5.0)");
  expect_close(glorot_normal(k, s, DType::f32, m), want("glorot_normal"), 8, "glorot_normal");
  expect_close(lecun_normal(k, s, DType::f32, m), want("lecun_normal"), 8, "lecun_normal");
  expect_close(he_normal(k, s, DType::f32, m), want("he_normal"), 8, "he_normal");
}

TEST(Initializers, FansAsJaxComputeFans) {
  // A HWIO conv kernel [3, 4, 5, 6]: receptive field 3 * 4 = 12.
  Fans f = compute_fans({3, 4, 5, 6});
  EXPECT_EQ(f.fan_in, 60.0);
  EXPECT_EQ(f.fan_out, 72.0);
  f = compute_fans({7, 9});
  EXPECT_EQ(f.fan_in, 7.0);
  EXPECT_EQ(f.fan_out, 9.0);
  f = compute_fans({7, 9}, 1, 0);  // a PyTorch-layout [out, in] weight
  EXPECT_EQ(f.fan_in, 9.0);
  EXPECT_EQ(f.fan_out, 7.0);
  EXPECT_THROW(compute_fans({5}), Error);
  EXPECT_THROW(compute_fans({5, 4}, 2), Error);
  EXPECT_THROW(variance_scaling(key(0), {0, 4}, 1.0, FanMode::fan_in, Distribution::normal), Error);
  EXPECT_THROW(glorot_uniform(key(0), {3, 4}, DType::s32), Error);
}

// Variance of each variance_scaling distribution is scale / fan (hand computation).
TEST(Initializers, VarianceScalingMoments) {
  const Shape s{400, 500};  // fan_in 400, fan_out 500, fan_avg 450
  struct Case {
    FanMode mode;
    Distribution dist;
    double scale, fan;
  };
  const Case cases[] = {{FanMode::fan_in, Distribution::truncated_normal, 1.0, 400},
                        {FanMode::fan_out, Distribution::normal, 2.0, 500},
                        {FanMode::fan_avg, Distribution::uniform, 1.0, 450}};
  for (const Case& c : cases) {
    auto v = variance_scaling(key(3), s, c.scale, c.mode, c.dist).to_doubles();
    double sum = 0, sq = 0, mx = 0;
    for (double x : v) sum += x, sq += x * x, mx = std::max(mx, std::abs(x));
    const double n = double(v.size()), var = c.scale / c.fan;
    EXPECT_NEAR(sum / n, 0.0, 5 * std::sqrt(var / n));
    EXPECT_NEAR(sq / n / var, 1.0, 0.02) << int(c.dist);
    if (c.dist == Distribution::uniform) {
      EXPECT_LE(mx, std::sqrt(3 * var) * (1 + 1e-6));
    }
    if (c.dist == Distribution::truncated_normal) {
      EXPECT_LT(mx, 2 * std::sqrt(var) / .87962566103423978 * (1 + 1e-6));
    }
  }
  EXPECT_EQ(zeros({2, 2}).to_doubles(), std::vector<double>(4, 0.0));
  EXPECT_EQ(ones({3}, DType::bf16).to_doubles(), std::vector<double>(3, 1.0));
}

// nn.Linear(in, out): kaiming_uniform_(a = sqrt(5)) gives bound sqrt(3) * sqrt(2 / 6) /
// sqrt(in) = 1 / sqrt(in); the bias bound is 1 / sqrt(in) too (torch/nn/modules/linear.py).
TEST(Initializers, TorchLinearDistribution) {
  const int64_t out = 300, in = 100;
  const double bound = 1.0 / std::sqrt(double(in));
  Array w = torch_linear_weight(key(1), out, in);
  Array b = torch_linear_bias(key(2), out, in);
  EXPECT_EQ(w.shape(), (Shape{out, in}));
  EXPECT_EQ(b.shape(), (Shape{out}));
  double sum = 0, sq = 0, lo = 1, hi = -1;
  for (double x : w.to_doubles()) sum += x, sq += x * x, lo = std::min(lo, x), hi = std::max(hi, x);
  const double n = double(out * in);
  EXPECT_GE(lo, -bound * (1 + 1e-6));
  EXPECT_LT(hi, bound * (1 + 1e-6));
  EXPECT_LT(lo, -0.99 * bound);  // the whole interval is used
  EXPECT_GT(hi, 0.99 * bound);
  EXPECT_NEAR(sum / n, 0.0, 5 * bound / std::sqrt(3 * n));
  EXPECT_NEAR(sq / n, bound * bound / 3, 0.02 * bound * bound / 3);
  for (double x : b.to_doubles()) EXPECT_TRUE(x >= -bound && x < bound) << x;
  EXPECT_THROW(torch_kaiming_uniform(key(0), {5}, 0.0), Error);
  // A conv weight [out, in, kh, kw]: fan_in = in * kh * kw, a = 0 gives bound sqrt(6 / fan_in).
  Array c = torch_kaiming_uniform(key(4), {8, 3, 5, 5}, 0.0);
  double cmax = 0;
  for (double x : c.to_doubles()) cmax = std::max(cmax, std::abs(x));
  EXPECT_LE(cmax, std::sqrt(6.0 / 75.0) * (1 + 1e-6));
  EXPECT_GT(cmax, 0.95 * std::sqrt(6.0 / 75.0));
}
