// Elementwise kernels against values computed here in double (std:: functions) or by hand.
#include <climits>

#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;
const std::vector<DType> kFloats = {DType::f32, DType::f64, DType::bf16, DType::f16};

double tol_for(DType t) {
  switch (t) {
    case DType::f64:
      return 1e-14;
    case DType::f32:
      return 1e-6;
    case DType::f16:
      return 2e-3;
    default:
      return 1e-2;
  }
}

void check_unary(Op op, const std::vector<double>& xs, const std::function<double(double)>& ref,
                 const std::vector<DType>& dts = kFloats) {
  for (DType dt : dts) {
    SCOPED_TRACE(std::string(ir::op_name(op)) + " " + std::string(name(dt)));
    Array x = Array::from_doubles(dt, {int64_t(xs.size())}, xs);
    std::vector<double> want;
    for (double v : x.to_doubles()) want.push_back(round_to(dt, ref(v)));
    auto f = one_op({{dt, x.shape()}}, [&](ir::Builder& b, auto& p) { return b.unary(op, p[0]); });
    expect_values(run_all(f, {x})[0], want, is_floating(dt) ? tol_for(dt) : 0);
  }
}

void check_binary(Op op, const std::vector<double>& as, const std::vector<double>& bs,
                  const std::function<double(double, double)>& ref,
                  const std::vector<DType>& dts = kFloats) {
  for (DType dt : dts) {
    SCOPED_TRACE(std::string(ir::op_name(op)) + " " + std::string(name(dt)));
    Shape s{int64_t(as.size())};
    Array a = Array::from_doubles(dt, s, as), b = Array::from_doubles(dt, s, bs);
    std::vector<double> want;
    auto ad = a.to_doubles(), bd = b.to_doubles();
    for (size_t i = 0; i < ad.size(); ++i) want.push_back(round_to(dt, ref(ad[i], bd[i])));
    auto f = one_op({{dt, s}, {dt, s}},
                    [&](ir::Builder& bl, auto& p) { return bl.binary(op, p[0], p[1]); });
    expect_values(run_all(f, {a, b})[0], want, is_floating(dt) ? tol_for(dt) : 0);
  }
}

// Exact check of a binary op on typed values.
template <class T>
void exact_binary(Op op, std::vector<T> a, std::vector<T> b, std::vector<double> want) {
  Shape s{int64_t(a.size())};
  Array x = Array::from(s, a), y = Array::from(s, b);
  auto f = one_op({{x.dtype(), s}, {x.dtype(), s}},
                  [&](ir::Builder& bl, auto& p) { return bl.binary(op, p[0], p[1]); });
  SCOPED_TRACE(std::string(ir::op_name(op)) + " " + std::string(name(x.dtype())));
  expect_values(run_all(f, {x, y})[0], want);
}
template <class T>
void exact_unary(Op op, std::vector<T> a, std::vector<double> want) {
  Shape s{int64_t(a.size())};
  Array x = Array::from(s, a);
  auto f = one_op({{x.dtype(), s}}, [&](ir::Builder& bl, auto& p) { return bl.unary(op, p[0]); });
  SCOPED_TRACE(std::string(ir::op_name(op)) + " " + std::string(name(x.dtype())));
  expect_values(run_all(f, {x})[0], want);
}

const std::vector<double> kXs = {-2.5, -1.0, -0.3, 0.0, 0.25, 1.0, 3.75};
const std::vector<double> kPos = {0.01, 0.3, 1.0, 2.0, 17.5, 1000.0};

