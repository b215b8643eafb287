// Internal to composites/attention.cpp: its host kernels' helpers over rows of values: a dot
// product in a fixed order, and the scan for an inf or NaN that picks a kernel's path.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tlaloc::composites::attention_detail {

// Dot product in 8 interleaved partial sums (element i into sum i % 8), added pairwise at the
// end: a fixed order, so results do not depend on threads, and the loop vectorizes without
// reassociation. The 8 partials are one GCC vector, folded in vector adds:
// ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)), pairs commuted (the same bits).
using V8f = float __attribute__((vector_size(32)));
using V4f = float __attribute__((vector_size(16)));
using V8d = double __attribute__((vector_size(64)));
using V4d = double __attribute__((vector_size(32)));

template <class F>
__attribute__((always_inline)) inline F dotp(const F* a, const F* b, int64_t n) {
  constexpr bool f32 = std::is_same_v<F, float>;
  using V = std::conditional_t<f32, V8f, V8d>;
  using H = std::conditional_t<f32, V4f, V4d>;
  V s = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    V x, y;
    std::memcpy(&x, a + i, sizeof x);
    std::memcpy(&y, b + i, sizeof y);
    s += x * y;
  }
  for (; i < n; ++i) s[i % 8] += a[i] * b[i];
  const H h = __builtin_shufflevector(s, s, 0, 1, 2, 3) + __builtin_shufflevector(s, s, 4, 5, 6, 7);
  const H q = h + __builtin_shufflevector(h, h, 1, 0, 3, 2);
  return q[0] + q[2];
}

// Whether any of the n values at x is an inf or a NaN: a magnitude (the bits without the sign)
// from the exponent's all-ones on; with as_bf16 (f32 only), from 0x7f7f8000 on, where to_bf16
// rounds to an inf or NaN. An integer OR over the bits, so the loop vectorizes. F: float,
// double, or uint16_t for bf16 bit patterns.
template <class F>
bool any_non_finite(const F* x, int64_t n, bool as_bf16 = false) {
  using U = std::conditional_t<sizeof(F) == 2, uint16_t,
                               std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>>;
  constexpr U e = sizeof(F) == 2   ? U(0x7f80u)
                  : sizeof(F) == 4 ? U(0x7f800000u)
                                   : U(0x7ff0000000000000ull);
  constexpr U magnitude = U(~U(0)) >> 1;
  const U limit = sizeof(F) == 4 && as_bf16 ? U(0x7f7f8000u) : e;
  U any = 0;
  for (int64_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, x + i, sizeof u);
    any |= U((u & magnitude) >= limit);
  }
  return any != 0;
}

}  // namespace tlaloc::composites::attention_detail
