// An Adam update's ops (the form optim/update.cpp emits) run as one instruction on the host
// (program.cpp: fuse_adam; instr_adam.cpp). Checked against the same formulas computed here op
// by op, each op's exact result rounded to f32 (double rounding is harmless for + - * / sqrt
// of floats): bitwise, in either operand order, with and without the decay multiply, with p, m
// and v donated, on the AVX2 and baseline loops, over several blocks with a partial last
// vector and the 2-thread split. A form with an intermediate used elsewhere is not fused and
// still gives the same values.
#include <array>
#include <cstdlib>

#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {

using ir::Op;
using runtime::host::compile;

struct Form {
  bool decay = true;  // p' = p·decay − ..., else p − ...
  bool swap = false;  // every commutative op with its operands the other way round
  bool leak = false;  // m' / (√v' + eps) is also an output: not fusable
};

// Inputs p, m, v, g [n] and the f32 scalars b1 c1 b2 c2 eps alpha decay; outputs p', m', v'
// (and the quotient when leak).
ir::Function adam(int64_t n, Form form) {
  ir::Builder b("adam");
  auto p = b.parameter({DType::f32, {n}}, "p");
  auto m = b.parameter({DType::f32, {n}}, "m");
  auto v = b.parameter({DType::f32, {n}}, "v");
  auto g = b.parameter({DType::f32, {n}}, "g");
  std::vector<ir::ValueId> s;
  for (const char* name : {"b1", "c1", "b2", "c2", "eps", "alpha", "decay"})
    s.push_back(b.broadcast_in_dim(b.parameter({DType::f32, {}}, name), {n}, {}));
  auto op = [&](Op o, ir::ValueId x, ir::ValueId y) {
    const bool commutes = o == Op::add || o == Op::multiply;
    return form.swap && commutes ? b.binary(o, y, x) : b.binary(o, x, y);
  };
  auto mn = op(Op::add, op(Op::multiply, m, s[0]), op(Op::multiply, g, s[1]));
  auto gc = op(Op::multiply, g, s[3]);
  auto vn = op(Op::add, op(Op::multiply, v, s[2]), op(Op::multiply, gc, gc));
  auto q = b.binary(Op::divide, mn, op(Op::add, b.unary(Op::sqrt, vn), s[4]));
  auto p1 = form.decay ? op(Op::multiply, p, s[6]) : p;
  auto pn = b.binary(Op::subtract, p1, op(Op::multiply, s[5], q));
  std::vector<ir::ValueId> outs = {pn, mn, vn};
  if (form.leak) outs.push_back(q);
  return b.build(outs);
}

double r32(double x) { return round_to(DType::f32, x); }

TEST(HostAdamFusion, OnePassEqualsTheOpsRoundedOneByOne) {
  const int64_t n = 3 * 8192 + 3;  // blocks of 256, a 3-element tail, split over 2 threads
  const double sc[] = {0.9, 0.1 * 0.5, 0.999, std::sqrt(1 - 0.999) * 0.5, 1e-8, 3e-3, 0.99997};
  std::vector<double> pv, mv, vv, gv;
  for (int64_t i = 0; i < n; ++i) {
    const double t = double(i);
    pv.push_back(0.5 * std::sin(t * 0.37) + (i % 97 == 0 ? -0.0 : 0.0));
    mv.push_back(0.01 * std::cos(t * 0.11));
    vv.push_back(i % 53 == 0 ? 0.0 : 1e-4 * (1.5 + std::sin(t * 0.05)));
    gv.push_back(i % 61 == 0 ? 0.0 : i % 89 == 0 ? 1e20 : std::sin(t * 0.71) * std::exp(-t * 1e-4));
  }
  std::vector<Array> in = {
      Array::from_doubles(DType::f32, {n}, pv), Array::from_doubles(DType::f32, {n}, mv),
      Array::from_doubles(DType::f32, {n}, vv), Array::from_doubles(DType::f32, {n}, gv)};
  for (double x : sc) in.push_back(Array::from_doubles(DType::f32, {}, {x}));
  double S[7];
  for (int k = 0; k < 7; ++k) S[k] = in[size_t(4 + k)].at(0);
  for (bool decay : {true, false}) {
    std::vector<double> wp, wm, wv, wq;
    for (int64_t i = 0; i < n; ++i) {
      const double p = in[0].at(i), m = in[1].at(i), v = in[2].at(i), g = in[3].at(i);
      const double mn = r32(r32(m * S[0]) + r32(g * S[1]));
      const double gc = r32(g * S[3]);
      const double vn = r32(r32(v * S[2]) + r32(gc * gc));
      const double q = r32(mn / r32(r32(std::sqrt(vn)) + S[4]));
      const double p1 = decay ? r32(p * S[6]) : p;
      wp.push_back(r32(p1 - r32(S[5] * q)));
      wm.push_back(mn);
      wv.push_back(vn);
      wq.push_back(q);
    }
    for (bool swap : {false, true})
      for (bool leak : {false, true}) {
        SCOPED_TRACE(fmt::format("decay {} swap {} leak {}", decay, swap, leak));
        const ir::Function f = adam(n, {decay, swap, leak});
        // The plan says whether the update became one instruction.
        EXPECT_EQ(fused_adam_updates(f), leak ? 0 : 1);
        for (bool baseline : {false, true}) {
          SCOPED_TRACE(baseline ? "baseline loops" : "default loops");
          if (baseline) setenv("TLALOC_HOST_ISA", "baseline", 1);
          auto out = run_all(f, in);  // fused / unfused, 1 / 2 threads: bitwise equal
          expect_values(out[0], wp);
          expect_values(out[1], wm);
          expect_values(out[2], wv);
          if (leak) expect_values(out[3], wq);
          if (!leak) {  // p, m, v donated: written in place, same values
            ir::Function d = f;
            d.aliases = {{0, 0}, {1, 1}, {2, 2}};
            std::vector<Array> din = in;  // deep copies
            const void* ps = din[0].raw();
            const void* ms = din[1].raw();
            auto dout = compile(d, {.num_threads = 2})->run_donated(din);
            EXPECT_EQ(dout[0].raw(), ps);
            EXPECT_EQ(dout[1].raw(), ms);
            EXPECT_TRUE(dout[0].bitwise_equal(out[0]));
            EXPECT_TRUE(dout[1].bitwise_equal(out[1]));
            EXPECT_TRUE(dout[2].bitwise_equal(out[2]));
          }
          unsetenv("TLALOC_HOST_ISA");
        }
      }
  }
}

