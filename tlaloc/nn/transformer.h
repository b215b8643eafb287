// Transformer layers (PyTorch naming and shapes): Embedding, LayerNorm, MultiHeadAttention with
// grouped kv heads, a pre-norm TransformerBlock and a byte-level CausalLM (GPT-2 layout:
// Radford et al. 2019; token + learned position embeddings, final LayerNorm, linear head).
#pragma once

#include <memory>
#include <optional>

#include "tlaloc/nn/kv_cache.h"
#include "tlaloc/nn/layers.h"

namespace tlaloc::nn {

// weight [num_embeddings, embedding_dim] ~ N(0, init_std²) (torch.nn.Embedding: init_std 1).
// forward: s32 ids [...] -> [..., embedding_dim] (gather; its gradient is a scatter-add). Ids
// are clamped into range as StableHLO gather clamps.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, double init_std = 1.0);
  trace::Tensor forward(const trace::Tensor& ids) override;
  std::string repr() const override;
  void reset_parameters(const random::Key& key) override;

 private:
  int64_t n_, d_;
  double init_std_;
};

// y = (x - mean) / sqrt(var + eps) · weight + bias over the last axis (torch.nn.LayerNorm);
// var is the two-pass mean((x - mean)²), exact for rows with a large mean. weight 1, bias 0.
// f32 / f64 go through the fused layer_norm composite (composites/layer_norm.cpp) (one host kernel
// per row block).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool bias = true);
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override;
  void reset_parameters(const random::Key& key) override;

 private:
  int64_t dim_;
  double eps_;
  bool bias_;
};

// Causal self-attention over x [batch, seq, d_model] with num_heads query heads and
// num_kv_heads key/value heads (MHA when equal, GQA when a divisor, MQA when 1); head size
// d_model / num_heads; scores scaled by 1/√head (Vaswani et al. 2017; GQA: Ainslie et al. 2023).
// Projections q_proj, k_proj, v_proj, out_proj (Linear with bias). Runs the fused attention
// composite (composites/attention.cpp). key_mask: optional i1 [batch, seq], true = a real token.
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t num_heads, int64_t num_kv_heads, bool causal = true);
  trace::Tensor forward(const trace::Tensor& x) override { return forward(x, std::nullopt); }
  trace::Tensor forward(const trace::Tensor& x, const std::optional<trace::Tensor>& key_mask);
  // One decoding step (kv_cache.cpp): x [batch, 1, d_model] is the token at position pos (s32
  // scalar); its key and value are written into slot pos of `cache` (dynamic_update_slice)
  // and its query attends to slots 0..pos only. Returns [batch, 1, d_model]; cache.k / cache.v
  // are replaced by the updated tensors. Throws tlaloc::Error for other shapes.
  trace::Tensor decode(const trace::Tensor& x, const trace::Tensor& pos, KVCache& cache);
  std::string repr() const override;
  int64_t num_heads() const { return h_; }
  int64_t num_kv_heads() const { return hkv_; }
  int64_t head_dim() const { return d_ / h_; }

 private:
  int64_t d_, h_, hkv_;
  bool causal_;
};

// Choices of a TransformerBlock beyond its sizes; the defaults are the original block.
struct BlockOptions {
  std::string norm = "layernorm";  // "layernorm" (LayerNorm with bias) or "rmsnorm" (RMSNorm)
  std::string gelu = "tanh";       // GELU approximate: "tanh" or "none" (erf form)
  double dropout = 0.0;            // Dropout p on each residual branch (training mode only)
};

