// Hostile rows for layer_norm's decomposition (the corrected two-pass algorithm), the GPU lane's
// layer_norm and what passes::interpret(passes::expand_composites(f)) evaluates, in f32 against
// a long double oracle, beside the centred formula written out here (mean, then the variance of
// the values centred twice) evaluated the same way. They caught a shifted one-pass form
// (sums of x - x[..., 0] and its square), which lost up to log2(D) bits when a row's first
// value was far from its mean and overflowed where the centred squares do not. Errors are printed
// in units of the largest |y| of the row (norm-wise) and elementwise in f32 ulps of the expected
// value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

using namespace tlaloc;

namespace {

using LD = long double;

ir::Function ln_fn(int64_t R, int64_t D, double eps) {
  ir::Builder b("ln");
  const ir::ValueId x = b.parameter({DType::f32, Shape{R, D}}, "x");
  const ir::ValueId w = b.parameter({DType::f32, Shape{D}}, "w");
  return b.build({b.composite(ir::Op::layer_norm, {x, w}, {eps})[0]}, {"y"});
}

ir::Function ln_grad_fn(int64_t R, int64_t D, double eps) {
  ir::Builder b("ln_grad");
  const ir::ValueId x = b.parameter({DType::f32, Shape{R, D}}, "x");
  const ir::ValueId w = b.parameter({DType::f32, Shape{D}}, "w");
  const ir::ValueId dy = b.parameter({DType::f32, Shape{R, D}}, "dy");
  return b.build(b.composite(ir::Op::layer_norm_grad, {x, w, dy}, {eps}), {"dx", "dw", "db"});
}

// The centred two-pass formula (the decomposition before the shift) in f32.
ir::Function centred_fn(int64_t R, int64_t D, double eps) {
  using trace::Tensor;
  return trace::capture(
      [&](std::span<const Tensor> in) -> std::vector<Tensor> {
        Tensor xc = in[0] - trace::mean(in[0], {-1}, true);
        xc = xc - trace::mean(xc, {-1}, true);
        return {xc * trace::rsqrt(trace::mean(trace::square(xc), {-1}, true) + eps) * in[1]};
      },
      {{DType::f32, Shape{R, D}}, {DType::f32, Shape{D}}}, {"x", "w"});
}

struct Oracle {
  std::vector<double> y, dx;
};

// y = (x - m) / sqrt(v + eps) (weight 1); dx for g = dy (weight 1).
Oracle oracle(const std::vector<float>& x, const std::vector<float>& dy, int64_t R, int64_t D,
              double eps) {
  Oracle o;
  for (int64_t r = 0; r < R; ++r) {
    LD m = 0, v = 0;
    for (int64_t i = 0; i < D; ++i) m += x[size_t(r * D + i)];
    m /= D;
    for (int64_t i = 0; i < D; ++i) v += (x[size_t(r * D + i)] - m) * (x[size_t(r * D + i)] - m);
    v /= D;
    const LD rstd = 1 / std::sqrt(v + LD(eps));
    LD mg = 0, mgx = 0;
    for (int64_t i = 0; i < D; ++i) {
      const LD xh = (x[size_t(r * D + i)] - m) * rstd;
      o.y.push_back(double(xh));
      mg += dy[size_t(r * D + i)];
      mgx += dy[size_t(r * D + i)] * xh;
    }
    mg /= D;
    mgx /= D;
    for (int64_t i = 0; i < D; ++i) {
      const LD xh = (x[size_t(r * D + i)] - m) * rstd;
      o.dx.push_back(double(rstd * (dy[size_t(r * D + i)] - mg - xh * mgx)));
    }
  }
  return o;
}

struct Err {
  double normwise = 0;  // max |got - want| / max |want|
  double ulps = 0;      // max elementwise |got - want| / ulp(want)
};

Err error(const std::vector<double>& got, const std::vector<double>& want) {
  Err e;
  double big = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    big = std::max(big, std::fabs(want[i]));
    const double d = std::fabs(got[i] - want[i]);
    if (std::isnan(got[i]) != std::isnan(want[i])) return {INFINITY, INFINITY};
    if (std::isnan(want[i])) continue;
    worst = std::max(worst, d);
    const float wf = float(want[i]);
    const double ulp =
        std::max(double(std::nextafter(std::fabs(wf), INFINITY) - std::fabs(wf)), 1e-45);
    e.ulps = std::max(e.ulps, d / ulp);
  }
  e.normwise = big > 0 ? worst / big : worst;
  return e;
}

