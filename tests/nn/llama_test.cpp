// LlamaConfig (HF's defaults, config.json both ways, refusals by name), LlamaForCausalLM's
// parameter names, shapes and initialisation, interleaved RoPE on un-permuted weights equal to
// rotate-half, KV-cache decoding against the whole prefix recomputed, the same bits on 1 and 2
// threads, and next_token_loss with a mask. The values against PyTorch: llama_torch_test.cpp.
#include <nlohmann/json.hpp>

#include "nn/llama_util.h"
#include "support/error_of.h"
#include "support/stablehlo_roundtrip.h"

using namespace tlaloc;
using namespace tlaloc::llama_test;
using nlohmann::json;
using nn::models::llama_config_from_json;
using tlaloc::testing::error_of;

namespace {

// meta-llama/Llama-3.2-1B's config.json.
const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// A Llama-2-style config: older keys, eos as a list, the legacy rope_scaling "type" key.
const char* kOlder = R"({
  "_name_or_path": "x/y", "architectures": ["LlamaForCausalLM"], "bos_token_id": 1,
  "eos_token_id": [2, 32000], "hidden_act": "swish", "hidden_size": 64,
  "intermediate_size": 172, "max_position_embeddings": 4096, "model_type": "llama",
  "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 4,
  "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": {"type": "default"},
  "tie_word_embeddings": false, "vocab_size": 32001})";

TEST(LlamaConfig, DefaultsAreHfs) {
  json j = nn::models::to_json(LlamaConfig{});
  const json want = json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "rope_scaling": null, "attention_bias": false, "mlp_bias": false,
    "tie_word_embeddings": false, "hidden_act": "silu", "initializer_range": 0.02,
    "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": null})");
  EXPECT_EQ(j, want) << j.dump(1);
}

TEST(LlamaConfig, ParsesHfConfigsAndKeepsEveryKey) {
  for (const char* text : {kLlama32, kOlder}) {
    const json j = json::parse(text);
    LlamaConfig c = llama_config_from_json(j);
    const json out = nn::models::to_json(c);
    for (auto& [k, v] : j.items()) {
      ASSERT_TRUE(out.contains(k)) << k;
      EXPECT_EQ(out[k], v) << k;
    }
    EXPECT_EQ(llama_config_from_json(out).metadata, c.metadata);
  }
  LlamaConfig c = llama_config_from_json(json::parse(kLlama32));
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.kv_heads(), 8);
  EXPECT_EQ(c.head_size(), 64);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  ASSERT_TRUE(c.llama3_scaling());
  EXPECT_EQ(c.llama3_scaling()->factor, 32.0);
  EXPECT_EQ(c.llama3_scaling()->original_max_position_embeddings, 8192);
  EXPECT_EQ(c.metadata.at("transformers_version"), "\"4.45.0.dev0\"");
  LlamaConfig o = llama_config_from_json(json::parse(kOlder));
  EXPECT_EQ(o.eos_token_id, (std::vector<int64_t>{2, 32000}));
  EXPECT_EQ(o.head_size(), 16);
  EXPECT_FALSE(o.llama3_scaling());
  EXPECT_EQ(o.pad_token_id, 0);
}

// transformers >= 4.56 spells torch_dtype "dtype"; a config with either, or both agreeing, keeps
// its spelling when written back.
TEST(LlamaConfig, DtypeIsTorchDtypesNewerSpelling) {
  json j = json::parse(kLlama32);
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  LlamaConfig c = llama_config_from_json(j);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_TRUE(c.metadata.empty() || !c.metadata.count("dtype"));
  c.torch_dtype = "float32";  // what a run that writes F32 weights sets
  json out = nn::models::to_json(c);
  EXPECT_EQ(out["dtype"], "float32");
  EXPECT_EQ(out.value("torch_dtype", "float32"), "float32");
  j["torch_dtype"] = "bfloat16";
  out = nn::models::to_json(llama_config_from_json(j));
  EXPECT_EQ(out["dtype"], "bfloat16");
  EXPECT_EQ(out["torch_dtype"], "bfloat16");
  json only = j;
  only.erase("torch_dtype");
  only["dtype"] = "int8";
  EXPECT_NE(error_of([&] { llama_config_from_json(only); }).find("dtype 'int8' is not float32"),
            std::string::npos);
  j["torch_dtype"] = "float32";
  EXPECT_NE(error_of([&] { llama_config_from_json(j, "d/config.json"); })
                .find("d/config.json: keys 'torch_dtype' ('float32') and 'dtype' ('bfloat16') "
                      "disagree"),
            std::string::npos);
}

