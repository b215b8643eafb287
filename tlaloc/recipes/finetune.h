// What fine-tuning adds to a recipe's checkpoints (`tlaloc finetune` on Llama directories and on
// `train lm` checkpoints): LoRA runs saved as PEFT adapter directories, runs with frozen
// parameters saved with them.
#pragma once

#include <string>

#include "tlaloc/io/peft.h"
#include "tlaloc/nn/module.h"
#include "tlaloc/train/fit.h"

namespace tlaloc::recipes {

// LoRA's A is drawn from fold_in(key(seed), kLoraStream), apart from every other draw of a run.
inline constexpr uint32_t kLoraStream = 0x4c6f5241;  // "LoRA"

// ", N trained" (the parameter count that requires a gradient).
std::string trained_text(nn::Module& model);

// Checkpoints as PEFT adapter directories (io/peft.h) plus the training state beside them; a
// --resume adapter must have `cfg`'s r, lora_alpha, lora_dropout, use_rslora and targets, and a
// training state. `name` is the command, in messages.
train::FitOptions::CheckpointFormat lora_format(const io::PeftLoraConfig& cfg,
                                                const std::string& name);

// Wraps `format` for a run with frozen parameters: a save writes the frozen tensors too (read
// from *trainer once it is set), a load checks that the checkpoint's frozen tensors are the
// model's (bitwise) and leaves them out of it.
void frozen_format(nn::Module& model, train::FitOptions::CheckpointFormat& format,
                   const train::Trainer*& trainer);

// fit's default: one safetensors file (io::save_checkpoint / io::load_checkpoint).
train::FitOptions::CheckpointFormat single_file_format();

}  // namespace tlaloc::recipes
