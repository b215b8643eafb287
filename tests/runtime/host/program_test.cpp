// The fused register program's compile-time choices, checked against values computed here:
// scalar operands read once per block, selects on a scalar predicate resolved per run, and ops
// writing donated outputs in place only once the block no longer reads the donor. Sizes span
// several blocks with a partial last one, and reach the multi-threaded split.
#include <bit>
#include <cmath>

#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;
using runtime::host::compile;

std::vector<double> ramp(int64_t n, double a, double b) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(a + b * std::sin(double(i) * 0.37));
  return v;
}

// f32 results of one IEEE op: the double result rounded once is the correctly rounded float.
std::vector<double> f32_map(const std::vector<double>& x, const std::function<double(double)>& f) {
  std::vector<double> out;
  for (double v : x) out.push_back(round_to(DType::f32, f(v)));
  return out;
}

TEST(HostProgram, ScalarOperandOnEitherSide) {
  const int64_t n = 1100;
  ir::Builder b("scalar_sides");
  auto x = b.parameter({DType::f32, {n}}, "x");
  auto s = b.parameter({DType::f32, {}}, "s");
  auto S = b.broadcast_in_dim(s, {n}, {});
  auto f = b.build({b.binary(Op::subtract, S, x), b.binary(Op::divide, x, S),
                    b.binary(Op::divide, S, x), b.compare(S, x, ir::Comparison::LT),
                    b.compare(x, S, ir::Comparison::LT), b.binary(Op::power, S, x)});
  Array xa = Array::from_doubles(DType::f32, {n}, ramp(n, 0.5, 2.0));
  const double sv = 1.25;
  auto out = run_all(f, {xa, Array::scalar(float(sv))});
  auto xs = xa.to_doubles();
  expect_values(out[0], f32_map(xs, [&](double v) { return sv - v; }));
  expect_values(out[1], f32_map(xs, [&](double v) { return v / sv; }));
  expect_values(out[2], f32_map(xs, [&](double v) { return sv / v; }));
  expect_values(out[3], f32_map(xs, [&](double v) { return sv < v ? 1 : 0; }));
  expect_values(out[4], f32_map(xs, [&](double v) { return v < sv ? 1 : 0; }));
  expect_values(out[5], f32_map(xs, [&](double v) { return std::pow(sv, v); }), 1e-6);
}

// m' = 0.5 m + g, p' = p - 0.25 m'; both skipped (select on the scalar `skip`, an input or
// computed from g as Σg·0 != itself, i.e. g holds an inf / NaN); p and m donated.
ir::Function skip_update(int64_t n, bool skip_from_g) {
  ir::Builder b("skip_update");
  auto p = b.parameter({DType::f32, {n}}, "p");
  auto m = b.parameter({DType::f32, {n}}, "m");
  auto g = b.parameter({DType::f32, {n}}, "g");
  auto skip_in = b.parameter({DType::i1, {}}, "skip");
  auto bc = [&](double v) { return b.broadcast_in_dim(b.scalar(DType::f32, v), {n}, {}); };
  auto m2 = b.binary(Op::add, b.binary(Op::multiply, bc(0.5), m), g);
  auto p2 = b.binary(Op::subtract, p, b.binary(Op::multiply, bc(0.25), m2));
  auto skip = skip_in;
  if (skip_from_g) {
    auto z =
        b.binary(Op::multiply, b.reduce(g, ir::ReduceKind::sum, {0}), b.scalar(DType::f32, 0.0));
    skip = b.compare(z, z, ir::Comparison::NE);
  }
  auto f = b.build({b.select(skip, p, p2), b.select(skip, m, m2), skip}, {"p", "m", "skip"});
  f.aliases = {{0, 0}, {1, 1}};
  return f;
}

