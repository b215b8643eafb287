// The transform's contract: errors, names, conventions at ties, leanness, second derivatives.
#include "harness.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/passes.h"

using namespace tlaloc;
using namespace tlaloc::testing;
using ir::Op;
using trace::Tensor;

namespace {

ir::Function capture1(const trace::TraceFn& fn, std::vector<ir::TensorType> in,
                      std::vector<std::string> in_names = {},
                      std::vector<std::string> out_names = {}) {
  return trace::capture(fn, in, std::move(in_names), std::move(out_names));
}

int count(const ir::Function& f, Op op) {
  int n = 0;
  for (auto& nd : f.nodes) n += nd.op == op;
  return n;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<double> grad_at(const ir::Function& f, const std::vector<Array>& x, int wrt) {
  return execute(autodiff::grad(f, {wrt}), x)[0].to_doubles();
}

}  // namespace

TEST(Autodiff, GradOfNonScalarOutputNamesItsType) {
  auto f = capture1([](std::span<const Tensor> a) { return std::vector<Tensor>{a[0] * a[0]}; },
                    {{DType::f64, {3}}});
  std::string m = error_of([&] { autodiff::grad(f, {0}); });
  EXPECT_NE(m.find("f64[3]"), std::string::npos) << m;
  EXPECT_NE(m.find("floating scalar"), std::string::npos) << m;
  auto fi =
      capture1([](std::span<const Tensor> a) { return std::vector<Tensor>{trace::sum(a[0])}; },
               {{DType::s32, {3}}});
  m = error_of([&] { autodiff::value_and_grad(fi, {0}); });
  EXPECT_NE(m.find("s32[]"), std::string::npos) << m;
}

TEST(Autodiff, WrtOutOfRangeNamesIndexAndCount) {
  auto f = capture1([](std::span<const Tensor> a) { return std::vector<Tensor>{trace::sum(a[0])}; },
                    {{DType::f64, {3}}});
  std::string m = error_of([&] { autodiff::grad(f, {0, 2}); });
  EXPECT_NE(m.find("wrt index 2"), std::string::npos) << m;
  EXPECT_NE(m.find("1 inputs"), std::string::npos) << m;
  m = error_of([&] { autodiff::vjp(f, {-1}); });
  EXPECT_NE(m.find("wrt index -1"), std::string::npos) << m;
}

TEST(Autodiff, IntegerAndComparisonOpsCarryNoCotangent) {
  // f(x, n) = sum(x * float(n*n + (n << 1) ^ iota) + |x|): n is s32, reached only through
  // integer ops, compare and select's pred.
  auto f = capture1(
      [](std::span<const Tensor> a) {
        Tensor n = a[1];
        Tensor k = (n * n + (n << trace::full_like(n, 1))) ^ trace::iota({3}, 0, DType::s32);
        Tensor w = trace::astype(k, DType::f64);
        Tensor y = a[0] * w + trace::where(a[0] > 0.0, a[0], -a[0]);
        return std::vector<Tensor>{trace::sum(y)};
      },
      {{DType::f64, {3}}, {DType::s32, {3}}});
  ir::Function g = autodiff::grad(f, {0, 1});
  EXPECT_EQ(g.output_type(1), (ir::TensorType{DType::s32, {3}}));
  std::vector<Array> x{f64({3}, {-0.5, 0.25, 2.0}), Array::from<int32_t>({3}, {1, -2, 3})};
  auto out = execute(g, x);
  // k = (n^2 + 2n) ^ iota = (3 ^ 0, 0 ^ 1, 15 ^ 2) = (3, 1, 13); d|x|/dx = sign(x).
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{3 - 1, 1 + 1, 13 + 1}));
  EXPECT_EQ(out[1].to_doubles(), (std::vector<double>{0, 0, 0}));
}

TEST(Autodiff, UninfluentialInputGetsZeros) {
  auto f = capture1([](std::span<const Tensor> a) { return std::vector<Tensor>{trace::sum(a[0])}; },
                    {{DType::f64, {2}}, {DType::f32, {2, 2}}});
  ir::Function g = autodiff::grad(f, {1});
  auto out = execute(g, {f64({2}, {1, 2}), Array(DType::f32, {2, 2})});
  EXPECT_EQ(out[0].dtype(), DType::f32);
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_LE(g.num_ops(), 2);  // a zero constant and its broadcast, nothing else
}