KERNEL_TEST(negate, values) {
  check_unary(Op::negate, kXs, [](double x) { return -x; });
  exact_unary<int32_t>(Op::negate, {5, -7, 0, INT_MIN}, {-5, 7, 0, double(INT_MIN)});
  exact_unary<float>(Op::negate, {0.0f}, {-0.0});
}
KERNEL_TEST(abs, values) {
  check_unary(Op::abs, kXs, [](double x) { return std::fabs(x); });
  exact_unary<int32_t>(Op::abs, {5, -7, 0, INT_MIN}, {5, 7, 0, double(INT_MIN)});
}
KERNEL_TEST(exponential, values) {
  check_unary(Op::exponential, kXs, [](double x) { return std::exp(x); });
}
KERNEL_TEST(log, values) {
  check_unary(Op::log, kPos, [](double x) { return std::log(x); });
  exact_unary<float>(Op::log, {0.0f, -1.0f}, {-kInf, kNaN});
}
KERNEL_TEST(log_plus_one, values) {
  check_unary(Op::log_plus_one, {-0.5, 1e-5, 0.3, 2.0}, [](double x) { return std::log1p(x); });
}
KERNEL_TEST(tanh, values) {
  check_unary(Op::tanh, kXs, [](double x) { return std::tanh(x); });
}
KERNEL_TEST(logistic, values) {
  check_unary(Op::logistic, kXs, [](double x) { return 1 / (1 + std::exp(-x)); });
}
KERNEL_TEST(sqrt, values) {
  check_unary(Op::sqrt, kPos, [](double x) { return std::sqrt(x); });
  exact_unary<float>(Op::sqrt, {-1.0f, -0.0f}, {kNaN, -0.0});
}
KERNEL_TEST(rsqrt, values) {
  check_unary(Op::rsqrt, kPos, [](double x) { return 1 / std::sqrt(x); });
}
KERNEL_TEST(sign, values) {
  exact_unary<float>(Op::sign, {-2.5f, 0.0f, -0.0f, 3.0f, float(kNaN)}, {-1, 0, -0.0, 1, kNaN});
  exact_unary<double>(Op::sign, {-1e-300, -0.0, 7.0}, {-1, -0.0, 1});
  exact_unary<int32_t>(Op::sign, {-9, 0, 4, INT_MIN}, {-1, 0, 1, -1});
  check_unary(Op::sign, {-3.0, 0.5}, [](double x) { return x < 0 ? -1.0 : 1.0; });
}
// cos / sin against the C library's in double, rounded to each dtype.
KERNEL_TEST(cosine, values) {
  check_unary(Op::cosine, {-3.5, -1.0, 0.0, 0.5, 3.14159, 100.0},
              [](double x) { return std::cos(x); });
}

KERNEL_TEST(sine, values) {
  check_unary(Op::sine, {-3.5, -1.0, 0.0, 0.5, 3.14159, 100.0},
              [](double x) { return std::sin(x); });
}

KERNEL_TEST(floor, values) {
  check_unary(Op::floor, {-2.5, -0.5, 0.0, 0.7, 3.0}, [](double x) { return std::floor(x); });
}