TEST(HostProgram, ScalarPredicateSelectTakesEitherBranchInPlace) {
  const int64_t n = 40000;  // above the threading threshold: both threads' block ranges
  const auto pv = ramp(n, 1.0, 0.5), mv = ramp(n, 0.0, 0.25);
  for (bool from_g : {false, true}) {
    for (bool skip : {false, true}) {
      SCOPED_TRACE(fmt::format("skip from g {} skip {}", from_g, skip));
      auto gv = ramp(n, 0.1, 1.0);
      if (skip && from_g) gv[size_t(n - 3)] = kInf;
      ir::Function f = skip_update(n, from_g);
      std::vector<Array> in = {Array::from_doubles(DType::f32, {n}, pv),
                               Array::from_doubles(DType::f32, {n}, mv),
                               Array::from_doubles(DType::f32, {n}, gv), Array::scalar(skip)};
      auto want = run_all(f, in);
      std::vector<double> wp, wm;
      for (int64_t i = 0; i < n; ++i) {
        const double p = in[0].at(i), m = in[1].at(i), g = in[2].at(i);
        double m2 = round_to(DType::f32, round_to(DType::f32, 0.5 * m) + g);
        wm.push_back(skip ? m : m2);
        wp.push_back(skip ? p : round_to(DType::f32, p - round_to(DType::f32, 0.25 * m2)));
      }
      expect_values(want[0], wp);
      expect_values(want[1], wm);
      expect_values(want[2], {skip ? 1.0 : 0.0});
      for (int threads : {1, 2}) {
        auto exe = compile(f, {.num_threads = threads});
        std::vector<Array> d = in;
        const void* ps = d[0].raw();
        const void* ms = d[1].raw();
        auto out = exe->run_donated(d);
        EXPECT_EQ(out[0].raw(), ps);
        EXPECT_EQ(out[1].raw(), ms);
        EXPECT_TRUE(out[0].bitwise_equal(want[0]));
        EXPECT_TRUE(out[1].bitwise_equal(want[1]));
      }
    }
  }
}

// o1 = 2x is computed before x + y reads x again; x is donated to o1, so o1 may only be
// written once nothing else reads x. Both orders of the two outputs in the IR.
TEST(HostProgram, DonatedOutputWaitsForLaterReadsOfItsDonor) {
  const int64_t n = 1500;
  for (bool o1_first : {true, false}) {
    ir::Builder b("donor_read_late");
    auto x = b.parameter({DType::f32, {n}}, "x");
    auto y = b.parameter({DType::f32, {n}}, "y");
    auto two = b.broadcast_in_dim(b.scalar(DType::f32, 2.0), {n}, {});
    ir::ValueId o1, o2;
    if (o1_first) {
      o1 = b.binary(Op::multiply, x, two);
      o2 = b.binary(Op::multiply, b.binary(Op::add, x, y), o1);
    } else {
      o2 = b.binary(Op::add, x, y);
      o1 = b.binary(Op::multiply, x, two);
      o2 = b.binary(Op::multiply, o2, o1);
    }
    auto f = b.build({o1, o2}, {"o1", "o2"});
    f.aliases = {{0, 0}};
    const auto xv = ramp(n, 0.0, 3.0), yv = ramp(n, 1.0, -1.0);
    std::vector<Array> in = {Array::from_doubles(DType::f32, {n}, xv),
                             Array::from_doubles(DType::f32, {n}, yv)};
    std::vector<double> w1, w2;
    for (int64_t i = 0; i < n; ++i) {
      const double xi = in[0].at(i), yi = in[1].at(i);
      w1.push_back(2 * xi);
      w2.push_back(round_to(DType::f32, round_to(DType::f32, xi + yi) * (2 * xi)));
    }
    auto exe = compile(f);
    const void* xs = in[0].raw();
    auto out = exe->run_donated(in);
    EXPECT_EQ(out[0].raw(), xs);
    expect_values(out[0], w1);
    expect_values(out[1], w2);
  }
}

// The multiply x * s (s a broadcast scalar) folded into the chain that reads it: x is donated
// to o1 = 2x, which the IR computes first, so o1 may only be written once the chain has read x;
// and p' = p * s - t written in place of p while the same loop reads p.
TEST(HostProgram, ScaledChainOperandReadsDonorsBeforeTheirOutputs) {
  const int64_t n = 1300;
  ir::Builder b("scaled_donor");
  auto x = b.parameter({DType::f32, {n}}, "x");
  auto y = b.parameter({DType::f32, {n}}, "y");
  auto p = b.parameter({DType::f32, {n}}, "p");
  auto bc = [&](double v) { return b.broadcast_in_dim(b.scalar(DType::f32, v), {n}, {}); };
  auto o1 = b.binary(Op::multiply, x, bc(2.0));
  auto o2 = b.binary(Op::add, b.binary(Op::multiply, x, bc(0.75)), b.binary(Op::divide, y, o1));
  auto o3 = b.binary(Op::subtract, b.binary(Op::multiply, p, bc(0.5)), b.binary(Op::add, x, y));
  auto f = b.build({o1, o2, o3}, {"o1", "o2", "p"});
  f.aliases = {{0, 0}, {2, 2}};
  const auto xv = ramp(n, 0.5, 3.0), yv = ramp(n, 1.0, -1.0), pv = ramp(n, -2.0, 0.3);
  std::vector<Array> in = {Array::from_doubles(DType::f32, {n}, xv),
                           Array::from_doubles(DType::f32, {n}, yv),
                           Array::from_doubles(DType::f32, {n}, pv)};
  std::vector<double> w1, w2, w3;
  for (int64_t i = 0; i < n; ++i) {
    const double xi = in[0].at(i), yi = in[1].at(i), pi = in[2].at(i);
    auto r = [](double v) { return round_to(DType::f32, v); };
    w1.push_back(2 * xi);
    w2.push_back(r(r(xi * 0.75) + r(yi / (2 * xi))));
    w3.push_back(r(r(pi * 0.5) - r(xi + yi)));
  }
  const void* xs = in[0].raw();
  const void* ps = in[2].raw();
  auto out = compile(f)->run_donated(in);
  EXPECT_EQ(out[0].raw(), xs);
  EXPECT_EQ(out[2].raw(), ps);
  expect_values(out[0], w1);
  expect_values(out[1], w2);
  expect_values(out[2], w3);
}

}  // namespace
}  // namespace tlaloc::host_test