std::vector<double> to_d(const Array& a) { return a.to_doubles(); }

struct Case {
  const char* what;
  int64_t D;
  double eps;
  std::vector<float> row;
};

struct Result {
  Err decomposed, decomposed_host, centred, kernel, grad_decomposed, grad_kernel;
};

Result probe(const Case& c) {
  const int64_t D = c.D;
  std::vector<float> dy(static_cast<size_t>(D));
  uint64_t s = 12345;
  for (auto& v : dy) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    v = float(double(s >> 11) / double(1ULL << 53) * 2 - 1);
  }
  const Oracle o = oracle(c.row, dy, 1, D, c.eps);
  const Array x =
      Array::from_doubles(DType::f32, {1, D}, std::vector<double>(c.row.begin(), c.row.end()));
  const Array w = Array::filled(DType::f32, {D}, 1.0);
  const Array g =
      Array::from_doubles(DType::f32, {1, D}, std::vector<double>(dy.begin(), dy.end()));
  const std::vector<Array> in{x, w}, gin{x, w, g};
  const ir::Function f = ln_fn(1, D, c.eps), fg = ln_grad_fn(1, D, c.eps);
  const ir::Function fe = passes::expand_composites(f), fge = passes::expand_composites(fg);
  Result r;
  r.decomposed = error(to_d(passes::interpret(fe, in)[0]), o.y);
  r.decomposed_host = error(to_d(runtime::host::compile(fe, {})->run(in)[0]), o.y);
  r.centred = error(to_d(passes::interpret(centred_fn(1, D, c.eps), in)[0]), o.y);
  r.kernel = error(to_d(runtime::host::compile(f, {})->run(in)[0]), o.y);
  r.grad_decomposed = error(to_d(passes::interpret(fge, gin)[0]), o.dx);
  r.grad_kernel = error(to_d(runtime::host::compile(fg, {})->run(gin)[0]), o.dx);
  std::printf(
      "%-44s D=%-8lld | y normwise: decomposed %.2e (host-compiled %.2e) centred %.2e kernel %.2e"
      " | y ulps: decomposed %.3g centred %.3g kernel %.3g | dx normwise: decomposed %.2e kernel "
      "%.2e\n",
      c.what, (long long)D, r.decomposed.normwise, r.decomposed_host.normwise, r.centred.normwise,
      r.kernel.normwise, r.decomposed.ulps, r.centred.ulps, r.kernel.ulps,
      r.grad_decomposed.normwise, r.grad_kernel.normwise);
  return r;
}

std::vector<float> noise(int64_t n, double centre, double half, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    e = float(centre + half * (double(seed >> 11) / double(1ULL << 53) * 2 - 1));
  }
  return v;
}

Case outlier_first(int64_t D, double x0, double centre = 0) {
  Case c{"first value an outlier", D, 1e-5, noise(D, centre, 1, 3)};
  c.row[0] = float(centre + x0);
  return c;
}

}  // namespace

// The accuracy table: the decomposition stays within a small factor of the centred formula
// evaluated the same way (norm-wise), whatever the row's first value or mean.
TEST(HostileLayerNorm, AccuracyAgainstLongDouble) {
  std::vector<Case> cases;
  cases.push_back({"noise, mean 0", 4096, 1e-5, noise(4096, 0, 1, 1)});
  cases.push_back({"noise, mean 1e6 (x0 typical)", 4096, 1e-5, noise(4096, 1e6, 1, 1)});
  cases.push_back(outlier_first(768, 1000));
  cases.push_back(outlier_first(4096, 1e4));
  cases.push_back(outlier_first(4096, 1e6));
  cases.push_back(outlier_first(65536, 1e4));
  cases.push_back(outlier_first(1 << 20, 1e5));
  {
    Case c = outlier_first(4096, 200, 1e4);
    c.what = "mean 1e4, first value 200 above";
    cases.push_back(c);
  }
  {
    Case c{"one-hot 1 at [0], D large", 1 << 16, 1e-5, std::vector<float>(1 << 16, 0.f)};
    c.row[0] = 1;
    cases.push_back(c);
  }
  {
    Case c{"one-hot 1 at [0], eps 0", 1 << 16, 0, std::vector<float>(1 << 16, 0.f)};
    c.row[0] = 1;
    cases.push_back(c);
  }
  bool bad = false;
  for (const Case& c : cases) {
    const Result r = probe(c);
    const double allowed = std::max(16 * r.centred.normwise, 1e-6);
    if (!(r.decomposed.normwise <= allowed)) {
      bad = true;
      ADD_FAILURE() << c.what << " D=" << c.D << ": the decomposition's norm-wise error "
                    << r.decomposed.normwise << " vs the centred formula's " << r.centred.normwise;
    }
  }
  EXPECT_FALSE(bad);
}

