// Attention on the host lane against naive f64 loops written here (forward) and central
// differences of those loops (gradients), for MHA / GQA / MQA; GQA equals MHA with repeated kv
// heads; LayerNorm's two-pass variance; the LM layers' shapes, parameter names and embedding init.
#include <gtest/gtest.h>

#include <cmath>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using trace::Tensor;

namespace {

Array pseudo(Shape s, uint64_t seed) {
  std::vector<double> v(size_t(s.numel()));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 3;
  for (auto& e : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = -1 + 2 * double(x >> 11) * 0x1.0p-53;
  }
  return Array::from_doubles(DType::f64, s, v);
}

struct Sizes {
  int64_t B, Hq, S, D, Hkv, T;
};

// softmax(q kᵀ / √D + causal mask) v, rows with no visible key -> 0; Σ ct·out.
double naive_loss(const Sizes& z, const std::vector<double>& q, const std::vector<double>& k,
                  const std::vector<double>& v, const std::vector<double>& ct,
                  std::vector<double>* out = nullptr) {
  double L = 0;
  const int64_t G = z.Hq / z.Hkv;
  for (int64_t b = 0; b < z.B; ++b)
    for (int64_t h = 0; h < z.Hq; ++h)
      for (int64_t i = 0; i < z.S; ++i) {
        const int64_t kh = h / G;
        std::vector<double> s(size_t(z.T), -INFINITY);
        double m = -INFINITY;
        for (int64_t j = 0; j < z.T; ++j) {
          if (j > i + z.T - z.S) continue;
          double d = 0;
          for (int64_t e = 0; e < z.D; ++e)
            d += q[size_t(((b * z.Hq + h) * z.S + i) * z.D + e)] *
                 k[size_t(((b * z.Hkv + kh) * z.T + j) * z.D + e)];
          s[size_t(j)] = d / std::sqrt(double(z.D));
          m = std::max(m, s[size_t(j)]);
        }
        double l = 0;
        for (auto& x : s) l += x == -INFINITY ? 0 : std::exp(x - m);
        for (int64_t e = 0; e < z.D; ++e) {
          double o = 0;
          for (int64_t j = 0; j < z.T; ++j)
            if (s[size_t(j)] != -INFINITY)
              o += std::exp(s[size_t(j)] - m) / l *
                   v[size_t(((b * z.Hkv + kh) * z.T + j) * z.D + e)];
          size_t at = size_t(((b * z.Hq + h) * z.S + i) * z.D + e);
          if (out) (*out)[at] = o;
          L += ct[at] * o;
        }
      }
  return L;
}

TEST(Attention, ForwardAndGradientsEqualNaiveF64ForMhaGqaMqa) {
  for (Sizes z : {Sizes{2, 4, 3, 2, 4, 3}, Sizes{1, 4, 3, 2, 2, 5}, Sizes{1, 4, 2, 3, 1, 4},
                  Sizes{1, 3, 2, 2, 3, 5}, Sizes{2, 2, 4, 3, 2, 3}}) {
    SCOPED_TRACE(fmt::format("Hq {} Hkv {} S {} T {}", z.Hq, z.Hkv, z.S, z.T));
    std::vector<Array> in = {pseudo({z.B, z.Hq, z.S, z.D}, 1), pseudo({z.B, z.Hkv, z.T, z.D}, 2),
                             pseudo({z.B, z.Hkv, z.T, z.D}, 3)};
    std::vector<ir::TensorType> types;
    for (auto& a : in) types.push_back({DType::f64, a.shape()});
    ir::Function f = trace::capture(
        [&](std::span<const Tensor> x) {
          return std::vector<Tensor>{composites::attention(x[0], x[1], x[2], std::nullopt,
                                                           1 / std::sqrt(double(z.D)), true)};
        },
        types);
    Array ct = pseudo({z.B, z.Hq, z.S, z.D}, 4);
    auto out = runtime::host::compile(f)->run(in)[0];
    std::vector<double> q = in[0].to_doubles(), k = in[1].to_doubles(), v = in[2].to_doubles(),
                        c = ct.to_doubles(), want(c.size());
    naive_loss(z, q, k, v, c, &want);
    for (int64_t i = 0; i < out.numel(); ++i) EXPECT_NEAR(out.at(i), want[size_t(i)], 1e-13);
    // The decomposition (4-D when Hq == Hkv, else 5-D) run by the interpreter.
    auto out_ir = passes::interpret(passes::expand_composites(f), in)[0];
    for (int64_t i = 0; i < out.numel(); ++i) EXPECT_NEAR(out_ir.at(i), want[size_t(i)], 1e-13);
    std::vector<Array> gin = in;
    gin.push_back(ct);
    auto g = runtime::host::compile(autodiff::vjp(f, {0, 1, 2}))->run(gin);
    auto g_ir = passes::interpret(passes::expand_composites(autodiff::vjp(f, {0, 1, 2})), gin);
    for (size_t a = 0; a < 3; ++a)
      for (int64_t e = 0; e < g[a].numel(); ++e)
        EXPECT_NEAR(g_ir[a].at(e), g[a].at(e), 1e-12) << "operand " << a << " " << e;
    std::vector<std::vector<double>*> xs = {&q, &k, &v};
    for (size_t a = 0; a < 3; ++a)
      for (size_t e = 0; e < xs[a]->size(); ++e) {
        double keep = (*xs[a])[e], h = 1e-6;
        (*xs[a])[e] = keep + h;
        double lp = naive_loss(z, q, k, v, c);
        (*xs[a])[e] = keep - h;
        double lm = naive_loss(z, q, k, v, c);
        (*xs[a])[e] = keep;
        EXPECT_NEAR(g[a].at(int64_t(e)), (lp - lm) / (2 * h), 1e-7) << "operand " << a << " " << e;
      }
  }
}

TEST(Attention, GqaEqualsMhaWithRepeatedKvHeads) {
  const int64_t B = 2, H = 4, Hkv = 2, S = 5, D = 3;
  Array q = pseudo({B, H, S, D}, 5), k = pseudo({B, Hkv, S, D}, 6), v = pseudo({B, Hkv, S, D}, 7);
  auto run = [&](bool repeat) {
    ir::Function f = trace::capture(
        [&](std::span<const Tensor> x) {
          Tensor kk = x[1], vv = x[2];
          if (repeat) {  // kv head j serves query heads 2j, 2j+1
            auto rep = [&](const Tensor& t) {
              Tensor e =
                  trace::broadcast_to(trace::reshape(t, {B, Hkv, 1, S, D}), {B, Hkv, 2, S, D});
              return trace::reshape(e, {B, H, S, D});
            };
            kk = rep(kk), vv = rep(vv);
          }
          return std::vector<Tensor>{composites::attention(x[0], kk, vv, std::nullopt, 0.6, true)};
        },
        {{DType::f64, q.shape()}, {DType::f64, k.shape()}, {DType::f64, v.shape()}});
    std::vector<Array> in{q, k, v, pseudo({B, H, S, D}, 8)};
    auto fwd = runtime::host::compile(f)->run(std::span(in).first(3))[0];
    auto g = runtime::host::compile(autodiff::vjp(f, {0, 1, 2}))->run(in);
    g.insert(g.begin(), fwd);
    return g;
  };
  auto gqa = run(false), mha = run(true);
  for (size_t i = 0; i < gqa.size(); ++i)
    for (int64_t e = 0; e < gqa[i].numel(); ++e)
      EXPECT_NEAR(gqa[i].at(e), mha[i].at(e), 1e-13) << i << " " << e;
}

TEST(LayerNorm, TwoPassVarianceIsExactForALargeMeanInF32) {
  nn::LayerNorm ln(4);
  ln.init(random::key(1));
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> x) {
        std::vector<Tensor> p{x[1], x[2]};
        ln.bind(p);
        return std::vector<Tensor>{ln(x[0])};
      },
      {{DType::f32, {1, 4}}, {DType::f32, {4}}, {DType::f32, {4}}});
  std::vector<Array> in{Array::from<float>({1, 4}, {40000, 40001, 40002, 40003}),
                        Array::filled(DType::f32, {4}, 1), Array(DType::f32, {4})};
  auto y = runtime::host::compile(f)->run(in)[0];
  const double sd = std::sqrt(1.25 + 1e-5);  // var of the row = 1.25
  std::vector<double> want{-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.at(i), want[size_t(i)], 1e-6);
}

