// Adam's update in one pass (instr.h: adam_fn), for the baseline instruction set and for AVX2.
// Each op is one IEEE operation rounded to f32 in the order the separate instructions would
// run it (no FMA), so the results are bitwise those of the unfused group. A vector of 8
// elements is loaded whole before any of its results is stored: results may share storage with
// the inputs they replace (donated optimizer state).
#include <immintrin.h>

#include <cmath>

#include "tlaloc/runtime/host/instr.h"

namespace tlaloc::runtime::host {
namespace {

struct Adam {
  const float *g, *m, *v, *p;
  float *po, *mo, *vo;
  float b1, c1, b2, c2, eps, alpha, decay;
  Adam(const Instr& in, void* const* r)
      : g(reg<float>(r, in.a)),
        m(reg<float>(r, in.b)),
        v(reg<float>(r, in.c)),
        p(reg<float>(r, in.e)),
        po(reg<float>(r, in.dst)),
        mo(reg<float>(r, in.x[0])),
        vo(reg<float>(r, in.x[1])),
        b1(reg<float>(r, in.x[2])[0]),
        c1(reg<float>(r, in.x[3])[0]),
        b2(reg<float>(r, in.x[4])[0]),
        c2(reg<float>(r, in.x[5])[0]),
        eps(reg<float>(r, in.x[6])[0]),
        alpha(reg<float>(r, in.x[7])[0]),
        decay(in.x[8] >= 0 ? reg<float>(r, in.x[8])[0] : 1.0f) {}

  template <bool Decay>
  void scalar(int64_t i0, int64_t n) const {
    for (int64_t i = i0; i < n; ++i) {
      const float gi = g[i], mi = m[i], vi = v[i], pi = p[i];
      const float mn = mi * b1 + gi * c1;
      const float gc = gi * c2;
      const float vn = vi * b2 + gc * gc;
      const float q = mn / (std::sqrt(vn) + eps);
      const float p1 = Decay ? pi * decay : pi;
      po[i] = p1 - alpha * q;
      mo[i] = mn;
      vo[i] = vn;
    }
  }
};

template <bool Decay>
void adam_baseline(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  Adam(in, r).scalar<Decay>(0, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
template <bool Decay>
__attribute__((target("avx2"))) void adam_avx2(const Instr& in, void* const* r, void* const*,
                                               int64_t, int64_t n) {
  const Adam a(in, r);
  const __m256 b1 = _mm256_set1_ps(a.b1), c1 = _mm256_set1_ps(a.c1), b2 = _mm256_set1_ps(a.b2),
               c2 = _mm256_set1_ps(a.c2), eps = _mm256_set1_ps(a.eps),
               alpha = _mm256_set1_ps(a.alpha), decay = _mm256_set1_ps(a.decay);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(a.g + i), m = _mm256_loadu_ps(a.m + i),
                 v = _mm256_loadu_ps(a.v + i), p = _mm256_loadu_ps(a.p + i);
    const __m256 mn = _mm256_add_ps(_mm256_mul_ps(m, b1), _mm256_mul_ps(g, c1));
    const __m256 gc = _mm256_mul_ps(g, c2);
    const __m256 vn = _mm256_add_ps(_mm256_mul_ps(v, b2), _mm256_mul_ps(gc, gc));
    const __m256 q = _mm256_div_ps(mn, _mm256_add_ps(_mm256_sqrt_ps(vn), eps));
    const __m256 p1 = Decay ? _mm256_mul_ps(p, decay) : p;
    _mm256_storeu_ps(a.po + i, _mm256_sub_ps(p1, _mm256_mul_ps(alpha, q)));
    _mm256_storeu_ps(a.mo + i, mn);
    _mm256_storeu_ps(a.vo + i, vn);
  }
  a.scalar<Decay>(i, n);
}
#endif

}  // namespace

namespace isa_baseline {
InstrFn adam_fn(bool decay) { return decay ? &adam_baseline<true> : &adam_baseline<false>; }
}  // namespace isa_baseline

#if TLALOC_HOST_AVX2
namespace isa_avx2 {
InstrFn adam_fn(bool decay) { return decay ? &adam_avx2<true> : &adam_avx2<false>; }
}  // namespace isa_avx2
#endif

}  // namespace tlaloc::runtime::host