// HF computes the llama3 wavelengths from original_max_position_embeddings in floats.
TEST(LlamaConfig, Llama3OriginalContextMayBeAWholeFloat) {
  json j = json::parse(kLlama32);
  j["rope_scaling"]["original_max_position_embeddings"] = 8192.0;
  EXPECT_EQ(llama_config_from_json(j).llama3_scaling()->original_max_position_embeddings, 8192);
  j["rope_scaling"]["original_max_position_embeddings"] = 8192.5;
  EXPECT_NE(error_of([&] { llama_config_from_json(j); })
                .find("key 'rope_scaling.original_max_position_embeddings' must be a whole "
                      "number, got 8192.5"),
            std::string::npos);
}

TEST(LlamaConfig, RefusesWhatIsNotImplementedByName) {
  struct Bad {
    std::string patch, message;
  };
  const std::vector<Bad> bad = {
      {R"({"rope_scaling": {"beta_fast": 32, "rope_type": "yarn"}})",
       "rope_scaling.rope_type 'yarn' is not implemented (tlaloc's Llama: 'default', 'llama3')"},
      {R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "beta": 1}})",
       "key 'rope_scaling.beta' is not implemented for rope_type 'llama3'"},
      {R"({"rope_scaling": {"type": "default", "factor": 2.0}})",
       "key 'rope_scaling.factor' is not implemented for rope_type 'default'"},
      {R"({"rope_scaling": {"rope_type": "yarn"}})", "rope_type 'yarn' is not implemented"},
      {R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}})", "has no low_freq_factor"},
      {R"({"hidden_act": "gelu"})", "hidden_act 'gelu' is not implemented"},
      {R"({"sliding_window": 4096})", "key 'sliding_window' is not implemented"},
      {R"({"quantization_config": {}})", "key 'quantization_config' is not implemented"},
      {R"({"model_type": "mistral"})", "model_type 'mistral' is not implemented"},
      {R"({"architectures": ["MistralForCausalLM"]})",
       "key 'architectures' is [\"MistralForCausalLM\"], not a list of Llama classes"},
      {R"({"architectures": "LlamaForCausalLM"})", "key 'architectures' is \"LlamaForCausalLM\""},
      {R"({"attention_dropout": 0.1})", "attention_dropout 0.1 is not implemented"},
      {R"({"vocab_size": "many"})", "key 'vocab_size' must be an integer, got \"many\""},
      {R"({"num_hidden_layers": 2.5})", "key 'num_hidden_layers' must be an integer"},
      {R"({"num_key_value_heads": 3})",
       "num_attention_heads 32 is not a multiple of "
       "num_key_value_heads 3"},
      {R"({"head_dim": 7})", "head_dim 7 must be even"},
      {R"({"hidden_size": 0})", "hidden_size 0 must be positive"},
      {R"({"rms_norm_eps": -1})", "rms_norm_eps -1 must be finite and positive"},
      {R"({"pad_token_id": 128256})", "pad_token_id 128256 is outside the vocabulary"},
      {R"({"torch_dtype": "int8"})", "torch_dtype 'int8'"},
      {R"({"eos_token_id": [1, "x"]})", "key 'eos_token_id[1]' must be an integer"},
  };
  for (const Bad& b : bad) {
    json j = json::parse(kLlama32);
    j.update(json::parse(b.patch));
    std::string msg = error_of([&] { llama_config_from_json(j, "dir/config.json"); });
    EXPECT_NE(msg.find("dir/config.json: "), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.message), std::string::npos) << b.patch << " -> " << msg;
  }
  EXPECT_NE(error_of([] { llama_config_from_json(json::array()); }).find("not a JSON object"),
            std::string::npos);
  LlamaConfig c = tiny(4, 2, false);
  c.rope_interleaved = true;
  EXPECT_NE(error_of([&] { nn::models::to_json(c); }).find("rope_interleaved"), std::string::npos);
  c.num_key_value_heads = 3;
  EXPECT_THROW(LlamaForCausalLM{c}, Error);
}

std::vector<std::string> shapes(LlamaForCausalLM& m) {
  std::vector<std::string> v;
  for (auto& p : m.named_parameters())
    v.push_back(p.name + " " + to_string(p.param->value.shape()));
  return v;
}

