#include "tlaloc/nn/models/llama_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tlaloc/core/error.h"

namespace tlaloc::nn::models {

using nlohmann::json;

namespace {

// Keys that mean nothing to the model, kept verbatim (see llama_config.h).
constexpr std::array<std::string_view, 12> kKept = {"architectures",
                                                    "transformers_version",
                                                    "_name_or_path",
                                                    "use_cache",
                                                    "pretraining_tp",
                                                    "output_attentions",
                                                    "output_hidden_states",
                                                    "return_dict",
                                                    "torchscript",
                                                    "tokenizer_class",
                                                    "id2label",
                                                    "label2id"};

bool kept(std::string_view key) {
  for (std::string_view k : kKept)
    if (k == key) return true;
  return false;
}

// Typed reads of one value, errors naming `what` and the (dotted) key.
struct Value {
  const json& v;
  std::string_view what;
  std::string key;

  [[noreturn]] void wrong(const char* want) const {
    fail("{}: key '{}' must be {}, got {}", what, key, want, v.dump());
  }
  int64_t integer() const {
    if (!v.is_number_integer()) wrong("an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) wrong("an int64");
    return v.get<int64_t>();
  }
  // An integer, or a float with an integral value in int64's range.
  int64_t whole_number() const {
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!(std::trunc(d) == d && std::abs(d) < 0x1p63)) wrong("a whole number");
      return int64_t(d);
    }
    return integer();
  }
  std::optional<int64_t> integer_or_null() const {
    if (v.is_null()) return std::nullopt;
    return integer();
  }
  double number() const {
    if (!v.is_number()) wrong("a number");
    return v.get<double>();
  }
  bool boolean() const {
    if (!v.is_boolean()) wrong("true or false");
    return v.get<bool>();
  }
  std::string string() const {
    if (!v.is_string()) wrong("a string");
    return v.get<std::string>();
  }
};

std::optional<LlamaRopeScaling> parse_rope_scaling(const json& v, std::string_view what) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_object()) Value{v, what, "rope_scaling"}.wrong("null or an object");
  LlamaRopeScaling r;
  // The type first, so that an unimplemented one is named rather than its first odd key.
  std::optional<std::string> rope_type, type;
  if (v.contains("rope_type"))
    rope_type = Value{v["rope_type"], what, "rope_scaling.rope_type"}.string();
  if (v.contains("type")) type = Value{v["type"], what, "rope_scaling.type"}.string();
  if (rope_type && type && *rope_type != *type)
    fail("{}: rope_scaling.rope_type '{}' and rope_scaling.type '{}' disagree", what, *rope_type,
         *type);
  if (!rope_type && !type) fail("{}: rope_scaling has no rope_type", what);
  r.rope_type = rope_type ? *rope_type : *type;
  r.rope_type_key = rope_type.has_value();
  r.legacy_type_key = type.has_value();
  if (r.rope_type != "default" && r.rope_type != "llama3")
    fail("{}: rope_scaling.rope_type '{}' is not implemented (tlaloc's Llama: 'default', 'llama3')",
         what, r.rope_type);
  const bool llama3 = r.rope_type == "llama3";
  const char* names[4] = {"factor", "low_freq_factor", "high_freq_factor",
                          "original_max_position_embeddings"};
  for (auto& [k, e] : v.items()) {
    if (k == "rope_type" || k == "type") continue;
    const auto* n = std::find(names, names + 4, k);
    if (n == names + 4 || !llama3)
      fail("{}: key 'rope_scaling.{}' is not implemented for rope_type '{}'", what, k, r.rope_type);
    Value x{e, what, "rope_scaling." + k};
    double* f[3] = {&r.llama3.factor, &r.llama3.low_freq_factor, &r.llama3.high_freq_factor};
    if (n - names < 3)
      *f[n - names] = x.number();
    else  // HF uses it as a float: 8192.0 is 8192
      r.llama3.original_max_position_embeddings = x.whole_number();
  }
  for (const char* n : names)
    if (llama3 && !v.contains(n)) fail("{}: rope_scaling (llama3) has no {}", what, n);
  return r;
}

}  // namespace

std::optional<Llama3RopeScaling> LlamaConfig::llama3_scaling() const {
  if (rope_scaling && rope_scaling->rope_type == "llama3") return rope_scaling->llama3;
  return std::nullopt;
}

