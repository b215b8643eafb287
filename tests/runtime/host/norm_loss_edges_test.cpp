// Edge cases of the fused layer_norm / cross_entropy kernels against the composites'
// decomposition interpreted in f64 (passes::interpret of passes::expand_composites on the inputs
// converted to f64): empty and one-element dims, rank 4, long rows, non-finite values, huge and
// zero epsilon, labels far outside [0, C). run_all also checks fused / unfused and 1 / 2
// threads agree bitwise.
#include <climits>

#include "kernel_test_util.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

// f's decomposition interpreted on `in` converted to f64 (s32 stays): the oracle.
std::vector<double> oracle(const ir::Function& f, const std::vector<Array>& in) {
  std::vector<ir::TensorType> types;
  std::vector<Array> in64;
  for (const Array& a : in) {
    DType t = is_floating(a.dtype()) ? DType::f64 : a.dtype();
    types.push_back({t, a.shape()});
    in64.push_back(t == a.dtype() ? a : Array::from_doubles(t, a.shape(), a.to_doubles()));
  }
  ir::Builder b("oracle");
  std::vector<ir::ValueId> p;
  for (auto& t : types) p.push_back(b.parameter(t));
  for (const ir::Node& n : f.nodes)
    if (ir::is_composite(n.op))
      return flat(passes::interpret(
          passes::expand_composites(b.build(b.composite(n.op, p, n.attrs.params))), in64));
  fail("oracle: {} has no composite", f.name);
}

void check_ln(DType dt, Shape xs, std::vector<double> x, std::vector<double> w,
              std::optional<std::vector<double>> bias, double eps, double tol) {
  SCOPED_TRACE(fmt::format("layer_norm {} x {} eps {}", name(dt), to_string(xs), eps));
  const int64_t D = xs[xs.rank() - 1];
  std::vector<Array> in = {Array::from_doubles(dt, xs, x), Array::from_doubles(dt, {D}, w)};
  if (bias) in.push_back(Array::from_doubles(dt, {D}, *bias));
  std::vector<ir::TensorType> types;
  for (auto& a : in) types.push_back({a.dtype(), a.shape()});
  auto fwd = one_op(types, [&](ir::Builder& b, auto& p) {
    return cop::layer_norm(b, p[0], p[1], bias ? p[2] : -1, eps);
  });
  expect_values(run_all(fwd, in)[0], oracle(fwd, in), tol);
  std::vector<Array> gin = {in[0], in[1],
                            Array::from_doubles(dt, xs, lcg_doubles(xs.numel(), 7, -1, 1))};
  auto bwd = one_op_results({types[0], types[1], types[0]}, [&](ir::Builder& b, auto& p) {
    return cop::layer_norm_grad(b, p[0], p[1], p[2], eps);
  });
  const std::vector<double> got = flat(run_all(bwd, gin));
  expect_values(Array::from_doubles(DType::f64, {int64_t(got.size())}, got), oracle(bwd, gin), tol);
}

void check_ln(DType dt, Shape xs, double eps = 1e-5, double tol = -1) {
  const int64_t D = xs[xs.rank() - 1];
  if (tol < 0) tol = dt == DType::f64 ? 1e-12 : 5e-5;
  check_ln(dt, xs, lcg_doubles(xs.numel(), 1, -3, 5), lcg_doubles(D, 2, 0.5, 1.5),
           lcg_doubles(D, 3, -1, 1), eps, tol);
  check_ln(dt, xs, lcg_doubles(xs.numel(), 4, -3, 5), lcg_doubles(D, 5, 0.5, 1.5), std::nullopt,
           eps, tol);
}

TEST(NormLossEdges, LayerNormDegenerateShapes) {
  for (DType dt : {DType::f64, DType::f32}) {
    check_ln(dt, {0, 8});
    check_ln(dt, {4, 0});
    check_ln(dt, {0});
    check_ln(dt, {5, 1});
    check_ln(dt, {1});
    check_ln(dt, {2, 3, 4, 5});
    check_ln(dt, {17, 3});
    check_ln(dt, {33, 8});
    check_ln(dt, {3, 5000});
  }
}