namespace tlaloc::host_test {
namespace {

// Every float op on f32 / f64 / bf16 values (incl. NaN, inf, -0, subnormals) and the
// converts between them: the AVX-512 and AVX2 loops (whichever this CPU has; TLALOC_HOST_ISA=avx2
// caps it) give the baseline loops' bits.
TEST(HostProgram, VectorAndBaselineLoopsAgreeBitwise) {
  const int64_t n = 1037;
  std::vector<double> xv = ramp(n, 0.0, 30.0), yv = ramp(n, 0.5, 2.0);
  const double specials[] = {kNaN, kInf, -kInf, -0.0, 0.0, 1e-40, -1e-39, 88.8, -104.0};
  for (size_t i = 0; i < std::size(specials); ++i) xv[i * 7] = yv[i * 11 + 1] = specials[i];
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    SCOPED_TRACE(std::string(name(dt)));
    ir::Builder b("isa");
    auto x = b.parameter({dt, {n}}, "x");
    auto y = b.parameter({dt, {n}}, "y");
    auto s = b.broadcast_in_dim(b.parameter({dt, {}}, "s"), {n}, {});
    std::vector<ir::ValueId> outs;
    for (Op op : {Op::negate, Op::abs, Op::exponential, Op::log, Op::log_plus_one, Op::tanh,
                  Op::logistic, Op::sqrt, Op::rsqrt, Op::sign, Op::floor})
      outs.push_back(b.unary(op, x));
    for (Op op : {Op::add, Op::subtract, Op::multiply, Op::divide, Op::maximum, Op::minimum,
                  Op::power, Op::remainder}) {
      outs.push_back(b.binary(op, x, y));
      outs.push_back(b.binary(op, s, x));
      outs.push_back(b.binary(op, x, s));
    }
    outs.push_back(b.select(b.compare(x, y, ir::Comparison::LT), x, y));
    outs.push_back(b.clamp(s, x, y));
    for (DType to : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::s32, DType::i1})
      outs.push_back(b.convert(b.binary(Op::multiply, x, y), to));
    ir::Function f = b.build(outs);
    std::vector<Array> in = {Array::from_doubles(dt, {n}, xv), Array::from_doubles(dt, {n}, yv),
                             Array::from_doubles(dt, {}, {-1.75})};
    auto fast = compile(f)->run(in);
    setenv("TLALOC_HOST_ISA", "avx2", 1);
    auto avx2 = compile(f)->run(in);
    setenv("TLALOC_HOST_ISA", "baseline", 1);
    auto base = compile(f)->run(in);
    unsetenv("TLALOC_HOST_ISA");
    for (size_t i = 0; i < outs.size(); ++i) {
      EXPECT_TRUE(fast[i].bitwise_equal(base[i])) << "output " << i;
      EXPECT_TRUE(avx2[i].bitwise_equal(base[i])) << "output " << i << " (AVX2)";
    }
  }
}

}  // namespace
}  // namespace tlaloc::host_test

