// bf16 attention (mixed precision): the host kernels (the GEMM path on the bf16 GEMM) against an
// f64 computation written here from the composite's bf16 rule (attention.cpp): scores
// scale·q·kᵀ of the bf16 values, softmax in full precision, the probabilities rounded to bf16
// before the dot with v; the backward's p, d_out and scale·ds rounded to bf16 before their dots,
// dq, dk, dv rounded to bf16. The only differences left are f32 accumulation and a rounding
// boundary crossed by an f32 value the oracle holds in f64, so the bounds are a few bf16 ulps of
// p (2^-8) times the sums' magnitudes. run_all also checks 1 = 2 threads, bitwise. MHA and GQA,
// causal with S < T and S > T, several query blocks; the decomposition (the pjrt lane's program)
// agrees too; inf and NaN inputs give the decomposition's NaN and inf; a key mask hides its keys.
#include <fmt/format.h>

#include <cmath>

#include "kernel_test_util.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

double bf(double v) { return round_to(DType::bf16, v); }

struct Cfg {
  int64_t B, Hq, S, D, Hkv, T, Dv;
  bool causal;
};

// The f64 oracle: out [B,Hq,S,Dv], lse [B,Hq,S] and, from d_out, dq, dk, dv (f64, unrounded
// dq / dk / dv; the caller compares with the kernel's bf16).
struct Oracle {
  std::vector<double> out, lse, dq, dk, dv;
};

// mask: [B, T] (false: the key is hidden) or empty.
Oracle oracle(const Cfg& c, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, const std::vector<double>& dout, double scale,
              const std::vector<bool>& mask = {}) {
  Oracle o;
  o.out.assign(size_t(c.B * c.Hq * c.S * c.Dv), 0);
  o.lse.assign(size_t(c.B * c.Hq * c.S), -INFINITY);
  o.dq.assign(q.size(), 0);
  o.dk.assign(k.size(), 0);
  o.dv.assign(v.size(), 0);
  const int64_t G = c.Hq / c.Hkv;
  std::vector<double> p(size_t(c.T)), pb(size_t(c.T));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t kv = b * c.Hkv + h / G, bh = b * c.Hq + h;
      for (int64_t i = 0; i < c.S; ++i) {
        const int64_t end = c.causal ? std::clamp<int64_t>(i + c.T - c.S + 1, 0, c.T) : c.T;
        auto seen = [&](int64_t j) {
          return j < end && (mask.empty() || mask[size_t(b * c.T + j)]);
        };
        bool any = false;
        for (int64_t j = 0; j < end; ++j) any |= seen(j);
        if (!any) continue;
        double m = -INFINITY;
        for (int64_t j = 0; j < end; ++j) {
          if (!seen(j)) continue;
          double s = 0;
          for (int64_t d = 0; d < c.D; ++d)
            s += q[size_t((bh * c.S + i) * c.D + d)] * k[size_t((kv * c.T + j) * c.D + d)];
          p[size_t(j)] = s * scale;
          m = std::max(m, p[size_t(j)]);
        }
        double l = 0;
        for (int64_t j = 0; j < end; ++j)
          l += p[size_t(j)] = seen(j) ? std::exp(p[size_t(j)] - m) : 0.0;
        const double lse = m + std::log(l);
        o.lse[size_t(bh * c.S + i)] = lse;
        for (int64_t j = 0; j < end; ++j) pb[size_t(j)] = bf(p[size_t(j)] / l);
        const double* dO = dout.data() + (bh * c.S + i) * c.Dv;
        double delta = 0;
        for (int64_t d = 0; d < c.Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < end; ++j)
            acc += pb[size_t(j)] * v[size_t((kv * c.T + j) * c.Dv + d)];
          o.out[size_t((bh * c.S + i) * c.Dv + d)] = acc;
        }
        // The backward reads the forward's (f32) out; here the oracle's own.
        for (int64_t d = 0; d < c.Dv; ++d)
          delta += dO[d] * o.out[size_t((bh * c.S + i) * c.Dv + d)];
        for (int64_t j = 0; j < end; ++j) {
          if (!seen(j)) continue;
          const double pj = p[size_t(j)] / l;  // exp(s - lse)
          double dp = 0;
          for (int64_t d = 0; d < c.Dv; ++d) {
            dp += bf(dO[d]) * v[size_t((kv * c.T + j) * c.Dv + d)];
            o.dv[size_t((kv * c.T + j) * c.Dv + d)] += bf(pj) * bf(dO[d]);
          }
          const double ds = bf(pj * (dp - delta) * scale);
          for (int64_t d = 0; d < c.D; ++d) {
            o.dq[size_t((bh * c.S + i) * c.D + d)] += ds * k[size_t((kv * c.T + j) * c.D + d)];
            o.dk[size_t((kv * c.T + j) * c.D + d)] += ds * q[size_t((bh * c.S + i) * c.D + d)];
          }
        }
      }
    }
  return o;
}

