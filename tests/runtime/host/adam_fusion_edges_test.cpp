// Edge cases of the fused Adam instruction (program.cpp: fuse_adam; instr_adam.cpp) with
// programs that look like an Adam update but read the update's own results (m' / v') as one of
// its inputs, alias storage, share registers, or use other dtypes. Oracles: the unfused compile
// (run_all checks fused == unfused bitwise on 1 and 2 threads) and the ops rounded to f32 one by
// one here.
#include <array>
#include <cmath>

#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;
using ir::ValueId;

double r32(double x) { return round_to(DType::f32, x); }

constexpr double kB1 = 0.9, kC1 = 0.05, kB2 = 0.99, kC2 = 0.07, kEps = 1e-6, kAlpha = 0.01,
                 kDec = 0.999;

std::vector<double> wave(int64_t n, double a, double w, double c) {
  std::vector<double> x;
  for (int64_t i = 0; i < n; ++i) x.push_back(c + a * std::sin(double(i) * w + 0.3));
  return x;
}

struct Ops {
  ir::Builder& b;
  int64_t n;
  ValueId S(double x) { return b.broadcast_in_dim(b.scalar(DType::f32, x), {n}, {}); }
  ValueId mul(ValueId x, ValueId y) { return b.binary(Op::multiply, x, y); }
  ValueId add(ValueId x, ValueId y) { return b.binary(Op::add, x, y); }
  ValueId sub(ValueId x, ValueId y) { return b.binary(Op::subtract, x, y); }
  // m / (√v + eps)
  ValueId quot(ValueId m, ValueId v) {
    return b.binary(Op::divide, m, add(b.unary(Op::sqrt, v), S(kEps)));
  }
};

// The same formulas, rounded op by op.
double mn_of(double m, double g) { return r32(r32(m * r32(kB1)) + r32(g * r32(kC1))); }
double vn_of(double v, double g) {
  const double gc = r32(g * r32(kC2));
  return r32(r32(v * r32(kB2)) + r32(gc * gc));
}
double pn_of(double p, double mn, double vn, bool decay) {
  const double q = r32(mn / r32(r32(std::sqrt(vn)) + r32(kEps)));
  return r32((decay ? r32(p * r32(kDec)) : p) - r32(r32(kAlpha) * q));
}

// The update's m, v or p operand is its own m' or v' (v' = m'·b2 + (g·c2)², m' = v'·b1 + g·c1,
// p' = m'·decay − ..., p' = v' − ...). The fused instruction reads that operand at the subtract,
// from the register of a result that the removed ops no longer compute before it.
enum class Self { v_is_mn, m_is_vn, p_is_mn, p_is_vn };

TEST(HostAdamFusionEdges, AnOperandIsTheUpdatesOwnResult) {
  const int64_t n = 1000;
  for (Self self : {Self::v_is_mn, Self::m_is_vn, Self::p_is_mn, Self::p_is_vn})
    for (bool decay : {true, false}) {
      SCOPED_TRACE(fmt::format("case {} decay {}", int(self), decay));
      ir::Builder b("self_ref");
      Ops o{b, n};
      auto p = b.parameter({DType::f32, {n}}, "p");
      auto m = b.parameter({DType::f32, {n}}, "m");
      auto v = b.parameter({DType::f32, {n}}, "v");
      auto g = b.parameter({DType::f32, {n}}, "g");
      ValueId mn, vn;
      auto gc = o.mul(g, o.S(kC2));
      if (self == Self::m_is_vn) {
        vn = o.add(o.mul(v, o.S(kB2)), o.mul(gc, gc));
        mn = o.add(o.mul(vn, o.S(kB1)), o.mul(g, o.S(kC1)));
      } else {
        mn = o.add(o.mul(m, o.S(kB1)), o.mul(g, o.S(kC1)));
        vn = o.add(o.mul(self == Self::v_is_mn ? mn : v, o.S(kB2)), o.mul(gc, gc));
      }
      const ValueId pin = self == Self::p_is_mn ? mn : self == Self::p_is_vn ? vn : p;
      auto pn = o.sub(decay ? o.mul(pin, o.S(kDec)) : pin, o.mul(o.S(kAlpha), o.quot(mn, vn)));
      const ir::Function f = b.build({pn, mn, vn});
      std::vector<Array> in = {Array::from_doubles(DType::f32, {n}, wave(n, 0.5, 0.37, 0)),
                               Array::from_doubles(DType::f32, {n}, wave(n, 0.01, 0.11, 0.02)),
                               Array::from_doubles(DType::f32, {n}, wave(n, 1e-3, 0.05, 2e-3)),
                               Array::from_doubles(DType::f32, {n}, wave(n, 1.0, 0.71, 0))};
      auto out = run_all(f, in);
      std::vector<double> wp, wm, wv;
      for (int64_t i = 0; i < n; ++i) {
        const double pi = in[0].at(i), mi = in[1].at(i), vi = in[2].at(i), gi = in[3].at(i);
        double mnv, vnv;
        if (self == Self::m_is_vn) {
          vnv = vn_of(vi, gi);
          mnv = mn_of(vnv, gi);
        } else {
          mnv = mn_of(mi, gi);
          vnv = vn_of(self == Self::v_is_mn ? mnv : vi, gi);
        }
        wm.push_back(mnv);
        wv.push_back(vnv);
        const double pp = self == Self::p_is_mn ? mnv : self == Self::p_is_vn ? vnv : pi;
        wp.push_back(pn_of(pp, mnv, vnv, decay));
      }
      expect_values(out[0], wp);
      expect_values(out[1], wm);
      expect_values(out[2], wv);
    }
}

