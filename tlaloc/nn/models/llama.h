// The Llama family (Touvron et al. 2023, "LLaMA" and "Llama 2"; Llama 3 / 3.1) in HuggingFace
// transformers' layout (modeling_llama.py): pre-norm decoder layers of RMSNorm, self-attention
// with rotary position embeddings (nn/rope.h) and grouped kv heads, RMSNorm, and a SwiGLU MLP
// (Shazeer 2020), then a final RMSNorm and the LM head. Parameter names and shapes are HF's
// (model.layers.N.self_attn.q_proj.weight [out, in], ...), so HF checkpoints map one to one.
#pragma once

#include <memory>
#include <optional>

#include "tlaloc/nn/kv_cache.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/models/llama_config.h"
#include "tlaloc/nn/rope.h"

namespace tlaloc::nn::models {

// The RoPE cos / sin tables of `c` for positions 0..length-1, [length, head_dim / 2] each, of
// `dtype` (f64: computed in f64; f32, bf16, f16: computed in f32 as HF does, then converted), as
// program constants of the current capture.
struct RopeConstants {
  trace::Tensor cos, sin;
};
RopeConstants rope_constants(const LlamaConfig& c, int64_t length, DType dtype);

// Self-attention: q_proj [heads·D, hidden], k_proj / v_proj [kv_heads·D, hidden], o_proj
// [hidden, heads·D] (D = head_dim; biases with attention_bias), RoPE on queries and keys
// (rotate-half, or interleaved with rope_interleaved), the attention composite (causal, scale
// 1/√D; query head h reads kv head h / (heads / kv_heads), HF's repeat_kv).
class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const LlamaConfig& c);
  // x [batch, seq, hidden]; cos / sin [seq, D / 2] of x's dtype (rope_constants); key_mask:
  // optional i1 [batch, seq], true = a real token. Returns [batch, seq, hidden].
  trace::Tensor forward(const trace::Tensor& x, const RopeConstants& rope,
                        const std::optional<trace::Tensor>& key_mask);
  // Positions 0..seq-1, no mask.
  trace::Tensor forward(const trace::Tensor& x) override;
  // One decoding step: x [batch, 1, hidden] at position pos (s32 scalar) with rope [1, D / 2]
  // (that position's row); its key (after RoPE) and value go into slot pos of `cache`
  // (cached_attention). Returns [batch, 1, hidden].
  trace::Tensor decode(const trace::Tensor& x, const trace::Tensor& pos, const RopeConstants& rope,
                       KVCache& cache);
  std::string repr() const override;

 private:
  LlamaConfig c_;
  int64_t hidden_, heads_, kv_heads_, head_dim_;
  RopeLayout layout_;
};

// SwiGLU MLP: down_proj(silu(gate_proj(x)) · up_proj(x)); gate_proj / up_proj [intermediate,
// hidden], down_proj [hidden, intermediate] (biases with mlp_bias).
class LlamaMLP : public Module {
 public:
  explicit LlamaMLP(const LlamaConfig& c);
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override;

 private:
  int64_t hidden_, intermediate_;
};

// h = x + self_attn(input_layernorm(x)); h + mlp(post_attention_layernorm(h)). Children in HF's
// order: self_attn, mlp, input_layernorm, post_attention_layernorm (RMSNorm, eps rms_norm_eps).
class LlamaDecoderLayer : public Module {
 public:
  explicit LlamaDecoderLayer(const LlamaConfig& c);
  trace::Tensor forward(const trace::Tensor& x, const RopeConstants& rope,
                        const std::optional<trace::Tensor>& key_mask);
  trace::Tensor forward(const trace::Tensor& x) override;
  trace::Tensor decode(const trace::Tensor& x, const trace::Tensor& pos, const RopeConstants& rope,
                       KVCache& cache);
  std::string repr() const override { return "LlamaDecoderLayer"; }

 private:
  LlamaConfig c_;
  LlamaAttention* attn_;
  Module *mlp_, *norm1_, *norm2_;
};

// embed_tokens [vocab, hidden], layers.<i>, norm: tokens -> the final norm's output [batch, seq,
// hidden].
class LlamaModel : public Module {
 public:
  explicit LlamaModel(const LlamaConfig& c);
  // tokens s32 [batch, seq]; attention_mask optional [batch, seq] (i1, or an integer type with
  // 1 = real token, 0 = padding, as HF's): padding keys are not attended to. Positions are
  // 0..seq-1 whatever the mask (HF's forward without position_ids).
  trace::Tensor forward(const trace::Tensor& tokens,
                        const std::optional<trace::Tensor>& attention_mask);
  trace::Tensor forward(const trace::Tensor& tokens) override {
    return forward(tokens, std::nullopt);
  }
  trace::Tensor decode(const trace::Tensor& tokens, const trace::Tensor& pos,
                       std::vector<KVCache>& caches);
  std::string repr() const override { return "LlamaModel"; }
  // The embedding matrix as bound in the current capture (the tied head reads it).
  const trace::Tensor& embedding() const;

 private:
  LlamaConfig c_;
};

// The causal LM: model (LlamaModel) and lm_head [vocab, hidden] (no bias), or, with
// tie_word_embeddings, logits = hidden · model.embed_tokens.weightᵀ and no lm_head. Parameters
// are created in f32 and initialised as HF's _init_weights: Linear and Embedding weights
// ~ N(0, initializer_range²) (threefry keys, so not PyTorch's numbers), biases 0, norm weights 1,
// the pad_token_id row of the embedding 0. A model whose parameter values are replaced by f64
// arrays computes in f64 throughout (RoPE tables included).
class LlamaForCausalLM : public CachedDecoder {
 public:
  // Throws tlaloc::Error for a config validate() refuses.
  explicit LlamaForCausalLM(LlamaConfig c);
  // tokens s32 [batch, seq] -> logits [batch, seq, vocab] (the parameters' float type).
  trace::Tensor forward(const trace::Tensor& tokens) override {
    return forward(tokens, std::nullopt);
  }
  trace::Tensor forward(const trace::Tensor& tokens,
                        const std::optional<trace::Tensor>& attention_mask);
  // One decoding step with one KVCache per layer (kv_cache.h; the key after RoPE at position
  // pos): logits [batch, 1, vocab] equal to forward()'s last row on the whole prefix.
  trace::Tensor decode(const trace::Tensor& tokens, const trace::Tensor& pos,
                       std::vector<KVCache>& caches) override;
  // f32 [batch, num_key_value_heads, length, head_dim].
  ir::TensorType kv_cache_type(int64_t batch, int64_t length) const override;
  int64_t num_layers() const override { return c_.num_hidden_layers; }
  int64_t vocab_size() const override { return c_.vocab_size; }
  int64_t max_positions() const override { return c_.max_position_embeddings; }
  std::string repr() const override { return "LlamaForCausalLM"; }
  const LlamaConfig& config() const { return c_; }

 private:
  trace::Tensor logits(const trace::Tensor& hidden);
  LlamaConfig c_;
  LlamaModel* model_;
};

}  // namespace tlaloc::nn::models
