#include "tlaloc/nn/losses.h"

#include "tlaloc/composites/composites.h"

namespace tlaloc::nn {

using trace::Tensor;

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  if (pred.shape() != target.shape())
    fail("mse_loss: pred {} and target {} differ", ir::to_string(pred.type()),
         ir::to_string(target.type()));
  return trace::mean(trace::square(pred - target));
}

Tensor cross_entropy_per_row(const Tensor& logits, const Tensor& labels) {
  if (logits.rank() != 2 || labels.rank() != 1 || labels.dim(0) != logits.dim(0))
    fail("cross_entropy: logits {} must be [batch, classes] and labels {} [batch]",
         ir::to_string(logits.type()), ir::to_string(labels.type()));
  if (labels.dtype() != DType::s32)
    fail("cross_entropy: labels must be s32, got {}", ir::to_string(labels.type()));
  trace::BuilderScope scope(logits.builder());
  if (logits.dtype() == DType::f32 || logits.dtype() == DType::f64)
    return composites::cross_entropy(logits, labels);  // the fused composite
  Tensor classes = trace::iota(logits.shape(), 1, DType::s32);
  Tensor is_label =
      trace::equal(trace::broadcast_to(trace::expand_dims(labels, 1), logits.shape()), classes);
  // -log_softmax at the label, picked with select (never 0·inf).
  Tensor ls = trace::log_softmax(logits, 1);
  return -trace::sum(trace::where(is_label, ls, trace::zeros_like(ls)), {1});
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  return trace::mean(cross_entropy_per_row(logits, labels));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& weights) {
  Tensor rows = cross_entropy_per_row(logits, labels);
  if (weights.shape() != rows.shape() || weights.dtype() != rows.dtype())
    fail("cross_entropy: weights {} must be {}", ir::to_string(weights.type()),
         ir::to_string(rows.type()));
  // PyTorch's reduction="mean" with weights: sum(w·loss) / sum(w) (NaN when every weight is 0).
  return trace::sum(rows * weights) / trace::sum(weights);
}

Tensor next_token_loss(const Tensor& logits, const Tensor& tokens,
                       const std::optional<Tensor>& mask) {
  if (logits.rank() != 3 || tokens.rank() != 2 || logits.dim(0) != tokens.dim(0) ||
      logits.dim(1) != tokens.dim(1) || tokens.dim(1) < 2 || tokens.dtype() != DType::s32)
    fail(
        "next_token_loss: logits {} must be [batch, seq >= 2, vocab] and tokens {} s32 [batch, "
        "seq]",
        ir::to_string(logits.type()), ir::to_string(tokens.type()));
  if (mask && (mask->shape() != tokens.shape() || is_floating(mask->dtype())))
    fail("next_token_loss: mask {} must be i1 or integer {}", ir::to_string(mask->type()),
         to_string(tokens.shape()));
  const int64_t B = logits.dim(0), S = logits.dim(1), V = logits.dim(2), n = B * S;
  // Every position's row, the last one of each sequence with label -1: outside [0, V), so its
  // loss is 0 and it passes no gradient. Slicing the logits instead would copy them (and pad
  // their gradient back).
  Tensor next =
      trace::concat({trace::slice(tokens, 1, 1, S), trace::full(Shape{B, 1}, -1, DType::s32)}, 1);
  Tensor rows = cross_entropy_per_row(trace::reshape(logits, {n, V}), trace::reshape(next, {n}));
  if (!mask) return trace::sum(rows) / double(B * (S - 1));
  Tensor m = trace::slice(*mask, 1, 1, S);
  Tensor real = m.dtype() == DType::i1 ? m : trace::not_equal(m, trace::zeros_like(m));
  Tensor w = trace::where(real, trace::full(real.shape(), 1, logits.dtype()),
                          trace::full(real.shape(), 0, logits.dtype()));
  w = trace::reshape(trace::concat({w, trace::full(Shape{B, 1}, 0, logits.dtype())}, 1), {n});
  // HF's reduction: the mean over the real targets (NaN when there are none).
  return trace::sum(rows * w) / trace::sum(w);
}

}  // namespace tlaloc::nn
