// Incremental decoding of a CausalLM with a key/value cache: each attention layer keeps the
// keys and values of the tokens seen so far, so one step computes only the new token's row
// (the usual autoregressive inference of GPT-style models; Pope et al. 2022, "Efficiently
// Scaling Transformer Inference", section 2). The decode methods of MultiHeadAttention,
// TransformerBlock and CausalLM are declared in transformer.h and defined in kv_cache.cpp.
#pragma once

#include <cstdint>

#include "tlaloc/ir/ir.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::nn {

class CausalLM;

// One attention layer's cache: k, v f32 [batch, num_kv_heads, context, head_dim]; slot t holds
// the key / value of the token at position t. Slots after the current position hold stale
// values that the decode step masks out, so a cache never needs clearing.
struct KVCache {
  trace::Tensor k, v;
};

// The captured decode-step program of `model` for `batch` sequences (batch >= 1):
//   inputs  token s32 [batch], pos s32 [], then k.0, v.0, ..., k.<L-1>, v.<L-1> (each
//           model.kv_cache_type(batch)), then the parameters in named_parameters() order;
//   outputs logits f32 [batch, vocab] (the next-token distribution after `token`), then the
//           updated caches in input order, each aliased to (donating) its input.
// `pos` must be in [0, context): out-of-range positions are clamped as StableHLO's
// dynamic_slice / dynamic_update_slice clamp, which is never what a caller wants.
// The model's parameter values give only the types. Throws tlaloc::Error for batch < 1.
ir::Function decode_step(CausalLM& model, int64_t batch = 1);

}  // namespace tlaloc::nn