// Inputs: four [n] f32 arrays (index 0..3) with distinct value ranges.
std::vector<Array> four_inputs(int64_t n) {
  return {Array::from_doubles(DType::f32, {n}, wave(n, 0.5, 0.37, 0)),
          Array::from_doubles(DType::f32, {n}, wave(n, 0.01, 0.11, 0.02)),
          Array::from_doubles(DType::f32, {n}, wave(n, 1e-3, 0.05, 2e-3)),
          Array::from_doubles(DType::f32, {n}, wave(n, 1.0, 0.71, 0))};
}

// One standard update of inputs (p, m, v, g) = params[ip], ...: outputs p', m', v'.
struct Upd {
  ValueId pn, mn, vn;
};
Upd standard(Ops& o, ValueId p, ValueId m, ValueId v, ValueId g, bool decay = true) {
  auto mn = o.add(o.mul(m, o.S(kB1)), o.mul(g, o.S(kC1)));
  auto gc = o.mul(g, o.S(kC2));
  auto vn = o.add(o.mul(v, o.S(kB2)), o.mul(gc, gc));
  auto pn = o.sub(decay ? o.mul(p, o.S(kDec)) : p, o.mul(o.S(kAlpha), o.quot(mn, vn)));
  return {pn, mn, vn};
}
std::array<double, 3> standard_want(double p, double m, double v, double g, bool decay = true) {
  const double mn = mn_of(m, g), vn = vn_of(v, g);
  return {pn_of(p, mn, vn, decay), mn, vn};
}

// Sizes around the 8-wide vectors, the 256-element blocks, the 8192-element chunks and the
// 2-thread split; the update fuses and agrees with the ops op by op, donated or not.
TEST(HostAdamFusionEdges, SizesAroundVectorsBlocksAndThreads) {
  for (int64_t n : {2, 7, 8, 9, 15, 255, 256, 257, 8191, 8192, 8193, 3 * 8192 + 5, 40007}) {
    SCOPED_TRACE(fmt::format("n {}", n));
    ir::Builder b("sizes");
    Ops o{b, n};
    std::vector<ValueId> x;
    for (const char* name : {"p", "m", "v", "g"}) x.push_back(b.parameter({DType::f32, {n}}, name));
    Upd u = standard(o, x[0], x[1], x[2], x[3]);
    ir::Function f = b.build({u.pn, u.mn, u.vn});
    EXPECT_EQ(fused_adam_updates(f), 1);
    auto in = four_inputs(n);
    auto out = run_all(f, in);
    std::vector<double> w[3];
    for (int64_t i = 0; i < n; ++i) {
      auto x3 = standard_want(in[0].at(i), in[1].at(i), in[2].at(i), in[3].at(i));
      for (int k = 0; k < 3; ++k) w[k].push_back(x3[size_t(k)]);
    }
    for (int k = 0; k < 3; ++k) expect_values(out[size_t(k)], w[k]);
    f.aliases = {{0, 0}, {1, 1}, {2, 2}};
    for (int threads : {1, 2}) {
      std::vector<Array> d = in;
      auto dout = runtime::host::compile(f, {.num_threads = threads})->run_donated(d);
      for (int k = 0; k < 3; ++k) EXPECT_TRUE(dout[size_t(k)].bitwise_equal(out[size_t(k)]));
    }
  }
}

