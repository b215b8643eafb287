// The fused ops (composites, ir/composite.h) as symbolic Tensor functions for layers and losses.
// Each emits one composite node into the current capture; its meaning, gradient and host kernel
// are in tlaloc/composites/<name>.cpp. Errors: tlaloc::Error from the composite's type rule,
// naming the op and the shapes that disagree.
#pragma once

#include <optional>

#include "tlaloc/trace/tensor.h"

namespace tlaloc::composites {

using trace::Tensor;

// Emits composite `op` on `operands` with its attributes (ir::Composite::params order); returns
// its results (several for a multi-result composite).
std::vector<Tensor> call(ir::Op op, const std::vector<Tensor>& operands,
                         std::vector<double> params = {});

// Scaled dot-product attention (FlashAttention, Dao et al. 2022; the math of
// torch.nn.functional.scaled_dot_product_attention). q [B,Hq,S,D], k [B,Hkv,T,D],
// v [B,Hkv,T,Dv], f32, f64 or bf16; Hq a multiple of Hkv (MHA Hq = Hkv, GQA, MQA Hkv = 1): query
// head h reads kv head h / (Hq / Hkv). key_mask i1 [B,T]: true where a key may be attended. causal:
// query i sees key j only when j <= i + T - S (bottom-right aligned; top-left when S = T).
// Returns [B,Hq,S,Dv]: softmax(scale·q·kᵀ + mask)·v, 0 for a query row with no visible key.
// bf16 q, k, v, or f32 ones under a bf16 trace::Autocast (rounded to bf16 then): bf16 dots with
// f32 accumulation, softmax in f32, the result f32.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const std::optional<Tensor>& key_mask, double scale, bool causal);
// Both results of the attention composite: the output [B,Hq,S,Dv] and the log-sum-exp of the
// visible scores [B,Hq,S] (-inf for a row with none).
struct AttentionResult {
  Tensor out, lse;
};
AttentionResult attention_with_lse(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const std::optional<Tensor>& key_mask, double scale,
                                   bool causal);

// Layer normalization over the last dim (Ba et al. 2016; torch.nn.functional.layer_norm with
// normalized_shape = (D,)): x [..., D] f32 / f64, weight [D], optional bias [D]:
// (x - mean) / sqrt(var + eps) · weight (+ bias), mean and biased variance of each row.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                  double eps);

// Batch normalization with batch statistics (Ioffe & Szegedy 2015; torch.nn.functional.batch_norm
// with training=True) over every dim but 1: x [N, C, ...] f32 / f64, weight and bias [C] (both or
// neither). Returns y (x's type) = (x - mean) / sqrt(var + eps) (· weight + bias) and each
// channel's mean and biased variance [C].
struct BatchNormResult {
  Tensor y, mean, var;
};
BatchNormResult batch_norm(const Tensor& x, const std::optional<Tensor>& weight,
                           const std::optional<Tensor>& bias, double eps);
// RMS normalization over the last dim (Zhang & Sennrich 2019; torch.nn.functional.rms_norm with
// normalized_shape = (D,)): x [..., D] f32 / f64, optional weight [D]:
// x / sqrt(mean(x²) + eps) (· weight).
Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, double eps);

// Rotary position embeddings (Su et al. 2021; HF's apply_rotary_pos_emb): x [..., S, H, D]
// (D even), cos / sin [S, D/2] of x's dtype; each pair (a, b) of a head's features at position s
// becomes (a·cos[s, i] − b·sin[s, i], b·cos[s, i] + a·sin[s, i]), the pairs (i, i + D/2)
// (rotate-half) or, with interleaved, (2i, 2i + 1). f32 / f64: the rope composite; other float
// dtypes: its decomposition in plain ops (nn::apply_rope checks the shapes).
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved);

// Softmax cross-entropy per row (torch.nn.functional.cross_entropy, reduction="none"):
// logits [N, C] f32 / f64, labels s32 [N] -> [N], -log_softmax(logits)[label]; a label outside
// [0, C) gives -0 (and no gradient).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);

// GELU, tanh approximation: 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³))) (Hendrycks & Gimpel 2016;
// torch.nn.GELU(approximate="tanh")). f32 / f64: the gelu composite; other float dtypes: its
// decomposition in plain ops. Throws tlaloc::Error for a non-float x.
Tensor gelu(const Tensor& x);

}  // namespace tlaloc::composites
