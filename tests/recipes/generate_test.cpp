// Generation (recipes/generate.h): the KV-cache decoder against recomputing the whole prefix
// (tests/support/lm_oracle.h) for greedy and sampled text past the context (sliding window);
// determinism per seed; the sampler against hand-computed probabilities; checkpoint metadata.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "support/lm_oracle.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/generate.h"

using namespace tlaloc;
using recipes::lm::SampleOptions;

namespace {

nn::CausalLMConfig small(int64_t kv_heads) {
  return {.vocab = 256,
          .context = 6,
          .d_model = 16,
          .layers = 2,
          .heads = 4,
          .kv_heads = kv_heads,
          .d_ff = 32,
          .tied = false};
}

const std::vector<int32_t> kPrompt{72, 101, 108, 108, 111};  // "Hello"

// Generation by recompute: every token from forward() on the last `context` tokens, drawn
// with the keys generate() documents.
std::vector<int32_t> generate_by_recompute(nn::CausalLM& m, const std::vector<int32_t>& prompt,
                                           int64_t n, const SampleOptions& o) {
  tlaloc::testing::RecomputeOracle oracle(m);
  std::vector<int32_t> history = prompt, out;
  random::Key key = random::key(o.seed);
  for (int64_t i = 0; i < n; ++i) {
    auto [next, sub] = random::split<2>(key);
    key = next;
    std::vector<float> logits = oracle.next_logits(history);
    int32_t t;
    if (o.temperature == 0) {
      t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      for (auto& l : logits) l = float(double(l) / o.temperature);
      if (o.top_k > 0) {  // all but the top_k largest -> -inf (no ties in these logits)
        std::vector<float> sorted = logits;
        std::sort(sorted.begin(), sorted.end(), std::greater<>());
        float kth = sorted[size_t(o.top_k - 1)];
        for (auto& l : logits) l = l < kth ? -INFINITY : l;
      }
      t = random::categorical(sub, Array::from(Shape{int64_t(logits.size())}, logits))
              .data<int32_t>()[0];
    }
    history.push_back(t);
    out.push_back(t);
  }
  return out;
}

TEST(Generate, KvCacheEqualsRecomputeGreedyAndSampledPastTheContext) {
  for (int64_t kv : {4, 2}) {
    SCOPED_TRACE(fmt::format("kv_heads {}", kv));
    nn::CausalLM m(small(kv));
    m.init(random::key(3));
    recipes::lm::Decoder d(m);
    for (SampleOptions o : {SampleOptions{.temperature = 0}, SampleOptions{.temperature = 1.5},
                            SampleOptions{.temperature = 0.8, .top_k = 5, .seed = 9}}) {
      SCOPED_TRACE(fmt::format("T {} top_k {}", o.temperature, o.top_k));
      auto cached = recipes::lm::generate(d, kPrompt, 16, o);  // 5 + 16 tokens > context 6
      EXPECT_EQ(cached, generate_by_recompute(m, kPrompt, 16, o));
      EXPECT_EQ(d.window(), 6);
    }
  }
}

TEST(Generate, WindowSlidesByRecomputingTheKeptTokens) {
  nn::CausalLM m(small(2));
  m.init(random::key(3));
  recipes::lm::Decoder d(m);
  for (int i = 0; i < 6; ++i) d.push(int32_t(60 + i));
  EXPECT_EQ(d.steps_run(), 6);
  d.push(1);  // drops token 60, re-feeds 61..65 at positions 0..4, then 1 at 5
  EXPECT_EQ(d.steps_run(), 6 + 5 + 1);
  EXPECT_EQ(d.window(), 6);
  d.reset();
  EXPECT_EQ(d.window(), 0);
  EXPECT_THROW(d.push(256), Error);
  EXPECT_THROW(d.push(-1), Error);
  // A prompt longer than the context: only its last 6 tokens are fed, and the text equals
  // generation by recompute over the whole history.
  std::vector<int32_t> long_prompt{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  SampleOptions o{.temperature = 1.0, .seed = 6};
  const int64_t before = d.steps_run();
  auto got = recipes::lm::generate(d, long_prompt, 3, o);
  EXPECT_EQ(d.steps_run() - before, 6 + 2 * 6);  // 6 prompt steps, then 2 slides of 6 steps
  EXPECT_EQ(got, generate_by_recompute(m, long_prompt, 3, o));
}

TEST(Generate, SameSeedSameTextOtherSeedOtherText) {
  nn::CausalLM m(small(4));
  m.init(random::key(5));
  recipes::lm::Decoder d(m);
  SampleOptions a{.temperature = 1.0, .seed = 1}, b{.temperature = 1.0, .seed = 2};
  auto a1 = recipes::lm::generate(d, kPrompt, 32, a), a2 = recipes::lm::generate(d, kPrompt, 32, a);
  auto b1 = recipes::lm::generate(d, kPrompt, 32, b);
  EXPECT_EQ(a1, a2);
  EXPECT_NE(a1, b1);
  EXPECT_EQ(a1.size(), 32u);
  EXPECT_TRUE(recipes::lm::generate(d, kPrompt, 0, a).empty());
}

// HF generate's eos_token_id: the text ends with the first end-of-sequence token drawn (kept
// as the last token); the tokens before it are the run without one, as the keys are the same.
TEST(Generate, StopsAtTheFirstEndOfSequenceToken) {
  nn::CausalLM m(small(4));
  m.init(random::key(5));
  recipes::lm::Decoder d(m);
  SampleOptions o{.temperature = 1.0, .seed = 3};
  const auto all = recipes::lm::generate(d, kPrompt, 24, o);
  const size_t at = 5;
  const auto first = std::find(all.begin(), all.end(), all[at]);  // its first draw
  o.eos = {999, all[at]};  // an id never drawn, then the one that ends the text
  std::vector<int32_t> streamed;
  const auto got =
      recipes::lm::generate(d, kPrompt, 24, o, [&](int32_t t) { streamed.push_back(t); });
  EXPECT_EQ(got, std::vector<int32_t>(all.begin(), first + 1));
  EXPECT_EQ(streamed, got);
  o.eos = {999};  // never drawn: all 24
  EXPECT_EQ(recipes::lm::generate(d, kPrompt, 24, o), all);
}

TEST(Generate, SamplerFollowsHandComputedProbabilities) {
  // logits {0, ln 3, -1, -2}: top_k 2 keeps tokens 0 and 1 with p = 1/4, 3/4 at T = 1 and
  // p ∝ 1, √3 at T = 2 (softmax(logits / T)); top_k 1 and T = 0 always give token 1.
  std::vector<float> l{0.0f, float(std::log(3.0)), -1.0f, -2.0f};
  for (double T : {1.0, 2.0}) {
    const int n = 4000;
    int ones = 0;
    auto keys = random::split(random::key(17), n);
    for (int i = 0; i < n; ++i) {
      int32_t t = recipes::lm::sample_token(l, {.temperature = T, .top_k = 2}, keys[size_t(i)]);
      ASSERT_TRUE(t == 0 || t == 1) << t;
      ones += t;
    }
    const double p1 = T == 1 ? 0.75 : std::sqrt(3.0) / (1 + std::sqrt(3.0));
    EXPECT_NEAR(double(ones) / n, p1, 0.025) << "T " << T;  // ~3.5 standard deviations
  }
  for (auto& k : random::split(random::key(1), 20)) {
    EXPECT_EQ(recipes::lm::sample_token(l, {.temperature = 1, .top_k = 1}, k), 1);
    EXPECT_EQ(recipes::lm::sample_token(l, {.temperature = 0}, k), 1);
  }
  std::vector<float> tie{2.0f, 5.0f, 5.0f};
  EXPECT_EQ(recipes::lm::sample_token(tie, {.temperature = 0}, random::key(0)), 1);
}

TEST(Generate, TopPKeepsTheNucleusHfsTopPWarperKeeps) {
  // p = {0.5, 0.3, 0.15, 0.05}: sorted up, the cumulative sums are 0.05, 0.2, 0.5, 1; top_p 0.8
  // drops those <= 0.2 (tokens 3 and 2), leaving 0 and 1 with 0.5 / 0.8 and 0.3 / 0.8. top_p
  // 0.5 drops those <= 0.5 but the most likely: token 0 only. At T = 2 the softmax is of l / 2
  // (p ∝ sqrt(0.5), sqrt(0.3), ...); top_k 3 then top_p apply in HF's order.
  std::vector<float> l;
  for (double p : {0.5, 0.3, 0.15, 0.05}) l.push_back(float(std::log(p)));
  const int n = 4000;
  auto keys = random::split(random::key(23), n);
  int zeros = 0;
  for (int i = 0; i < n; ++i) {
    int32_t t = recipes::lm::sample_token(l, {.temperature = 1, .top_p = 0.8}, keys[size_t(i)]);
    ASSERT_TRUE(t == 0 || t == 1) << t;
    zeros += t == 0;
  }
  EXPECT_NEAR(double(zeros) / n, 0.625, 0.027);  // ~3.5 standard deviations
  for (auto& k : random::split(random::key(2), 20))
    EXPECT_EQ(recipes::lm::sample_token(l, {.temperature = 1, .top_p = 0.5}, k), 0);
  // T = 2: q ∝ sqrt(p) = {.7071, .5477, .3873, .2236} / 1.8657 = {.379, .294, .208, .120}; top_k
  // 3 drops token 3 first: {.379, .294, .208} / .880 = {.430, .333, .236}; top_p 0.7 drops the
  // .236 (<= 0.3): tokens 0 and 1 with .430 / .764 = .563.
  zeros = 0;
  for (int i = 0; i < n; ++i) {
    int32_t t =
        recipes::lm::sample_token(l, {.temperature = 2, .top_k = 3, .top_p = 0.7}, keys[size_t(i)]);
    ASSERT_TRUE(t == 0 || t == 1) << t;
    zeros += t == 0;
  }
  const double q0 = std::sqrt(0.5), q1 = std::sqrt(0.3);
  EXPECT_NEAR(double(zeros) / n, q0 / (q0 + q1), 0.027);
}

TEST(Generate, BadInputIsAnError) {
  nn::CausalLM m(small(2));
  recipes::lm::Decoder d(m);
  auto msg = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([&] { recipes::lm::generate(d, {}, 3, {}); }).find("prompt is empty"),
            std::string::npos);
  EXPECT_NE(msg([&] { recipes::lm::generate(d, kPrompt, -1, {}); }).find("-1 tokens"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              recipes::lm::generate(d, kPrompt, 3, {.temperature = -0.5});
            }).find("temperature -0.5"),
            std::string::npos);
  EXPECT_NE(msg([&] {
              recipes::lm::generate(d, kPrompt, 3, {.temperature = NAN});
            }).find("temperature nan"),
            std::string::npos);
  EXPECT_NE(msg([&] { recipes::lm::generate(d, kPrompt, 3, {.top_k = -2}); }).find("top_k -2"),
            std::string::npos);
  for (double p : {0.0, -0.5, 1.5, double(NAN)})
    EXPECT_NE(msg([&] {
                recipes::lm::generate(d, kPrompt, 3, {.top_p = p});
              }).find("top_p " + fmt::format("{}", p) + " must be in (0, 1]"),
              std::string::npos)
        << p;
  EXPECT_NE(msg([&] {
              recipes::lm::generate(d, std::vector<int32_t>{300}, 3, {});
            }).find("prompt token 300"),
            std::string::npos);
}

