// Incremental decoding of a decoder-only LM (CausalLM, models::LlamaForCausalLM) with a key/value
// cache: each attention layer keeps the
// keys and values of the tokens seen so far, so one step computes only the new token's row
// (the usual autoregressive inference of GPT-style models; Pope et al. 2022, "Efficiently
// Scaling Transformer Inference", section 2). The decode methods of MultiHeadAttention,
// TransformerBlock and CausalLM are declared in transformer.h and defined in kv_cache.cpp; the
// Llama ones in models/llama.h.
#pragma once

#include <cstdint>

#include "tlaloc/ir/ir.h"
#include "tlaloc/nn/module.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::nn {

// One attention layer's cache: k, v f32 [batch, num_kv_heads, context, head_dim]; slot t holds
// the key / value of the token at position t. Slots after the current position hold stale
// values that the decode step masks out, so a cache never needs clearing.
struct KVCache {
  trace::Tensor k, v;
};

// One decoding step's attention over a cache: q [batch, Hq, 1, D] the new token's query, k / v
// [batch, Hkv, 1, D] its key / value, written into slot pos (s32 scalar) of `cache`
// (dynamic_update_slice; cache.k / cache.v are replaced by the updated tensors); the query
// attends to slots 0..pos only (the attention composite with a key mask, scores scaled by
// `scale`). Returns [batch, Hq, 1, D]. Throws tlaloc::Error for other shapes.
trace::Tensor cached_attention(const trace::Tensor& q, const trace::Tensor& k,
                               const trace::Tensor& v, const trace::Tensor& pos, KVCache& cache,
                               double scale);

// A decoder-only LM that decode_step drives: one key/value cache per layer.
class CachedDecoder : public Module {
 public:
  // One decoding step: tokens s32 [batch, 1] at position pos (s32 scalar) -> logits [batch, 1,
  // vocab], equal to forward()'s last row on the whole prefix whose earlier keys / values are
  // in `caches` (one per layer, each kv_cache_type(batch, length)). Each cache is replaced by
  // its updated tensor. Throws tlaloc::Error for other shapes.
  virtual trace::Tensor decode(const trace::Tensor& tokens, const trace::Tensor& pos,
                               std::vector<KVCache>& caches) = 0;
  // The type of one layer's k or v cache for `batch` sequences of up to `length` positions.
  virtual ir::TensorType kv_cache_type(int64_t batch, int64_t length) const = 0;
  virtual int64_t num_layers() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The most positions the model encodes (CausalLM: its context; Llama:
  // max_position_embeddings): decode_step's default and largest cache length.
  virtual int64_t max_positions() const = 0;
};

// The captured decode-step program of `model` for `batch` sequences (batch >= 1) with caches
// of `length` positions (0: model.max_positions()):
//   inputs  token s32 [batch], pos s32 [], then k.0, v.0, ..., k.<L-1>, v.<L-1> (each
//           model.kv_cache_type(batch, length)), then the parameters in named_parameters()
//           order;
//   outputs logits [batch, vocab] (the next-token distribution after `token`), then the
//           updated caches in input order, each aliased to (donating) its input.
// `pos` must be in [0, length): out-of-range positions are clamped as StableHLO's
// dynamic_slice / dynamic_update_slice clamp, which is never what a caller wants.
// The model's parameter values give only the types. Throws tlaloc::Error for batch < 1 or a
// length outside [1, model.max_positions()].
ir::Function decode_step(CachedDecoder& model, int64_t batch = 1, int64_t length = 0);

}  // namespace tlaloc::nn
