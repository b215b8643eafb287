// GELU (tanh form; the gelu / gelu_grad composites for f32 / f64) through the rest of the
// pipeline: second derivatives at and near x = 0 against finite differences of the derivative's
// tanh form in long double, f64 finite differences of a Linear -> GELU -> Linear gradient with a
// pre-activation of exactly 0, nn::GELU on bf16 (plain ops, no composite) against the formula in
// double, the StableHLO round trip of a second derivative (composites expanded), constant
// folding of the composites and integer x.
#include "autodiff/harness.h"
#include "support/stablehlo_roundtrip.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/passes/passes.h"

using namespace tlaloc;
using namespace tlaloc::testing;
using trace::Tensor;

namespace {

// d/dx of the tanh form, 0.5(1 + t) + 0.5x(1 - t²)·√(2/π)(1 + 3·0.044715x²), in long double.
long double gelu_prime(long double x) {
  const long double c = std::sqrt(2.0L / 3.14159265358979323846L), a = 0.044715L;
  const long double t = std::tanh(c * (x + a * x * x * x));
  return 0.5L * (1 + t) + 0.5L * x * (1 - t * t) * c * (1 + 3 * a * x * x);
}

// gelu''(x) by central differences of gelu_prime (step 1e-5: error ~1e-11).
double gelu_second_fd(double x) {
  const long double h = 1e-5L;
  return double((gelu_prime(x + h) - gelu_prime(x - h)) / (2 * h));
}

int count_ops(const ir::Function& f, ir::Op op) {
  int n = 0;
  for (const ir::Node& node : f.nodes) n += node.op == op;
  return n;
}

ir::Function sum_gelu(DType dt, const Shape& s) {
  return trace::capture(
      [](std::span<const Tensor> t) {
        return std::vector<Tensor>{trace::sum(composites::gelu(t[0]))};
      },
      {{dt, s}});
}

// sum(gelu(x)·w) for x and w of type (dt, s).
ir::Function sum_gelu_times(DType dt, const Shape& s) {
  return trace::capture(
      [](std::span<const Tensor> t) {
        return std::vector<Tensor>{trace::sum(composites::gelu(t[0]) * t[1])};
      },
      {{dt, s}, {dt, s}});
}

// gelu''(x) as the vjp of grad(sum(gelu(x))) with cotangent 1, on the host lane and in the
// interpreter. Through gelu_grad's decomposition (q = 2y / x) it was half of gelu''(0) at
// x = 0 and |x| < 2^-60, and in f32 it lost every bit below |x| ~ 1e-6 (0, 1, 0.84 for 0.798).
TEST(GeluEdges, SecondDerivativeAtAndNearZero) {
  const std::vector<double> xs = {0,      -0.0, 1e-300, 1e-30, -1e-20, 1e-15, 1e-12,
                                  -1e-10, 1e-8, 1e-7,   -1e-6, 1e-5,   1e-4,  1e-3,
                                  0.01,   -0.3, 0.5,    -2,    3,      -5};
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(name(dt));
    const Shape s{int64_t(xs.size())};
    ir::Function f = sum_gelu(dt, s);
    ASSERT_EQ(count_ops(f, ir::Op::gelu), 1);
    ir::Function g = autodiff::grad(f, {0});
    ASSERT_EQ(count_ops(g, ir::Op::gelu_grad), 1);
    ir::Function h = autodiff::vjp(g, {0});
    std::vector<Array> in = {Array::from_doubles(dt, s, xs), Array::filled(dt, s, 1.0)};
    Array host = execute(h, in)[0], interp = passes::interpret(h, in)[0];
    // |gelu''| < 1; f32: 1 - t² at x = -5 is known to t's ulp only (~3e-6 of 1e-5)
    const double tol = dt == DType::f64 ? 1e-9 : 5e-6;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = gelu_second_fd(in[0].at(int64_t(i)));  // x as rounded to dt
      EXPECT_NEAR(host.at(int64_t(i)), want, tol) << "x = " << xs[i];
      EXPECT_NEAR(interp.at(int64_t(i)), want, tol) << "x = " << xs[i];
    }
  }
  // By hand: gelu''(0) = √(2/π) (u'(0), t(0) = 0).
  EXPECT_NEAR(gelu_second_fd(0), std::sqrt(2 / M_PI), 1e-10);
}

