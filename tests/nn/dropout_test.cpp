// Dropout with in-program threefry masks: the mask equals the host's random::bernoulli for the
// same key (an independent implementation of the same bits), kept values are scaled by exactly
// 1/(1 - p), the gradient is mask / (1 - p); eval mode, p = 0 and p = 1 as in torch.nn.Dropout.
#include <gtest/gtest.h>

#include <cmath>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/random/key.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using trace::Tensor;

namespace {

constexpr int64_t kN = 100000;

std::vector<Array> run(runtime::Executable& exe, std::vector<Array> in) { return exe.run(in); }
std::vector<Array> run(const ir::Function& f, std::vector<Array> in) {
  return runtime::host::compile(f)->run(in);
}

Array values(int64_t n) {  // 0.25 .. 1.75, never 0, so a zero output means "dropped"
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = 0.25f + 0.25f * float(i % 7);
  return Array::from(Shape{n}, v);
}

// (x f32 [n], key u32[2]) -> dropout(x, key, p).
ir::Function dropout_fn(double p, int64_t n) {
  return trace::capture(
      [p](std::span<const Tensor> in) { return std::vector<Tensor>{nn::dropout(in[0], in[1], p)}; },
      {{DType::f32, Shape{n}}, {DType::u32, Shape{2}}});
}

TEST(Dropout, MaskIsHostBernoulliAndKeptValuesAreScaledExactly) {
  const double p = 0.3;
  auto exe = runtime::host::compile(dropout_fn(p, kN));
  Array x = values(kN);
  random::Key k = random::fold_in(random::key(7), 3);
  auto y = run(*exe, {x, random::key_data(k)})[0].to_vector<float>();
  Array keep = random::bernoulli(k, 1 - p, Shape{kN});  // host oracle of the same bits
  const float scale = float(1 / (1 - p));
  int64_t kept = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const bool kk = keep.data<bool>()[i];
    kept += kk;
    const float xi = x.data<float>()[i];
    ASSERT_EQ(y[size_t(i)], kk ? xi * scale : 0.0f) << i;
  }
  // Binomial(1e5, 0.7): standard deviation 0.00145 of the fraction.
  EXPECT_NEAR(double(kept) / kN, 0.7, 0.007);
  // Same key, same mask; another key, another mask.
  EXPECT_EQ(run(*exe, {x, random::key_data(k)})[0].to_vector<float>(), y);
  auto y2 = run(*exe, {x, random::key_data(random::fold_in(random::key(7), 4))})[0];
  int64_t differ = 0;
  for (int64_t i = 0; i < kN; ++i) differ += (y2.data<float>()[i] == 0) != (y[size_t(i)] == 0);
  EXPECT_NEAR(double(differ) / kN, 2 * 0.3 * 0.7, 0.01);  // independent masks
}

TEST(Dropout, GradientIsMaskOverKeepProbability) {
  const double p = 0.6;
  const int64_t n = 4096;
  ir::Function g = autodiff::vjp(dropout_fn(p, n), {0});
  random::Key k = random::key(11);
  Array ct = Array::filled(DType::f32, Shape{n}, 1.0);
  auto dx = run(g, {values(n), random::key_data(k), ct})[0];
  Array keep = random::bernoulli(k, 1 - p, Shape{n});
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(dx.data<float>()[i], keep.data<bool>()[i] ? float(1 / (1 - p)) : 0.0f) << i;
}

TEST(Dropout, ZeroAndOneAreIdentityAndZerosWithoutNaN) {
  float inf = INFINITY;
  Array x = Array::from<float>({4}, {1.5f, -inf, inf, -2});
  Array key = random::key_data(random::key(1));
  auto same = run(dropout_fn(0, 4), {x, key})[0];
  EXPECT_EQ(same.to_vector<float>(), x.to_vector<float>());
  ir::Function one = dropout_fn(1, 4);
  EXPECT_EQ(run(one, {x, key})[0].to_vector<float>(), (std::vector<float>(4, 0.0f)));
  auto g = run(autodiff::vjp(one, {0}), {x, key, Array::filled(DType::f32, {4}, 1.0)})[0];
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>(4, 0.0f)));
  EXPECT_THROW(dropout_fn(1.5, 4), Error);
  EXPECT_THROW(nn::Dropout(-0.1), Error);
}