TEST(NormLossEdges, LayerNormNonFiniteAndEpsilon) {
  const double inf = kInf, nan = kNaN;
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 5e-5;
    // rows: a NaN, a +inf, a -inf, a finite row
    std::vector<double> x = {1, nan, 3, 4, 1, inf, 3, 4, -inf, 2, 3, 4, 1, 2, 3, 5};
    check_ln(dt, {4, 4}, x, {1, 2, 3, 4}, std::vector<double>{0, 1, 0, 1}, 1e-5, tol);
    check_ln(dt, {4, 4}, lcg_doubles(16, 3, -1, 1), {1, nan, inf, -inf}, std::nullopt, 1e-5, tol);
    check_ln(dt, {3, 6}, lcg_doubles(18, 4, -1, 1), lcg_doubles(6, 5, 0, 1), std::nullopt, 1e30,
             tol);
    // eps 0 and a constant row: variance 0, rstd inf, 0·inf = NaN as the decomposition
    check_ln(dt, {2, 4}, {2, 2, 2, 2, 1, 2, 3, 4}, {1, 1, 1, 1}, std::nullopt, 0, tol);
    check_ln(dt, {2, 4}, {2, 2, 2, 2, 1, 2, 3, 4}, {1, 1, 1, 1}, std::nullopt, 1e-5, tol);
  }
}

// f32 rows of mean 40000 and noise in [-1, 1) against the f64 decomposition of the same f32
// inputs: x - mean is exact in f32 once the mean is, so the kernel's error stays at f32 rounding
// of the result. (A mean summed in f32 and left uncorrected was off by up to 0.03·std at
// D = 5000, and y with it.)
TEST(NormLossEdges, LayerNormLargeMeanF32) {
  for (int64_t D : {4, 64, 768, 5000}) {
    SCOPED_TRACE(D);
    std::vector<double> x = lcg_doubles(3 * D, uint64_t(D), -1, 1);
    for (auto& v : x) v = double(float(40000 + v));
    check_ln(DType::f32, {3, D}, x, lcg_doubles(D, 2, 0.5, 1.5), lcg_doubles(D, 3, -1, 1), 1e-5,
             2e-5);
  }
}

// An f64 row of mean ~1e9 (x_k = 1e9 + 0.3·k rounded to f64, k < 7), eps 0: y from the exact
// rational mean and variance of those doubles (Python fractions), only the final quotient
// rounded. A centring by the f64 mean alone is off by 2.8e-8 here; the kernel and the
// decomposition both centre again by the mean of the centred values.
TEST(NormLossEdges, LayerNormLargeMeanF64AgainstExactValues) {
  std::vector<double> x;
  for (int k = 0; k < 7; ++k) x.push_back(1e9 + k * 0.3);
  const std::vector<double> want = {-1.4999999929042067,   -1.000000070957909, -0.4999999503294618,
                                    -2.83831642593178e-08, 0.5000000922452832, 1.0000000141915808,
                                    1.4999999361378784};
  std::vector<Array> in = {Array::from_doubles(DType::f64, {1, 7}, x),
                           Array::filled(DType::f64, {7}, 1.0)};
  auto fwd = one_op({{DType::f64, {1, 7}}, {DType::f64, {7}}},
                    [](ir::Builder& b, auto& p) { return cop::layer_norm(b, p[0], p[1], -1, 0); });
  expect_values(run_all(fwd, in)[0], want, 1e-14);
  expect_values(passes::interpret(passes::expand_composites(fwd), in)[0], want, 1e-14);
}

// The decomposition (the GPU lane's layer_norm) interpreted in f32 against statistics computed
// here in long double from the published formula. Rows: mean 40000 with noise (the second
// pass's correction keeps the centred values exact), a first value 1000 above the other values'
// O(1) noise (where a shift by the first value lost ~10 bits of the variance) and a constant
// row with one spike. y = (x - mean) / sqrt(var + eps), weight 1.
TEST(NormLossEdges, LayerNormDecompositionInF32AgainstLongDouble) {
  const int64_t D = 768;
  const double eps = 1e-5;
  std::vector<double> x = lcg_doubles(3 * D, 11, -1, 1);
  for (int64_t i = 0; i < D; ++i) x[size_t(i)] = double(float(40000 + x[size_t(i)]));
  x[size_t(D)] = 1000;
  for (int64_t i = 2 * D; i < 3 * D; ++i) x[size_t(i)] = i == 2 * D + 5 ? 7 : 2;
  std::vector<double> want;
  for (int64_t r = 0; r < 3; ++r) {
    long double m = 0, v = 0;
    for (int64_t i = 0; i < D; ++i) m += x[size_t(r * D + i)];
    m /= D;
    for (int64_t i = 0; i < D; ++i) v += (x[size_t(r * D + i)] - m) * (x[size_t(r * D + i)] - m);
    v /= D;
    for (int64_t i = 0; i < D; ++i)
      want.push_back(double((x[size_t(r * D + i)] - m) / std::sqrt(v + eps)));
  }
  std::vector<Array> in = {Array::from_doubles(DType::f32, {3, D}, x),
                           Array::filled(DType::f32, {D}, 1.0)};
  auto fwd = one_op({{DType::f32, {3, D}}, {DType::f32, {D}}}, [&](ir::Builder& b, auto& p) {
    return cop::layer_norm(b, p[0], p[1], -1, eps);
  });
  const std::vector<double> got =
      passes::interpret(passes::expand_composites(fwd), in)[0].to_doubles();
  for (size_t i = 0; i < want.size(); ++i)  // f32 rounding of |y| up to 27.7
    ASSERT_NEAR(got[i], want[i], 1e-5) << "row " << i / size_t(D) << " col " << i % size_t(D);
}

