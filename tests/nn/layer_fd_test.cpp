// f64 central finite differences against autodiff for the nn layers and composites of issue 7
// (tests/autodiff/harness.h): RMSNorm, LayerNorm, GELU (tanh and erf), Embedding (scatter-add
// gradient), Dropout with a fixed key, attention (MHA / GQA / MQA with causal + padding masks,
// rows with no visible key), a whole TransformerBlock with the new choices, and the Llama layers
// (RoPE in both layouts, SwiGLU MLP, attention, decoder layer, the whole causal LM).
#include "autodiff/harness.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/nn/models/llama.h"
#include "tlaloc/nn/norms.h"
#include "tlaloc/nn/rope.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/random/key.h"
#include "tlaloc/random/program.h"
#include "tlaloc/trace/special.h"

using namespace tlaloc;
using namespace tlaloc::testing;
using trace::Tensor;

namespace {

// FD check of m(x) w.r.t. x (when floating) and every parameter, all in f64. `extra` inputs
// (e.g. a key) follow x; their values are given in extra_values. h: the FD step.
void check_module(
    nn::Module& m, const Array& x, const std::vector<Array>& extra_values = {},
    const std::function<void(nn::Module&, std::span<const Tensor>)>& bind_extra = nullptr,
    double h = 1e-6) {
  std::vector<Array> in{x};
  in.insert(in.end(), extra_values.begin(), extra_values.end());
  const size_t first_param = in.size();
  uint64_t seed = 1;
  for (auto& p : m.named_parameters()) {
    // Parameters at generic values (not the init's ones / zeros), in f64.
    p.param->value = uniform(p.param->value.shape(), 100 + seed++, -1, 1);
    in.push_back(p.param->value);
  }
  std::vector<ir::TensorType> types;
  std::vector<int> wrt;
  for (size_t i = 0; i < in.size(); ++i) {
    types.push_back({in[i].dtype(), in[i].shape()});
    if (is_floating(in[i].dtype())) wrt.push_back(int(i));
  }
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> t) {
        m.bind(t.subspan(first_param));
        if (bind_extra) bind_extra(m, t.subspan(1, first_param - 1));
        return std::vector<Tensor>{m(t[0])};
      },
      types, {}, {}, m.repr());
  expect_vjp_matches_fd(f, in, wrt, h);
}

TEST(LayerFD, RMSNormAndLayerNorm) {
  nn::RMSNorm rms(5);
  check_module(rms, uniform({3, 5}, 1, -2, 2));
  nn::RMSNorm rms2(std::vector<int64_t>{2, 3}, 1e-3, false);
  check_module(rms2, uniform({2, 2, 3}, 2));
  nn::LayerNorm ln(5);
  check_module(ln, uniform({3, 5}, 3, -2, 2));
  // A row with a large mean: the two-pass variance keeps the gradient accurate. The step is
  // 1e-4 since rounding of 4e4 (~1e-11) over 1e-6 would swamp the difference quotient.
  std::vector<double> big{40000, 40001, 40002, 40003, 40000.5};
  nn::LayerNorm ln_big(5);
  check_module(ln_big, f64({1, 5}, big), {}, nullptr, 1e-4);
  nn::RMSNorm rms_big(5);
  check_module(rms_big, f64({1, 5}, big), {}, nullptr, 1e-4);
}

TEST(LayerFD, GeluBothForms) {
  // Points across [-4, 4] and exactly 0.
  std::vector<double> v;
  for (int i = 0; i < 17; ++i) v.push_back(-4 + 0.5 * i + (i == 8 ? 0 : 0.1));
  for (const char* approx : {"tanh", "none"}) {
    SCOPED_TRACE(approx);
    nn::GELU g(approx);
    check_module(g, f64({17}, v));
  }
  // erf itself (FD points away from nothing: erf is continuous at 0 by construction).
  ir::Function f = trace::capture(
      [](std::span<const Tensor> x) { return std::vector<Tensor>{trace::erf(x[0])}; },
      {{DType::f64, Shape{17}}}, {}, {}, "erf");
  expect_vjp_matches_fd(f, {f64({17}, v)}, {0});
  EXPECT_THROW(nn::GELU("exact"), Error);
}

TEST(LayerFD, EmbeddingScatterAddsRepeatedIds) {
  nn::Embedding emb(5, 3);
  // Id 1 appears three times and id 2 never: its gradient row must be 3 cotangents / 0.
  check_module(emb, Array::from<int32_t>({2, 3}, {1, 3, 1, 0, 1, 4}));
}

TEST(LayerFD, DropoutWithAFixedKey) {
  nn::Dropout drop(0.4);
  Array key = random::key_data(random::key(9));
  check_module(drop, uniform({4, 6}, 4), {key},
               [](nn::Module& m, std::span<const Tensor> k) { m.bind_key(k[0]); });
}

