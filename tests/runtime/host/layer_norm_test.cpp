// The fused layer_norm kernels against the composites' decomposition run by the IR interpreter
// (the composite's meaning): rows shorter and longer than the 8 partial sums, a row count that
// leaves a partial chunk of the weight / bias gradient sums, rank 1 and 3, with and without
// bias, f64 and f32; run_all also checks fused / unfused and 1 / 2 threads agree bitwise. And a
// row with a large mean, where a one-pass variance (E[x²] - E[x]²) would lose every digit.
#include "kernel_test_util.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

struct Cfg {
  Shape x;
  bool bias;
};

const Cfg kCfgs[] = {
    {{3, 5}, true},      // rows shorter than the 8 partial sums
    {{2, 3, 7}, false},  // rank 3, no bias
    {{64, 128}, true},   // the benchmark LM's shape: 4 chunks, split over threads
    {{37, 33}, true},    // a partial last chunk, a row tail after the 8-wide loop
    {{9}, false},        // rank 1: one row
};

void check(DType dt, const Cfg& c, double tol) {
  SCOPED_TRACE(fmt::format("{} x {} bias {}", name(dt), to_string(c.x), c.bias));
  const int64_t D = c.x[c.x.rank() - 1];
  const double eps = 1e-5;
  std::vector<Array> in = {lcg_array(dt, c.x, 1, -3, 5), lcg_array(dt, {D}, 2, 0.5, 1.5)};
  if (c.bias) in.push_back(lcg_array(dt, {D}, 3));
  std::vector<ir::TensorType> types;
  for (auto& a : in) types.push_back({a.dtype(), a.shape()});
  auto fwd = one_op(types, [&](ir::Builder& b, auto& p) {
    return cop::layer_norm(b, p[0], p[1], c.bias ? p[2] : -1, eps);
  });
  Array y = run_all(fwd, in)[0];
  expect_values(y, passes::interpret(passes::expand_composites(fwd), in)[0].to_doubles(), tol);

  std::vector<Array> gin = {in[0], in[1], lcg_array(dt, c.x, 4)};
  auto bwd = one_op_results({types[0], types[1], types[0]}, [&](ir::Builder& b, auto& p) {
    return cop::layer_norm_grad(b, p[0], p[1], p[2], eps);
  });
  std::vector<Array> g = run_all(bwd, gin);
  std::vector<Array> gwant = passes::interpret(passes::expand_composites(bwd), gin);
  for (size_t r = 0; r < 3; ++r) expect_values(g[r], gwant[r].to_doubles(), tol);
}

KERNEL_TEST(layer_norm, shapes_bias_dtypes) {
  for (const Cfg& c : kCfgs) {
    check(DType::f64, c, 1e-12);
    check(DType::f32, c, 2e-5);
  }
}

// [40000, 40001, 40002, 40003] in f32: centred values [-1.5, -0.5, 0.5, 1.5] are exact, var
// 1.25, so y = xc / sqrt(1.25 + eps) to f32 rounding; its gradient with d_y = [1, 0, 0, 0] and
// weight 1 is rstd·(e0 - 1/4 - xhat·xhat0/4), computed here in double.
KERNEL_TEST(layer_norm_grad, large_mean_rows_in_f32) {
  const double eps = 1e-5, rstd = 1 / std::sqrt(1.25 + eps);
  const std::vector<double> x = {40000, 40001, 40002, 40003}, xc = {-1.5, -0.5, 0.5, 1.5};
  std::vector<Array> in = {Array::from_doubles(DType::f32, {1, 4}, x),
                           Array::filled(DType::f32, {4}, 1.0)};
  auto fwd = one_op({{DType::f32, {1, 4}}, {DType::f32, {4}}}, [&](ir::Builder& b, auto& p) {
    return cop::layer_norm(b, p[0], p[1], -1, eps);
  });
  std::vector<double> want;
  for (double c : xc) want.push_back(c * rstd);
  expect_values(run_all(fwd, in)[0], want, 1e-6);

  in.push_back(Array::from_doubles(DType::f32, {1, 4}, {1, 0, 0, 0}));
  auto bwd = one_op_results(
      {{DType::f32, {1, 4}}, {DType::f32, {4}}, {DType::f32, {1, 4}}},
      [&](ir::Builder& b, auto& p) { return cop::layer_norm_grad(b, p[0], p[1], p[2], eps); });
  std::vector<double> gwant;
  for (int i = 0; i < 4; ++i)
    gwant.push_back(rstd * ((i == 0 ? 1.0 : 0.0) - 0.25 - xc[size_t(i)] * rstd * xc[0] * rstd / 4));
  gwant.insert(gwant.end(), {xc[0] * rstd, 0, 0, 0, 1, 0, 0, 0});  // d_weight, d_bias
  expect_values(Array::from_doubles(DType::f64, {12}, flat(run_all(bwd, in))), gwant, 1e-6);
}

// Norm-wise relative error of f32 `got` against `want` (f64).
double normwise(const Array& got, const std::vector<double>& want) {
  const std::vector<double> g = got.to_doubles();
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (g[i] - want[i]) * (g[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

// Long f32 rows (D up to 2^18, one outlier at 10^4 over noise), LayerNorm forward and backward
// and RMSNorm: the row sums are pairwise over blocks of 1024, so the error stays near f32 rounding
// as D grows (8 partial sums alone gave 1.4e-5 at D = 65536). The oracle: the same kernel in f64 on
// the same f32 values.
KERNEL_TEST(layer_norm, long_rows_stay_accurate_in_f32) {
  for (int64_t D : {int64_t(4096), int64_t(1) << 16, int64_t(1) << 18}) {
    SCOPED_TRACE(D);
    Array x32 = lcg_array(DType::f32, {1, D}, 7, -1, 1);
    x32.data<float>()[0] = 1e4f;
    const Array w32 = Array::filled(DType::f32, {D}, 1.0);
    const Array dy32 = lcg_array(DType::f32, {1, D}, 8, -1, 1);
    auto run = [&](DType dt) {
      std::vector<ir::TensorType> t = {{dt, {1, D}}, {dt, {D}}};
      auto fwd = one_op(
          t, [&](ir::Builder& b, auto& p) { return cop::layer_norm(b, p[0], p[1], -1, 1e-5); });
      auto bwd = one_op_results({t[0], t[1], t[0]}, [&](ir::Builder& b, auto& p) {
        return cop::layer_norm_grad(b, p[0], p[1], p[2], 1e-5);
      });
      const std::vector<Array> in = {x32.astype(dt), w32.astype(dt)};
      Array y = run_all(fwd, in)[0];
      Array dx = run_all(bwd, {in[0], in[1], dy32.astype(dt)})[0];
      return std::pair{y, dx};
    };
    const auto [y64, dx64] = run(DType::f64);
    const auto [y32, dx32] = run(DType::f32);
    EXPECT_LE(normwise(y32, y64.to_doubles()), 1e-6);
    EXPECT_LE(normwise(dx32, dx64.to_doubles()), 1e-6);
    // RMSNorm's mean square, the same way.
    auto rms = [&](DType dt) {
      auto f = one_op({{dt, {1, D}}, {dt, {D}}}, [&](ir::Builder& b, auto& p) {
        return b.composite(ir::Op::rms_norm, {p[0], p[1]}, {1e-5})[0];
      });
      return run_all(f, {x32.astype(dt), w32.astype(dt)})[0];
    };
    EXPECT_LE(normwise(rms(DType::f32), rms(DType::f64).to_doubles()), 1e-6);
  }
}

}  // namespace
}  // namespace tlaloc::host_test
