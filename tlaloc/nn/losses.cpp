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
      logits.dim(1) != tokens.dim(1) || tokens.dim(1) < 2)
    fail("next_token_loss: logits {} must be [batch, seq >= 2, vocab] and tokens {} [batch, seq]",
         ir::to_string(logits.type()), ir::to_string(tokens.type()));
  if (mask && (mask->shape() != tokens.shape() || is_floating(mask->dtype())))
    fail("next_token_loss: mask {} must be i1 or integer {}", ir::to_string(mask->type()),
         to_string(tokens.shape()));
  const int64_t B = logits.dim(0), S = logits.dim(1), V = logits.dim(2), n = B * (S - 1);
  Tensor x = trace::reshape(trace::slice(logits, 1, 0, S - 1), {n, V});
  Tensor y = trace::reshape(trace::slice(tokens, 1, 1, S), {n});
  if (!mask) return cross_entropy(x, y);
  Tensor m = trace::reshape(trace::slice(*mask, 1, 1, S), {n});
  Tensor real = m.dtype() == DType::i1 ? m : trace::not_equal(m, trace::zeros_like(m));
  return cross_entropy(x, y,
                       trace::where(real, trace::full(Shape{n}, 1, logits.dtype()),
                                    trace::full(Shape{n}, 0, logits.dtype())));
}

}  // namespace tlaloc::nn