// The same register as several operands: g = m = v, p = g; p = m; m = v; one broadcast for
// every scalar. Fused (the operands are only read) and equal to the ops op by op.
TEST(HostAdamFusionEdges, OneRegisterAsSeveralOperands) {
  const int64_t n = 1000;
  auto in = four_inputs(n);
  struct Case {
    int p, m, v, g;
  };
  for (Case c : {Case{3, 3, 3, 3}, Case{1, 1, 2, 3}, Case{0, 1, 1, 3}, Case{3, 1, 2, 3}}) {
    SCOPED_TRACE(fmt::format("p {} m {} v {} g {}", c.p, c.m, c.v, c.g));
    ir::Builder b("shared");
    Ops o{b, n};
    std::vector<ValueId> x;
    for (const char* name : {"a", "b", "c", "d"}) x.push_back(b.parameter({DType::f32, {n}}, name));
    Upd u = standard(o, x[size_t(c.p)], x[size_t(c.m)], x[size_t(c.v)], x[size_t(c.g)]);
    const ir::Function f = b.build({u.pn, u.mn, u.vn});
    EXPECT_EQ(fused_adam_updates(f), 1);
    auto out = run_all(f, in);
    std::vector<double> w[3];
    for (int64_t i = 0; i < n; ++i) {
      auto x3 = standard_want(in[size_t(c.p)].at(i), in[size_t(c.m)].at(i), in[size_t(c.v)].at(i),
                              in[size_t(c.g)].at(i));
      for (int k = 0; k < 3; ++k) w[k].push_back(x3[size_t(k)]);
    }
    for (int k = 0; k < 3; ++k) expect_values(out[size_t(k)], w[k]);
  }
  // Every scalar the same broadcast value s: m' = m·s + g·s, v' = v·s + (g·s)², p' = p·s − s·q.
  ir::Builder b("one_scalar");
  auto x = b.parameter({DType::f32, {n}}, "x");
  auto g = b.parameter({DType::f32, {n}}, "g");
  auto s = b.broadcast_in_dim(b.parameter({DType::f32, {}}, "s"), {n}, {});
  auto mul = [&](ValueId l, ValueId r) { return b.binary(Op::multiply, l, r); };
  auto add = [&](ValueId l, ValueId r) { return b.binary(Op::add, l, r); };
  auto mn = add(mul(x, s), mul(g, s));
  auto gc = mul(g, s);
  auto vn = add(mul(x, s), mul(gc, gc));
  auto q = b.binary(Op::divide, mn, add(b.unary(Op::sqrt, vn), s));
  auto pn = b.binary(Op::subtract, mul(x, s), mul(s, q));
  const ir::Function f = b.build({pn, mn, vn});
  std::vector<Array> in2 = {in[2], in[3], Array::scalar<float>(0.75f)};
  auto out = run_all(f, in2);
  std::vector<double> w[3];
  for (int64_t i = 0; i < n; ++i) {
    const double xi = in2[0].at(i), gi = in2[1].at(i), S = 0.75;
    const double m2 = r32(r32(xi * S) + r32(gi * S)), gcs = r32(gi * S);
    const double v2 = r32(r32(xi * S) + r32(gcs * gcs));
    const double qq = r32(m2 / r32(r32(std::sqrt(v2)) + S));
    w[0].push_back(r32(r32(xi * S) - r32(S * qq)));
    w[1].push_back(m2);
    w[2].push_back(v2);
  }
  for (int k = 0; k < 3; ++k) expect_values(out[size_t(k)], w[k]);
}