TEST(Autodiff, ValueAndGradKeepsNamesAndOrder) {
  auto f = capture1(
      [](std::span<const Tensor> a) {
        Tensor pred = trace::matmul(a[0], a[1]) + a[2];
        return std::vector<Tensor>{trace::sum(trace::square(pred)), pred};
      },
      {{DType::f64, {1, 2}}, {DType::f64, {2, 1}}, {DType::f64, {1}}}, {"x", "w", "b"},
      {"loss", "pred"});
  ir::Function g = autodiff::value_and_grad(f, {1, 2});
  EXPECT_EQ(g.input_names, (std::vector<std::string>{"x", "w", "b"}));
  EXPECT_EQ(g.output_names, (std::vector<std::string>{"loss", "pred", "grad.w", "grad.b"}));
  auto out = execute(g, {f64({1, 2}, {1, 2}), f64({2, 1}, {3, 4}), f64({1}, {0.5})});
  // pred = 1*3 + 2*4 + 0.5 = 11.5; loss = pred^2; dloss/dw = 2 pred x; dloss/db = 2 pred.
  EXPECT_EQ(out[0].to_doubles()[0], 11.5 * 11.5);
  EXPECT_EQ(out[1].to_doubles()[0], 11.5);
  EXPECT_EQ(out[2].to_doubles(), (std::vector<double>{23, 46}));
  EXPECT_EQ(out[3].to_doubles(), (std::vector<double>{23}));
  ir::Function gr = autodiff::grad(f, {0});
  EXPECT_EQ(gr.output_names, (std::vector<std::string>{"grad.x"}));
  EXPECT_EQ(gr.num_outputs(), 1);
}

TEST(Autodiff, ConventionsAtNonDifferentiablePoints) {
  std::vector<Array> x{f64({5}, {-1, 0, 2, 2, 0.5})};
  ir::TensorType t{DType::f64, {5}};
  auto g = [&](Tensor (*h)(const Tensor&)) {
    auto f = capture1(
        [h](std::span<const Tensor> a) { return std::vector<Tensor>{trace::sum(h(a[0]))}; }, {t});
    return grad_at(f, x, 0);
  };
  EXPECT_EQ(g(trace::relu), (std::vector<double>{0, 0, 1, 1, 1}));  // relu'(0) = 0
  // torch.relu at NaN, ±0 and ±inf (torch 1.13: relu(x), and its gradient for a cotangent of 3):
  // x    NaN  -0   +0   1  -1  inf  -inf
  // y    NaN  -0   +0   1  +0  inf  +0     (tlaloc: +0 for -0, as trace/tensor.h says)
  // dx   3    0    0    3  0   3    0
  {
    const double nan = std::nan("");
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<Array> xs{f64({7}, {nan, -0.0, 0.0, 1, -1, inf, -inf})};
    ir::TensorType t7{DType::f64, {7}};
    auto y = capture1(
        [](std::span<const Tensor> a) { return std::vector<Tensor>{trace::relu(a[0])}; }, {t7});
    const double want[] = {nan, 0.0, 0.0, 1, 0.0, inf, 0.0};
    for (const Array& out : {execute(y, xs)[0], runtime::host::compile(y)->run(xs)[0]})
      for (int i = 0; i < 7; ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(out.at(i))) << i;
          continue;
        }
        EXPECT_EQ(out.at(i), want[i]) << i;
        EXPECT_EQ(std::signbit(out.at(i)), std::signbit(want[i])) << i;
      }
    auto s3 = capture1(
        [](std::span<const Tensor> a) {
          return std::vector<Tensor>{trace::sum(trace::relu(a[0]) * 3.0)};
        },
        {t7});
    auto d = grad_at(s3, xs, 0);
    EXPECT_EQ(d, (std::vector<double>{3, 0, 0, 3, 0, 3, 0}));
  }
  EXPECT_EQ(g(trace::abs), (std::vector<double>{-1, 0, 1, 1, 1}));  // abs'(0) = 0
  EXPECT_EQ(g(trace::sign), (std::vector<double>{0, 0, 0, 0, 0}));
  // reduce max / min: ties split equally.
  auto mx = capture1(
      [](std::span<const Tensor> a) { return std::vector<Tensor>{trace::max(a[0])}; }, {t});
  EXPECT_EQ(grad_at(mx, x, 0), (std::vector<double>{0, 0, 0.5, 0.5, 0}));
  auto mn = capture1(
      [](std::span<const Tensor> a) { return std::vector<Tensor>{trace::min(a[0])}; }, {t});
  EXPECT_EQ(grad_at(mn, x, 0), (std::vector<double>{1, 0, 0, 0, 0}));
  // maximum / minimum: half each at a tie.
  std::vector<Array> xy{f64({3}, {1, 2, 3}), f64({3}, {1, 5, 0})};
  for (Op op : {Op::maximum, Op::minimum}) {
    auto f = capture1(
        [op](std::span<const Tensor> a) {
          ir::Builder& b = a[0].builder();
          return std::vector<Tensor>{trace::sum(Tensor(&b, b.binary(op, a[0].id(), a[1].id())))};
        },
        {{DType::f64, {3}}, {DType::f64, {3}}});
    auto out = execute(autodiff::grad(f, {0, 1}), xy);
    bool m = op == Op::maximum;
    EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{0.5, m ? 0.0 : 1.0, m ? 1.0 : 0.0}));
    EXPECT_EQ(out[1].to_doubles(), (std::vector<double>{0.5, m ? 1.0 : 0.0, m ? 0.0 : 1.0}));
  }
  // clamp: ties at lo and hi go to x; below lo to lo, above hi to hi.
  auto cl = capture1(
      [](std::span<const Tensor> a) {
        ir::Builder& b = a[0].builder();
        return std::vector<Tensor>{
            trace::sum(Tensor(&b, b.clamp(a[1].id(), a[0].id(), a[2].id())))};
      },
      {t, {DType::f64, {}}, {DType::f64, {}}});
  auto out = execute(autodiff::grad(cl, {0, 1, 2}), {x[0], f64({}, {0}), f64({}, {2})});
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{0, 1, 1, 1, 1}));
  EXPECT_EQ(out[1].to_doubles(), (std::vector<double>{1}));
  EXPECT_EQ(out[2].to_doubles(), (std::vector<double>{0}));
}

