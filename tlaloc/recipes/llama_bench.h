// The LlamaDecoder benchmark matrix's train step (`tlaloc bench step --model llama --preset P`,
// bench/run_llama_bench.sh): LlamaForCausalLM of a preset (llama_presets.h), next-token
// cross-entropy over `batch` windows of `context` tokens drawn from a resident stream of random
// token ids, AdamW (lr 1e-3, weight_decay 0.01) in the program, as bench/llama_step_torch.py.
#pragma once

#include <optional>

#include "tlaloc/nn/lora.h"
#include "tlaloc/recipes/llama_presets.h"
#include "tlaloc/train/step_bench.h"

namespace tlaloc::recipes::llama {

// Model FLOPs of one train step (PaLM's count, Chowdhery et al. 2022, appendix B): 6 · N · T
// for the N weights of matrix products (every projection and the head, not the embedding
// gather) over T = batch · context tokens, plus 12 · layers · heads · head_dim · context · T
// for attention's two products (causal masking not discounted).
double train_step_flops(const Preset& p);

// The step of preset `p` on `threads` host threads (0: OpenMP's default); with `lora`, the
// same model with LoRA adapters (nn::add_lora: the base frozen, only the adapters trained), as
// bench/finetune_step_torch.py's PEFT-style LoRA.
train::StepBenchCase bench_case(const Preset& p, int threads,
                                const std::optional<nn::LoraConfig>& lora = std::nullopt);

}  // namespace tlaloc::recipes::llama