KERNEL_TEST(add, values) {
  check_binary(Op::add, kXs, {1, 2, 3, 4, 5, 6, 7}, [](double a, double b) { return a + b; });
  exact_binary<int32_t>(Op::add, {INT_MAX, -3}, {1, 5}, {double(INT_MIN), 2});
  exact_binary<uint32_t>(Op::add, {0xffffffffu, 3}, {2, 5}, {1, 8});
}
KERNEL_TEST(subtract, values) {
  check_binary(Op::subtract, kXs, {1, 2, 3, 4, 5, 6, 7}, [](double a, double b) { return a - b; });
  exact_binary<uint32_t>(Op::subtract, {0, 9}, {1, 4}, {4294967295.0, 5});
}
KERNEL_TEST(multiply, values) {
  check_binary(Op::multiply, kXs, {1, -2, 3, 4, 5, 6, 0.5},
               [](double a, double b) { return a * b; });
  exact_binary<int32_t>(Op::multiply, {65536, -7}, {65536, 6}, {0, -42});
}
KERNEL_TEST(divide, values) {
  check_binary(Op::divide, kXs, {1, -2, 3, 4, 5, 6, 0.5}, [](double a, double b) { return a / b; });
  exact_binary<float>(Op::divide, {1.0f, -1.0f, 0.0f}, {0.0f, 0.0f, 0.0f}, {kInf, -kInf, kNaN});
  // Integer division truncates; x / 0 = -1 (s32) or all ones (u32); INT_MIN / -1 = INT_MIN.
  exact_binary<int32_t>(Op::divide, {7, -7, 7, 5, INT_MIN}, {2, 2, -2, 0, -1},
                        {3, -3, -3, -1, double(INT_MIN)});
  exact_binary<uint32_t>(Op::divide, {7, 5}, {2, 0}, {3, 4294967295.0});
}
KERNEL_TEST(maximum, values) {
  check_binary(Op::maximum, kXs, {0, 0, 0, 0, 0, 0, 0},
               [](double a, double b) { return std::max(a, b); });
  exact_binary<float>(Op::maximum, {float(kNaN), 1.0f, -0.0f, 0.0f},
                      {1.0f, float(kNaN), 0.0f, -0.0f}, {kNaN, kNaN, 0.0, 0.0});
  exact_binary<int32_t>(Op::maximum, {-5, 3}, {2, -9}, {2, 3});
  exact_binary<uint32_t>(Op::maximum, {5, 0xffffffffu}, {7, 1}, {7, 4294967295.0});
}
KERNEL_TEST(minimum, values) {
  check_binary(Op::minimum, kXs, {0, 0, 0, 0, 0, 0, 0},
               [](double a, double b) { return std::min(a, b); });
  exact_binary<double>(Op::minimum, {kNaN, 1.0, -0.0, 0.0}, {1.0, kNaN, 0.0, -0.0},
                       {kNaN, kNaN, -0.0, -0.0});
  exact_binary<int32_t>(Op::minimum, {-5, 3}, {2, -9}, {-5, -9});
}
KERNEL_TEST(power, values) {
  check_binary(Op::power, {2, 0.5, 9, 1.5}, {3, -1, 0.5, 2.25},
               [](double a, double b) { return std::pow(a, b); });
}
KERNEL_TEST(remainder, values) {
  // The result has the dividend's sign (C fmod).
  check_binary(Op::remainder, {5.5, -5.5, 5.5, -7}, {2, 2, -2, 3},
               [](double a, double b) { return std::fmod(a, b); });
  exact_binary<float>(Op::remainder, {-5.5f, 1.0f}, {2.0f, 0.0f}, {-1.5, kNaN});
  exact_binary<int32_t>(Op::remainder, {7, -7, 7, 5, INT_MIN}, {3, 3, -3, 0, -1}, {1, -1, 1, 5, 0});
  exact_binary<uint32_t>(Op::remainder, {7, 5}, {3, 0}, {1, 5});
}
KERNEL_TEST(and_, values) {
  exact_binary<int32_t>(Op::and_, {0x0f0f, -1}, {0x00ff, 12}, {0x000f, 12});
  exact_binary<uint32_t>(Op::and_, {0xf0f0f0f0u}, {0xffff0000u}, {double(0xf0f00000u)});
  exact_binary<bool>(Op::and_, {true, true, false, false}, {true, false, true, false},
                     {1, 0, 0, 0});
}
KERNEL_TEST(or_, values) {
  exact_binary<int32_t>(Op::or_, {0x0f00, 1}, {0x00f0, 2}, {0x0ff0, 3});
  exact_binary<bool>(Op::or_, {true, true, false, false}, {true, false, true, false}, {1, 1, 1, 0});
  exact_binary<uint32_t>(Op::or_, {1u}, {0x80000000u}, {2147483649.0});
}
KERNEL_TEST(xor_, values) {
  exact_binary<int32_t>(Op::xor_, {0x0ff0, -1}, {0x00ff, 0}, {0x0f0f, -1});
  exact_binary<bool>(Op::xor_, {true, true, false, false}, {true, false, true, false},
                     {0, 1, 1, 0});
  exact_binary<uint32_t>(Op::xor_, {5u}, {3u}, {6});
}
KERNEL_TEST(shift_left, values) {
  // Shift amounts >= 32 (read as unsigned, so negative ones too) give 0.
  exact_binary<int32_t>(Op::shift_left, {1, 3, 1, 1, 1}, {4, 30, 31, 32, -1},
                        {16, double(INT_MIN + 0x40000000), double(INT_MIN), 0, 0});
  exact_binary<uint32_t>(Op::shift_left, {1, 1, 7}, {31, 40, 0}, {2147483648.0, 0, 7});
}
KERNEL_TEST(shift_right_logical, values) {
  exact_binary<int32_t>(Op::shift_right_logical, {-1, 256, 5}, {28, 4, 33}, {15, 16, 0});
  exact_binary<uint32_t>(Op::shift_right_logical, {0x80000000u, 9}, {31, 32}, {1, 0});
}