TEST(Autodiff, GeneratedCodeIsLean) {
  // d/dw sum(x * w) = x: a splat of 1 times x, no accumulation, no reduce.
  auto f = capture1(
      [](std::span<const Tensor> a) { return std::vector<Tensor>{trace::sum(a[0] * a[1])}; },
      {{DType::f32, {4}}, {DType::f32, {4}}});
  ir::Function g = autodiff::grad(f, {1});
  EXPECT_EQ(count(g, Op::add), 0) << ir::print(g);
  EXPECT_EQ(count(g, Op::reduce), 0) << ir::print(g);
  EXPECT_LE(g.num_ops(), 3) << ir::print(g);
  // Matmul gradients fold the transposes into dot_general's dimension numbers.
  auto m = capture1(
      [](std::span<const Tensor> a) {
        return std::vector<Tensor>{trace::sum(trace::matmul(a[0], a[1]))};
      },
      {{DType::f32, {2, 3}}, {DType::f32, {3, 4}}});
  ir::Function gm = autodiff::grad(m, {0, 1});
  EXPECT_EQ(count(gm, Op::transpose), 0) << ir::print(gm);
  EXPECT_EQ(count(gm, Op::dot_general), 2) << ir::print(gm);
  // Fan-out: one use per path, summed with add.
  auto fan = capture1(
      [](std::span<const Tensor> a) {
        return std::vector<Tensor>{trace::sum(trace::exp(a[0]) + a[0] * 3.0 + a[0])};
      },
      {{DType::f64, {2}}});
  auto out = execute(autodiff::grad(fan, {0}), {f64({2}, {0, 1})});
  EXPECT_NEAR(out[0].at(0), 1 + 3 + 1, 1e-15);
  EXPECT_NEAR(out[0].at(1), std::exp(1.0) + 3 + 1, 1e-15);
}

