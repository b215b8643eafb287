// What fine-tuning adds to a recipe's checkpoints (`tlaloc finetune` on Llama directories and on
// `train lm` checkpoints): LoRA runs saved as PEFT adapter directories, runs with frozen
// parameters saved with them.
#pragma once

#include <optional>
#include <string>

#include "tlaloc/io/peft.h"
#include "tlaloc/nn/module.h"
#include "tlaloc/random/key.h"
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

// Wraps `format` for a run with frozen parameters (`freeze`: its patterns, comma-joined, as the
// checkpoint field "freeze" records them): a save writes the frozen tensors too (read from
// *trainer once it is set), a load refuses a checkpoint trained with other patterns (or none)
// by name, checks that its frozen tensors are the model's (bitwise) and leaves them out of it.
void frozen_format(nn::Module& model, const std::string& freeze,
                   train::FitOptions::CheckpointFormat& format, const train::Trainer*& trainer);

// fit's default: one safetensors file (io::save_checkpoint / io::load_checkpoint).
train::FitOptions::CheckpointFormat single_file_format();

// `model` with the PEFT adapter `adapter` added (its modules, r and scaling) and
// its tensors loaded (BF16 / F16 widened to the parameters' F32). With `fresh` (to train it),
// every module its target_modules name is adapted, as PEFT's from_pretrained(is_trainable=True)
// does: one without tensors starts as nn::add_lora draws it from `fresh` (B = 0); without, only
// the modules with tensors (the others would add B A = 0). Throws naming a module the model
// does not have, a target that matches none (with `fresh`), or a tensor of another shape than
// the module's.
void apply_peft_adapter(nn::Module& model, const io::PeftAdapter& adapter,
                        std::optional<random::Key> fresh = std::nullopt);

// `model`'s parameters (named_parameters order) with each adapted weight replaced by W + scaling
// · B A (nn::merged_lora_weights) and the adapters' own tensors left out: the merged model.
// Throws naming `what` for a merged weight that is not finite (e.g. a huge lora_alpha).
io::NamedArrays merged_parameters(nn::Module& model, const std::string& what);
// The line `tlaloc merge` prints: "merged the N LoRA adapters of ADAPTER (r R, scaling S) into
// BASE: wrote OUT".
std::string merge_line(size_t adapted, const io::PeftLoraConfig& adapter,
                       const std::string& adapter_dir, const std::string& base,
                       const std::string& out);

// Refuses (naming both) an adapter whose training state `state` records a base_model digest
// other than `base_digest` (io::tensors_digest of the base's tensors): it was trained on
// another base. A state without one (PEFT's own adapters) passes.
void check_adapter_base(const io::Checkpoint& state, const std::string& base_digest,
                        const std::string& base, const std::string& adapter);

}  // namespace tlaloc::recipes
