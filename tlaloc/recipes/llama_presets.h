// The Llama presets of `tlaloc train llama --preset` and the LlamaDecoder benchmark matrix
// (bench/run_llama_bench.sh): model sizes with the context and batch they train at. Llama's
// proportions: head_dim 64 (tiny: 32), grouped kv heads (half the query heads), SwiGLU width
// 8/3 · hidden rounded up to a multiple of 128, RMSNorm eps 1e-5, rope_theta 10000, untied
// head (HF's defaults), vocabulary 8000 (a SentencePiece BPE model of the training text).
#pragma once

#include <string>
#include <string_view>

#include "tlaloc/core/error.h"
#include "tlaloc/nn/models/llama_config.h"

namespace tlaloc::recipes::llama {

struct Preset {
  std::string name;
  nn::models::LlamaConfig model;
  int64_t context = 0, batch = 0;  // tokens per window, windows per step
};

inline constexpr int64_t kPresetVocab = 8000;

// tiny: 2 layers x 128, ctx 64, batch 8; small: 4 x 256, ctx 256, batch 8; medium: 8 x 512,
// ctx 512, batch 4. Throws tlaloc::Error naming the known presets for any other name.
inline Preset preset(std::string_view name) {
  struct Size {
    const char* name;
    int64_t layers, hidden, heads, kv_heads, intermediate, context, batch;
  };
  static constexpr Size kSizes[] = {{"tiny", 2, 128, 4, 2, 384, 64, 8},
                                    {"small", 4, 256, 4, 2, 768, 256, 8},
                                    {"medium", 8, 512, 8, 4, 1408, 512, 4}};
  for (const Size& s : kSizes) {
    if (name != s.name) continue;
    Preset p;
    p.name = s.name;
    nn::models::LlamaConfig& c = p.model;
    c.vocab_size = kPresetVocab;
    c.hidden_size = s.hidden;
    c.intermediate_size = s.intermediate;
    c.num_hidden_layers = s.layers;
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = s.kv_heads;
    c.max_position_embeddings = s.context;
    c.rms_norm_eps = 1e-5;
    c.torch_dtype = "float32";
    p.context = s.context;
    p.batch = s.batch;
    return p;
  }
  fail("unknown Llama preset '{}' (known: tiny, small, medium)", name);
}

}  // namespace tlaloc::recipes::llama