io::Checkpoint lm_checkpoint(nn::CausalLM& m) {
  io::Checkpoint c;
  for (auto& p : m.named_parameters()) c.params.emplace_back(p.name, p.param->value);
  const auto& k = m.config();
  c.user = {{"recipe", "lm"},
            {"layers", std::to_string(k.layers)},
            {"d_model", std::to_string(k.d_model)},
            {"heads", std::to_string(k.heads)},
            {"kv_heads", std::to_string(k.kv_heads)},
            {"context", std::to_string(k.context)},
            {"d_ff", std::to_string(k.d_ff)}};
  c.source = "test.safetensors";
  return c;
}

TEST(Generate, ModelSizesComeFromCheckpointMetadata) {
  for (bool tied : {false, true}) {
    nn::CausalLMConfig cfg = small(2);
    cfg.tied = tied;
    nn::CausalLM m(cfg);
    m.init(random::key(8));
    io::Checkpoint c = lm_checkpoint(m);
    // The process id in the name: test runs of two checkouts at once must not share the file.
    auto path = std::filesystem::temp_directory_path() /
                ("tlaloc_generate_test_" + std::to_string(getpid()) + ".safetensors");
    io::save_checkpoint(path.string(), c);
    io::Checkpoint back = io::load_checkpoint(path.string());
    std::filesystem::remove(path);
    auto loaded = recipes::lm::load_model(back);  // tied inferred from the missing head.weight
    EXPECT_EQ(loaded->config().tied, tied);
    EXPECT_EQ(loaded->config().kv_heads, 2);
    EXPECT_EQ(loaded->config().context, 6);
    SampleOptions o{.temperature = 1.0, .seed = 4};
    recipes::lm::Decoder d1(m), d2(*loaded);
    EXPECT_EQ(recipes::lm::generate(d1, kPrompt, 10, o), recipes::lm::generate(d2, kPrompt, 10, o));
  }
}