KERNEL_TEST(compare, directions) {
  using C = ir::Comparison;
  std::vector<float> a = {1, 2, 3, float(kNaN)}, b = {2, 2, 1, 1};
  std::vector<std::pair<C, std::vector<double>>> cases = {
      {C::EQ, {0, 1, 0, 0}}, {C::NE, {1, 0, 1, 1}}, {C::LT, {1, 0, 0, 0}},
      {C::LE, {1, 1, 0, 0}}, {C::GT, {0, 0, 1, 0}}, {C::GE, {0, 1, 1, 0}}};
  for (auto& [dir, want] : cases) {
    for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
      Shape s{4};
      std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
      auto f = one_op({{dt, s}, {dt, s}},
                      [&](ir::Builder& bl, auto& p) { return bl.compare(p[0], p[1], dir); });
      auto out = run_all(f, {Array::from_doubles(dt, s, ad), Array::from_doubles(dt, s, bd)});
      EXPECT_EQ(out[0].dtype(), DType::i1);
      expect_values(out[0], want);
    }
  }
  // Integers compare by value in their own signedness; i1 as 0 < 1.
  auto cmp = [](auto x, auto y, C dir, std::vector<double> want) {
    Shape s{int64_t(x.size())};
    Array ax = Array::from(s, x), ay = Array::from(s, y);
    auto f = one_op({{ax.dtype(), s}, {ax.dtype(), s}},
                    [&](ir::Builder& bl, auto& p) { return bl.compare(p[0], p[1], dir); });
    expect_values(run_all(f, {ax, ay})[0], want);
  };
  cmp(std::vector<int32_t>{-1, 5}, std::vector<int32_t>{1, 5}, C::LT, {1, 0});
  cmp(std::vector<uint32_t>{0xffffffffu, 5}, std::vector<uint32_t>{1, 5}, C::GT, {1, 0});
  cmp(std::vector<bool>{false, true}, std::vector<bool>{true, true}, C::LT, {1, 0});
}

KERNEL_TEST(select, scalar_and_full_pred) {
  Shape s{3};
  auto f = one_op({{DType::i1, s}, {DType::f32, s}, {DType::f32, s}},
                  [](ir::Builder& b, auto& p) { return b.select(p[0], p[1], p[2]); });
  auto out = run_all(f, {Array::from<bool>(s, {true, false, true}),
                         Array::from<float>(s, {1, 2, 3}), Array::from<float>(s, {-1, -2, -3})});
  expect_values(out[0], {1, -2, 3});
  auto g = one_op({{DType::i1, {}}, {DType::s32, s}, {DType::s32, s}},
                  [](ir::Builder& b, auto& p) { return b.select(p[0], p[1], p[2]); });
  out = run_all(g, {Array::scalar(false), Array::from<int32_t>(s, {1, 2, 3}),
                    Array::from<int32_t>(s, {7, 8, 9})});
  expect_values(out[0], {7, 8, 9});
  auto h = one_op({{DType::i1, s}, {DType::bf16, s}, {DType::bf16, s}},
                  [](ir::Builder& b, auto& p) { return b.select(p[0], p[1], p[2]); });
  out = run_all(h, {Array::from<bool>(s, {false, true, false}),
                    Array::from_doubles(DType::bf16, s, {1, 2, 3}),
                    Array::from_doubles(DType::bf16, s, {0.5, 0.25, -8})});
  expect_values(out[0], {0.5, 2, -8});
}