// Linear -> GELU -> Linear in f64, the first Linear's bias 0 and one input row 0, so that
// row's pre-activations are exactly 0: the gradient of sum(out²) w.r.t. the input and every
// parameter, then f64 finite differences of that gradient (second derivatives).
TEST(GeluEdges, SecondDerivativesThroughALinearGeluLinearWithZeroPreActivations) {
  nn::Sequential m;
  auto l1 = std::make_shared<nn::Linear>(3, 4, true, DType::f64);
  m.add(l1)
      .add(std::make_shared<nn::GELU>("tanh"))
      .add(std::make_shared<nn::Linear>(4, 2, true, DType::f64));
  std::vector<ir::TensorType> types = {{DType::f64, {3, 3}}};
  std::vector<Array> in = {f64({3, 3}, {0, 0, 0, 0.7, -1.2, 0.4, -0.3, 0.9, 1.5})};
  uint64_t seed = 20;
  for (auto& p : m.named_parameters()) {
    p.param->value = p.name == "0.bias" ? Array(DType::f64, p.param->value.shape())
                                        : uniform(p.param->value.shape(), ++seed, -1, 1);
    types.push_back({DType::f64, p.param->value.shape()});
    in.push_back(p.param->value);
  }
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> t) {
        m.bind(t.subspan(1));
        Tensor y = m(t[0]);
        return std::vector<Tensor>{trace::sum(y * y)};
      },
      types);
  ASSERT_EQ(count_ops(f, ir::Op::gelu), 1);
  std::vector<int> wrt;
  for (int i = 0; i < int(in.size()); ++i) wrt.push_back(i);
  expect_vjp_matches_fd(autodiff::grad(f, wrt), in, wrt, 1e-5, 1e-7);
}

// Third derivatives: the vjp of grad(sum(gelu(x)·w)) (gelu'' from gelu_grad's rule, gelu_grad
// again as d_y's cotangent) is itself differentiated and checked against f64 finite
// differences, x over both tails and near 0.
TEST(GeluEdges, ThirdDerivativesFd) {
  ir::Function f = sum_gelu_times(DType::f64, {2, 4});
  ir::Function h = autodiff::vjp(autodiff::grad(f, {0, 1}), {0, 1});
  std::vector<Array> in = {f64({2, 4}, {0, 1e-9, -0.2, 0.7, -1.5, 2.5, -4, 5}),
                           uniform({2, 4}, 41, 0.5, 1.5), uniform({2, 4}, 42, -1, 1),
                           uniform({2, 4}, 43, -1, 1)};
  expect_vjp_matches_fd(h, in, {0, 1, 2, 3}, 1e-5, 1e-7);
}

// bf16 x: trace::gelu emits the tanh form in plain ops (the composites take f32 / f64 only);
// nn::GELU in a bf16 Linear -> GELU model, its value and gradient against the formula in
// double on the same bf16 values (bf16 rounding: 8 bits).
TEST(GeluEdges, Bf16ModelUsesPlainOps) {
  nn::Sequential m;
  m.add(std::make_shared<nn::Linear>(4, 3, true, DType::bf16))
      .add(std::make_shared<nn::GELU>("tanh"));
  std::vector<ir::TensorType> types = {{DType::bf16, {2, 4}}};
  std::vector<Array> in = {uniform({2, 4}, 7, -2, 2).astype(DType::bf16)};
  uint64_t seed = 30;
  for (auto& p : m.named_parameters()) {
    p.param->value = uniform(p.param->value.shape(), ++seed, -1, 1).astype(DType::bf16);
    types.push_back({DType::bf16, p.param->value.shape()});
    in.push_back(p.param->value);
  }
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> t) {
        m.bind(t.subspan(1));
        return std::vector<Tensor>{trace::sum(m(t[0]))};
      },
      types);
  ir::Function vg = autodiff::value_and_grad(f, {0, 1, 2});
  EXPECT_EQ(count_ops(vg, ir::Op::gelu) + count_ops(vg, ir::Op::gelu_grad), 0);
  EXPECT_GT(count_ops(vg, ir::Op::tanh), 0);
  std::vector<Array> out = execute(vg, in);
  ASSERT_EQ(out.size(), 4u);
  // By hand in double: pre = x Wᵀ + b, loss = Σ gelu(pre), d pre = gelu'(pre).
  const Array &x = in[0], &w = in[1], &b = in[2];
  double loss = 0;
  std::vector<double> dx(8, 0), dw(12, 0), db(3, 0);
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 3; ++o) {
      double pre = b.at(o);
      for (int i = 0; i < 4; ++i) pre += x.at(r * 4 + i) * w.at(o * 4 + i);
      const double c = std::sqrt(2 / M_PI);
      loss += 0.5 * pre * (1 + std::tanh(c * (pre + 0.044715 * pre * pre * pre)));
      const double d = double(gelu_prime(pre));
      db[size_t(o)] += d;
      for (int i = 0; i < 4; ++i) {
        dx[size_t(r * 4 + i)] += d * w.at(o * 4 + i);
        dw[size_t(o * 4 + i)] += d * x.at(r * 4 + i);
      }
    }
  EXPECT_NEAR(out[0].at(0), loss, 0.03 * std::max(1.0, std::fabs(loss)));
  const std::vector<std::vector<double>*> want = {&dx, &dw, &db};
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_EQ(out[k + 1].dtype(), DType::bf16);
    for (size_t e = 0; e < want[k]->size(); ++e)
      EXPECT_NEAR(out[k + 1].at(int64_t(e)), (*want[k])[e], 0.03)
          << "grad " << k << " [" << e << "]";
  }
}