// m' and v' read again: each stored to two outputs, summed in the same group, multiplied after
// the subtract; and a reduce of m' recorded before the subtract (values only).
TEST(HostAdamFusionEdges, ResultsStoredTwiceReducedAndReadAfter) {
  const int64_t n = 20000;
  auto in = four_inputs(n);
  for (bool reduce_first : {false, true}) {
    SCOPED_TRACE(fmt::format("reduce first {}", reduce_first));
    ir::Builder b("reread");
    Ops o{b, n};
    std::vector<ValueId> x;
    for (const char* name : {"p", "m", "v", "g"}) x.push_back(b.parameter({DType::f32, {n}}, name));
    auto mn = o.add(o.mul(x[1], o.S(kB1)), o.mul(x[3], o.S(kC1)));
    ValueId early = reduce_first ? b.reduce(mn, ir::ReduceKind::sum, {0}) : ValueId{};
    auto gc = o.mul(x[3], o.S(kC2));
    auto vn = o.add(o.mul(x[2], o.S(kB2)), o.mul(gc, gc));
    auto pn = o.sub(o.mul(x[0], o.S(kDec)), o.mul(o.S(kAlpha), o.quot(mn, vn)));
    auto sum_m = reduce_first ? early : b.reduce(mn, ir::ReduceKind::max, {0});
    auto sum_v = b.reduce(vn, ir::ReduceKind::max, {0});
    auto prod = o.mul(mn, vn);
    const ir::Function f = b.build({pn, mn, vn, mn, vn, sum_m, sum_v, prod});
    if (!reduce_first) {
      EXPECT_EQ(fused_adam_updates(f), 1);
    }
    auto out = run_all(f, in);
    std::vector<double> w[4];
    double mx_m = -kInf, mx_v = -kInf;
    for (int64_t i = 0; i < n; ++i) {
      auto x3 = standard_want(in[0].at(i), in[1].at(i), in[2].at(i), in[3].at(i));
      for (int k = 0; k < 3; ++k) w[k].push_back(x3[size_t(k)]);
      w[3].push_back(r32(x3[1] * x3[2]));
      mx_m = std::max(mx_m, x3[1]);
      mx_v = std::max(mx_v, x3[2]);
    }
    for (int k = 0; k < 3; ++k) expect_values(out[size_t(k)], w[k]);
    expect_values(out[3], w[1]);
    expect_values(out[4], w[2]);
    if (!reduce_first) expect_values(out[5], {mx_m});
    expect_values(out[6], {mx_v});
    expect_values(out[7], w[3]);
  }
}

// Donation crossed between the update's inputs: m' into g's storage, v' into p's, p' into m's,
// and a second update after it reading the same g and p. Donated runs (1 and 2 threads) equal
// the undonated ones, which equal the ops op by op.
TEST(HostAdamFusionEdges, CrossedDonationWithALaterReaderOfTheDonors) {
  const int64_t n = 20000;
  auto in = four_inputs(n);
  in.push_back(Array::from_doubles(DType::f32, {n}, wave(n, 0.02, 0.23, -0.01)));
  ir::Builder b("crossed");
  Ops o{b, n};
  std::vector<ValueId> x;
  for (const char* name : {"p", "m", "v", "g", "m2"})
    x.push_back(b.parameter({DType::f32, {n}}, name));
  Upd u1 = standard(o, x[0], x[1], x[2], x[3]);
  Upd u2 = standard(o, x[0], x[4], x[2], x[3], false);  // reads p, v and g again
  ir::Function f = b.build({u1.pn, u1.mn, u1.vn, u2.pn, u2.mn, u2.vn});
  EXPECT_EQ(fused_adam_updates(f), 2);
  auto out = run_all(f, in);
  std::vector<double> w[6];
  for (int64_t i = 0; i < n; ++i) {
    auto a = standard_want(in[0].at(i), in[1].at(i), in[2].at(i), in[3].at(i));
    auto c = standard_want(in[0].at(i), in[4].at(i), in[2].at(i), in[3].at(i), false);
    for (int k = 0; k < 3; ++k) {
      w[k].push_back(a[size_t(k)]);
      w[3 + k].push_back(c[size_t(k)]);
    }
  }
  for (int k = 0; k < 6; ++k) expect_values(out[size_t(k)], w[k]);
  for (auto aliases : {std::vector<ir::Alias>{{1, 3}, {2, 0}, {0, 1}},
                       std::vector<ir::Alias>{{4, 3}, {5, 0}, {3, 1}},
                       std::vector<ir::Alias>{{0, 0}, {1, 1}, {2, 2}, {4, 4}, {3, 3}}}) {
    f.aliases = aliases;
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("aliases {} threads {}", aliases[0].output, threads));
      std::vector<Array> d = in;
      auto dout = runtime::host::compile(f, {.num_threads = threads})->run_donated(d);
      for (int k = 0; k < 6; ++k)
        EXPECT_TRUE(dout[size_t(k)].bitwise_equal(out[size_t(k)])) << "output " << k;
    }
  }
}

