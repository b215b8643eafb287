// Edge cases of the fused gelu / gelu_grad kernels against the composites' decomposition run by
// the IR interpreter (passes::interpret of passes::expand_composites): operands the host plan
// keeps as views (transpose, broadcast, slices), empty and rank-0 shapes, arrays long enough to
// be split between threads, f64 values at the ends of the range, and gelu_grad on a y that is
// not gelu(x) (random, 0, NaN, infinities) and a non-finite d_y. run_all also checks fused /
// unfused and 1 / 2 threads agree bitwise.
#include <cfloat>

#include "kernel_test_util.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

std::vector<double> oracle(const ir::Function& f, const std::vector<Array>& in, size_t k = 0) {
  return passes::interpret(passes::expand_composites(f), in)[k].to_doubles();
}

double tol_of(DType dt) { return dt == DType::f64 ? 1e-12 : 2e-6; }

// gelu(x) and gelu_grad(x, y, d_y) of the given values, against the decomposition.
void check(DType dt, const Shape& s, const std::vector<double>& x, const std::vector<double>& y,
           const std::vector<double>& dy) {
  SCOPED_TRACE(fmt::format("{} {}", name(dt), to_string(s)));
  const ir::TensorType t{dt, s};
  std::vector<Array> in = {Array::from_doubles(dt, s, x)};
  auto fwd = one_op({t}, [](ir::Builder& b, auto& p) { return cop::gelu(b, p[0]); });
  expect_values(run_all(fwd, in)[0], oracle(fwd, in), tol_of(dt));
  in.push_back(Array::from_doubles(dt, s, y));
  in.push_back(Array::from_doubles(dt, s, dy));
  auto bwd = one_op({t, t, t},
                    [](ir::Builder& b, auto& p) { return cop::gelu_grad(b, p[0], p[1], p[2]); });
  expect_values(run_all(bwd, in)[0], oracle(bwd, in), tol_of(dt));
}

void check(DType dt, const Shape& s, uint64_t seed) {
  const int64_t n = s.numel();
  check(dt, s, lcg_doubles(n, seed, -6, 6), lcg_doubles(n, seed + 1, -3, 6),
        lcg_doubles(n, seed + 2, -2, 2));
}

TEST(GeluEdges, EmptyRankZeroAndThreadSplitShapes) {
  for (DType dt : {DType::f64, DType::f32}) {
    check(dt, {0}, 1);
    check(dt, {3, 0, 4}, 2);
    check(dt, {}, 3);
    check(dt, {1}, 4);
    check(dt, {65}, 5);
    // past kParallelElements (8192): split between threads in parts of 64 elements, one short
    check(dt, {3, 8192 + 37}, 6);
    check(dt, {2, 3, 4, 5, 6, 7}, 7);
  }
}

// y that is not gelu(x): the result is the formula on the given y (q = 2y / x), NaN and
// infinite y and d_y included, x = 0 with any y (q = 1), tiny x at the 2^-60 switch.
TEST(GeluEdges, GradOfArbitraryYAndNonFiniteOperands) {
  const double nan = kNaN, inf = kInf, s = std::ldexp(1.0, -60);
  const std::vector<double> x = {1, -1, 2,   0,   -0.0, 0, s, -s, s / 2, 3,    -3, 4, 0.5,
                                 1, 1,  nan, inf, -inf, 1, 2, -2, 5,     1e-3, 7,  0, 1e-30};
  const std::vector<double> y = {5, -7, 0, 123, nan, inf,  s,     0,     -1, nan, inf, -inf, 0.5,
                                 1, 2,  0, inf, 0,   1e30, 1e-30, -1e30, 0,  -1,  7,   nan,  1e30};
  const std::vector<double> dy = {1,   2,    -1, 1, 1, 1, 1, 1, 1, 1, 1, 1,   nan,
                                  inf, -inf, 1,  1, 1, 1, 1, 1, 0, 1, 0, inf, 1};
  for (DType dt : {DType::f64, DType::f32}) check(dt, {int64_t(x.size())}, x, y, dy);
}

// f64 x at the ends of the range: DBL_MAX, 1e300 (x² overflows), 1e155 (x³ overflows),
// subnormals, the 2^-60 switch and its neighbours, and x where 1 + t rounds to 0 or 2.
TEST(GeluEdges, F64RangeEnds) {
  const double s = std::ldexp(1.0, -60);
  std::vector<double> x = {DBL_MAX,
                           -DBL_MAX,
                           1e300,
                           -1e300,
                           1e155,
                           -1e155,
                           1e103,
                           -1e103,
                           5e-324,
                           -5e-324,
                           2.2e-308,
                           s,
                           std::nextafter(s, 0),
                           std::nextafter(s, 1),
                           -s,
                           -19,
                           -20,
                           -27,
                           -40,
                           19,
                           40,
                           1e-8,
                           -1e-8};
  const int64_t n = int64_t(x.size());
  const ir::TensorType t{DType::f64, {n}};
  std::vector<Array> in = {Array::from_doubles(DType::f64, {n}, x)};
  auto fwd = one_op({t}, [](ir::Builder& b, auto& p) { return cop::gelu(b, p[0]); });
  Array y = run_all(fwd, in)[0];
  expect_values(y, oracle(fwd, in), 1e-12);
  check(DType::f64, {n}, x, y.to_doubles(), lcg_doubles(n, 9, 0.5, 2));
}

// Operands the host plan keeps as views: a transposed x, a broadcast y and a broadcast scalar
// d_y, a leading-row slice read in place at an offset, a column slice (copied).
TEST(GeluEdges, ViewOperands) {
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(name(dt));
    std::vector<Array> in = {lcg_array(dt, {6, 5}, 1, -4, 4), lcg_array(dt, {5}, 2, -1, 3),
                             lcg_array(dt, {}, 3, 0.5, 1.5)};
    ir::Builder b("views");
    std::vector<ir::ValueId> p;
    for (auto& a : in) p.push_back(b.parameter({a.dtype(), a.shape()}));
    ir::ValueId xt = b.transpose(p[0], {1, 0});              // [5, 6]
    ir::ValueId xs = b.slice(p[0], {2, 0}, {6, 5}, {1, 1});  // [4, 5], rows 2..5
    ir::ValueId xc = b.slice(p[0], {0, 1}, {6, 4}, {1, 1});  // [6, 3], columns
    ir::ValueId xr = b.slice(p[0], {0, 0}, {6, 5}, {2, 2});  // [3, 3], strided
    ir::ValueId yb = b.broadcast_in_dim(p[1], {4, 5}, {1});  // rows of y
    ir::ValueId yt = b.broadcast_in_dim(p[1], {5, 6}, {0});  // columns of y
    ir::ValueId d45 = b.broadcast_in_dim(p[2], {4, 5}, {});  // d_y of s·sum
    ir::ValueId d56 = b.broadcast_in_dim(p[2], {5, 6}, {});
    ir::ValueId gt = cop::gelu(b, xt), gs = cop::gelu(b, xs);
    ir::Function f = b.build({gt, gs, cop::gelu(b, xc), cop::gelu(b, xr),
                              cop::gelu_grad(b, xs, yb, d45), cop::gelu_grad(b, xt, gt, d56),
                              cop::gelu_grad(b, xt, yt, xt), cop::gelu_grad(b, xs, gs, xs)});
    std::vector<Array> got = run_all(f, in);
    std::vector<Array> want = passes::interpret(passes::expand_composites(f), in);
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE(i);
      expect_values(got[i], want[i].to_doubles(), tol_of(dt));
    }
  }
}

}  // namespace
}  // namespace tlaloc::host_test