TEST(Autodiff, SecondDerivativeOfTanhCubed) {
  // f(x) = sum(tanh(x)^3), f'(x) = 3 t^2 (1 - t^2), f''(x) = (6 t - 12 t^3)(1 - t^2) with
  // t = tanh(x) (hand computation); the Hessian is diagonal, so vjp(f', v) = f''(x) v.
  auto f = capture1(
      [](std::span<const Tensor> a) {
        Tensor t = trace::tanh(a[0]);
        return std::vector<Tensor>{trace::sum(t * t * t)};
      },
      {{DType::f64, {4}}});
  ir::Function g = autodiff::grad(f, {0});
  ir::Function h = autodiff::vjp(g, {0});
  Array x = f64({4}, {-1.5, -0.2, 0.3, 1.1}), v = f64({4}, {1, 2, -1, 0.5});
  auto hv = execute(h, {x, v})[0];
  for (int64_t i = 0; i < 4; ++i) {
    double t = std::tanh(x.at(i));
    EXPECT_NEAR(hv.at(i), (6 * t - 12 * t * t * t) * (1 - t * t) * v.at(i), 1e-14);
  }
  // And against f64 finite differences of the gradient function.
  expect_vjp_matches_fd(g, {x}, {0});
}

TEST(Autodiff, HessianVectorProductOfAnMlpMatchesFiniteDifferences) {
  // Cross-entropy of a 2-layer tanh MLP: second derivatives through dot_general, broadcast,
  // log_softmax (reduce max, exp, log, select) and gather.
  auto f = capture1(
      [](std::span<const Tensor> a) {
        Tensor h = trace::tanh(trace::matmul(a[0], a[1]) + a[2]);
        Tensor logits = trace::matmul(h, a[3]);
        Tensor lp = trace::log_softmax(logits);
        Tensor picked = lp * trace::one_hot(a[4], 3, DType::f64);
        return std::vector<Tensor>{-trace::mean(trace::sum(picked, {1}))};
      },
      {{DType::f64, {4, 2}},
       {DType::f64, {2, 3}},
       {DType::f64, {3}},
       {DType::f64, {3, 3}},
       {DType::s32, {4}}});
  std::vector<Array> x{uniform({4, 2}, 1), uniform({2, 3}, 2), uniform({3}, 3), uniform({3, 3}, 4),
                       Array::from<int32_t>({4}, {0, 2, 1, 2})};
  expect_vjp_matches_fd(f, x, {1, 2, 3});
  ir::Function g = autodiff::grad(f, {1, 2, 3});
  expect_vjp_matches_fd(g, x, {1, 2, 3});  // Hessian-vector products
}

TEST(Autodiff, F32GradientAgreesWithF64) {
  auto mk = [](DType t) {
    return capture1(
        [](std::span<const Tensor> a) {
          return std::vector<Tensor>{
              trace::mean(trace::square(composites::gelu(trace::matmul(a[0], a[1]))))};
        },
        {{t, {3, 2}}, {t, {2, 2}}});
  };
  std::vector<Array> x{uniform({3, 2}, 5), uniform({2, 2}, 6)};
  auto g64 = execute(autodiff::grad(mk(DType::f64), {1}), x)[0];
  auto g32 = execute(autodiff::grad(mk(DType::f32), {1}),
                     {x[0].astype(DType::f32), x[1].astype(DType::f32)})[0];
  ASSERT_EQ(g32.dtype(), DType::f32);
  for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(g32.at(i), g64.at(i), 1e-6);
}

TEST(Autodiff, GradientOfSimplifiedFunctionIsUnchanged) {
  // simplify() must not change values: the gradient before and after agrees exactly here.
  auto f = capture1(
      [](std::span<const Tensor> a) {
        return std::vector<Tensor>{trace::sum(trace::softmax(a[0]) * 2.0)};
      },
      {{DType::f64, {2, 3}}});
  ir::Function g = autodiff::grad(f, {0});
  ir::Function s = passes::simplify(g);
  EXPECT_LE(s.num_ops(), g.num_ops());
  Array x = uniform({2, 3}, 7);
  auto a = execute(g, {x})[0].to_doubles(), b = execute(s, {x})[0].to_doubles();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-15);
}