// The found-inf form: p', m', v' each selected against p, m, v by one i1 scalar (resolved per
// run), donated. Either value of the flag, 1 and 2 threads.
TEST(HostAdamFusionEdges, SkippedByAScalarPredicate) {
  const int64_t n = 20000;
  auto in = four_inputs(n);
  ir::Builder b("skip");
  Ops o{b, n};
  std::vector<ValueId> x;
  for (const char* name : {"p", "m", "v", "g"}) x.push_back(b.parameter({DType::f32, {n}}, name));
  auto skip = b.parameter({DType::i1, {}}, "skip");
  Upd u = standard(o, x[0], x[1], x[2], x[3]);
  auto sel = [&](ValueId keep, ValueId upd) {
    return b.select(b.broadcast_in_dim(skip, {n}, {}), keep, upd);
  };
  // m' also feeds an output unconditionally, after the selects.
  ir::Function f =
      b.build({sel(x[0], u.pn), sel(x[1], u.mn), sel(x[2], u.vn), o.mul(u.mn, o.S(2.0))});
  f.aliases = {{0, 0}, {1, 1}, {2, 2}};
  EXPECT_EQ(fused_adam_updates(f), 1);
  for (bool flag : {false, true}) {
    SCOPED_TRACE(fmt::format("skip {}", flag));
    std::vector<Array> args = in;
    args.push_back(Array::scalar(flag));
    auto out = run_all(f, args);
    std::vector<double> w[4];
    for (int64_t i = 0; i < n; ++i) {
      auto a = standard_want(in[0].at(i), in[1].at(i), in[2].at(i), in[3].at(i));
      for (int k = 0; k < 3; ++k) w[k].push_back(flag ? in[size_t(k)].at(i) : a[size_t(k)]);
      w[3].push_back(r32(a[1] * 2.0));
    }
    for (int k = 0; k < 4; ++k) expect_values(out[size_t(k)], w[k]);
    for (int threads : {1, 2}) {
      std::vector<Array> d = args;
      auto dout = runtime::host::compile(f, {.num_threads = threads})->run_donated(d);
      for (int k = 0; k < 4; ++k) EXPECT_TRUE(dout[size_t(k)].bitwise_equal(out[size_t(k)]));
    }
  }
}

