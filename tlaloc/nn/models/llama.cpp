#include "tlaloc/nn/models/llama.h"

#include <fmt/format.h>

#include <cmath>

#include "tlaloc/composites/composites.h"
#include "tlaloc/nn/norms.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/random/random.h"
#include "tlaloc/trace/autocast.h"

namespace tlaloc::nn::models {

using trace::Tensor;

namespace {

// N(0, std²) in f32, as HF's normal_(mean=0.0, std=std).
Array scaled_normal(const random::Key& key, const Shape& shape, double std) {
  Array a = random::normal(key, shape);
  for (float& v : a.span<float>()) v *= float(std);
  return a;
}

// Linear and Embedding initialised as HF's LlamaPreTrainedModel._init_weights.
class InitLinear : public Linear {
 public:
  InitLinear(int64_t in, int64_t out, bool bias, double std)
      : Linear(in, out, bias), has_bias_(bias), std_(std) {}
  void reset_parameters(const random::Key& key) override {
    parameter("weight").value = scaled_normal(key, Shape{out_features(), in_features()}, std_);
    if (has_bias_) parameter("bias").value = Array(DType::f32, Shape{out_features()});
  }

 private:
  bool has_bias_;
  double std_;
};

class InitEmbedding : public Embedding {
 public:
  InitEmbedding(int64_t n, int64_t d, double std, std::optional<int64_t> pad)
      : Embedding(n, d), n_(n), d_(d), std_(std), pad_(pad) {}
  void reset_parameters(const random::Key& key) override {
    Array w = scaled_normal(key, Shape{n_, d_}, std_);
    if (pad_) std::fill_n(w.data<float>() + *pad_ * d_, d_, 0.0f);
    parameter("weight").value = std::move(w);
  }

