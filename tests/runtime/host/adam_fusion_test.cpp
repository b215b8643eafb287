// An Adam update's ops (the form optim/update.cpp emits) run as one instruction on the host
// (program.cpp: fuse_adam; instr_adam.cpp). Checked against the same formulas computed here op
// by op, each op's exact result rounded to f32 (double rounding is harmless for + - * / sqrt
// of floats): bitwise, in either operand order, with and without the decay multiply, with p, m
// and v donated, on the AVX2 and baseline loops, over several blocks with a partial last
// vector and the 2-thread split. A form with an intermediate used elsewhere is not fused and
// still gives the same values.
#include <cstdlib>

#include "kernel_test_util.h"
#include "tlaloc/runtime/host/plan.h"

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
        auto plan = runtime::host::make_plan(f, {.num_threads = 1});
        bool fused = false;
        for (const auto& k : plan.steps) fused |= k->label.find(", 1 adam)") != std::string::npos;
        EXPECT_EQ(fused, !leak);
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

}  // namespace
}  // namespace tlaloc::host_test