// The second derivative of sum(gelu(x)·w) (gelu and gelu_grad composites, the latter's VJP in
// plain ops) emitted as StableHLO: no tlaloc op left, parse -> run bitwise equal to the
// expanded function on the host lane.
TEST(GeluEdges, StablehloRoundTripOfASecondDerivative) {
  ir::Function f = sum_gelu_times(DType::f32, {3, 5});
  ir::Function h = autodiff::vjp(autodiff::grad(f, {0, 1}), {0, 1});
  EXPECT_GT(count_ops(h, ir::Op::gelu_grad), 0);
  std::vector<Array> in = sample_inputs(h, 4);
  in[0] = Array::from_doubles(DType::f32, {3, 5},
                              {0, -0.0, 1e-20, 1e-7, -1e-4, 0.5, -0.5, 1, -1, 2, -2, 3, -3, 6, -6});
  std::string text = expect_stablehlo_roundtrip(h, in);
  EXPECT_EQ(text.find("tlaloc.gelu"), std::string::npos);
  EXPECT_NE(text.find("stablehlo.tanh"), std::string::npos);
}

// Constant operands fold (passes::simplify evaluates the composites): gelu of x = [1, -1, 0]
// and gelu_grad(x, gelu(x), [1, 2, 4]), by hand in double: gelu(±1) = 0.5(1 ± tanh(1.044715·
// √(2/π))) · ±1, gelu(0) = 0; gelu'(x) as gelu_prime (gelu'(0) = 0.5).
TEST(GeluEdges, ConstantOperandsFold) {
  ir::Function f = trace::capture(
      [](std::span<const Tensor> t) {
        Tensor x = trace::constant(Array::from_doubles(DType::f64, {3}, {1, -1, 0}));
        Tensor dy = trace::constant(Array::from_doubles(DType::f64, {3}, {1, 2, 4}));
        ir::Builder& b = x.builder();
        Tensor y = composites::gelu(x);
        Tensor g{&b, cop::gelu_grad(b, x.id(), y.id(), dy.id())};
        return std::vector<Tensor>{y + t[0], g + t[0]};
      },
      {{DType::f64, {}}});
  ir::Function s = passes::simplify(f);
  for (const auto& n : s.nodes) EXPECT_FALSE(ir::is_composite(n.op)) << ir::op_name(n.op);
  const double c = std::sqrt(2 / M_PI), th = std::tanh(1.044715 * c);
  std::vector<Array> out = execute(s, {f64({}, {0})});
  const double y[] = {0.5 * (1 + th), -0.5 * (1 - th), 0};
  const double g[] = {double(gelu_prime(1)), 2 * double(gelu_prime(-1)), 4 * 0.5};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(out[0].at(i), y[i], 1e-15);
    EXPECT_NEAR(out[1].at(i), g[i], 1e-15);
  }
}

// Non-float x: trace::gelu (and nn::GELU) raise a tlaloc::Error naming gelu and x's type
// (was tanh's or multiply's error from inside the plain-op form).
TEST(GeluEdges, IntegerInputIsAnError) {
  for (DType dt : {DType::s32, DType::u32, DType::i1}) {
    SCOPED_TRACE(name(dt));
    std::string msg;
    try {
      trace::capture(
          [](std::span<const Tensor> t) {
            nn::GELU g("tanh");
            return std::vector<Tensor>{g(t[0])};
          },
          {{dt, {2, 3}}});
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("gelu"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string(name(dt)) + "[2,3]"), std::string::npos) << msg;
  }
}

}  // namespace
