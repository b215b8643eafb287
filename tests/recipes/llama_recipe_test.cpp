// The Llama recipe's size arithmetic (recipes/llama.h): parameter_count, which refuses configs
// too large for memory before anything is allocated, against the models themselves; the
// KV-cache Decoder (recipes/generate.h) on a Llama model against its full forward().
#include <gtest/gtest.h>

#include <map>

#include "tlaloc/nn/models/llama.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/generate.h"
#include "tlaloc/recipes/llama.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using nn::models::LlamaConfig;

TEST(LlamaRecipe, ParameterCountIsTheModelsCount) {
  std::vector<LlamaConfig> configs{recipes::llama::preset("tiny").model,
                                   recipes::llama::preset("small").model};
  LlamaConfig c = configs[0];
  c.vocab_size = 300;
  c.attention_bias = true;
  configs.push_back(c);
  c.mlp_bias = true;
  c.tie_word_embeddings = true;
  c.head_dim = 16;  // q / k / v widths other than hidden_size
  configs.push_back(c);
  c.num_key_value_heads = 1;
  configs.push_back(c);
  for (const LlamaConfig& k : configs) {
    nn::models::LlamaForCausalLM m(k);
    EXPECT_EQ(recipes::llama::parameter_count(k), double(m.num_parameters()))
        << k.hidden_size << " " << k.attention_bias << k.mlp_bias << k.tie_word_embeddings;
  }
}

// The Decoder on a LlamaForCausalLM with a window shorter than max_position_embeddings: every
// step's logits are forward()'s last row on the last min(n, window) tokens, past the window too.
TEST(LlamaRecipe, DecoderSlidesItsWindowOverALlamaModel) {
  LlamaConfig c = recipes::llama::preset("tiny").model;
  c.vocab_size = 40;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 1;
  c.max_position_embeddings = 16;
  nn::models::LlamaForCausalLM model(c);
  model.init(random::key(4));
  const int64_t window = 5;
  recipes::lm::Decoder d(model, window, 1);
  auto named = model.named_parameters();
  std::map<int64_t, std::unique_ptr<runtime::Executable>> forward;  // by length
  auto oracle = [&](const std::vector<int32_t>& t) {
    const int64_t n = int64_t(t.size());
    if (!forward.count(n)) {
      std::vector<ir::TensorType> types{{DType::s32, Shape{1, n}}};
      for (auto& p : named) types.push_back({p.param->value.dtype(), p.param->value.shape()});
      forward[n] = runtime::host::compile(trace::capture(
          [&](std::span<const trace::Tensor> in) {
            model.bind(in.subspan(1));
            return std::vector<trace::Tensor>{model(in[0])};
          },
          types));
    }
    std::vector<Array> in{Array::from(Shape{1, n}, t)};
    for (auto& p : named) in.push_back(p.param->value);
    Array out = forward[n]->run(in)[0];
    const float* l = out.data<float>() + (n - 1) * c.vocab_size;
    return std::vector<float>(l, l + c.vocab_size);
  };
  std::vector<int32_t> history;
  for (int32_t i = 0; i < 12; ++i) {
    history.push_back((i * 7 + 3) % 40);
    std::vector<float> got = d.push(history.back());
    const size_t keep = std::min<size_t>(history.size(), window);
    std::vector<float> want = oracle({history.end() - std::ptrdiff_t(keep), history.end()});
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-4) << i << " " << k;
  }
  EXPECT_EQ(d.window(), window);
}