KERNEL_TEST(clamp, scalar_and_full_bounds) {
  Shape s{5};
  auto f = one_op({{DType::f32, {}}, {DType::f32, s}, {DType::f32, {}}},
                  [](ir::Builder& b, auto& p) { return b.clamp(p[0], p[1], p[2]); });
  auto out =
      run_all(f, {Array::scalar(-1.0f), Array::from<float>(s, {-3, -0.5f, 0.25f, 9, float(kNaN)}),
                  Array::scalar(2.0f)});
  expect_values(out[0], {-1, -0.5, 0.25, 2, kNaN});
  auto g = one_op({{DType::s32, {3}}, {DType::s32, {3}}, {DType::s32, {3}}},
                  [](ir::Builder& b, auto& p) { return b.clamp(p[0], p[1], p[2]); });
  out = run_all(g, {Array::from<int32_t>({3}, {0, 0, 5}), Array::from<int32_t>({3}, {-4, 3, 2}),
                    Array::from<int32_t>({3}, {1, 2, 9})});
  expect_values(out[0], {0, 2, 5});
}

// f32 exp / tanh / logistic use tlaloc's own vectorizable approximations: within 3 ulp of the
// correctly rounded value (computed in double) over a dense sweep, with exact specials.
TEST(HostElementwise, F32TranscendentalsWithinThreeUlp) {
  std::vector<float> xs;
  for (double v = -110; v <= 95; v += 0.0137) xs.push_back(float(v));
  for (double v = -1; v <= 1; v += 1e-4) xs.push_back(float(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.3f, -103.9f, -104.0f, 0.625f,
                  -0.625f, 9.0f, 20.0f})
    xs.push_back(v);
  Shape s{int64_t(xs.size())};
  Array x = Array::from(s, xs);
  for (Op op : {Op::exponential, Op::tanh, Op::logistic}) {
    SCOPED_TRACE(std::string(ir::op_name(op)));
    auto f = one_op({{DType::f32, s}}, [&](ir::Builder& b, auto& p) { return b.unary(op, p[0]); });
    Array y = run_all(f, {x})[0];
    double worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double xd = xs[i];
      double want = op == Op::exponential ? std::exp(xd)
                    : op == Op::tanh      ? std::tanh(xd)
                                          : 1 / (1 + std::exp(-xd));
      float wf = float(want);
      double got = y.at(int64_t(i));
      if (std::isinf(wf) || wf == 0) {
        EXPECT_EQ(got, double(wf)) << "x = " << xd;
        continue;
      }
      double ulp = std::nextafter(std::fabs(wf), INFINITY) - std::fabs(wf);
      if (std::fabs(wf) < 1.2e-38) ulp = 1.4e-45;  // subnormal spacing
      worst = std::max(worst, std::fabs(got - want) / ulp);
      ASSERT_LE(std::fabs(got - want) / ulp, 3.0)
          << "x = " << xd << " got " << got << " want " << want;
    }
    RecordProperty(std::string(ir::op_name(op)) + "_max_ulp", std::to_string(worst));
  }
  exact_unary<float>(Op::exponential, {float(kNaN), float(kInf), float(-kInf), 0.0f},
                     {kNaN, kInf, 0, 1});
  exact_unary<float>(Op::tanh, {float(kNaN), float(kInf), float(-kInf), -0.0f},
                     {kNaN, 1, -1, -0.0});
  exact_unary<float>(Op::logistic, {float(kInf), float(-kInf)}, {1, 0});
}

}  // namespace
}  // namespace tlaloc::host_test
