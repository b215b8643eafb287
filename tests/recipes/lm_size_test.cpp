// lm::parameter_count against hand counts and built models; check_fits_in_memory refuses
// sizes no machine holds before anything is allocated (train lm and sample use it).
#include <gtest/gtest.h>

#include <string>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/recipes/generate.h"
#include "tlaloc/recipes/lm.h"

using namespace tlaloc;

namespace {

TEST(LmSize, ParameterCountMatchesHandCountAndBuiltModels) {
  // Benchmark model, by hand: tok_emb 256*128 + pos_emb 16*128 + 2 blocks * (2 LayerNorms
  // 2*256 + q/k/v/out 4*(128*128+128) + MLP 128*512+512 + 512*128+128) + ln_f 256
  // + head 256*128 = 32768 + 2048 + 2*198272 + 256 + 32768.
  EXPECT_EQ(recipes::lm::parameter_count(recipes::lm::bench_config()), 464384.0);
  nn::CausalLMConfig rms = recipes::lm::bench_config();
  rms.norm = "rmsnorm";  // 5 norms lose their 128 biases
  EXPECT_EQ(recipes::lm::parameter_count(rms), 464384.0 - 5 * 128);
  for (int64_t kv : {1, 2, 4})
    for (bool tied : {false, true})
      for (const char* norm : {"layernorm", "rmsnorm"}) {
        nn::CausalLMConfig c{.vocab = 256,
                             .context = 8,
                             .d_model = 24,
                             .layers = 3,
                             .heads = 4,
                             .kv_heads = kv,
                             .d_ff = 40,
                             .tied = tied,
                             .norm = norm};
        EXPECT_EQ(recipes::lm::parameter_count(c), double(nn::CausalLM(c).num_parameters()))
            << "kv " << kv << " tied " << tied << " " << norm;
      }
  nn::CausalLMConfig zero = recipes::lm::bench_config();
  zero.heads = 0;
  EXPECT_EQ(recipes::lm::parameter_count(zero), 0.0);
}

TEST(LmSize, AbsurdSizesAreRefusedBeforeAllocating) {
  nn::CausalLMConfig huge = recipes::lm::bench_config();
  huge.layers = 1000000000;  // ~2e14 parameters
  try {
    recipes::lm::check_fits_in_memory(huge, 16, "train lm");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train lm: a model of 1.983e+14 parameters needs about"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(recipes::lm::check_fits_in_memory(recipes::lm::bench_config(), 16, "train lm"));
  // A checkpoint whose metadata claims d_model 1e8 (no tensors): refused by name, not OOM.
  io::Checkpoint c;
  c.source = "huge.safetensors";
  c.user = {{"recipe", "lm"},  {"layers", "2"},   {"d_model", "100000000"}, {"heads", "4"},
            {"kv_heads", "4"}, {"context", "16"}, {"d_ff", "512"}};
  try {
    recipes::lm::load_model(c);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("huge.safetensors: a model of"), std::string::npos)
        << e.what();
  }
}

}  // namespace