// The decomposition's reductions are two deep (the mean, then the centred values' mean and mean
// square from one pass), one more in the gradient (mean(g) and mean(g·xhat) beside d_weight and
// d_bias): XLA runs each level as one kernel. The thrice-centred form was 3 and 4 deep.
TEST(NormLossEdges, LayerNormDecompositionReductionDepth) {
  const ir::TensorType xt{DType::f32, {4, 16}}, wt{DType::f32, {16}};
  auto fwd = one_op({xt, wt, wt}, [](ir::Builder& b, auto& p) {
    return cop::layer_norm(b, p[0], p[1], p[2], 1e-5);
  });
  auto bwd = one_op_results({xt, wt, xt}, [](ir::Builder& b, auto& p) {
    return cop::layer_norm_grad(b, p[0], p[1], p[2], 1e-5);
  });
  auto depth = [](const ir::Function& f) {  // the longest chain of reductions
    std::vector<int> d(f.nodes.size(), 0);
    int most = 0;
    for (size_t i = 0; i < f.nodes.size(); ++i) {
      for (ir::ValueId o : f.nodes[i].operands) d[i] = std::max(d[i], d[size_t(o)]);
      if (f.nodes[i].op == ir::Op::reduce) most = std::max(most, ++d[i]);
    }
    return most;
  };
  EXPECT_EQ(depth(passes::expand_composites(fwd)), 2);
  EXPECT_EQ(depth(passes::expand_composites(bwd)), 3);
}

void check_ce(DType dt, int64_t N, int64_t C, std::vector<double> x, std::vector<int32_t> labels,
              double tol) {
  SCOPED_TRACE(fmt::format("cross_entropy {} [{}, {}]", name(dt), N, C));
  std::vector<Array> in = {Array::from_doubles(dt, {N, C}, x), Array::from(Shape{N}, labels)};
  auto fwd = one_op({{dt, {N, C}}, {DType::s32, {N}}},
                    [](ir::Builder& b, auto& p) { return cop::cross_entropy(b, p[0], p[1]); });
  expect_values(run_all(fwd, in)[0], oracle(fwd, in), tol);
  const std::vector<Array> loss = run_all(fwd, in);
  in.push_back(Array::from_doubles(dt, {N}, lcg_doubles(N, 9, 0.5, 2)));
  auto bwd =
      one_op_results({{dt, {N, C}}, {DType::s32, {N}}, {dt, {N}}}, [](ir::Builder& b, auto& p) {
        return b.composite(ir::Op::cross_entropy_grad, {p[0], p[1], p[2]});
      });
  const std::vector<Array> got = run_all(bwd, in);
  expect_values(Array::from_doubles(DType::f64, {N * C + N}, flat(got)), oracle(bwd, in), tol);
  // The gradient's second result is the forward's loss, bit for bit (passes::simplify reads it
  // instead of the forward's).
  expect_values(got[1], loss[0].to_doubles(), 0);
}

std::vector<int32_t> labels(int64_t N, int64_t C) {
  std::vector<int32_t> l;
  for (int64_t r = 0; r < N; ++r) l.push_back(C ? int32_t((r * 7 + 3) % C) : 0);
  return l;
}

TEST(NormLossEdges, CrossEntropyDegenerateShapes) {
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 5e-5;
    for (auto [N, C] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 5}, {3, 0}, {4, 1}, {1, 1}, {3, 5000}, {33, 17}})
      check_ce(dt, N, C, lcg_doubles(N * C, uint64_t(N + C), -4, 4), labels(N, C), tol);
  }
}