namespace tlaloc::host_test {
namespace {

// outer(c, inner(a, b)) and outer(inner(a, b), c) for every pair of + - * / on f32, with each
// operand a block or a broadcast scalar, and c also a block times a broadcast scalar (that
// multiply folded into the chain): run as one chained instruction, each op still rounded to f32
// (values computed here in double, rounded after each op).
TEST(HostProgram, ChainedArithmeticRoundsEachOp) {
  const int64_t n = 600;
  const Op ops[] = {Op::add, Op::subtract, Op::multiply, Op::divide};
  auto apply = [](Op op, double x, double y) {
    switch (op) {
      case Op::add:
        return x + y;
      case Op::subtract:
        return x - y;
      case Op::multiply:
        return x * y;
      default:
        return x / y;
    }
  };
  const auto av = ramp(n, 1.5, 1.0), bv = ramp(n, -0.7, 3.0), cv = ramp(n, 2.0, 0.9);
  // scalars: bit k set = operand k a broadcast scalar; 8..11: c a block times a scalar.
  for (int scalars = 0; scalars < 12; ++scalars) {
    ir::Builder b("chains");
    std::vector<ir::ValueId> in;
    std::vector<Array> args;
    const std::vector<double>* vals[] = {&av, &bv, &cv};
    for (int k = 0; k < 3; ++k) {
      const bool sc = ((scalars >> k) & 1) != 0;
      auto p = b.parameter({DType::f32, sc ? Shape{} : Shape{n}}, fmt::format("x{}", k));
      in.push_back(sc ? b.broadcast_in_dim(p, {n}, {}) : p);
      args.push_back(sc ? Array::from_doubles(DType::f32, {}, {(*vals[k])[5]})
                        : Array::from_doubles(DType::f32, {n}, *vals[k]));
    }
    // With c a block times a broadcast scalar (folded into the chain's loop): one more input.
    const bool scaled = scalars >= 8;
    auto sp = b.parameter({DType::f32, {}}, "s");
    args.push_back(Array::from_doubles(DType::f32, {}, {-1.3}));
    std::vector<ir::ValueId> outs;
    for (Op inner : ops)
      for (Op outer : ops)
        for (bool right : {false, true}) {
          auto c = scaled ? b.binary(Op::multiply, in[2], b.broadcast_in_dim(sp, {n}, {})) : in[2];
          auto t = b.binary(inner, in[0], in[1]);
          outs.push_back(right ? b.binary(outer, c, t) : b.binary(outer, t, c));
        }
    auto got = compile(b.build(outs))->run(args);
    size_t o = 0;
    for (Op inner : ops)
      for (Op outer : ops)
        for (bool right : {false, true}) {
          SCOPED_TRACE(fmt::format("scalars {} inner {} outer {} right {}", scalars,
                                   ir::op_name(inner), ir::op_name(outer), right));
          std::vector<double> want;
          for (int64_t i = 0; i < n; ++i) {
            auto at = [&](int k) {
              return args[size_t(k)].at(args[size_t(k)].numel() > 1 ? i : 0);
            };
            double t = round_to(DType::f32, apply(inner, at(0), at(1)));
            double cv = scaled ? round_to(DType::f32, at(2) * args[3].at(0)) : at(2);
            want.push_back(round_to(DType::f32, right ? apply(outer, cv, t) : apply(outer, t, cv)));
          }
          expect_values(got[o++], want);
        }
  }
}

}  // namespace
}  // namespace tlaloc::host_test

namespace tlaloc::host_test {
namespace {

// f32 tanh's branch-free formula, if-converted and vectorized by the compiler for AVX-512 and
// AVX2: over 2^20 + 5 float bit patterns spread over every exponent and both signs (plus the
// 0.625 and 9.1 branch points, +-0, +-inf, NaN) its bits equal the baseline loop's. (AVX-512 has
// FMA instructions of its own: a contracted p * z * x + x differs here.)
TEST(HostProgram, VectorTanhEqualsBaselineOverFloatBitPatterns) {
  const int64_t n = (int64_t(1) << 20) + 5;
  std::vector<float> xs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xs[size_t(i)] = std::bit_cast<float>(uint32_t(i) * 4096u + 77u);
  const float specials[] = {0.625f,      std::nextafter(0.625f, 0.0f),
                            -0.625f,     4.55f,
                            -4.55f,      std::nextafter(4.55f, 9.0f),
                            9.1f,        -9.1f,
                            0.0f,        -0.0f,
                            float(kInf), -float(kInf),
                            float(kNaN), 1e-45f};
  for (size_t i = 0; i < std::size(specials); ++i) xs[i * 977] = specials[i];
  ir::Builder b("tanh");
  ir::Function f = b.build({b.unary(Op::tanh, b.parameter({DType::f32, {n}}, "x"))});
  const std::vector<Array> in = {Array::from(Shape{n}, xs)};
  auto fast = compile(f)->run(in);
  setenv("TLALOC_HOST_ISA", "avx2", 1);
  auto avx2 = compile(f)->run(in);
  setenv("TLALOC_HOST_ISA", "baseline", 1);
  auto base = compile(f)->run(in);
  unsetenv("TLALOC_HOST_ISA");
  const auto* c = base[0].data<float>();
  int64_t bad = 0;
  for (const Array* v : {&fast[0], &avx2[0]}) {
    const auto* a = v->data<float>();
    for (int64_t i = 0; i < n; ++i)
      if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(c[i]) && bad++ < 5)
        ADD_FAILURE() << "tanh(" << xs[size_t(i)] << "): " << a[i] << " vs baseline " << c[i];
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace tlaloc::host_test
