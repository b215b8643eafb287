#include "tlaloc/nn/transformer.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "tlaloc/composites/composites.h"
#include "tlaloc/nn/norms.h"
#include "tlaloc/random/random.h"
#include "tlaloc/trace/autocast.h"

namespace tlaloc::nn {

using trace::Tensor;

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, double init_std)
    : n_(num_embeddings), d_(embedding_dim), init_std_(init_std) {
  if (n_ <= 0 || d_ <= 0)
    fail("Embedding: num_embeddings {} and embedding_dim {} must be positive", n_, d_);
  register_parameter("weight", Array(DType::f32, Shape{n_, d_}));
}

Tensor Embedding::forward(const Tensor& ids) {
  if (is_floating(ids.dtype()))
    fail("Embedding: ids must be s32, got {}", ir::to_string(ids.type()));
  return trace::take_rows(param("weight"), ids);
}

std::string Embedding::repr() const { return fmt::format("Embedding({}, {})", n_, d_); }

void Embedding::reset_parameters(const random::Key& key) {
  Array w = random::normal(key, Shape{n_, d_});
  if (init_std_ != 1.0)
    for (float& v : w.span<float>()) v *= float(init_std_);
  parameter("weight").value = std::move(w);
}

LayerNorm::LayerNorm(int64_t dim, double eps, bool bias) : dim_(dim), eps_(eps), bias_(bias) {
  if (dim <= 0 || !(eps > 0)) fail("LayerNorm: dim {} and eps {} must be positive", dim, eps);
  register_parameter("weight", Array::filled(DType::f32, Shape{dim}, 1.0));
  if (bias) register_parameter("bias", Array(DType::f32, Shape{dim}));
}

Tensor LayerNorm::forward(const Tensor& x) {
  if (x.rank() < 1 || x.dim(-1) != dim_)
    fail("LayerNorm({}): input {} does not end in {}", dim_, ir::to_string(x.type()), dim_);
  const DType t = x.dtype();
  if ((t == DType::f32 || t == DType::f64) && param("weight").dtype() == t) {
    std::optional<Tensor> b;
    if (bias_) b = param("bias");
    if (!b || b->dtype() == t) return composites::layer_norm(x, param("weight"), b, eps_);
  }
  Tensor mu = trace::mean(x, {-1}, true);
  Tensor xc = x - mu;  // two-pass: the variance of centred values
  Tensor var = trace::mean(trace::square(xc), {-1}, true);
  Tensor y = xc * trace::rsqrt(var + eps_) * param("weight");
  return bias_ ? y + param("bias") : y;
}

std::string LayerNorm::repr() const {
  return fmt::format("LayerNorm(({},), eps={}, elementwise_affine=True, bias={})", dim_, eps_,
                     bias_ ? "True" : "False");
}

void LayerNorm::reset_parameters(const random::Key&) {
  parameter("weight").value = Array::filled(DType::f32, Shape{dim_}, 1.0);
  if (bias_) parameter("bias").value = Array(DType::f32, Shape{dim_});
}

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t num_heads, int64_t num_kv_heads,
                                       bool causal)
    : d_(d_model), h_(num_heads), hkv_(num_kv_heads), causal_(causal) {
  if (d_ <= 0 || h_ <= 0 || hkv_ <= 0 || d_ % h_ != 0 || h_ % hkv_ != 0)
    fail(
        "MultiHeadAttention: d_model {} must be a multiple of num_heads {}, itself a multiple "
        "of num_kv_heads {}",
        d_, h_, hkv_);
  const int64_t hd = d_ / h_;
  register_module("q_proj", std::make_shared<Linear>(d_, h_ * hd));
  register_module("k_proj", std::make_shared<Linear>(d_, hkv_ * hd));
  register_module("v_proj", std::make_shared<Linear>(d_, hkv_ * hd));
  register_module("out_proj", std::make_shared<Linear>(h_ * hd, d_));
}

Tensor MultiHeadAttention::forward(const Tensor& x, const std::optional<Tensor>& key_mask) {
  if (x.rank() != 3 || x.dim(2) != d_)
    fail("MultiHeadAttention(d_model={}): input {} is not [batch, seq, {}]", d_,
         ir::to_string(x.type()), d_);
  const int64_t B = x.dim(0), S = x.dim(1), hd = d_ / h_;
  auto& ch = children();
  // q, k and v from one GEMM (Linear::forward_fused); the three modules keep their names.
  std::array<Linear*, 3> proj{};
  for (size_t i = 0; i < 3; ++i) proj[i] = &dynamic_cast<Linear&>(*ch[i].second);
  const std::vector<Tensor> qkv = Linear::forward_fused(proj, x);
  auto heads = [&](size_t i, int64_t n) {  // [B,S,n*hd] -> [B,n,S,hd]
    return trace::transpose(trace::reshape(qkv[i], {B, S, n, hd}), {0, 2, 1, 3});
  };
  Tensor q = heads(0, h_), k = heads(1, hkv_), v = heads(2, hkv_);
  Tensor o = composites::attention(q, k, v, key_mask, 1.0 / std::sqrt(double(hd)), causal_);
  o = trace::reshape(trace::transpose(o, {0, 2, 1, 3}), {B, S, d_});
  return (*ch[3].second)(o);
}