// Not an Adam update: b1 a block (not one broadcast value), or p' = alpha·q − p·decay. Neither
// fuses; values as the ops give them.
TEST(HostAdamFusionEdges, BlockCoefficientOrSwappedSubtractDoNotFuse) {
  const int64_t n = 3000;
  auto in = four_inputs(n);
  in.push_back(Array::from_doubles(DType::f32, {n}, wave(n, 0.05, 0.9, 0.9)));
  for (bool swapped : {false, true}) {
    SCOPED_TRACE(fmt::format("swapped {}", swapped));
    ir::Builder b("not_adam");
    Ops o{b, n};
    std::vector<ValueId> x;
    for (const char* name : {"p", "m", "v", "g", "b1"})
      x.push_back(b.parameter({DType::f32, {n}}, name));
    auto mn = o.add(o.mul(x[1], swapped ? o.S(kB1) : x[4]), o.mul(x[3], o.S(kC1)));
    auto gc = o.mul(x[3], o.S(kC2));
    auto vn = o.add(o.mul(x[2], o.S(kB2)), o.mul(gc, gc));
    auto pd = o.mul(x[0], o.S(kDec)), aq = o.mul(o.S(kAlpha), o.quot(mn, vn));
    const ir::Function f = b.build({swapped ? o.sub(aq, pd) : o.sub(pd, aq), mn, vn});
    EXPECT_EQ(fused_adam_updates(f), 0);
    auto out = run_all(f, in);
    std::vector<double> w;
    for (int64_t i = 0; i < n; ++i) {
      const double b1 = swapped ? r32(kB1) : in[4].at(i);
      const double m2 = r32(r32(in[1].at(i) * b1) + r32(in[3].at(i) * r32(kC1)));
      const double v2 = vn_of(in[2].at(i), in[3].at(i));
      const double q = r32(m2 / r32(r32(std::sqrt(v2)) + r32(kEps)));
      const double pd1 = r32(in[0].at(i) * r32(kDec)), aq1 = r32(r32(kAlpha) * q);
      w.push_back(swapped ? r32(aq1 - pd1) : r32(pd1 - aq1));
    }
    expect_values(out[0], w);
  }
}

// bf16 / f16 updates (each op rounded to the dtype) do not fuse; an f32 update of bf16 p and g
// (converted) fuses and rounds p' to bf16 once, at the store.
TEST(HostAdamFusionEdges, HalfPrecisionUpdates) {
  const int64_t n = 1029;
  for (DType t : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(name(t)));
    auto in4 = four_inputs(n);
    std::vector<Array> in;
    for (const Array& a : in4)
      in.push_back(Array::from_doubles(t, {n}, [&] {
        std::vector<double> x;
        for (int64_t i = 0; i < n; ++i) x.push_back(a.at(i));
        return x;
      }()));
    {  // everything in t
      ir::Builder b("half");
      std::vector<ValueId> x;
      for (const char* name : {"p", "m", "v", "g"}) x.push_back(b.parameter({t, {n}}, name));
      auto S = [&](double v) { return b.broadcast_in_dim(b.scalar(t, v), {n}, {}); };
      auto mul = [&](ValueId l, ValueId r) { return b.binary(Op::multiply, l, r); };
      auto add = [&](ValueId l, ValueId r) { return b.binary(Op::add, l, r); };
      auto mn = add(mul(x[1], S(kB1)), mul(x[3], S(kC1)));
      auto gc = mul(x[3], S(kC2));
      auto vn = add(mul(x[2], S(kB2)), mul(gc, gc));
      auto q = b.binary(Op::divide, mn, add(b.unary(Op::sqrt, vn), S(kEps)));
      auto pn = b.binary(Op::subtract, mul(x[0], S(kDec)), mul(S(kAlpha), q));
      const ir::Function f = b.build({pn, mn, vn});
      EXPECT_EQ(fused_adam_updates(f), 0);
      auto out = run_all(f, in);
      std::vector<double> w[3];
      auto rt = [&](double v) { return round_to(t, v); };
      for (int64_t i = 0; i < n; ++i) {
        const double p = in[0].at(i), m = in[1].at(i), v = in[2].at(i), g = in[3].at(i);
        const double m2 = rt(rt(m * rt(kB1)) + rt(g * rt(kC1))), gcv = rt(g * rt(kC2));
        const double v2 = rt(rt(v * rt(kB2)) + rt(gcv * gcv));
        const double qv = rt(m2 / rt(rt(std::sqrt(v2)) + rt(kEps)));
        w[0].push_back(rt(rt(p * rt(kDec)) - rt(rt(kAlpha) * qv)));
        w[1].push_back(m2);
        w[2].push_back(v2);
      }
      for (int k = 0; k < 3; ++k) expect_values(out[size_t(k)], w[k]);
    }
    {  // p and g in t, converted; m, v and the update in f32; p' back to t
      ir::Builder b("mixed");
      Ops o{b, n};
      auto p = b.parameter({t, {n}}, "p");
      auto m = b.parameter({DType::f32, {n}}, "m");
      auto v = b.parameter({DType::f32, {n}}, "v");
      auto g = b.parameter({t, {n}}, "g");
      Upd u = standard(o, b.convert(p, DType::f32), m, v, b.convert(g, DType::f32));
      ir::Function f = b.build({b.convert(u.pn, t), u.mn, u.vn});
      EXPECT_EQ(fused_adam_updates(f), 1);
      std::vector<Array> args = {in[0], in4[1], in4[2], in[3]};
      auto out = run_all(f, args);
      std::vector<double> w[3];
      for (int64_t i = 0; i < n; ++i) {
        auto a = standard_want(args[0].at(i), args[1].at(i), args[2].at(i), args[3].at(i));
        w[0].push_back(round_to(t, a[0]));
        w[1].push_back(a[1]);
        w[2].push_back(a[2]);
      }
      for (int k = 0; k < 3; ++k) expect_values(out[size_t(k)], w[k]);
      f.aliases = {{0, 0}, {1, 1}, {2, 2}};
      std::vector<Array> d = args;
      auto dout = runtime::host::compile(f, {.num_threads = 2})->run_donated(d);
      for (int k = 0; k < 3; ++k) EXPECT_TRUE(dout[size_t(k)].bitwise_equal(out[size_t(k)]));
    }
  }
}

