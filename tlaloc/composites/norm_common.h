// Internal to the normalization composites (layer_norm, rms_norm): the operand check they share,
// and their parameter gradients' sums over rows in a fixed order (so results do not depend on the
// thread count); row sums are sum8 (sum8.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tlaloc/composites/sum8.h"
#include "tlaloc/ir/ir.h"

namespace tlaloc::composites {

// x's weight type [D] (D: x's last dim) after checking that x is f32 / f64 of rank >= 1.
inline ir::TensorType norm_weight_type(const ir::TensorType& x) {
  if (x.dtype != DType::f32 && x.dtype != DType::f64)
    fail("needs f32 or f64, got {}", name(x.dtype));
  if (x.shape.rank() < 1) fail("x must have rank >= 1");
  return {x.dtype, Shape{x.shape[x.shape.rank() - 1]}};
}

// Rows per chunk of a parameter gradient's sum over rows: each chunk's partial sum is written by
// whichever thread runs the chunk, and the chunks are added in order (add_chunks).
inline constexpr int64_t kChunkRows = 16;
inline int64_t row_chunks(int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }

// out[i] = Σ_c part[c·stride + offset + i] for i < width, c < nchunks, in chunk order.
template <class F>
void add_chunks(const F* part, int64_t nchunks, int64_t stride, int64_t offset, int64_t width,
                F* out) {
  std::fill(out, out + width, F(0));
  for (int64_t c = 0; c < nchunks; ++c)
    for (int64_t i = 0; i < width; ++i) out[i] += part[c * stride + offset + i];
}

}  // namespace tlaloc::composites
