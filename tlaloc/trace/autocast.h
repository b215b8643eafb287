// Mixed precision during a capture, as torch.autocast / JAX's jmp policies: while an Autocast
// of bf16 or f16 is alive on this thread, every dot_general of f32 operands traced through
// dot_general() below (Linear, matmul, the tied LM heads) rounds its operands to that type
// (nearest even) and accumulates and returns f32 (preferred_element_type). Under bf16,
// composites::attention takes q, k, v in bf16 too (softmax in f32, an f32 output); under f16 it
// stays f32. Everything else (convolutions, norms, softmax, cross-entropy, RoPE, reductions)
// stays f32. The autodiff rules of these round the cotangent to the operands' type, so backward
// GEMMs run in it too.
#pragma once

#include <optional>

#include "tlaloc/ir/builder.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::trace {

// Sets the compute type of dots for its lifetime (nullopt or f32: none); restores the previous
// one when destroyed. Throws tlaloc::Error for a type other than bf16, f16, f32.
class Autocast {
 public:
  explicit Autocast(std::optional<DType> compute);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::optional<DType> previous_;
};

// The compute type of the Autocast alive on this thread: bf16, f16, or nullopt (none, or f32).
std::optional<DType> autocast_dtype();

// dot_general of a and b (ir::Builder::dot_general's dims) under the autocast policy: f32
// operands go in as the Autocast's type with an f32 result; other dtypes, or no autocast, as given.
Tensor dot_general(const Tensor& a, const Tensor& b, ir::DotDims dims);

}  // namespace tlaloc::trace