void LlamaConfig::validate(std::string_view what) const {
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", kv_heads()},
      {"head_dim", head_size()},
      {"max_position_embeddings", max_position_embeddings}};
  for (auto& [name, v] : sizes)
    if (v <= 0) fail("{}: {} {} must be positive", what, name, v);
  if (num_attention_heads % kv_heads() != 0)
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", what,
         num_attention_heads, kv_heads());
  if (head_size() % 2 != 0) fail("{}: head_dim {} must be even (RoPE pairs)", what, head_size());
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps))
    fail("{}: rms_norm_eps {} must be finite and positive", what, rms_norm_eps);
  if (!(rope_theta > 0) || !std::isfinite(rope_theta))
    fail("{}: rope_theta {} must be finite and positive", what, rope_theta);
  if (!(initializer_range >= 0) || !std::isfinite(initializer_range))
    fail("{}: initializer_range {} must be finite and >= 0", what, initializer_range);
  if (hidden_act != "silu" && hidden_act != "swish")
    fail("{}: hidden_act '{}' is not implemented (tlaloc's Llama: 'silu')", what, hidden_act);
  if (attention_dropout != 0)
    fail("{}: attention_dropout {} is not implemented (tlaloc's Llama: 0)", what,
         attention_dropout);
  if (pad_token_id && (*pad_token_id < 0 || *pad_token_id >= vocab_size))
    fail("{}: pad_token_id {} is outside the vocabulary [0, {})", what, *pad_token_id, vocab_size);
  if (bos_token_id && (*bos_token_id < 0 || *bos_token_id >= vocab_size))
    fail("{}: bos_token_id {} is outside the vocabulary [0, {})", what, *bos_token_id, vocab_size);
  for (int64_t e : eos_token_id)
    if (e < 0 || e >= vocab_size)
      fail("{}: eos_token_id {} is outside the vocabulary [0, {})", what, e, vocab_size);
  if (!torch_dtype.empty() && torch_dtype != "float32" && torch_dtype != "bfloat16" &&
      torch_dtype != "float16" && torch_dtype != "float64")
    fail("{}: {} '{}' is not float32, bfloat16, float16 or float64", what,
         dtype_key && !torch_dtype_key ? "dtype" : "torch_dtype", torch_dtype);
  if (rope_scaling) {
    const std::string& t = rope_scaling->rope_type;
    if (t != "default" && t != "llama3")
      fail(
          "{}: rope_scaling.rope_type '{}' is not implemented (tlaloc's Llama: 'default', "
          "'llama3')",
          what, t);
    const Llama3RopeScaling& s = rope_scaling->llama3;
    if (t == "llama3") {
      if (!(s.factor > 0) || !std::isfinite(s.factor))
        fail("{}: rope_scaling.factor {} must be finite and positive", what, s.factor);
      if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
          !std::isfinite(s.high_freq_factor))
        fail("{}: rope_scaling.high_freq_factor {} must be greater than low_freq_factor {} > 0",
             what, s.high_freq_factor, s.low_freq_factor);
      if (s.original_max_position_embeddings <= 0)
        fail("{}: rope_scaling.original_max_position_embeddings {} must be positive", what,
             s.original_max_position_embeddings);
    }
  }
  for (auto& [k, text] : metadata)
    if (!kept(k) || !json::accept(text))
      fail("{}: metadata key '{}' is not one tlaloc keeps verbatim, or its value is not JSON", what,
           k);
}