 private:
  int64_t n_, d_;
  double std_;
  std::optional<int64_t> pad_;
};

std::shared_ptr<Linear> linear(const LlamaConfig& c, int64_t in, int64_t out, bool bias) {
  return std::make_shared<InitLinear>(in, out, bias, c.initializer_range);
}

RopeLayout layout(const LlamaConfig& c) {
  return c.rope_interleaved ? RopeLayout::interleaved : RopeLayout::rotate_half;
}

void check_hidden(const Tensor& x, int64_t hidden, const char* who) {
  if (x.rank() != 3 || x.dim(2) != hidden)
    fail("{}: input {} is not [batch, seq, {}]", who, ir::to_string(x.type()), hidden);
}

}  // namespace

RopeConstants rope_constants(const LlamaConfig& c, int64_t length, DType dtype) {
  if (!is_floating(dtype)) fail("rope_constants: dtype {} is not floating", name(dtype));
  const DType t = dtype == DType::f64 ? DType::f64 : DType::f32;
  RopeTables r =
      rope_tables(rope_inv_freq(c.head_size(), c.rope_theta, c.llama3_scaling(), t), length);
  return {trace::constant(r.cos.astype(dtype)), trace::constant(r.sin.astype(dtype))};
}

// --- LlamaAttention -------------------------------------------------------------------------

LlamaAttention::LlamaAttention(const LlamaConfig& c)
    : c_(c),
      hidden_(c.hidden_size),
      heads_(c.num_attention_heads),
      kv_heads_(c.kv_heads()),
      head_dim_(c.head_size()),
      layout_(layout(c)) {
  c.validate();
  const bool b = c.attention_bias;
  register_module("q_proj", linear(c, hidden_, heads_ * head_dim_, b));
  register_module("k_proj", linear(c, hidden_, kv_heads_ * head_dim_, b));
  register_module("v_proj", linear(c, hidden_, kv_heads_ * head_dim_, b));
  register_module("o_proj", linear(c, heads_ * head_dim_, hidden_, b));
}

Tensor LlamaAttention::forward(const Tensor& x, const RopeConstants& rope,
                               const std::optional<Tensor>& key_mask) {
  check_hidden(x, hidden_, "LlamaAttention");
  const int64_t B = x.dim(0), S = x.dim(1), D = head_dim_;
  auto proj = [&](const char* name, int64_t n) {  // [B,S,n*D] -> [B,S,n,D]
    return trace::reshape(child(name)(x), {B, S, n, D});
  };
  auto heads = [](const Tensor& t) { return trace::transpose(t, {0, 2, 1, 3}); };
  Tensor q = apply_rope(proj("q_proj", heads_), rope.cos, rope.sin, layout_);
  Tensor k = apply_rope(proj("k_proj", kv_heads_), rope.cos, rope.sin, layout_);
  Tensor v = proj("v_proj", kv_heads_);
  Tensor o = composites::attention(heads(q), heads(k), heads(v), key_mask,
                                   1.0 / std::sqrt(double(D)), true);
  return child("o_proj")(trace::reshape(heads(o), {B, S, heads_ * D}));
}

Tensor LlamaAttention::forward(const Tensor& x) {
  check_hidden(x, hidden_, "LlamaAttention");
  return forward(x, rope_constants(c_, x.dim(1), x.dtype()), std::nullopt);
}

Tensor LlamaAttention::decode(const Tensor& x, const Tensor& pos, const RopeConstants& rope,
                              KVCache& cache) {
  if (x.rank() != 3 || x.dim(1) != 1 || x.dim(2) != hidden_)
    fail("LlamaAttention::decode: input {} is not [batch, 1, {}]", ir::to_string(x.type()),
         hidden_);
  const int64_t B = x.dim(0), D = head_dim_;
  auto proj = [&](const char* name, int64_t n) {  // [B,1,n*D] -> [B,1,n,D]
    return trace::reshape(child(name)(x), {B, 1, n, D});
  };
  // [B,1,n,D] -> [B,n,1,D] is a reshape: the moved axis has size 1.
  auto heads = [&](const Tensor& t, int64_t n) { return trace::reshape(t, {B, n, 1, D}); };
  Tensor q = apply_rope(proj("q_proj", heads_), rope.cos, rope.sin, layout_);
  Tensor k = apply_rope(proj("k_proj", kv_heads_), rope.cos, rope.sin, layout_);
  Tensor o = cached_attention(heads(q, heads_), heads(k, kv_heads_),
                              heads(proj("v_proj", kv_heads_), kv_heads_), pos, cache,
                              1.0 / std::sqrt(double(D)));
  return child("o_proj")(trace::reshape(o, {B, 1, heads_ * D}));
}

std::string LlamaAttention::repr() const {
  return fmt::format(
      "LlamaAttention(hidden_size={}, num_heads={}, num_key_value_heads={}, "
      "head_dim={}, rope={})",
      hidden_, heads_, kv_heads_, head_dim_,
      layout_ == RopeLayout::rotate_half ? "rotate_half" : "interleaved");
}

// --- LlamaMLP, LlamaDecoderLayer ------------------------------------------------------------

LlamaMLP::LlamaMLP(const LlamaConfig& c)
    : hidden_(c.hidden_size), intermediate_(c.intermediate_size) {
  register_module("gate_proj", linear(c, hidden_, intermediate_, c.mlp_bias));
  register_module("up_proj", linear(c, hidden_, intermediate_, c.mlp_bias));
  register_module("down_proj", linear(c, intermediate_, hidden_, c.mlp_bias));
}

Tensor LlamaMLP::forward(const Tensor& x) {
  auto& ch = children();
  return (*ch[2].second)(silu((*ch[0].second)(x)) * (*ch[1].second)(x));
}

std::string LlamaMLP::repr() const {
  return fmt::format("LlamaMLP(hidden_size={}, intermediate_size={}, act=silu)", hidden_,
                     intermediate_);
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c) : c_(c) {
  attn_ = &register_module("self_attn", std::make_shared<LlamaAttention>(c));
  mlp_ = &register_module("mlp", std::make_shared<LlamaMLP>(c));
  norm1_ =
      &register_module("input_layernorm", std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
  norm2_ = &register_module("post_attention_layernorm",
                            std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x, const RopeConstants& rope,
                                  const std::optional<Tensor>& key_mask) {
  Tensor h = x + attn_->forward((*norm1_)(x), rope, key_mask);
  return h + (*mlp_)((*norm2_)(h));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x) {
  check_hidden(x, c_.hidden_size, "LlamaDecoderLayer");
  return forward(x, rope_constants(c_, x.dim(1), x.dtype()), std::nullopt);
}

Tensor LlamaDecoderLayer::decode(const Tensor& x, const Tensor& pos, const RopeConstants& rope,
                                 KVCache& cache) {
  Tensor h = x + attn_->decode((*norm1_)(x), pos, rope, cache);
  return h + (*mlp_)((*norm2_)(h));
}

// --- LlamaModel -----------------------------------------------------------------------------

LlamaModel::LlamaModel(const LlamaConfig& c) : c_(c) {
  c.validate();
  register_module("embed_tokens",
                  std::make_shared<InitEmbedding>(c.vocab_size, c.hidden_size, c.initializer_range,
                                                  c.pad_token_id));
  auto layers = std::make_shared<Sequential>();  // a container: its forward is not used
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers->add(std::make_shared<LlamaDecoderLayer>(c));
  register_module("layers", layers);
  register_module("norm", std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
}

const Tensor& LlamaModel::embedding() const {
  return child("embed_tokens").named_parameters()[0].param->bound;
}

namespace {

LlamaDecoderLayer& layer(const Module& layers, int64_t i) {
  return static_cast<LlamaDecoderLayer&>(layers.child(std::to_string(i)));
}

}  // namespace

Tensor LlamaModel::forward(const Tensor& tokens, const std::optional<Tensor>& attention_mask) {
  if (tokens.rank() != 2 || is_floating(tokens.dtype()))
    fail("LlamaModel: tokens {} must be s32 [batch, seq]", ir::to_string(tokens.type()));
  std::optional<Tensor> mask;
  if (attention_mask) {
    const Tensor& m = *attention_mask;
    if (m.shape() != tokens.shape() || is_floating(m.dtype()))
      fail("LlamaModel: attention_mask {} must be i1 or integer {}", ir::to_string(m.type()),
           tlaloc::to_string(tokens.shape()));
    mask = m.dtype() == DType::i1 ? m : trace::not_equal(m, trace::zeros_like(m));
  }
  Tensor x = child("embed_tokens")(tokens);
  const RopeConstants rope = rope_constants(c_, tokens.dim(1), x.dtype());
  const Module& layers = child("layers");
  for (int64_t i = 0; i < c_.num_hidden_layers; ++i) x = layer(layers, i).forward(x, rope, mask);
  return child("norm")(x);
}

Tensor LlamaModel::decode(const Tensor& tokens, const Tensor& pos, std::vector<KVCache>& caches) {
  if (tokens.rank() != 2 || tokens.dim(1) != 1 || is_floating(tokens.dtype()))
    fail("LlamaModel::decode: tokens {} must be s32 [batch, 1]", ir::to_string(tokens.type()));
  if (int64_t(caches.size()) != c_.num_hidden_layers)
    fail("LlamaModel::decode: {} caches for {} layers", caches.size(), c_.num_hidden_layers);
  Tensor x = child("embed_tokens")(tokens);
  // The rows of position pos of tables as long as the cache: the same values forward() uses.
  const RopeConstants table = rope_constants(c_, caches[0].k.dim(2), x.dtype());
  Tensor zero = trace::scalar(0, DType::s32);
  const int64_t half = c_.head_size() / 2;
  const RopeConstants rope{trace::dynamic_slice(table.cos, {pos, zero}, {1, half}),
                           trace::dynamic_slice(table.sin, {pos, zero}, {1, half})};
  const Module& layers = child("layers");
  for (int64_t i = 0; i < c_.num_hidden_layers; ++i)
    x = layer(layers, i).decode(x, pos, rope, caches[size_t(i)]);
  return child("norm")(x);
}

// --- LlamaForCausalLM -----------------------------------------------------------------------

LlamaForCausalLM::LlamaForCausalLM(LlamaConfig c) : c_(std::move(c)) {
  c_.validate();
  model_ = &register_module("model", std::make_shared<LlamaModel>(c_));
  if (!c_.tie_word_embeddings)
    register_module("lm_head", linear(c_, c_.hidden_size, c_.vocab_size, false));
}

Tensor LlamaForCausalLM::logits(const Tensor& hidden) {
  if (!c_.tie_word_embeddings) return child("lm_head")(hidden);
  const Tensor& w = model_->embedding();  // logits = hidden · embed_tokens.weightᵀ
  return trace::dot_general(hidden, w, {{}, {}, {2}, {1}});
}

Tensor LlamaForCausalLM::forward(const Tensor& tokens,
                                 const std::optional<Tensor>& attention_mask) {
  return logits(model_->forward(tokens, attention_mask));
}

Tensor LlamaForCausalLM::decode(const Tensor& tokens, const Tensor& pos,
                                std::vector<KVCache>& caches) {
  return logits(model_->decode(tokens, pos, caches));
}

ir::TensorType LlamaForCausalLM::kv_cache_type(int64_t batch, int64_t length) const {
  return {DType::f32, Shape{batch, c_.kv_heads(), length, c_.head_size()}};
}

}  // namespace tlaloc::nn::models
