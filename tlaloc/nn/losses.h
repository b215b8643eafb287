// Losses, reduced by mean over the batch as PyTorch's default reduction="mean".
#pragma once

#include <optional>

#include "tlaloc/trace/tensor.h"

namespace tlaloc::nn {

// mean((pred - target)²) over all elements (torch.nn.functional.mse_loss). Shapes equal.
trace::Tensor mse_loss(const trace::Tensor& pred, const trace::Tensor& target);

// Softmax cross-entropy on integer labels (torch.nn.functional.cross_entropy):
// logits f32 [batch, classes], labels s32 [batch] -> mean over the batch of
// -log_softmax(logits)[label]. Max-subtracted, so finite and exact for logits of ±1e8, and
// -inf logits on wrong classes are fine (the label's entry is picked with select, never 0·inf).
// `weights` (optional, [batch] of the logits' dtype) weighs each row, e.g. a 0/1 mask for the
// padded rows of a last partial batch: the mean is then sum(weights · loss) / sum(weights), as
// PyTorch's reduction="mean" with `weight` (class weights: weights[i] = weight[label i]), so
// NaN (loss and gradient) when every weight is 0. f32 / f64 logits go through the fused
// cross_entropy composite (composites/cross_entropy.cpp) (one host kernel per row for the loss and
// for its gradient). Throws tlaloc::Error naming the types when logits are not [batch, classes],
// labels not s32 [batch], or weights not of the per-row loss's type.
trace::Tensor cross_entropy(const trace::Tensor& logits, const trace::Tensor& labels);
trace::Tensor cross_entropy(const trace::Tensor& logits, const trace::Tensor& labels,
                            const trace::Tensor& weights);

// The causal LM loss (HF's LlamaForCausalLM with labels = input_ids): logits [batch, seq, vocab]
// at positions 0..seq-2 predict tokens s32 [batch, seq] at 1..seq-1; the mean cross_entropy
// over those batch·(seq - 1) predictions, or, with `mask` [batch, seq] (i1 or integer, 1 = real
// token; HF's attention_mask), over those whose target token is real (HF's labels -100 at
// padding). Throws tlaloc::Error naming the types for other shapes or seq < 2.
trace::Tensor next_token_loss(const trace::Tensor& logits, const trace::Tensor& tokens,
                              const std::optional<trace::Tensor>& mask = std::nullopt);

// Per-row loss [batch] (no reduction).
trace::Tensor cross_entropy_per_row(const trace::Tensor& logits, const trace::Tensor& labels);

}  // namespace tlaloc::nn
