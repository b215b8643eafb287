// The Llama presets (recipes/llama_presets.h) and the benchmark's FLOP count (llama_bench.h)
// against hand computations: parameter counts of HF's LlamaForCausalLM layout and PaLM's
// model-FLOP formula.
#include <gtest/gtest.h>

#include "tlaloc/core/error.h"
#include "tlaloc/nn/models/llama.h"
#include "tlaloc/recipes/llama_bench.h"

using namespace tlaloc;

namespace {

TEST(LlamaPresets, SizesAndParameterCounts) {
  // Per layer: q 128·128, k / v 128·64 each, o 128·128, gate / up / down 128·384 each, two
  // norms of 128; then embed_tokens and lm_head 8000·128 each and the final norm.
  const recipes::llama::Preset tiny = recipes::llama::preset("tiny");
  const int64_t tiny_layer = 128 * 128 * 2 + 128 * 64 * 2 + 3 * 128 * 384 + 2 * 128;
  EXPECT_EQ(nn::models::LlamaForCausalLM(tiny.model).num_parameters(),
            2 * tiny_layer + 2 * 8000 * 128 + 128);
  EXPECT_EQ(tiny.context, 64);
  EXPECT_EQ(tiny.batch, 8);
  const recipes::llama::Preset medium = recipes::llama::preset("medium");
  const int64_t medium_layer = 512 * 512 * 2 + 512 * 256 * 2 + 3 * 512 * 1408 + 2 * 512;
  EXPECT_EQ(nn::models::LlamaForCausalLM(medium.model).num_parameters(),
            8 * medium_layer + 2 * 8000 * 512 + 512);
  EXPECT_EQ(medium.model.head_size(), 64);
  EXPECT_EQ(medium.model.kv_heads(), 4);
  EXPECT_EQ(recipes::llama::preset("small").model.intermediate_size, 768);
}

TEST(LlamaPresets, UnknownNameIsRefusedWithTheKnownOnes) {
  try {
    recipes::llama::preset("large");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown Llama preset 'large' (known: tiny, small, medium)");
  }
}

// PaLM (Chowdhery et al. 2022, appendix B): 6·N·T + 12·L·H·Q·T·ctx. tiny: N = 2 · (128·256 +
// 128·128 + 3·128·384) + 128·8000 = 1,417,216 matrix weights, T = 512 tokens, attention
// 12·2·128·64·512.
TEST(LlamaPresets, TrainStepFlopsArePalmsCount) {
  EXPECT_DOUBLE_EQ(recipes::llama::train_step_flops(recipes::llama::preset("tiny")),
                   6.0 * 1417216 * 512 + 12.0 * 2 * 128 * 64 * 512);
}

}  // namespace