LlamaConfig llama_config_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) fail("{}: not a JSON object", what);
  LlamaConfig c;
  for (auto& [k, v] : j.items()) {
    const Value x{v, what, k};
    if (k == "vocab_size") {
      c.vocab_size = x.integer();
    } else if (k == "hidden_size") {
      c.hidden_size = x.integer();
    } else if (k == "intermediate_size") {
      c.intermediate_size = x.integer();
    } else if (k == "num_hidden_layers") {
      c.num_hidden_layers = x.integer();
    } else if (k == "num_attention_heads") {
      c.num_attention_heads = x.integer();
    } else if (k == "num_key_value_heads") {
      c.num_key_value_heads = x.integer_or_null();
    } else if (k == "head_dim") {
      c.head_dim = x.integer_or_null();
    } else if (k == "max_position_embeddings") {
      c.max_position_embeddings = x.integer();
    } else if (k == "rms_norm_eps") {
      c.rms_norm_eps = x.number();
    } else if (k == "rope_theta") {
      c.rope_theta = x.number();
    } else if (k == "rope_scaling") {
      c.rope_scaling = parse_rope_scaling(v, what);
    } else if (k == "attention_bias") {
      c.attention_bias = x.boolean();
    } else if (k == "mlp_bias") {
      c.mlp_bias = x.boolean();
    } else if (k == "tie_word_embeddings") {
      c.tie_word_embeddings = x.boolean();
    } else if (k == "hidden_act") {
      c.hidden_act = x.string();
    } else if (k == "initializer_range") {
      c.initializer_range = x.number();
    } else if (k == "attention_dropout") {
      c.attention_dropout = x.number();
    } else if (k == "bos_token_id") {
      c.bos_token_id = x.integer_or_null();
    } else if (k == "pad_token_id") {
      c.pad_token_id = x.integer_or_null();
    } else if (k == "eos_token_id") {
      c.eos_token_id.clear();
      c.eos_token_id_list = v.is_array();
      if (v.is_array()) {
        for (size_t i = 0; i < v.size(); ++i)
          c.eos_token_id.push_back(Value{v[i], what, fmt::format("eos_token_id[{}]", i)}.integer());
      } else if (!v.is_null()) {
        c.eos_token_id.push_back(x.integer());
      }
    } else if (k == "torch_dtype" || k == "dtype") {
      // One field, two spellings: transformers >= 4.56 writes "dtype".
      const std::string d = x.string();
      if (!c.torch_dtype.empty() && c.torch_dtype != d)
        fail("{}: keys 'torch_dtype' ('{}') and 'dtype' ('{}') disagree", what,
             k == "dtype" ? c.torch_dtype : d, k == "dtype" ? d : c.torch_dtype);
      c.torch_dtype = d;
      if (k == "dtype")
        c.dtype_key = true;
      else
        c.torch_dtype_key = true;
    } else if (k == "model_type") {
      if (x.string() != "llama")
        fail("{}: model_type '{}' is not implemented (tlaloc's Llama: 'llama')", what, x.string());
    } else if (k == "architectures" &&
               !(v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& a) {
                   return a.is_string() && a.get<std::string>().rfind("Llama", 0) == 0;
                 }))) {
      fail(
          "{}: key 'architectures' is {}, not a list of Llama classes (e.g. "
          "[\"LlamaForCausalLM\"])",
          what, v.dump());
    } else if (kept(k)) {
      c.metadata[k] = v.dump();
    } else {
      fail("{}: key '{}' is not implemented by tlaloc's Llama", what, k);
    }
  }
  c.validate(what);
  return c;
}

json to_json(const LlamaConfig& c) {
  c.validate();
  if (c.rope_interleaved)
    fail(
        "LlamaConfig: rope_interleaved has no config.json key: HF's Llama rotates halves "
        "(rope_permute the q_proj / k_proj weights and clear rope_interleaved)");
  auto opt = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
  json j = json::object();
  j["architectures"] = json::array({"LlamaForCausalLM"});
  j["model_type"] = "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.kv_heads();
  j["head_dim"] = c.head_size();
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  if (c.rope_scaling) {
    const LlamaRopeScaling& r = *c.rope_scaling;
    json s = json::object();
    if (r.rope_type_key || !r.legacy_type_key) s["rope_type"] = r.rope_type;
    if (r.legacy_type_key) s["type"] = r.rope_type;
    if (r.rope_type == "llama3") {
      s["factor"] = r.llama3.factor;
      s["low_freq_factor"] = r.llama3.low_freq_factor;
      s["high_freq_factor"] = r.llama3.high_freq_factor;
      s["original_max_position_embeddings"] = r.llama3.original_max_position_embeddings;
    }
    j["rope_scaling"] = s;
  }
  j["attention_bias"] = c.attention_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["initializer_range"] = c.initializer_range;
  j["attention_dropout"] = c.attention_dropout;
  j["bos_token_id"] = opt(c.bos_token_id);
  if (c.eos_token_id_list || c.eos_token_id.size() > 1)
    j["eos_token_id"] = c.eos_token_id;
  else
    j["eos_token_id"] = c.eos_token_id.empty() ? json(nullptr) : json(c.eos_token_id[0]);
  j["pad_token_id"] = opt(c.pad_token_id);
  if (!c.torch_dtype.empty()) {
    if (c.torch_dtype_key || !c.dtype_key) j["torch_dtype"] = c.torch_dtype;
    if (c.dtype_key) j["dtype"] = c.torch_dtype;
  }
  for (auto& [k, text] : c.metadata) j[k] = json::parse(text);
  return j;
}

}  // namespace tlaloc::nn::models
