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

}  // namespace tlaloc::composites