// Four updates in one program: two sharing v and g, one whose m' feeds another op before p'
// is computed (not fused), one where g is also m and p is computed in the group. Three fuse;
// values against the ops rounded one by one, as above.
TEST(HostAdamFusion, SeveralUpdatesAndEarlyReadersInOneGroup) {
  const int64_t n = 1000;
  ir::Builder b("adam2");
  std::vector<ir::ValueId> in;
  for (const char* name : {"p", "m", "v", "g", "q", "u"})
    in.push_back(b.parameter({DType::f32, {n}}, name));
  auto S = [&](double x) { return b.broadcast_in_dim(b.scalar(DType::f32, x), {n}, {}); };
  auto mul = [&](ir::ValueId x, ir::ValueId y) { return b.binary(Op::multiply, x, y); };
  auto add = [&](ir::ValueId x, ir::ValueId y) { return b.binary(Op::add, x, y); };
  const double b1 = 0.9, c1 = 0.05, b2 = 0.99, c2 = 0.07, eps = 1e-6, alpha = 0.01, dec = 0.999;
  // p' = p·dec − alpha·(m' / (√v' + eps)), m' = m·b1 + g·c1, v' = v·b2 + (g·c2)².
  auto update = [&](ir::ValueId p, ir::ValueId m, ir::ValueId v, ir::ValueId g,
                    std::vector<ir::ValueId>& outs, bool early) {
    auto mn = add(mul(m, S(b1)), mul(g, S(c1)));
    if (early) outs.push_back(mul(mn, mn));  // read before the subtract by a non-store op
    auto gc = mul(g, S(c2));
    auto vn = add(mul(v, S(b2)), mul(gc, gc));
    auto q = b.binary(Op::divide, mn, add(b.unary(Op::sqrt, vn), S(eps)));
    outs.push_back(b.binary(Op::subtract, mul(p, S(dec)), mul(S(alpha), q)));
    outs.push_back(mn);
    outs.push_back(vn);
  };
  std::vector<ir::ValueId> outs;
  update(in[0], in[1], in[2], in[3], outs, false);
  update(in[4], in[5], in[2], in[3], outs, false);              // a second update, same v and g
  update(in[0], in[1], in[2], in[1], outs, true);               // early reader: not fused
  update(add(in[4], in[5]), in[3], in[2], in[3], outs, false);  // g is m; p computed here
  const ir::Function f = b.build(outs);
  EXPECT_EQ(fused_adam_updates(f), 3);  // all but the one with an early reader

  std::vector<Array> args;
  for (int k = 0; k < 6; ++k) {
    std::vector<double> x;
    for (int64_t i = 0; i < n; ++i)
      x.push_back(k == 2 ? 0.01 + 0.005 * std::sin(double(i) * 0.3)
                         : std::sin(double(i) * (0.1 + 0.07 * k) + k));
    args.push_back(Array::from_doubles(DType::f32, {n}, x));
  }
  auto out = run_all(f, args);
  auto want = [&](int pi, int mi, int vi, int gi, int64_t i, bool p_sum) {
    const double p = p_sum ? r32(args[4].at(i) + args[5].at(i)) : args[size_t(pi)].at(i);
    const double m = args[size_t(mi)].at(i), v = args[size_t(vi)].at(i), g = args[size_t(gi)].at(i);
    const double mn = r32(r32(m * r32(b1)) + r32(g * r32(c1)));
    const double gc = r32(g * r32(c2));
    const double vn = r32(r32(v * r32(b2)) + r32(gc * gc));
    const double q = r32(mn / r32(r32(std::sqrt(vn)) + r32(eps)));
    return std::array<double, 4>{r32(r32(p * r32(dec)) - r32(r32(alpha) * q)), mn, vn,
                                 r32(mn * mn)};
  };
  struct Case {
    int p, m, v, g;
    bool early, p_sum;
  };
  const Case cases[] = {{0, 1, 2, 3, false, false},
                        {4, 5, 2, 3, false, false},
                        {0, 1, 2, 1, true, false},
                        {0, 3, 2, 3, false, true}};
  size_t o = 0;
  for (const Case& c : cases) {
    std::vector<double> w[4];
    for (int64_t i = 0; i < n; ++i) {
      auto x = want(c.p, c.m, c.v, c.g, i, c.p_sum);
      for (int k = 0; k < 4; ++k) w[k].push_back(x[size_t(k)]);
    }
    if (c.early) expect_values(out[o++], w[3]);
    for (int k = 0; k < 3; ++k) expect_values(out[o++], w[k]);
  }
}

}  // namespace
}  // namespace tlaloc::host_test