// |got - want| <= tol · (1 + |want|) for each element.
void near(const Array& got, const std::vector<double>& want, double tol, const char* what) {
  int bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.at(i), w = want[size_t(i)];
    if (std::isinf(w) && g == w) continue;  // a row with no visible key: lse -inf
    if (!(std::abs(g - w) <= tol * (1 + std::abs(w))) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << g << " vs f64 " << w;
  }
}

const Cfg kCfgs[] = {
    {1, 2, 70, 16, 2, 70, 16, true},   // MHA causal, two query blocks
    {2, 4, 130, 8, 2, 90, 12, false},  // GQA, not causal, a last block of 2 rows
    {1, 4, 150, 16, 1, 100, 8, true},  // MQA, causal S > T: rows 0..49 see no key
    {1, 2, 40, 32, 2, 200, 16, true},  // causal S < T
};

TEST(HostBf16Attention, ForwardAndGradientMatchF64OnRoundedOperands) {
  for (const Cfg& c : kCfgs) {
    SCOPED_TRACE(fmt::format("B{} Hq{} S{} D{} Hkv{} T{} Dv{} causal {}", c.B, c.Hq, c.S, c.D,
                             c.Hkv, c.T, c.Dv, c.causal));
    const double scale = 1 / std::sqrt(double(c.D));
    std::vector<Array> in = {lcg_array(DType::bf16, {c.B, c.Hq, c.S, c.D}, 31, -2, 2),
                             lcg_array(DType::bf16, {c.B, c.Hkv, c.T, c.D}, 32, -2, 2),
                             lcg_array(DType::bf16, {c.B, c.Hkv, c.T, c.Dv}, 33)};
    std::vector<ir::TensorType> types;
    for (auto& a : in) types.push_back({a.dtype(), a.shape()});
    auto fwd = one_op_results(types, [&](ir::Builder& b, auto& p) {
      return cop::attention(b, p[0], p[1], p[2], -1, scale, c.causal);
    });
    std::vector<Array> out = run_all(fwd, in);
    ASSERT_EQ(out[0].dtype(), DType::f32);
    const Array dout = lcg_array(DType::f32, out[0].shape(), 34);
    const Oracle o = oracle(c, in[0].to_doubles(), in[1].to_doubles(), in[2].to_doubles(),
                            dout.to_doubles(), scale);
    near(out[0], o.out, 5e-4, "out");
    near(out[1], o.lse, 1e-5, "lse");

    std::vector<Array> gin = {in[0], in[1], in[2], out[0], out[1], dout};
    std::vector<ir::TensorType> gtypes;
    for (auto& a : gin) gtypes.push_back({a.dtype(), a.shape()});
    auto bwd = one_op_results(gtypes, [&](ir::Builder& b, auto& p) {
      return cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], -1, scale, c.causal);
    });
    std::vector<Array> g = run_all(bwd, gin);
    for (const Array& x : g) ASSERT_EQ(x.dtype(), DType::bf16);
    near(g[0], o.dq, 1e-2, "dq");
    near(g[1], o.dk, 1e-2, "dk");
    near(g[2], o.dv, 1e-2, "dv");

    // The decomposition (what StableHLO carries to the pjrt lane) computes the same thing.
    std::vector<Array> fd = passes::interpret(passes::expand_composites(fwd), in);
    near(fd[0], o.out, 5e-4, "decomposed out");
    std::vector<Array> gd = passes::interpret(passes::expand_composites(bwd), gin);
    near(gd[0], o.dq, 1e-2, "decomposed dq");
    near(gd[1], o.dk, 1e-2, "decomposed dk");
    near(gd[2], o.dv, 1e-2, "decomposed dv");
  }
}