TEST(CausalLM, BenchmarkModelNamesAndCount) {
  nn::CausalLM m({});
  auto ps = m.named_parameters();
  EXPECT_EQ(ps[0].name, "tok_emb.weight");
  EXPECT_EQ(ps[2].name, "blocks.0.ln_1.weight");
  EXPECT_EQ(ps[4].name, "blocks.0.attn.q_proj.weight");
  EXPECT_EQ(ps.back().name, "head.weight");
  // 256·128 + 16·128 + 2·(2·256 + 4·(128·128 + 128) + 128·512 + 512 + 512·128 + 128) + 256
  // + 128·256 (torch's count of the same model).
  EXPECT_EQ(m.num_parameters(), 464384);
}

// Sample standard deviation of a parameter's values (f64 sums).
double sample_std(const Array& a) {
  double s = 0, s2 = 0;
  const auto v = a.to_doubles();
  for (double x : v) s += x, s2 += x * x;
  const double n = double(v.size()), mean = s / n;
  return std::sqrt(s2 / n - mean * mean);
}

TEST(CausalLM, TiedEmbeddingsStartAtGpt2sStdUntiedAtTorchs) {
  // Tied: the head is tok_emb, so both tables start N(0, 0.02²) (GPT-2's initializer_range);
  // untied: torch.nn.Embedding's N(0, 1). 32768 and 2048 draws give the std to
  // about 0.4 % and 1.6 % (one standard error).
  for (bool tied : {false, true}) {
    nn::CausalLMConfig c;
    c.tied = tied;
    nn::CausalLM m(c);
    m.init(random::key(7));
    const double want = tied ? 0.02 : 1.0;
    for (const auto& p : m.named_parameters()) {
      if (p.name != "tok_emb.weight" && p.name != "pos_emb.weight") continue;
      EXPECT_NEAR(sample_std(p.param->value), want, 0.05 * want) << p.name << " tied " << tied;
    }
  }
}

}  // namespace