TEST(NormLossEdges, CrossEntropyExtremeValuesAndLabels) {
  const double inf = kInf;
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-12 : 5e-5;
    std::vector<double> x = {1e30, -1e30, 0,    1, 1e30, 1e30,  -1e30, -inf,  -inf,  0,
                             -inf, 5,     -inf, 2, 3,    -1e30, -1e30, -1e30, -1e30, -1e30,
                             inf,  0,     1,    2, 3,    1,     2,     3,     4,     5};
    check_ce(dt, 6, 5, x, {0, 1, 1, 2, 0, 0}, tol);
    check_ce(dt, 6, 5, lcg_doubles(30, 3, -2, 2), {-1, 5, INT_MAX, INT_MIN, -5, 4}, tol);
  }
}

// A label outside [0, C) makes the row's loss the constant -0, so its gradient is 0 (+0, by
// hand), NaN logits included; in-range rows are d_loss · (softmax - one_hot): softmax of
// [0, log 3] is [1/4, 3/4].
TEST(NormLossEdges, CrossEntropyGradOfAnOutOfRangeLabelIsZero) {
  const double l3 = std::log(3.0);
  for (DType dt : {DType::f64, DType::f32}) {
    std::vector<Array> in = {Array::from_doubles(dt, {4, 2}, {0, l3, 0, l3, kNaN, 1, 0, l3}),
                             Array::from(Shape{4}, std::vector<int32_t>{-1, 2, INT_MAX, 1}),
                             Array::from_doubles(dt, {4}, {1, 2, 3, 2})};
    auto bwd = one_op({{dt, {4, 2}}, {DType::s32, {4}}, {dt, {4}}}, [](ir::Builder& b, auto& p) {
      return cop::cross_entropy_grad(b, p[0], p[1], p[2]);
    });
    const std::vector<double> want = {0, 0, 0, 0, 0, 0, 2 * 0.25, 2 * (0.75 - 1)};
    Array g = run_all(bwd, in)[0];
    expect_values(g, want, dt == DType::f64 ? 1e-15 : 5e-7);
    for (int64_t i = 0; i < 6; ++i) EXPECT_FALSE(std::signbit(g.at(i))) << "element " << i;
  }
}

// Operands that the host plan keeps as views (transpose, a column slice, a broadcast scalar
// d_y / d_loss, a leading-row slice read in place): the kernels read them as dense rows.
TEST(NormLossEdges, ViewOperands) {
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(name(dt));
    const double tol = dt == DType::f64 ? 1e-12 : 5e-5;
    std::vector<Array> in = {lcg_array(dt, {6, 5}, 1, -2, 2), lcg_array(dt, {6}, 2, 0.5, 1.5),
                             lcg_array(dt, {}, 3, 0.5, 1.5),
                             Array::from(Shape{4}, std::vector<int32_t>{0, 3, 1, 2})};
    ir::Builder b("views");
    std::vector<ir::ValueId> p;
    for (auto& a : in) p.push_back(b.parameter({a.dtype(), a.shape()}));
    ir::ValueId xt = b.transpose(p[0], {1, 0});              // [5, 6]
    ir::ValueId xs = b.slice(p[0], {1, 0}, {5, 5}, {1, 1});  // [4, 5], leading rows dropped
    ir::ValueId xc = b.slice(p[0], {0, 1}, {4, 5}, {1, 1});  // [4, 4], columns
    ir::ValueId dy = b.broadcast_in_dim(p[2], {5, 6}, {});   // d_y of sum(y)·s
    ir::ValueId dl = b.broadcast_in_dim(p[2], {4}, {});
    std::vector<ir::ValueId> outs{cop::layer_norm(b, xt, p[1], -1, 1e-5)};
    for (ir::ValueId g : cop::layer_norm_grad(b, xt, p[1], dy, 1e-5)) outs.push_back(g);
    outs.push_back(cop::cross_entropy(b, xs, p[3]));
    outs.push_back(cop::cross_entropy_grad(b, xc, p[3], dl));
    ir::Function f = b.build(outs);
    std::vector<Array> got = run_all(f, in);
    std::vector<Array> want = passes::interpret(passes::expand_composites(f), in);
    for (size_t i = 0; i < got.size(); ++i) expect_values(got[i], want[i].to_doubles(), tol);
  }
}

}  // namespace
}  // namespace tlaloc::host_test
