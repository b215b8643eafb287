// The fused gelu kernels against the composites' decomposition run by the IR interpreter (the
// composite's meaning), f64 and f32, on a grid over [-12, 12] (tanh's small-argument and
// exponential branches, both tails of 1 + t) plus 0, -0, tiny and subnormal x, large |x|,
// infinities and NaN; the f32 forward is also bitwise the decomposition run by the host's
// unfused loops. run_all checks fused / unfused and 1 / 2 threads agree bitwise.
#include "kernel_test_util.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

std::vector<double> grid() {
  std::vector<double> x = lcg_doubles(4000, 11, -12, 12);
  for (double v :
       {0.0, -0.0, 1e-30, -1e-30, 1e-45, 3e-39, 1e-19, -10.0, -20.0, 1e4, -1e4, kInf, -kInf, kNaN})
    x.push_back(v);
  return x;
}

void check(DType dt, double tol) {
  SCOPED_TRACE(name(dt));
  const std::vector<double> xs = grid();
  const Shape s{int64_t(xs.size())};
  const ir::TensorType t{dt, s};
  std::vector<Array> in = {Array::from_doubles(dt, s, xs)};
  auto fwd = one_op({t}, [](ir::Builder& b, auto& p) { return cop::gelu(b, p[0]); });
  Array y = run_all(fwd, in)[0];
  const ir::Function plain = passes::expand_composites(fwd);
  expect_values(y, passes::interpret(plain, in)[0].to_doubles(), tol);
  if (dt == DType::f32) expect_values(y, run_all(plain, in)[0].to_doubles(), 0);

  std::vector<Array> gin = {in[0], y, lcg_array(dt, s, 12, -2, 2)};
  auto bwd = one_op({t, t, t},
                    [](ir::Builder& b, auto& p) { return cop::gelu_grad(b, p[0], p[1], p[2]); });
  expect_values(run_all(bwd, gin)[0],
                passes::interpret(passes::expand_composites(bwd), gin)[0].to_doubles(), tol);
}

KERNEL_TEST(gelu, grid_and_edges) {
  check(DType::f64, 1e-12);
  check(DType::f32, 2e-6);
}

// gelu_grad from y = gelu(x) against the tanh form of the derivative in double,
// 0.5(1 + t) + 0.5x(1 - t²)·√(2/π)(1 + 3·0.044715x²), over [-8, 8] in f64 and f32 (f32: to the
// rounding of y, whose 1 + t loses digits where t nears -1, relative to max(1, |d_x|)).
KERNEL_TEST(gelu_grad, matches_the_tanh_form) {
  const std::vector<double> xs = lcg_doubles(2000, 13, -8, 8);
  const double c = std::sqrt(2 / M_PI), k = 0.044715;
  std::vector<double> want;
  for (double x : xs) {
    const double t = std::tanh(c * (x + k * x * x * x));
    want.push_back(0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * k * x * x));
  }
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(name(dt));
    const Shape s{int64_t(xs.size())};
    const ir::TensorType t{dt, s};
    Array x = Array::from_doubles(dt, s, xs);
    Array y =
        run_all(one_op({t}, [](ir::Builder& b, auto& p) { return cop::gelu(b, p[0]); }), {x})[0];
    auto bwd = one_op({t, t, t},
                      [](ir::Builder& b, auto& p) { return cop::gelu_grad(b, p[0], p[1], p[2]); });
    expect_values(run_all(bwd, {x, y, Array::filled(dt, s, 1.0)})[0], want,
                  dt == DType::f64 ? 1e-12 : 2e-5);
  }
}

}  // namespace
}  // namespace tlaloc::host_test
