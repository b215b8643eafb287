// Internal to the composites' host kernels: a sum in a fixed order, the same whatever the thread
// count and vectorizable without reassociation.
#pragma once

#include <cstdint>

namespace tlaloc::composites {

// Σ f(i) for i < n in 8 interleaved partials (i into partial i % 8), added pairwise.
template <class F, class G>
__attribute__((always_inline)) inline F sum8(int64_t n, G f) {
  F s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += f(i + k);
  for (; i < n; ++i) s[i % 8] += f(i);
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

inline constexpr int64_t kSumBlock = 1024;

// Σ f(i) for lo <= i < hi, hi - lo > kSumBlock: split at a block boundary near the middle, the
// halves' sums added; a range of up to kSumBlock values is sum8'd.
template <class F, class G>
F sum_blocks(int64_t lo, int64_t hi, const G& f) {
  if (hi - lo <= kSumBlock) return sum8<F>(hi - lo, [&](int64_t i) { return f(lo + i); });
  const int64_t mid = lo + (hi - lo + 2 * kSumBlock - 1) / (2 * kSumBlock) * kSumBlock;
  return sum_blocks<F>(lo, mid, f) + sum_blocks<F>(mid, hi, f);
}

// Σ f(i) for i < n: sum8 when n <= kSumBlock (the same code and bits); a longer range pairwise
// over blocks of kSumBlock (sum_blocks), so the rounding error grows with log(n / kSumBlock),
// not with n.
template <class F, class G>
__attribute__((always_inline)) inline F sum_pairwise(int64_t n, G f) {
  if (n <= kSumBlock) return sum8<F>(n, f);
  return sum_blocks<F>(0, n, f);
}

}  // namespace tlaloc::composites