// Inf and NaN in q, k, v or d_out, seen or hidden (a causal future key, a row that sees no key):
// the kernels give NaN and inf where the decomposition does (hidden keys take part with weight 0
// there, and 0 · NaN is NaN). Their finite values come from the f32 kernel then (p and d_out not
// rounded to bf16), so they are near the bf16 decomposition's within a few bf16 roundings of
// sums of up to 128 terms. Causal with S <= T is the plain softmax (a row whose scores hold an
// inf or NaN is NaN, gradients too); S > T (rows that see no key) the guarded one.
TEST(HostBf16Attention, NonFiniteInputsAsTheDecomposition) {
  struct Poke {
    int which;  // 0 q, 1 k, 2 v, 3 d_out
    int64_t at;
    double value;
  };
  const Cfg big{1, 1, 128, 4, 1, 128, 4, true}, small{1, 1, 3, 4, 1, 3, 4, true},
      empty{1, 1, 150, 4, 1, 100, 4, true};
  const std::pair<Cfg, Poke> cases[] = {
      {big, {2, 400, kNaN}},  // v of key 100, hidden from rows 0..99
      {big, {1, 400, kNaN}},  // k of key 100
      {big, {2, 400, kInf}},  // v = +inf at key 100
      {small, {3, 0, kNaN}},  // d_out of row 0
      {small, {0, 0, kInf}},  // q = +inf
      {empty, {3, 0, kNaN}},  // d_out of row 0, which sees no key
  };
  for (const auto& [c, poke] : cases) {
    SCOPED_TRACE(
        fmt::format("S{} T{}: operand {} [{}] = {}", c.S, c.T, poke.which, poke.at, poke.value));
    std::vector<Array> in = {lcg_array(DType::bf16, {c.B, c.Hq, c.S, c.D}, 51),
                             lcg_array(DType::bf16, {c.B, c.Hkv, c.T, c.D}, 52),
                             lcg_array(DType::bf16, {c.B, c.Hkv, c.T, c.Dv}, 53)};
    Array dout = lcg_array(DType::f32, {c.B, c.Hq, c.S, c.Dv}, 54);
    Array& target = poke.which < 3 ? in[size_t(poke.which)] : dout;
    std::vector<double> v = target.to_doubles();
    v[size_t(poke.at)] = poke.value;
    target = Array::from_doubles(target.dtype(), target.shape(), v);
    std::vector<ir::TensorType> types;
    for (auto& a : in) types.push_back({a.dtype(), a.shape()});
    auto fwd = one_op_results(types, [&](ir::Builder& b, auto& p) {
      return cop::attention(b, p[0], p[1], p[2], -1, 0.5, c.causal);
    });
    const std::vector<Array> out = run_all(fwd, in);
    const std::vector<Array> want = passes::interpret(passes::expand_composites(fwd), in);
    for (size_t r = 0; r < 2; ++r) expect_values(out[r], want[r].to_doubles(), 1e-2);
    std::vector<Array> gin = {in[0], in[1], in[2], want[0], want[1], dout};
    std::vector<ir::TensorType> gtypes;
    for (auto& a : gin) gtypes.push_back({a.dtype(), a.shape()});
    auto bwd = one_op_results(gtypes, [&](ir::Builder& b, auto& p) {
      return cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], -1, 0.5, c.causal);
    });
    const std::vector<Array> g = run_all(bwd, gin);
    const std::vector<Array> gwant = passes::interpret(passes::expand_composites(bwd), gin);
    for (size_t r = 0; r < 3; ++r) {
      SCOPED_TRACE(fmt::format("gradient {}", r));
      expect_values(g[r], gwant[r].to_doubles(), 5e-2);
    }
  }
}

// A key mask (batch 0 hides key 1; batch 1 hides keys 0..2, so with causal its first rows see
// no key): the kernels' masked GEMM path against the oracle, forward and gradient.
TEST(HostBf16Attention, KeyMaskMatchesF64OnRoundedOperands) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(fmt::format("causal {}", causal));
    const Cfg c{2, 4, 70, 8, 2, 72, 4, causal};
    std::vector<bool> mask(size_t(c.B * c.T), true);
    mask[1] = false;
    for (int64_t j = 0; j < 3; ++j) mask[size_t(c.T + j)] = false;
    std::vector<Array> in = {lcg_array(DType::bf16, {c.B, c.Hq, c.S, c.D}, 41, -2, 2),
                             lcg_array(DType::bf16, {c.B, c.Hkv, c.T, c.D}, 42, -2, 2),
                             lcg_array(DType::bf16, {c.B, c.Hkv, c.T, c.Dv}, 43),
                             Array::from(Shape{c.B, c.T}, mask)};
    std::vector<ir::TensorType> types;
    for (auto& a : in) types.push_back({a.dtype(), a.shape()});
    auto fwd = one_op_results(types, [&](ir::Builder& b, auto& p) {
      return cop::attention(b, p[0], p[1], p[2], p[3], 0.4, c.causal);
    });
    const std::vector<Array> out = run_all(fwd, in);
    const Array dout = lcg_array(DType::f32, out[0].shape(), 44);
    const Oracle o = oracle(c, in[0].to_doubles(), in[1].to_doubles(), in[2].to_doubles(),
                            dout.to_doubles(), 0.4, mask);
    near(out[0], o.out, 5e-4, "out");
    near(out[1], o.lse, 1e-5, "lse");
    std::vector<Array> gin = {in[0], in[1], in[2], out[0], out[1], dout, in[3]};
    std::vector<ir::TensorType> gtypes;
    for (auto& a : gin) gtypes.push_back({a.dtype(), a.shape()});
    auto bwd = one_op_results(gtypes, [&](ir::Builder& b, auto& p) {
      return cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], p[6], 0.4, c.causal);
    });
    const std::vector<Array> g = run_all(bwd, gin);
    near(g[0], o.dq, 1e-2, "dq");
    near(g[1], o.dk, 1e-2, "dk");
    near(g[2], o.dv, 1e-2, "dv");
  }
}