// NaN operands of opposite sign meeting in an add: x86 returns the first operand's NaN. The
// adam instruction computes m·b1 + g·c1 in that order whatever the program's order: written
// that way, fused == unfused to the NaN's sign bit (run_all compares bits); the other way
// round, NaN where unfused has NaN, its sign not guaranteed (IEEE 754 leaves it open).
TEST(HostAdamFusionEdges, NaNOperandsInEitherOrder) {
  const int64_t n = 64;
  for (bool swap : {false, true}) {
    SCOPED_TRACE(fmt::format("swap {}", swap));
    ir::Builder b("nan");
    Ops o{b, n};
    std::vector<ValueId> x;
    for (const char* name : {"p", "m", "v", "g"}) x.push_back(b.parameter({DType::f32, {n}}, name));
    auto M = [&](ValueId l, ValueId r) { return swap ? o.mul(r, l) : o.mul(l, r); };
    auto A = [&](ValueId l, ValueId r) { return swap ? o.add(r, l) : o.add(l, r); };
    auto mn = A(M(x[1], o.S(kB1)), M(x[3], o.S(kC1)));
    auto gc = M(x[3], o.S(kC2));
    auto vn = A(M(x[2], o.S(kB2)), M(gc, gc));
    auto pn = o.sub(M(x[0], o.S(kDec)), M(o.S(kAlpha), o.quot(mn, vn)));
    const ir::Function f = b.build({pn, mn, vn});
    EXPECT_EQ(fused_adam_updates(f), 1);
    auto in = four_inputs(n);
    for (int64_t i = 0; i < n; i += 2) {  // m +NaN, g -NaN, v +NaN, p -NaN on even elements
      static_cast<float*>(in[0].raw())[i] = -std::numeric_limits<float>::quiet_NaN();
      static_cast<float*>(in[1].raw())[i] = std::numeric_limits<float>::quiet_NaN();
      static_cast<float*>(in[2].raw())[i] = std::numeric_limits<float>::quiet_NaN();
      static_cast<float*>(in[3].raw())[i] = -std::numeric_limits<float>::quiet_NaN();
    }
    if (!swap) {
      run_all(f, in);  // fused (the adam instruction) == unfused, NaN signs included
      continue;
    }
    // The other way round: the same values, NaN where the unfused run has NaN.
    auto fused = runtime::host::compile(f)->run(in);
    auto plain = runtime::host::compile(f, {.fuse = false})->run(in);
    for (size_t k = 0; k < fused.size(); ++k) expect_values(fused[k], plain[k].to_doubles());
  }
}