// Pre-norm block: x + attn(ln_1(x)), then + mlp(ln_2(x)) with mlp = Linear(d, d_ff), GELU,
// Linear(d_ff, d). Children: ln_1, attn, ln_2, mlp.{0,1,2}, and drop_1 / drop_2 (Dropout on the
// attention / MLP branch, registered only when options.dropout > 0). Throws tlaloc::Error for
// an unknown norm or gelu choice or a dropout outside [0, 1].
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t d_model, int64_t num_heads, int64_t num_kv_heads, int64_t d_ff)
      : TransformerBlock(d_model, num_heads, num_kv_heads, d_ff, BlockOptions{}) {}
  TransformerBlock(int64_t d_model, int64_t num_heads, int64_t num_kv_heads, int64_t d_ff,
                   const BlockOptions& options);
  trace::Tensor forward(const trace::Tensor& x) override;
  // forward() for one token at position pos with attention over `cache` (kv_cache.cpp).
  trace::Tensor decode(const trace::Tensor& x, const trace::Tensor& pos, KVCache& cache);
  std::string repr() const override { return "TransformerBlock"; }

 private:
  Module *ln1_, *ln2_;
  MultiHeadAttention* attn_;
  Sequential* mlp_;
  Module *drop1_ = nullptr, *drop2_ = nullptr;
};

// A normalisation layer over the last axis by name: "layernorm" -> LayerNorm(dim) (with
// bias), "rmsnorm" -> RMSNorm(dim) (norms.h). Throws tlaloc::Error for another name.
std::shared_ptr<Module> make_norm(const std::string& norm, int64_t dim);

inline constexpr double kTiedEmbeddingStd = 0.02;

struct CausalLMConfig {
  int64_t vocab = 256, context = 16, d_model = 128, layers = 2, heads = 4, kv_heads = 4;
  int64_t d_ff = 512;
  // The head shares tok_emb.weight; tok_emb and pos_emb then start N(0, kTiedEmbeddingStd²)
  // (GPT-2's initializer_range), else N(0, 1).
  bool tied = false;
  // Block choices (BlockOptions); ln_f follows `norm`, and dropout > 0 also adds a Dropout
  // "drop" on the embeddings. The defaults leave the model and its checkpoints unchanged.
  std::string norm = "layernorm";
  std::string gelu = "tanh";
  double dropout = 0.0;
};

// tokens s32 [batch, seq <= context] -> logits f32 [batch, seq, vocab]. Children: tok_emb,
// pos_emb, blocks.<i>, ln_f, head (untied only), drop (dropout > 0 only). With dropout > 0 a
// training-mode capture needs a key (Module::bind_key). Throws tlaloc::Error for bad sizes.
class CausalLM : public CachedDecoder {
 public:
  explicit CausalLM(CausalLMConfig c);
  trace::Tensor forward(const trace::Tensor& tokens) override;
  // One decoding step (kv_cache.cpp): tokens s32 [batch, 1] at position pos (s32 scalar,
  // 0 <= pos < context) -> logits f32 [batch, 1, vocab], equal to forward()'s last row on the
  // whole prefix whose earlier keys/values are in `caches` (one per block, kv_cache_type()).
  // Each cache is replaced by its updated tensor. Throws tlaloc::Error for other shapes.
  trace::Tensor decode(const trace::Tensor& tokens, const trace::Tensor& pos,
                       std::vector<KVCache>& caches) override;
  // The type of one block's k or v cache: f32 [batch, kv_heads, length (default: context),
  // d_model / heads].
  ir::TensorType kv_cache_type(int64_t batch, int64_t length) const override;
  ir::TensorType kv_cache_type(int64_t batch) const { return kv_cache_type(batch, c_.context); }
  int64_t num_layers() const override { return c_.layers; }
  int64_t vocab_size() const override { return c_.vocab; }
  int64_t max_positions() const override { return c_.context; }
  std::string repr() const override { return "CausalLM"; }
  const CausalLMConfig& config() const { return c_; }

 private:
  // The head on the final-norm output x [batch, seq, d_model] -> logits f32 [batch, seq,
  // vocab]: `head`, or x · tok_emb.weightᵀ when tied (shared by forward and decode).
  trace::Tensor logits(const trace::Tensor& x);
  CausalLMConfig c_;
  Module* drop_ = nullptr;
};

}  // namespace tlaloc::nn
