// The Llama family's configuration: HuggingFace transformers' LlamaConfig
// (configuration_llama.py), its key names and defaults, and its config.json both ways.
//
// config.json keys (llama_config_from_json):
// * implemented (fields below): vocab_size, hidden_size, intermediate_size, num_hidden_layers,
//   num_attention_heads, num_key_value_heads (null: = heads), head_dim (null: hidden_size /
//   heads), max_position_embeddings, rms_norm_eps, rope_theta, rope_scaling (null, or an object
//   with rope_type (or the older key "type") "default" or "llama3" and, for llama3, factor,
//   low_freq_factor, high_freq_factor, original_max_position_embeddings), attention_bias,
//   mlp_bias, tie_word_embeddings, hidden_act ("silu" or its alias "swish"), initializer_range,
//   attention_dropout (0 only), bos_token_id, eos_token_id (an id or a list), pad_token_id
//   (null or an id), torch_dtype or its newer spelling dtype (the same field; "float32",
//   "bfloat16", "float16" or "float64"; both present must agree), model_type ("llama" only);
// * kept verbatim for round trips, meaning nothing to the model (LlamaConfig::metadata):
//   architectures, transformers_version, _name_or_path, use_cache, pretraining_tp
//   (HF's sliced linear layers compute the same products), output_attentions,
//   output_hidden_states, return_dict, torchscript, tokenizer_class, id2label, label2id;
// * refused by name: every other key (e.g. sliding_window, quantization_config), and values of
//   implemented keys that tlaloc does not implement (rope_type "yarn", hidden_act "gelu",
//   attention_dropout 0.1, model_type "mistral", ...).
// to_json(llama_config_from_json(j)) holds every key of j with an equal value (plus the
// implemented keys j left at their defaults).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/nn/rope.h"

namespace tlaloc::nn::models {

// rope_scaling: absent (null), {"rope_type": "default"} or llama3 (Llama3RopeScaling's fields).
struct LlamaRopeScaling {
  std::string rope_type = "llama3";  // "default" or "llama3"
  Llama3RopeScaling llama3;          // read for rope_type "llama3" only
  // Which keys spell the type in config.json: "rope_type", and / or HF's older "type".
  bool rope_type_key = true, legacy_type_key = false;
};

struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  std::optional<int64_t> num_key_value_heads;  // unset: num_attention_heads (MHA)
  std::optional<int64_t> head_dim;             // unset: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<LlamaRopeScaling> rope_scaling;
  bool attention_bias = false;
  bool mlp_bias = false;
  bool tie_word_embeddings = false;
  std::string hidden_act = "silu";
  double initializer_range = 0.02;
  double attention_dropout = 0.0;
  std::optional<int64_t> bos_token_id = 1;
  std::vector<int64_t> eos_token_id = {2};  // written as one id unless eos_token_id_list
  bool eos_token_id_list = false;
  std::optional<int64_t> pad_token_id;
  std::string torch_dtype;  // "" = absent
  // Which keys spell torch_dtype in config.json: "torch_dtype" and / or "dtype" (neither: the
  // former).
  bool torch_dtype_key = false, dtype_key = false;
  // Not an HF key: RoPE on interleaved pairs (Meta's original layout) instead of HF's
  // rotate-half; to_json refuses a config with it set (rope_permute the q / k weights instead).
  bool rope_interleaved = false;
  // The kept keys (see above): key -> its JSON text.
  std::map<std::string, std::string> metadata;

  int64_t kv_heads() const { return num_key_value_heads.value_or(num_attention_heads); }
  int64_t head_size() const {
    return head_dim.value_or(num_attention_heads > 0 ? hidden_size / num_attention_heads : 0);
  }
  // The llama3 scaling, when rope_scaling is llama3.
  std::optional<Llama3RopeScaling> llama3_scaling() const;
  // Throws tlaloc::Error naming the field (with `what` before it) for a size that is not
  // positive, heads not a multiple of kv heads, an odd head_dim, eps / theta / factors out of
  // range, a pad_token_id outside the vocabulary, or a value that is not implemented.
  void validate(std::string_view what = "LlamaConfig") const;
};

// Parses a config.json object (see above). Throws tlaloc::Error "<what>: key 'K' ..." for a
// refused key or value, a value of the wrong JSON type, or a config validate() refuses.
LlamaConfig llama_config_from_json(const nlohmann::json& j, std::string_view what = "config.json");
// The config.json object: every implemented key (with model_type "llama" and, unless kept in
// metadata, architectures ["LlamaForCausalLM"]), then the kept keys. Throws tlaloc::Error for a
// config validate() refuses or one with rope_interleaved set.
nlohmann::json to_json(const LlamaConfig& c);

}  // namespace tlaloc::nn::models