TEST(LlamaForCausalLM, HfParameterNamesAndShapes) {
  LlamaConfig c = tiny(4, 2, false);
  c.num_hidden_layers = 1;
  c.head_dim = 12;
  LlamaForCausalLM untied(c);
  EXPECT_EQ(shapes(untied),
            (std::vector<std::string>{"model.embed_tokens.weight [61,32]",
                                      "model.layers.0.self_attn.q_proj.weight [48,32]",
                                      "model.layers.0.self_attn.k_proj.weight [24,32]",
                                      "model.layers.0.self_attn.v_proj.weight [24,32]",
                                      "model.layers.0.self_attn.o_proj.weight [32,48]",
                                      "model.layers.0.mlp.gate_proj.weight [48,32]",
                                      "model.layers.0.mlp.up_proj.weight [48,32]",
                                      "model.layers.0.mlp.down_proj.weight [32,48]",
                                      "model.layers.0.input_layernorm.weight [32]",
                                      "model.layers.0.post_attention_layernorm.weight [32]",
                                      "model.norm.weight [32]", "lm_head.weight [61,32]"}));
  c.tie_word_embeddings = c.attention_bias = c.mlp_bias = true;
  LlamaForCausalLM tied(c);
  std::vector<std::string> s = shapes(tied);
  ASSERT_EQ(s.size(), 18u);
  EXPECT_EQ(s[2], "model.layers.0.self_attn.q_proj.bias [48]");
  EXPECT_EQ(s[8], "model.layers.0.self_attn.o_proj.bias [32]");
  EXPECT_EQ(s[14], "model.layers.0.mlp.down_proj.bias [32]");
  EXPECT_EQ(s.back(), "model.norm.weight [32]");  // no lm_head
}

TEST(LlamaForCausalLM, InitialisesAsHfInitWeights) {
  LlamaConfig c = tiny(4, 2, false);
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.initializer_range = 0.02;
  c.attention_bias = c.mlp_bias = true;
  c.pad_token_id = 3;
  LlamaForCausalLM m(c), again(c);
  m.init(random::key(1));
  again.init(random::key(1));
  for (auto& p : m.named_parameters()) {
    SCOPED_TRACE(p.name);
    const std::vector<double> v = p.param->value.to_doubles();
    if (p.name.find("norm") != std::string::npos) {
      for (double x : v) ASSERT_EQ(x, 1.0);
    } else if (p.name.ends_with(".bias")) {
      for (double x : v) ASSERT_EQ(x, 0.0);
    } else {
      double sum = 0, sq = 0;
      for (double x : v) sum += x, sq += x * x;
      const double n = double(v.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
      EXPECT_NEAR(mean, 0, 4 * 0.02 / std::sqrt(n));
      EXPECT_NEAR(sd, 0.02, 0.02 * 6 / std::sqrt(n));
    }
  }
  const Array& emb = m.named_parameters()[0].param->value;
  for (int64_t d = 0; d < 64; ++d) EXPECT_EQ(emb.at(3 * 64 + d), 0.0);  // the pad row
  auto a = m.named_parameters(), b = again.named_parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(a[i].param->value.bitwise_equal(b[i].param->value)) << a[i].name;
}

TEST(LlamaForCausalLM, InterleavedRopeOnUnpermutedWeightsEqualsRotateHalf) {
  for (LlamaConfig c : {tiny(4, 2, false), with_llama3(tiny(4, 1, true))}) {
    c.attention_bias = true;
    LlamaForCausalLM hf(c);
    randomize(hf, 7);
    c.rope_interleaved = true;
    LlamaForCausalLM meta(c);
    auto from = hf.named_parameters(), to = meta.named_parameters();
    for (size_t i = 0; i < from.size(); ++i) {
      const std::string& n = from[i].name;
      const Array& w = from[i].param->value;
      const bool q = n.find("q_proj") != std::string::npos,
                 k = n.find("k_proj") != std::string::npos;
      const int64_t heads = q ? c.num_attention_heads : c.kv_heads();
      to[i].param->value = q || k ? nn::rope_unpermute(w, heads) : w;
      if (q || k) {
        EXPECT_TRUE(nn::rope_permute(to[i].param->value, heads).bitwise_equal(w));
      }
    }
    const Array ids = tokens(2, 12, 61);
    EXPECT_LE(rel_err(logits(meta, ids), logits(hf, ids)), 1e-5);
  }
}

TEST(LlamaForCausalLM, SameBitsOnOneAndTwoThreads) {
  LlamaForCausalLM m(with_llama3(tiny(4, 2, true)));
  randomize(m, 3);
  const Array ids = tokens(2, 12, 61);
  EXPECT_TRUE(logits(m, ids, {}, 1).bitwise_equal(logits(m, ids, {}, 2)));
  auto one = loss_and_grads(m, ids, 1), two = loss_and_grads(m, ids, 2);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(one[i].bitwise_equal(two[i])) << i;
}

// Runs the decode step over every position of `ids` [B, S]; returns the logits [B, vocab] of
// each position.
std::vector<Array> decode_all(LlamaForCausalLM& m, const Array& ids, int64_t length) {
  const int64_t B = ids.shape().dims[0], S = ids.shape().dims[1], L = m.num_layers();
  auto exe = runtime::host::compile(nn::decode_step(m, B, length), {.num_threads = 1});
  std::vector<Array> in{Array(DType::s32, Shape{B}), Array(DType::s32, Shape{})};
  const ir::TensorType ct = m.kv_cache_type(B, length);
  for (int64_t i = 0; i < 2 * L; ++i) in.push_back(Array::filled(ct.dtype, ct.shape, 7.5));
  for (auto& p : m.named_parameters()) in.push_back(p.param->value);
  std::vector<Array> out;
  for (int64_t pos = 0; pos < S; ++pos) {
    for (int64_t b = 0; b < B; ++b) in[0].data<int32_t>()[b] = ids.data<int32_t>()[b * S + pos];
    in[1].data<int32_t>()[0] = int32_t(pos);
    auto res = exe->run_donated(in);
    for (int64_t i = 0; i < 2 * L; ++i) in[size_t(2 + i)] = std::move(res[size_t(1 + i)]);
    out.push_back(std::move(res[0]));
  }
  return out;
}

TEST(LlamaForCausalLM, DecodeEqualsRecomputingTheWholePrefix) {
  LlamaConfig il = with_llama3(tiny(4, 1, true));
  il.rope_interleaved = true;
  for (const LlamaConfig& c : {tiny(4, 2, false), il}) {
    SCOPED_TRACE(c.rope_interleaved ? "MQA tied llama3 interleaved" : "GQA untied");
    LlamaForCausalLM m(c);
    randomize(m, 9);
    const int64_t B = 2, S = 10, V = c.vocab_size;
    const Array ids = tokens(B, S, V, 8);
    std::vector<Array> got = decode_all(m, ids, 16);  // a cache longer than the sequence
    for (int64_t pos = 0; pos < S; ++pos) {
      // forward() on the prefix 0..pos; its last row.
      std::vector<int32_t> prefix;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s <= pos; ++s) prefix.push_back(ids.data<int32_t>()[b * S + s]);
      Array full = logits(m, Array::from(Shape{B, pos + 1}, prefix));
      std::vector<float> last;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t v = 0; v < V; ++v)
          last.push_back(full.data<float>()[(b * (pos + 1) + pos) * V + v]);
      // f32 sums in other orders (the cache's per-row attention, forward's GEMM blocks).
      EXPECT_LE(rel_err(got[size_t(pos)], Array::from(Shape{B, V}, last)), 1e-5) << pos;
    }
  }
}