// p·decay with a second reader (not taken into the instruction): the update still fuses with
// p·decay as its p; m' converted to bf16 before the subtract (a reader that is not a store).
TEST(HostAdamFusionEdges, SharedDecayProductAndEarlyConvert) {
  const int64_t n = 3000;
  auto in = four_inputs(n);
  ir::Builder b("shared_decay");
  Ops o{b, n};
  std::vector<ValueId> x;
  for (const char* name : {"p", "m", "v", "g"}) x.push_back(b.parameter({DType::f32, {n}}, name));
  auto mn = o.add(o.mul(x[1], o.S(kB1)), o.mul(x[3], o.S(kC1)));
  auto mb = b.convert(mn, DType::bf16);
  auto gc = o.mul(x[3], o.S(kC2));
  auto vn = o.add(o.mul(x[2], o.S(kB2)), o.mul(gc, gc));
  auto pd = o.mul(x[0], o.S(kDec));
  auto pn = o.sub(pd, o.mul(o.S(kAlpha), o.quot(mn, vn)));
  const ir::Function f = b.build({pn, mn, vn, pd, mb});
  auto out = run_all(f, in);
  std::vector<double> w[5];
  for (int64_t i = 0; i < n; ++i) {
    auto a = standard_want(in[0].at(i), in[1].at(i), in[2].at(i), in[3].at(i));
    for (int k = 0; k < 3; ++k) w[k].push_back(a[size_t(k)]);
    w[3].push_back(r32(in[0].at(i) * r32(kDec)));
    w[4].push_back(round_to(DType::bf16, a[1]));
  }
  for (int k = 0; k < 5; ++k) expect_values(out[size_t(k)], w[k]);
}

// Two updates in one group. The found-inf style output keep = flag ? h : p'₁ is donated to
// input z, so its store runs after the block (a late store), though it is recorded before the
// second update. The second update's g is h, its m is v'₁, and its m'₂ is donated to h. Unfused,
// g·c2 and v·b2 read h after m'₂ is computed, so m'₂ is stored late too, after keep. Fused, the
// adam instruction is both m'₂'s last writer and h's last reader, so m'₂ is written straight into
// h's storage inside the block, before the late store of keep reads h (the check for later readers
// of h looks only at instructions after the writer in program order, and keep's store is
// before it). With the flag set, keep comes out as m'₂ instead of h.
TEST(HostAdamFusionEdges, DonatedMPrimeOverwritesAPassThroughStoredLate) {
  const int64_t n = 1000;
  auto in = four_inputs(n);
  for (int k = 0; k < 3; ++k) in.push_back(in[size_t(k + 1)]);  // h, (unused), v2
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(in[4].raw())[i] += 1.0f;
  in.push_back(Array::from_doubles(DType::f32, {n}, wave(n, 1, 0.2, 5)));  // z
  ir::Builder b("late_pass_through");
  Ops o{b, n};
  std::vector<ValueId> x;
  for (const char* name : {"p", "m", "v", "g", "h", "m2", "v2", "z"})
    x.push_back(b.parameter({DType::f32, {n}}, name));
  auto flag = b.parameter({DType::i1, {}}, "flag");
  Upd u1 = standard(o, x[0], x[1], x[2], x[3]);
  auto keep = b.select(b.broadcast_in_dim(flag, {n}, {}), x[4], u1.pn);
  Upd u2 = standard(o, x[0], u1.vn, x[6], x[4]);  // m₂ = v'₁: one group
  ir::Function f = b.build({keep, u1.mn, u1.vn, u2.pn, u2.mn, u2.vn});
  f.aliases = {{0, 7}, {4, 4}};  // keep -> z, m'₂ -> h
  EXPECT_EQ(fused_adam_updates(f), 2);
  for (bool fl : {true, false}) {
    SCOPED_TRACE(fmt::format("flag {}", fl));
    std::vector<Array> args = in;
    args.push_back(Array::scalar(fl));
    auto want = run_all(f, args);
    std::vector<double> wk;
    for (int64_t i = 0; i < n; ++i)
      wk.push_back(fl ? in[4].at(i)
                      : standard_want(in[0].at(i), in[1].at(i), in[2].at(i), in[3].at(i))[0]);
    expect_values(want[0], wk);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("donated, threads {}", threads));
      std::vector<Array> d = args;
      auto dout = runtime::host::compile(f, {.num_threads = threads})->run_donated(d);
      expect_values(dout[0], wk);
      for (int k = 1; k < 6; ++k) EXPECT_TRUE(dout[size_t(k)].bitwise_equal(want[size_t(k)]));
    }
  }
}

}  // namespace
}  // namespace tlaloc::host_test