// q, k, v converted from f32 in the program (torch.autocast's case) are read as f32 and rounded
// as the GEMMs pack them: the bits of the program that takes their bf16 values, forward and
// gradient; also with an f32 value that rounds to a bf16 inf (the dense path) and with a NaN.
TEST(HostBf16Attention, ConvertsFromF32GiveTheBitsOfBf16Inputs) {
  const Cfg c{2, 4, 70, 8, 2, 72, 4, true};
  for (double poke : {0.0, 3.4e38, kNaN}) {
    SCOPED_TRACE(fmt::format("k[5] = {}", poke));
    std::vector<Array> f32 = {lcg_array(DType::f32, {c.B, c.Hq, c.S, c.D}, 61, -2, 2),
                              lcg_array(DType::f32, {c.B, c.Hkv, c.T, c.D}, 62, -2, 2),
                              lcg_array(DType::f32, {c.B, c.Hkv, c.T, c.Dv}, 63)};
    if (poke != 0.0) {
      std::vector<double> v = f32[1].to_doubles();
      v[5] = poke;
      f32[1] = Array::from_doubles(DType::f32, f32[1].shape(), v);
    }
    std::vector<Array> b16;
    for (const Array& a : f32) b16.push_back(a.astype(DType::bf16));
    // The op on params of `types`, q, k, v converted to bf16 first when they are f32.
    auto program = [&](const std::vector<Array>& in, bool grad) {
      std::vector<ir::TensorType> types;
      for (auto& a : in) types.push_back({a.dtype(), a.shape()});
      return one_op_results(types, [&](ir::Builder& b, auto& p) {
        for (int i = 0; i < 3; ++i)
          if (in[size_t(i)].dtype() == DType::f32)
            p[size_t(i)] = b.convert(p[size_t(i)], DType::bf16);
        return grad ? cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], -1, 0.4, true)
                    : cop::attention(b, p[0], p[1], p[2], -1, 0.4, true);
      });
    };
    const std::vector<Array> want = run_all(program(b16, false), b16);
    const std::vector<Array> got = run_all(program(f32, false), f32);
    for (size_t r = 0; r < 2; ++r) EXPECT_TRUE(got[r].bitwise_equal(want[r])) << "forward " << r;
    const Array dout = lcg_array(DType::f32, want[0].shape(), 64);
    std::vector<Array> gf = f32, gb = b16;
    for (const Array& a : {want[0], want[1], dout}) gf.push_back(a), gb.push_back(a);
    const std::vector<Array> gwant = run_all(program(gb, true), gb);
    const std::vector<Array> ggot = run_all(program(gf, true), gf);
    for (size_t r = 0; r < 3; ++r) EXPECT_TRUE(ggot[r].bitwise_equal(gwant[r])) << "gradient " << r;
    // The bf16 gradients converted to f32 (autocast's VJP; fused, the kernel writes the f32
    // itself): the bf16 values widened, fused or not (run_all), with inf / NaN inputs too.
    std::vector<ir::TensorType> types;
    for (auto& a : gf) types.push_back({a.dtype(), a.shape()});
    const std::vector<Array> wide =
        run_all(one_op_results(types,
                               [&](ir::Builder& b, auto& p) {
                                 for (int i = 0; i < 3; ++i)
                                   p[size_t(i)] = b.convert(p[size_t(i)], DType::bf16);
                                 std::vector<ir::ValueId> g = cop::attention_grad(
                                     b, p[0], p[1], p[2], p[3], p[4], p[5], -1, 0.4, true);
                                 for (auto& v : g) v = b.convert(v, DType::f32);
                                 return g;
                               }),
                gf);
    for (size_t r = 0; r < 3; ++r)
      EXPECT_TRUE(wide[r].bitwise_equal(gwant[r].astype(DType::f32))) << "widened " << r;
  }
}

}  // namespace
}  // namespace tlaloc::host_test
