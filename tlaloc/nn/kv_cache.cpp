// KV-cache decoding: the decode methods declared in transformer.h and the decode-step program.
#include "tlaloc/nn/kv_cache.h"

#include <fmt/format.h>

#include <cmath>

#include "tlaloc/composites/composites.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/passes/passes.h"

namespace tlaloc::nn {

using trace::Tensor;

Tensor MultiHeadAttention::decode(const Tensor& x, const Tensor& pos, KVCache& cache) {
  const int64_t hd = d_ / h_;
  if (x.rank() != 3 || x.dim(1) != 1 || x.dim(2) != d_)
    fail("MultiHeadAttention::decode(d_model={}): input {} is not [batch, 1, {}]", d_,
         ir::to_string(x.type()), d_);
  const int64_t B = x.dim(0);
  auto heads = [&](const char* proj, int64_t n) {  // [B,1,n*hd] -> [B,n,1,hd]
    return trace::reshape(child(proj)(x), {B, n, 1, hd});
  };
  Tensor o = cached_attention(heads("q_proj", h_), heads("k_proj", hkv_), heads("v_proj", hkv_),
                              pos, cache, 1.0 / std::sqrt(double(hd)));
  return child("out_proj")(trace::reshape(o, {B, 1, d_}));  // [B,h,1,hd] -> [B,1,h*hd]
}

Tensor cached_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos,
                        KVCache& cache, double scale) {
  if (q.rank() != 4 || q.dim(2) != 1)
    fail("cached_attention: query {} is not [batch, heads, 1, head_dim]", ir::to_string(q.type()));
  const int64_t B = q.dim(0);
  for (const Tensor* c : {&cache.k, &cache.v})
    if (c->rank() != 4 || c->dim(0) != B || c->dim(1) != k.dim(1) || c->dim(3) != k.dim(3))
      fail("cached_attention: cache {} is not [{}, {}, context, {}]", ir::to_string(c->type()), B,
           k.dim(1), k.dim(3));
  if (pos.rank() != 0 || pos.dtype() != DType::s32)
    fail("cached_attention: pos {} is not an s32 scalar", ir::to_string(pos.type()));
  const int64_t T = cache.k.dim(2);
  Tensor zero = trace::scalar(0, DType::s32);
  cache.k = trace::dynamic_update_slice(cache.k, k, {zero, zero, pos, zero});
  cache.v = trace::dynamic_update_slice(cache.v, v, {zero, zero, pos, zero});
  // Slots 0..pos are this sequence's prefix; later slots are stale and masked out.
  Tensor visible = trace::broadcast_to(trace::iota(Shape{1, T}, 1, DType::s32) <= pos, {B, T});
  return composites::attention(q, cache.k, cache.v, visible, scale, false);
}

Tensor TransformerBlock::decode(const Tensor& x, const Tensor& pos, KVCache& cache) {
  Tensor h = x + attn_->decode((*ln1_)(x), pos, cache);
  return h + (*mlp_)((*ln2_)(h));
}

ir::TensorType CausalLM::kv_cache_type(int64_t batch, int64_t length) const {
  return {DType::f32, Shape{batch, c_.kv_heads, length, c_.d_model / c_.heads}};
}

Tensor CausalLM::decode(const Tensor& tokens, const Tensor& pos, std::vector<KVCache>& caches) {
  if (tokens.rank() != 2 || tokens.dim(1) != 1 || is_floating(tokens.dtype()))
    fail("CausalLM::decode: tokens {} must be s32 [batch, 1]", ir::to_string(tokens.type()));
  if (int64_t(caches.size()) != c_.layers)
    fail("CausalLM::decode: {} caches for {} layers", caches.size(), c_.layers);
  Tensor x = child("tok_emb")(tokens) + child("pos_emb")(trace::reshape(pos, {1}));
  Module& blocks = child("blocks");
  for (int64_t i = 0; i < c_.layers; ++i) {
    auto* block = dynamic_cast<TransformerBlock*>(&blocks.child(std::to_string(i)));
    if (!block) fail("CausalLM::decode: blocks.{} is not a TransformerBlock", i);
    x = block->decode(x, pos, caches[size_t(i)]);
  }
  return logits(child("ln_f")(x));
}

ir::Function decode_step(CachedDecoder& model, int64_t batch, int64_t length) {
  if (batch < 1) fail("decode_step: batch {} must be >= 1", batch);
  if (length == 0) length = model.max_positions();
  if (length < 1 || length > model.max_positions())
    fail("decode_step: cache length {} must be in [1, {}]", length, model.max_positions());
  const int64_t L = model.num_layers(), V = model.vocab_size();
  std::vector<ir::TensorType> types{{DType::s32, Shape{batch}}, {DType::s32, Shape{}}};
  std::vector<std::string> in_names{"token", "pos"}, out_names{"logits"};
  for (int64_t i = 0; i < L; ++i)
    for (const char* kv : {"k", "v"}) {
      types.push_back(model.kv_cache_type(batch, length));
      in_names.push_back(fmt::format("{}.{}", kv, i));
      out_names.push_back(fmt::format("{}.{}", kv, i));
    }
  for (auto& p : model.named_parameters()) {
    types.push_back({p.param->value.dtype(), p.param->value.shape()});
    in_names.push_back(p.name);
  }
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> in) {
        model.bind(in.subspan(size_t(2 + 2 * L)));
        std::vector<KVCache> caches;
        for (int64_t i = 0; i < L; ++i)
          caches.push_back({in[size_t(2 + 2 * i)], in[size_t(3 + 2 * i)]});
        Tensor logits = model.decode(trace::reshape(in[0], {batch, 1}), in[1], caches);
        std::vector<Tensor> out{trace::reshape(logits, {batch, V})};
        for (auto& kv : caches) out.insert(out.end(), {kv.k, kv.v});
        return out;
      },
      types, in_names, out_names, "decode_step");
  f = passes::simplify(f);
  for (int i = 0; i < int(2 * L); ++i) f.aliases.push_back({1 + i, 2 + i});
  ir::verify(f);
  return f;
}

}  // namespace tlaloc::nn