std::string MultiHeadAttention::repr() const {
  return fmt::format("MultiHeadAttention(d_model={}, num_heads={}, num_kv_heads={}, causal={})", d_,
                     h_, hkv_, causal_ ? "True" : "False");
}

std::shared_ptr<Module> make_norm(const std::string& norm, int64_t dim) {
  if (norm == "layernorm") return std::make_shared<LayerNorm>(dim);
  if (norm == "rmsnorm") return std::make_shared<RMSNorm>(dim);
  fail("norm must be 'layernorm' or 'rmsnorm', got '{}'", norm);
}

TransformerBlock::TransformerBlock(int64_t d_model, int64_t num_heads, int64_t num_kv_heads,
                                   int64_t d_ff, const BlockOptions& o) {
  ln1_ = &register_module("ln_1", make_norm(o.norm, d_model));
  attn_ = &register_module("attn",
                           std::make_shared<MultiHeadAttention>(d_model, num_heads, num_kv_heads));
  ln2_ = &register_module("ln_2", make_norm(o.norm, d_model));
  auto mlp = std::make_shared<Sequential>();
  mlp->add(std::make_shared<Linear>(d_model, d_ff))
      .add(std::make_shared<GELU>(o.gelu))
      .add(std::make_shared<Linear>(d_ff, d_model));
  mlp_ = &register_module("mlp", mlp);
  if (!(o.dropout >= 0 && o.dropout <= 1))
    fail("TransformerBlock: dropout must be in [0, 1], got {}", o.dropout);
  if (o.dropout > 0) {
    drop1_ = &register_module("drop_1", std::make_shared<Dropout>(o.dropout));
    drop2_ = &register_module("drop_2", std::make_shared<Dropout>(o.dropout));
  }
}

Tensor TransformerBlock::forward(const Tensor& x) {
  auto drop = [](Module* d, const Tensor& t) { return d ? (*d)(t) : t; };
  Tensor h = x + drop(drop1_, (*attn_)((*ln1_)(x)));
  return h + drop(drop2_, (*mlp_)((*ln2_)(h)));
}

CausalLM::CausalLM(CausalLMConfig c) : c_(c) {
  if (c.vocab <= 0 || c.context <= 0 || c.layers <= 0 || c.d_ff <= 0)
    fail("CausalLM: vocab {}, context {}, layers {}, d_ff {} must be positive", c.vocab, c.context,
         c.layers, c.d_ff);
  // Tied: GPT-2's N(0, 0.02) for both tables, as tok_emb is also the head (N(0, 1) would give
  // logits of std ~sqrt(d_model)); untied: torch.nn.Embedding's N(0, 1).
  const double emb_std = c.tied ? kTiedEmbeddingStd : 1.0;
  register_module("tok_emb", std::make_shared<Embedding>(c.vocab, c.d_model, emb_std));
  register_module("pos_emb", std::make_shared<Embedding>(c.context, c.d_model, emb_std));
  auto blocks = std::make_shared<Sequential>();
  const BlockOptions opt{.norm = c.norm, .gelu = c.gelu, .dropout = c.dropout};
  for (int64_t i = 0; i < c.layers; ++i)
    blocks->add(std::make_shared<TransformerBlock>(c.d_model, c.heads, c.kv_heads, c.d_ff, opt));
  register_module("blocks", blocks);
  register_module("ln_f", make_norm(c.norm, c.d_model));
  if (!c.tied) register_module("head", std::make_shared<Linear>(c.d_model, c.vocab, false));
  // Registered last so the children above keep their indices.
  if (c.dropout > 0) drop_ = &register_module("drop", std::make_shared<Dropout>(c.dropout));
}

Tensor CausalLM::forward(const Tensor& tokens) {
  if (tokens.rank() != 2 || tokens.dim(1) > c_.context)
    fail("CausalLM: tokens {} must be [batch, seq <= {}]", ir::to_string(tokens.type()),
         c_.context);
  const int64_t S = tokens.dim(1);
  auto& ch = children();
  Tensor pos = trace::iota(Shape{S}, 0, DType::s32);
  Tensor x = (*ch[0].second)(tokens) + (*ch[1].second)(pos);
  if (drop_) x = (*drop_)(x);
  return logits((*ch[3].second)((*ch[2].second)(x)));
}

Tensor CausalLM::logits(const Tensor& x) {
  if (!c_.tied) return child("head")(x);
  // Tied head: logits = x · tok_emb.weightᵀ.
  const Tensor& w = child("tok_emb").named_parameters()[0].param->bound;
  return trace::dot_general(x, w, {{}, {}, {2}, {1}});
}

}  // namespace tlaloc::nn
