// PEFT LoRA adapter directories, both ways: what peft's PeftModel.save_pretrained writes and
// PeftModel.from_pretrained reads.
//
//   DIR/adapter_config.json        peft.LoraConfig as JSON (peft_type "LORA")
//   DIR/adapter_model.safetensors  base_model.model.<module>.lora_A.weight [r, in] and
//                                  base_model.model.<module>.lora_B.weight [out, r] for every
//                                  adapted Linear <module> (HF's dotted module names)
//
// As for model directories (hf_dir.h), training state never goes inside DIR: it is
// DIR.training.safetensors beside it, tied to the adapter's tensors by their digest.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tlaloc/io/checkpoint.h"

namespace tlaloc::io {

// The prefix PEFT gives every tensor name (PeftModel.base_model.model).
inline constexpr const char* kPeftPrefix = "base_model.model.";

// peft.LoraConfig's fields that tlaloc implements (PEFT's names and defaults).
struct PeftLoraConfig {
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0;
  bool use_rslora = false;
  // A list of module-name suffixes, or {"all-linear"} (PEFT's string form of that value).
  std::vector<std::string> target_modules = {"q_proj", "v_proj"};
  std::string base_model_name_or_path;
  std::string task_type = "CAUSAL_LM";
};

// adapter_config.json for `c`: every key PEFT writes, the options tlaloc does not implement at
// their off values (use_dora false, bias "none", no rank_pattern, ...).
nlohmann::json peft_config_json(const PeftLoraConfig& c);

// Reads adapter_config.json's object. Throws one tlaloc::Error line starting with `where` and
// naming the key for: peft_type other than "LORA"; r not a positive integer; lora_alpha not a
// number; lora_dropout outside [0, 1); target_modules missing, empty or a regular expression
// (a string other than "all-linear"); and every PEFT option tlaloc does not implement when it
// is on: use_dora (DoRA), rank_pattern, alpha_pattern, modules_to_save, fan_in_fan_out, bias
// other than "none", layers_to_transform, layers_pattern, and any other key whose value is not
// null, false, "", [] or {} (except the descriptive keys base_model_name_or_path, revision,
// task_type, inference_mode, init_lora_weights, auto_mapping, megatron_core, loftq_config,
// eva_config, corda_config, runtime_config, peft_version, qalora_group_size).
PeftLoraConfig peft_config_from_json(const nlohmann::json& j, const std::string& where);

// An adapter directory read back: its config and tensors named without kPeftPrefix
// ("model.layers.0.self_attn.q_proj.lora_A.weight"), dtypes as stored.
struct PeftAdapter {
  PeftLoraConfig config;
  NamedArrays tensors;
  std::string path;
};

// Throws one line naming DIR and the file / key / tensor for: DIR or either file missing;
// adapter_config.json not JSON or refused (peft_config_from_json); a tensor not named
// base_model.model.<module>.lora_A.weight / .lora_B.weight; a module with only one of A, B; A
// not [r, in] or B not [out, r] with the config's r; no tensors; any safetensors refusal.
PeftAdapter load_peft_adapter(const std::string& dir);

// Refuses (one line starting with `what`) an output folder that exists and holds anything but
// adapter_config.json, adapter_model.safetensors and README.md, or cannot be written.
void check_output_adapter_dir(const std::string& dir, const std::string& what);

// Writes ckpt.params (adapter tensors named without kPeftPrefix) as the adapter directory DIR
// (replaced whole at once, atomic_dir.h) and the rest of ckpt as DIR.training.safetensors.
// Throws, writing nothing, for check_output_adapter_dir's refusals and names not ending in
// .lora_A.weight / .lora_B.weight.
void save_peft_checkpoint(const std::string& dir, const PeftLoraConfig& config,
                          const Checkpoint& ckpt, const std::string& what);

// The adapter of DIR as ckpt.params (names without kPeftPrefix) with, when `training_state`
// and DIR.training.safetensors is present, the rest of the checkpoint from that file (its
// model_digest must be the adapter's).
Checkpoint load_peft_checkpoint(const PeftAdapter& adapter, bool training_state = true);

}  // namespace tlaloc::io
