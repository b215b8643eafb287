// f32 GEMM kernel for AVX2 + FMA (see kernels.h: sgemm_rows).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::runtime::host {
namespace {

#define TLALOC_AVX2_FMA __attribute__((target("avx2,fma")))

// C[R rows, 16 columns] = sum over k of A(r, k) * B[k, 0:16], one fused multiply-add per k
// per element in k order, from zero. A(r, k) is A[r * lda + k], or A[k * lda + r] when TA.
// MASK: only the columns whose mask lanes are set are read and written.
template <int R, bool TA, bool MASK>
TLALOC_AVX2_FMA inline void micro(int64_t K, const float* A, int64_t lda, const float* B,
                                  int64_t ldb, float* C, int64_t ldc, __m256i m0, __m256i m1) {
  __m256 c0[R], c1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    __m256 b0, b1;
    if constexpr (MASK) {
      b0 = _mm256_maskload_ps(b, m0);
      b1 = _mm256_maskload_ps(b + 8, m1);
    } else {
      b0 = _mm256_loadu_ps(b);
      b1 = _mm256_loadu_ps(b + 8);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256 a = _mm256_broadcast_ss(TA ? A + k * lda + r : A + r * lda + k);
      c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if constexpr (MASK) {
      _mm256_maskstore_ps(C + r * ldc, m0, c0[r]);
      _mm256_maskstore_ps(C + r * ldc + 8, m1, c1[r]);
    } else {
      _mm256_storeu_ps(C + r * ldc, c0[r]);
      _mm256_storeu_ps(C + r * ldc + 8, c1[r]);
    }
  }
}

template <bool TA, bool MASK>
TLALOC_AVX2_FMA void rows(int R, int64_t K, const float* A, int64_t lda, const float* B,
                          int64_t ldb, float* C, int64_t ldc, __m256i m0, __m256i m1) {
  switch (R) {
    case 6:
      return micro<6, TA, MASK>(K, A, lda, B, ldb, C, ldc, m0, m1);
    case 5:
      return micro<5, TA, MASK>(K, A, lda, B, ldb, C, ldc, m0, m1);
    case 4:
      return micro<4, TA, MASK>(K, A, lda, B, ldb, C, ldc, m0, m1);
    case 3:
      return micro<3, TA, MASK>(K, A, lda, B, ldb, C, ldc, m0, m1);
    case 2:
      return micro<2, TA, MASK>(K, A, lda, B, ldb, C, ldc, m0, m1);
    default:
      return micro<1, TA, MASK>(K, A, lda, B, ldb, C, ldc, m0, m1);
  }
}

template <bool TA>
TLALOC_AVX2_FMA void gemm(int64_t m0, int64_t m1, int64_t N, int64_t K, const float* A, int64_t lda,
                          const float* B, int64_t ldb, float* C, int64_t ldc) {
  for (int64_t j = 0; j < N; j += 16) {
    const int64_t w = std::min<int64_t>(16, N - j);
    alignas(32) int32_t mask[16];
    for (int i = 0; i < 16; ++i) mask[i] = i < w ? -1 : 0;
    const __m256i k0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask)),
                  k1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask + 8));
    for (int64_t i = m0; i < m1; i += 6) {
      const int R = int(std::min<int64_t>(6, m1 - i));
      const float* a = TA ? A + i : A + i * lda;
      if (w == 16)
        rows<TA, false>(R, K, a, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1);
      else
        rows<TA, true>(R, K, a, lda, B + j, ldb, C + i * ldc + j, ldc, k0, k1);
    }
  }
}

}  // namespace

bool sgemm_rows_available() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

void sgemm_rows(bool ta, int64_t m0, int64_t m1, int64_t N, int64_t K, const float* A, int64_t lda,
                const float* B, int64_t ldb, float* C, int64_t ldc) {
  if (ta)
    gemm<true>(m0, m1, N, K, A, lda, B, ldb, C, ldc);
  else
    gemm<false>(m0, m1, N, K, A, lda, B, ldb, C, ldc);
}

}  // namespace tlaloc::runtime::host
