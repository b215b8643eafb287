// Internal to the Llama recipe (llama.cpp): what fine-tuning (Config::freeze, Config::lora) adds
// to `train llama --init DIR` -- the run's fields, the frozen or adapted model, and the
// checkpoint formats (a model directory with its frozen tensors, or a PEFT adapter directory).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "tlaloc/io/hf_dir.h"
#include "tlaloc/io/peft.h"
#include "tlaloc/recipes/finetune.h"
#include "tlaloc/recipes/llama.h"

namespace tlaloc::recipes::llama {

// The run field `key` of `c` as a positive integer; throws naming `where` and the field.
int64_t field_int(const io::Checkpoint& c, const std::string& key, const std::string& where);

// The run's fields that a resume must match: base_model (a digest of --init's tensors),
// freeze (the patterns) and lora (the adapter_config.json this run writes).
void add_finetune_fields(const Config& c, const io::HfModelDir& init,
                         std::map<std::string, std::string>& fields);

// Freezes c.freeze or adds c.lora's adapters (A drawn from the run's seed) to `model`, whose
// base weights are loaded.
void prepare_finetune(const Config& c, nn::models::LlamaForCausalLM& model);

// The adapter_config.json fields of c.lora (base_model_name_or_path: --init's absolute path).
io::PeftLoraConfig peft_config(const Config& c);

// recipes::lora_format of this run's adapter config.
train::FitOptions::CheckpointFormat lora_format(const Config& c);

}  // namespace tlaloc::recipes::llama
