// Builder-level calls of the composites for tests (ir::Builder::composite with each record's
// operand order and attributes, ir/composite.h). -1 stands for an absent optional operand.
#pragma once

#include <vector>

#include "tlaloc/ir/builder.h"

namespace tlaloc::testing::cop {

using ir::Builder;
using ir::Op;
using ir::ValueId;

inline std::vector<ValueId> with(std::vector<ValueId> ops, ValueId optional) {
  if (optional >= 0) ops.push_back(optional);
  return ops;
}
// (out [B,Hq,S,Dv], lse [B,Hq,S])
inline std::vector<ValueId> attention(Builder& b, ValueId q, ValueId k, ValueId v, ValueId key_mask,
                                      double scale, bool causal) {
  return b.composite(Op::attention, with({q, k, v}, key_mask), {scale, causal ? 1.0 : 0.0});
}
// (dq, dk, dv)
inline std::vector<ValueId> attention_grad(Builder& b, ValueId q, ValueId k, ValueId v, ValueId out,
                                           ValueId lse, ValueId d_out, ValueId key_mask,
                                           double scale, bool causal) {
  return b.composite(Op::attention_grad, with({q, k, v, out, lse, d_out}, key_mask),
                     {scale, causal ? 1.0 : 0.0});
}
inline ValueId layer_norm(Builder& b, ValueId x, ValueId w, ValueId bias, double eps) {
  return b.composite(Op::layer_norm, with({x, w}, bias), {eps})[0];
}
// (d_x, d_weight, d_bias)
inline std::vector<ValueId> layer_norm_grad(Builder& b, ValueId x, ValueId w, ValueId d_y,
                                            double eps) {
  return b.composite(Op::layer_norm_grad, {x, w, d_y}, {eps});
}
inline ValueId cross_entropy(Builder& b, ValueId logits, ValueId labels) {
  return b.composite(Op::cross_entropy, {logits, labels})[0];
}
inline ValueId cross_entropy_grad(Builder& b, ValueId logits, ValueId labels, ValueId d_loss) {
  return b.composite(Op::cross_entropy_grad, {logits, labels, d_loss})[0];
}
inline ValueId gelu(Builder& b, ValueId x) { return b.composite(Op::gelu, {x})[0]; }
inline ValueId gelu_grad(Builder& b, ValueId x, ValueId y, ValueId d_y) {
  return b.composite(Op::gelu_grad, {x, y, d_y})[0];
}

}  // namespace tlaloc::testing::cop
namespace cop = tlaloc::testing::cop;
