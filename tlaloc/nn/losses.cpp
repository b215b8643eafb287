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

}  // namespace tlaloc::nn