TEST(LlamaForCausalLM, DecodeStepSignatureAndStableHlo) {
  LlamaForCausalLM m(with_llama3(tiny(4, 2, false)));
  randomize(m, 2);
  ir::Function f = nn::decode_step(m, 2, 8);
  EXPECT_EQ(f.input_names[2], "k.0");
  EXPECT_EQ(f.input_names[6], "model.embed_tokens.weight");
  EXPECT_EQ(f.input_type(2).shape, (Shape{2, 2, 8, 8}));  // [batch, kv_heads, length, head_dim]
  EXPECT_EQ(f.output_type(0).shape, (Shape{2, 61}));
  EXPECT_EQ(f.aliases.size(), 4u);
  EXPECT_THROW(nn::decode_step(m, 1, 65), Error);  // past max_position_embeddings
  std::vector<Array> in = tlaloc::testing::sample_inputs(f, 3);
  in[1] = Array::scalar<int32_t>(5);
  tlaloc::testing::expect_stablehlo_roundtrip(f, in);
}

TEST(LlamaForCausalLM, NextTokenLossWithAMask) {
  const Array ids = tokens(2, 6, 61);
  // A mask of ones is no mask; a masked target drops out of the mean.
  std::vector<int32_t> ones(12, 1), some = ones;
  some[5] = some[10] = 0;
  std::vector<ir::TensorType> types{{DType::s32, Shape{2, 6}}, {DType::s32, Shape{2, 6}}};
  ir::Function f = trace::capture(
      [](std::span<const Tensor> x) {
        auto iota = [](int64_t d) {
          return trace::astype(trace::iota(Shape{2, 6, 61}, d, DType::s32), DType::f32);
        };
        Tensor logits = iota(2) * (iota(1) + 1) * 0.01;
        Tensor per_row =
            nn::cross_entropy_per_row(trace::reshape(trace::slice(logits, 1, 0, 5), {10, 61}),
                                      trace::reshape(trace::slice(x[0], 1, 1, 6), {10}));
        return std::vector<Tensor>{nn::next_token_loss(logits, x[0], x[1]),
                                   nn::next_token_loss(logits, x[0]), per_row};
      },
      types);
  auto exe = runtime::host::compile(f);
  auto all = exe->run(std::vector<Array>{ids, Array::from(Shape{2, 6}, ones)});
  EXPECT_EQ(all[0].at(0), all[1].at(0));
  auto part = exe->run(std::vector<Array>{ids, Array::from(Shape{2, 6}, some)});
  double sum = 0;
  for (int64_t r = 0; r < 10; ++r)
    if (r != 4 && r != 8) sum += part[2].at(r);  // targets 5 and 10 of the [2, 6] tokens
  EXPECT_NEAR(part[0].at(0), sum / 8, 1e-6);
}

}  // namespace