// Attention with causal and padding masks for MHA, GQA and MQA: FD of the composite, then the
// rows with no visible key give 0 and pass no gradient (finite everywhere).
TEST(LayerFD, AttentionMasksForMhaGqaMqa) {
  struct Heads {
    int64_t hq, hkv;
  };
  // Batch 0 masks key 0 (its first query sees nothing under the causal mask); batch 1 masks
  // keys 2, 3 only.
  const std::vector<bool> keep{0, 1, 1, 1, 1, 1, 0, 0};
  for (Heads h : {Heads{2, 2}, Heads{4, 2}, Heads{4, 1}}) {
    SCOPED_TRACE(fmt::format("Hq {} Hkv {}", h.hq, h.hkv));
    const int64_t B = 2, S = 4, D = 3;
    std::vector<Array> x{uniform({B, h.hq, S, D}, 10), uniform({B, h.hkv, S, D}, 11),
                         uniform({B, h.hkv, S, D}, 12)};
    auto fn = [&](std::span<const Tensor> t) {
      Tensor mask = trace::constant(Array::from(Shape{B, S}, keep));
      return std::vector<Tensor>{composites::attention(t[0], t[1], t[2], mask, 0.6, true)};
    };
    std::vector<ir::TensorType> types;
    for (auto& a : x) types.push_back({DType::f64, a.shape()});
    ir::Function f = trace::capture(fn, types, {}, {}, "attention");
    expect_vjp_matches_fd(f, x, {0, 1, 2});
    // Output rows (batch 0, query 0) are 0 for every head.
    Array out = execute(f, x)[0];
    for (int64_t hh = 0; hh < h.hq; ++hh)
      for (int64_t d = 0; d < D; ++d) EXPECT_EQ(out.at((hh * S + 0) * D + d), 0.0);
    // A cotangent only on those rows: every gradient is exactly 0 (no NaN).
    std::vector<double> ct(size_t(out.numel()), 0.0);
    for (int64_t hh = 0; hh < h.hq; ++hh)
      for (int64_t d = 0; d < D; ++d) ct[size_t((hh * S + 0) * D + d)] = 1.0;
    std::vector<Array> gin = x;
    gin.push_back(f64(out.shape(), ct));
    auto g = execute(autodiff::vjp(f, {0, 1, 2}), gin);
    for (auto& a : g)
      for (int64_t e = 0; e < a.numel(); ++e) ASSERT_EQ(a.at(e), 0.0) << e;
  }
}

// A whole block with RMSNorm, erf GELU, GQA and dropout (fixed key), through the
// MultiHeadAttention module.
TEST(LayerFD, TransformerBlockWithRmsNormErfGeluAndDropout) {
  nn::TransformerBlock block(4, 2, 1, 6, {.norm = "rmsnorm", .gelu = "none", .dropout = 0.2});
  Array key = random::key_data(random::key(4));
  check_module(block, uniform({1, 3, 4}, 20), {key},
               [](nn::Module& m, std::span<const Tensor> k) { m.bind_key(k[0]); });
}

// A tiny Llama: GQA (4 heads sharing 2), head_dim 4 != hidden / heads, biases, llama3 scaling
// with a short original context (scaled, smoothed and unchanged frequencies at 3 positions).
nn::models::LlamaConfig tiny_llama(bool interleaved, bool tied) {
  nn::models::LlamaConfig c;
  c.vocab_size = 11;
  c.hidden_size = 6;
  c.intermediate_size = 10;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500;
  c.rope_scaling = nn::models::LlamaRopeScaling{.llama3 = {.original_max_position_embeddings = 8}};
  c.attention_bias = c.mlp_bias = true;
  c.tie_word_embeddings = tied;
  c.rope_interleaved = interleaved;
  return c;
}

TEST(LayerFD, RopeBothLayouts) {
  for (auto layout : {nn::RopeLayout::rotate_half, nn::RopeLayout::interleaved}) {
    SCOPED_TRACE(layout == nn::RopeLayout::rotate_half ? "rotate_half" : "interleaved");
    nn::RopeTables t = nn::rope_tables(nn::rope_inv_freq(6, 100, std::nullopt, DType::f64), 3);
    ir::Function f = trace::capture(
        [&](std::span<const Tensor> x) {
          return std::vector<Tensor>{
              nn::apply_rope(x[0], trace::constant(t.cos), trace::constant(t.sin), layout)};
        },
        {{DType::f64, Shape{2, 3, 2, 6}}}, {}, {}, "rope");
    expect_vjp_matches_fd(f, {uniform({2, 3, 2, 6}, 30)}, {0});
  }
}

TEST(LayerFD, LlamaMlpAttentionAndDecoderLayer) {
  for (bool interleaved : {false, true}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "rotate_half");
    const nn::models::LlamaConfig c = tiny_llama(interleaved, false);
    nn::models::LlamaMLP mlp(c);
    check_module(mlp, uniform({2, 3, 6}, 31, -2, 2));
    nn::models::LlamaAttention attn(c);
    check_module(attn, uniform({2, 3, 6}, 32));
    nn::models::LlamaDecoderLayer layer(c);
    check_module(layer, uniform({1, 3, 6}, 33));
  }
}

TEST(LayerFD, LlamaForCausalLMTiedAndUntied) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied, interleaved" : "untied, rotate-half");
    nn::models::LlamaForCausalLM m(tiny_llama(tied, tied));
    check_module(m, Array::from<int32_t>({2, 3}, {1, 3, 1, 0, 10, 4}));
  }
}

}  // namespace
