// Composite ops (ir/ops.def: attention, layer_norm, cross_entropy, gelu and their _grad ops):
// symbolic helpers that emit them, and their decompositions into plain ops. The decomposition is
// the composite's meaning: StableHLO emission expands composites with it, autodiff differentiates
// it where no dedicated rule exists, and tests use it as the oracle for the host lane's fused
// kernels.
#pragma once

#include <optional>
#include <span>

#include "tlaloc/trace/tensor.h"

namespace tlaloc::trace {

// Fused scaled dot-product attention (FlashAttention, Dao et al. 2022; the math of
// torch.nn.functional.scaled_dot_product_attention). q [B,Hq,S,D], k [B,Hkv,T,D],
// v [B,Hkv,T,Dv], f32 or f64; Hq a multiple of Hkv (MHA Hq = Hkv, GQA, MQA Hkv = 1): query head h
// reads kv head h / (Hq / Hkv). key_mask i1 [B,T]: true where a key may be attended. causal:
// query i sees key j only when j <= i + T - S. Returns [B,Hq,S,Dv]: softmax(scale·q·kᵀ + mask)·v,
// and 0 for a query row with no visible key (its gradients are 0 too, never NaN).
// Errors: tlaloc::Error from the verifier naming the shapes that disagree.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const std::optional<Tensor>& key_mask, double scale, bool causal);
// The composite's full result [B,Hq,S,Dv+1]: output and, in the last column, the log-sum-exp of
// the visible scores (-inf for a row with none).
Tensor attention_with_lse(const Tensor& q, const Tensor& k, const Tensor& v,
                          const std::optional<Tensor>& key_mask, double scale, bool causal);

// Fused layer normalization over the last dim (Ba et al. 2016; torch.nn.functional.layer_norm
// with normalized_shape = (D,)): x [..., D] f32 / f64, weight [D], optional bias [D].
// (x - mean) / sqrt(var + eps) · weight (+ bias), mean and biased variance of each row, the
// variance two-pass (of the centred values, the mean corrected by their mean: Chan, Golub &
// LeVeque 1983), so rows with a large mean stay exact. Its gradient is the fused
// layer_norm_grad composite. Errors: tlaloc::Error from the verifier.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                  double eps);

// Fused softmax cross-entropy per row (torch.nn.functional.cross_entropy, reduction="none"):
// logits [N, C] f32 / f64, labels s32 [N] -> [N], -log_softmax(logits)[label], max-shifted (a
// row's max of -inf shifts by 0), the label's entry picked by select (never 0·inf; a label
// outside [0, C) gives -0). Its gradient is the fused cross_entropy_grad composite.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);

// GELU's tanh approximation in plain ops, the gelu composite's decomposition (trace::gelu in
// tensor.h emits the composite for f32 / f64 and this for other float dtypes).
Tensor gelu_decomposed(const Tensor& x);

// Appends the decomposition of composite node `n` into plain ops to `b`, reading `operands`
// (ids in b, one per operand of n), and returns the value equal to n's result.
ir::ValueId decompose(ir::Builder& b, const ir::Node& n, std::span<const ir::ValueId> operands);

// f with every composite node replaced by its decomposition (same inputs, outputs, names and
// aliases). Returns f unchanged when it has none.
ir::Function expand_composites(const ir::Function& f);

// Appends the nodes of `g` to `b` with g's inputs bound to `args` (ids in b, one per input of
// g, same types); returns the ids of g's results in b. Throws tlaloc::Error on a count or type
// mismatch.
std::vector<ir::ValueId> inline_function(ir::Builder& b, const ir::Function& g,
                                         std::span<const ir::ValueId> args);

}  // namespace tlaloc::trace
