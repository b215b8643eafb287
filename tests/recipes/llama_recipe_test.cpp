// The Llama recipe's size arithmetic (recipes/llama.h): parameter_count, which refuses configs
// too large for memory before anything is allocated, against the models themselves.
#include <gtest/gtest.h>

#include "tlaloc/nn/models/llama.h"
#include "tlaloc/recipes/llama.h"

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
