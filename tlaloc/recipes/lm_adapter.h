// LoRA adapters of `train lm` checkpoints (written by `tlaloc finetune CKPT --lora`, PEFT adapter
// directories) used as Llama directories' are: added for `eval` and `sample` (--adapter), folded
// in by `merge`.
#pragma once

#include <cstdio>
#include <string>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/nn/transformer.h"

namespace tlaloc::recipes::lm {

// Adds the PEFT adapter directory `adapter` to `model` (read from the checkpoint `base`, whose
// file is `base_path`) for inference (eval mode: lora_dropout off). Throws naming the adapter
// for load_peft_adapter's and apply_peft_adapter's refusals (a module the model lacks, a tensor
// of another shape), and for an adapter whose training state says it was trained on another
// base (check_adapter_base).
void add_adapter(nn::CausalLM& model, const io::Checkpoint& base, const std::string& base_path,
                 const std::string& adapter);

// `tlaloc merge CKPT ADAPTER OUT` for a `train lm` checkpoint: OUT, a checkpoint of the same
// model (CKPT's model fields and seed; no optimizer state: a model to sample, score or fine-tune,
// not a run to resume) whose adapted weights are W + scaling · B A (computed in f64, stored as
// f32; nn::merged_lora_weights). Throws, writing nothing, when OUT is CKPT or cannot be written
// (before any work), for add_adapter's refusals, and for a merged weight that is not finite.
void merge_adapter(const std::string& ckpt, const std::string& adapter, const std::string& out,
                   std::FILE* log);

}  // namespace tlaloc::recipes::lm