// x = [-a, a] with 2a² < FLT_MAX < 4a²: the centred squares a² are finite, so y = -1, 1 as in
// PyTorch and the host kernel (squares of x - x[0], 4a², overflowed to inf and gave y = 0).
TEST(HostileLayerNorm, FiniteRowsWhoseShiftedSquaresWouldOverflow) {
  const double a = 1e19;
  const std::vector<Array> in{Array::from_doubles(DType::f32, {1, 2}, {-a, a}),
                              Array::filled(DType::f32, {2}, 1.0)};
  const ir::Function f = ln_fn(1, 2, 1e-5);
  const std::vector<double> kernel = to_d(runtime::host::compile(f, {})->run(in)[0]);
  const std::vector<double> centred = to_d(passes::interpret(centred_fn(1, 2, 1e-5), in)[0]);
  const std::vector<double> decomposed =
      to_d(passes::interpret(passes::expand_composites(f), in)[0]);
  EXPECT_NEAR(kernel[0], -1, 1e-6);
  EXPECT_NEAR(centred[0], -1, 1e-6);
  EXPECT_NEAR(decomposed[0], -1, 1e-6);
  EXPECT_NEAR(decomposed[1], 1, 1e-6);
}

// D = 1 (y = bias), D = 0, constant rows, eps 0, inf / NaN: the decomposition's values equal
// the host kernel's (NaN where it gives NaN).
TEST(HostileLayerNorm, EdgeRowsMatchTheKernel) {
  struct Edge {
    int64_t D;
    double eps;
    std::vector<double> x;
  };
  const double inf = INFINITY, nan = NAN;
  const Edge edges[] = {
      {1, 1e-5, {3.5}},
      {1, 0, {3.5}},
      {3, 1e-5, {2, 2, 2}},
      {3, 0, {2, 2, 2}},
      {3, 1e-5, {inf, 1, 2}},
      {3, 1e-5, {1, inf, 2}},
      {3, 1e-5, {1, 2, -inf}},
      {3, 1e-5, {nan, 1, 2}},
      {3, 1e-5, {1, 2, nan}},
      {4, 1e-5, {1e30, 1e30, 1e30, 1e30}},
      {2, 1e-5, {1e-30, -1e-30}},
      {2, 0, {1e-30, -1e-30}},
      {0, 1e-5, {}},
  };
  for (const Edge& e : edges) {
    SCOPED_TRACE(::testing::PrintToString(e.x) + " eps " + std::to_string(e.eps));
    const std::vector<Array> in{Array::from_doubles(DType::f32, {1, e.D}, e.x),
                                Array::filled(DType::f32, {e.D}, 1.0)};
    const ir::Function f = ln_fn(1, e.D, e.eps);
    const std::vector<double> kernel = to_d(runtime::host::compile(f, {})->run(in)[0]);
    const std::vector<double> decomposed =
        to_d(passes::interpret(passes::expand_composites(f), in)[0]);
    ASSERT_EQ(kernel.size(), decomposed.size());
    for (size_t i = 0; i < kernel.size(); ++i) {
      if (std::isnan(kernel[i])) {
        EXPECT_TRUE(std::isnan(decomposed[i])) << i << ": " << decomposed[i];
      } else if (std::isinf(kernel[i])) {
        EXPECT_EQ(decomposed[i], kernel[i]) << i;
      } else {
        EXPECT_NEAR(decomposed[i], kernel[i], 1e-5 * std::max(1.0, std::fabs(kernel[i]))) << i;
      }
    }
  }
}
