// LoRA fine-tuning (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") as
// HF PEFT's LoraConfig defines it: adapters on a model's Linear layers (Linear::add_lora), the
// base model frozen, and the merge W + scaling · B A.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tlaloc/nn/module.h"

namespace tlaloc::nn {

// peft.LoraConfig's fields that tlaloc implements (PEFT's names and defaults).
struct LoraConfig {
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0;
  bool use_rslora = false;  // scaling lora_alpha / √r (Kalajdzievski 2023) instead of / r
  // Module names matched as PEFT matches a list: a module whose dotted name equals a target or
  // ends in "." + target. {"all-linear"}: every Linear but the output layer (lm_head).
  std::vector<std::string> target_modules = {"q_proj", "v_proj"};
  double scaling() const;
};

// Whether module `name` (dotted) is a target of `targets` as PEFT matches them: equal to one or
// ending in "." + one; {"all-linear"}: any module but lm_head.
bool is_lora_target(const std::string& name, const std::vector<std::string>& targets);

// Adds an adapter (Linear::add_lora) to every Linear module of `model` that c.target_modules
// names, then freezes every parameter but the adapters' (PEFT's bias="none"). A of adapter i
// (model order) is drawn from split(key, n)[i]; B is 0. Returns the adapted modules' dotted
// names in model order. Throws tlaloc::Error naming a target that matches no Linear module (with
// the Linear names there are), a target list that is empty or names one twice, or invalid r /
// alpha / dropout; the
// model is unchanged then.
std::vector<std::string> add_lora(Module& model, const LoraConfig& c, const random::Key& key);

// Adds adapters of rank c.r, c.scaling() and c.lora_dropout to exactly the Linear modules named
// `modules` (dotted; c.target_modules is not read) and freezes the rest, as add_lora; A and B
// are 0 (to be loaded, e.g. from a PEFT adapter). Throws tlaloc::Error naming a module that is
// not a Linear module of the model or has an adapter already (nothing is changed then).
void add_lora_to(Module& model, const std::vector<std::string>& modules, const LoraConfig& c);

// The adapted modules of `model` (those with Linear::has_lora), dotted names in model order.
std::vector<std::string> lora_modules(Module& model);

// Every adapted module's merged weight W + scaling · B A ("<module>.weight", [out, in]),
// computed in f64 from the parameters' values and rounded once to W's dtype.
std::vector<std::pair<std::string, Array>> merged_lora_weights(Module& model);

}  // namespace tlaloc::nn
