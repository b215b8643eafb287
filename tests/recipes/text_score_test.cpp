// Text scoring (recipes/text_score.h): score_stream against every prediction recomputed on its
// own by forward() with plain-op attention (tests/support/lm_oracle.h), over several chunks and
// a partial last window; the unigram baseline and the unit conversions against hand
// computations.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/lm_oracle.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/text_score.h"

using namespace tlaloc;
using recipes::TextScore;

namespace {

// -ln softmax(logits)[target], in f64.
double nll(const std::vector<float>& logits, int32_t target) {
  double top = -INFINITY, sum = 0;
  for (float v : logits) top = std::max(top, double(v));
  for (float v : logits) sum += std::exp(double(v) - top);
  return -(double(logits[size_t(target)]) - top - std::log(sum));
}

TEST(TextScore, EveryTokenPredictedOnceFromItsWindow) {
  nn::CausalLM model({.vocab = 32,
                      .context = 6,
                      .d_model = 16,
                      .layers = 1,
                      .heads = 4,
                      .kv_heads = 2,
                      .d_ff = 32,
                      .tied = false});
  model.init(random::key(3));
  const int64_t ctx = 6, per_chunk = recipes::kScoreTokens / ctx;
  // Two full chunks of windows and one window of 5 tokens (4 predictions) in a third.
  const int64_t n = 2 * per_chunk * ctx + 5;
  Array stream = random::randint(random::key(9), Shape{n}, 0, 32);
  const TextScore s = recipes::score_stream(model, stream, ctx, 12345, 2);
  EXPECT_EQ(s.tokens, n - 1);
  EXPECT_EQ(s.bytes, 12345);

  tlaloc::testing::RecomputeOracle oracle(model);
  const int32_t* t = stream.data<int32_t>();
  double want = 0;
  for (int64_t i = 1; i < n; ++i) {  // token i from tokens w·ctx .. i-1 of its window w
    const int64_t start = (i - 1) / ctx * ctx;
    want += nll(oracle.last_logits({t + start, size_t(i - start)}), t[i]);
  }
  EXPECT_NEAR(s.nats, want, 1e-5 * want);
  // The same bits on one thread (the host lane's contract).
  EXPECT_EQ(recipes::score_stream(model, stream, ctx, 12345, 1).nats, s.nats);
}

TEST(TextScore, ShortStreamAndRefusals) {
  nn::CausalLM model(
      {.vocab = 8, .context = 4, .d_model = 8, .layers = 1, .heads = 2, .kv_heads = 2, .d_ff = 8});
  model.init(random::key(1));
  Array two = Array::from<int32_t>(Shape{2}, {3, 5});
  const TextScore s = recipes::score_stream(model, two, 4, 1);
  tlaloc::testing::RecomputeOracle oracle(model);
  const std::vector<int32_t> first{3};
  EXPECT_EQ(s.tokens, 1);
  EXPECT_NEAR(s.nats, nll(oracle.last_logits(first), 5), 1e-5);
  Array one = Array::from<int32_t>(Shape{1}, {3});
  EXPECT_THROW(recipes::score_stream(model, one, 4, 1), Error);
  EXPECT_THROW(recipes::score_stream(model, two, 0, 1), Error);
}

TEST(TextScore, UnigramAndUnitsByHand) {
  // Training counts over 3 ids, add-one: id 0: 2 + 1, id 1: 1 + 1, id 2: 0 + 1; total 3 + 3.
  Array train = Array::from<int32_t>(Shape{3}, {0, 0, 1});
  Array stream = Array::from<int32_t>(Shape{4}, {2, 0, 1, 1});  // token 0 is not predicted
  const TextScore u = recipes::unigram_score(train, 3, stream, 5);
  const double nats = -std::log(3.0 / 6) - 2 * std::log(2.0 / 6);
  EXPECT_EQ(u.tokens, 3);
  EXPECT_NEAR(u.nats, nats, 1e-12);
  EXPECT_NEAR(u.nats_per_token(), nats / 3, 1e-12);
  EXPECT_NEAR(u.perplexity(), std::exp(nats / 3), 1e-12);
  EXPECT_NEAR(u.bits_per_byte(), nats / std::log(2.0) / 5, 1e-12);
  EXPECT_EQ(recipes::format_score({.nats = 3 * std::log(2.0), .tokens = 3, .bytes = 4}),
            "0.6931 nats/token, perplexity 2.00, 0.7500 bits/byte (3 tokens, 4 bytes)");
  Array bad = Array::from<int32_t>(Shape{2}, {0, 3});
  EXPECT_THROW(recipes::unigram_score(train, 3, bad, 1), Error);
  EXPECT_THROW(recipes::unigram_score(bad, 3, stream, 1), Error);
}

}  // namespace