TEST(Generate, NormAndGeluChoicesComeFromCheckpointMetadata) {
  nn::CausalLMConfig cfg = small(2);
  cfg.norm = "rmsnorm";
  cfg.gelu = "none";
  nn::CausalLM m(cfg);
  m.init(random::key(9));
  io::Checkpoint c = lm_checkpoint(m);
  c.user["norm"] = "rmsnorm";
  c.user["gelu"] = "none";
  auto loaded = recipes::lm::load_model(c);
  EXPECT_EQ(loaded->config().norm, "rmsnorm");
  EXPECT_EQ(loaded->config().gelu, "none");
  SampleOptions o{.temperature = 1.0, .seed = 4};
  recipes::lm::Decoder d1(m), d2(*loaded);
  EXPECT_EQ(recipes::lm::generate(d1, kPrompt, 10, o), recipes::lm::generate(d2, kPrompt, 10, o));
}

TEST(Generate, NonLmCheckpointsAreRefusedByName) {
  nn::CausalLM m(small(2));
  io::Checkpoint c = lm_checkpoint(m);
  auto refuse = [](io::Checkpoint k, const std::string& want) {
    try {
      recipes::lm::load_model(k);
      ADD_FAILURE() << "accepted; want " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  io::Checkpoint fm = c;
  fm.user = {{"recipe", "fmnist"}, {"hidden", "128"}};
  refuse(fm,
         "test.safetensors: not a `tlaloc train lm` checkpoint (metadata user.recipe is "
         "'fmnist')");
  io::Checkpoint none = c;
  none.user.clear();
  refuse(none, "user.recipe is missing");
  io::Checkpoint no_heads = c;
  no_heads.user.erase("heads");
  refuse(no_heads, "user.heads is missing");
  io::Checkpoint bad = c;
  bad.user["context"] = "16x";
  refuse(bad, "user.context is '16x', not a positive integer");
  io::Checkpoint erf = c;
  erf.user["gelu"] = "exact";
  refuse(erf, "user.gelu is 'exact', not tanh or none");
  io::Checkpoint wrong = c;
  wrong.user["d_model"] = "32";  // the tensors are d_model 16
  refuse(wrong, "tok_emb.weight");
}

TEST(Generate, NonFiniteCheckpointsAndLogitsAreRefused) {
  nn::CausalLM m(small(2));
  m.init(random::key(3));
  io::Checkpoint c = lm_checkpoint(m);
  for (auto& [name, a] : c.params)
    if (name == "pos_emb.weight") {
      Array bad(DType::f32, a.shape());
      for (int64_t i = 0; i < bad.numel(); ++i) bad.data<float>()[i] = i == 5 ? NAN : 0.5f;
      a = bad;
    }
  try {
    recipes::lm::load_model(c);
    ADD_FAILURE() << "a NaN parameter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.safetensors: parameter 'pos_emb.weight' holds 1 "
                                         "NaN or inf values of 96"),
              std::string::npos)
        << e.what();
  }
  auto refused = [](std::vector<float> l, SampleOptions o, const std::string& want) {
    try {
      recipes::lm::sample_token(l, o, random::key(0));
      ADD_FAILURE() << "accepted; want " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused({0.0f, NAN}, {.temperature = 0}, "logit nan of token 1 is not finite");
  refused({INFINITY, 0.0f}, {.temperature = 1}, "logit inf of token 0 is not finite");
  refused({0.0f}, {.temperature = INFINITY}, "temperature inf must be finite and >= 0");
  // -inf logits (masked tokens) are fine: never drawn.
  for (auto& k : random::split(random::key(2), 10))
    EXPECT_EQ(recipes::lm::sample_token(std::vector<float>{-INFINITY, 0.0f, -INFINITY}, {}, k), 1);
}

TEST(Generate, TinyTemperatureIsGreedyAndTokensStream) {
  // logits / 1e-300 overflow f32; softmax((l - max) / T) puts all mass on the argmax (token 2).
  std::vector<float> l{1.0f, -3.0f, 2.5f, 2.0f};
  for (auto& k : random::split(random::key(4), 20))
    EXPECT_EQ(recipes::lm::sample_token(l, {.temperature = 1e-300}, k), 2);
  nn::CausalLM m(small(4));
  m.init(random::key(6));
  recipes::lm::Decoder d(m);
  std::vector<int32_t> streamed;
  SampleOptions o{.temperature = 0.9, .seed = 8};
  auto out = recipes::lm::generate(d, kPrompt, 12, o, [&](int32_t t) { streamed.push_back(t); });
  EXPECT_EQ(streamed, out);
  EXPECT_EQ(out, generate_by_recompute(m, kPrompt, 12, o));
}

}  // namespace
