// Internal: rounding a double to a dtype's nearest value, as JAX rounds each operation's result.
#pragma once

#include "tlaloc/core/dtype.h"

namespace tlaloc::random::detail {

// f32 / bf16 / f16: the nearest value (bf16 / f16 through f32); other dtypes: v unchanged.
// For +, -, *, / and sqrt of f32 values computed in double this is the correctly rounded f32
// result (double has more than 2 * 24 + 2 bits).
inline double round_to(DType t, double v) {
  switch (t) {
    case DType::f32:
      return double(float(v));
    case DType::bf16:
      return double(bf16_to_f32(f32_to_bf16(float(v))));
    case DType::f16:
      return double(f16_to_f32(f32_to_f16(float(v))));
    default:
      return v;
  }
}

}  // namespace tlaloc::random::detail