// The module: training mode draws from the bound key, eval mode is the identity, and training
// without a key is an error naming the module.
TEST(Dropout, ModuleFollowsTrainAndEval) {
  nn::Dropout drop(0.5);
  EXPECT_EQ(drop.repr(), "Dropout(p=0.5, inplace=False)");
  auto capture = [&](bool with_key) {
    return trace::capture(
        [&](std::span<const Tensor> in) {
          if (with_key) drop.bind_key(in[1]);
          return std::vector<Tensor>{drop(in[0])};
        },
        {{DType::f32, Shape{64}}, {DType::u32, Shape{2}}});
  };
  Array x = values(64), key = random::key_data(random::key(5));
  EXPECT_TRUE(drop.training());
  auto y = run(capture(true), {x, key})[0].to_vector<float>();
  int zeros = 0;
  for (float v : y) zeros += v == 0;
  EXPECT_GT(zeros, 10);
  EXPECT_LT(zeros, 54);
  drop.eval();
  EXPECT_EQ(run(capture(false), {x, key})[0].to_vector<float>(), x.to_vector<float>());
  drop.train();
  nn::Dropout fresh(0.5);
  try {
    trace::capture([&](std::span<const Tensor> in) { return std::vector<Tensor>{fresh(in[0])}; },
                   {{DType::f32, Shape{4}}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Dropout(p=0.5"), std::string::npos) << e.what();
  }
}

// A CausalLM with dropout has the same parameters as without; in eval mode it computes the
// same logits; in training mode with a key it differs, and each step's key gives its own masks.
TEST(Dropout, CausalLMWithDropoutKeepsParametersAndEvalLogits) {
  nn::CausalLMConfig c{
      .vocab = 16, .context = 4, .d_model = 8, .layers = 2, .heads = 2, .kv_heads = 1, .d_ff = 16};
  nn::CausalLM plain(c);
  c.dropout = 0.25;
  nn::CausalLM drop(c);
  plain.init(random::key(3));
  drop.init(random::key(3));
  auto pa = plain.named_parameters(), pb = drop.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].name, pb[i].name);
    EXPECT_EQ(pa[i].param->value.to_doubles(), pb[i].param->value.to_doubles()) << pa[i].name;
  }
  EXPECT_NE(drop.to_string().find("(drop_1): Dropout(p=0.25"), std::string::npos);
  EXPECT_EQ(plain.to_string().find("Dropout"), std::string::npos);
  auto logits = [&](nn::CausalLM& m, const Array& key) {
    std::vector<ir::TensorType> types{{DType::s32, Shape{2, 4}}, {DType::u32, Shape{2}}};
    std::vector<Array> in{Array::from<int32_t>({2, 4}, {1, 5, 9, 2, 0, 15, 3, 3}), key};
    for (auto& p : m.named_parameters()) {
      types.push_back({p.param->value.dtype(), p.param->value.shape()});
      in.push_back(p.param->value);
    }
    ir::Function f = trace::capture(
        [&](std::span<const Tensor> t) {
          m.bind(t.subspan(2));
          m.bind_key(t[1]);
          return std::vector<Tensor>{m(t[0])};
        },
        types);
    return run(f, in)[0].to_vector<float>();
  };
  Array k1 = random::key_data(random::key(1)), k2 = random::key_data(random::key(2));
  auto base = logits(plain, k1);
  auto t1 = logits(drop, k1), t2 = logits(drop, k2);
  EXPECT_NE(t1, base);
  EXPECT_NE(t1, t2);
  EXPECT_EQ(logits(drop, k1), t1);
  drop.eval();
  EXPECT_EQ(logits(drop, k1), base);
}

}  // namespace
