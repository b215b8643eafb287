// f32 GEMM for AVX2 + FMA (see kernels.h: sgemm_rows). Blocked and packed as in BLIS (Van Zee
// and van de Geijn, "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", 2015):
// K in blocks of kKc, N in blocks of kNc whose B block is packed into 16-column panels
// [kc, 16] (zero-padded, transposed here when B is stored [N, K]), and, when A is stored
// [K, M], A in blocks of kMc rows packed into 6-row panels [kc, 6]. A 6 x 16 register tile
// accumulates in k order from zero (a later K block reloads it), so every element is the same
// chain of fused multiply-adds whatever the blocking or row / column split. Packed panels are
// read contiguously (unpacked, a 16-column strip of B with a power-of-two row pitch falls on
// few L1 sets) and the transpose of a B stored [N, K] is paid once per panel. That transpose
// reads 16 rows at once, more streams than the hardware prefetcher follows, so it prefetches
// each row two cache lines ahead.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::runtime::host {
namespace {

#define TLALOC_AVX2_FMA __attribute__((target("avx2,fma")))

constexpr int64_t kMr = 6, kNr = 16;  // register tile
constexpr int64_t kKc = 256;          // K block: a B panel (16 KiB) stays in L1
constexpr int64_t kNc = 256;          // N block: the packed B block (256 KiB) stays in L2
constexpr int64_t kMc = 72;           // A block rows, when A is packed (72 KiB)

// C[R rows, 16 columns] (+)= sum over k of A(r, k) * Bp[k, 0:16], one fused multiply-add per k
// per element in k order, from zero or (ACC) from C, then + bias[0:16] when bias is not null,
// then + add[r * ldc + 0:16] when add is not null (one add each). A(r, k) is A[r * lda + k], or
// A[k * lda + r] when TA. MASK: only the columns whose mask lanes are set are read / written.
template <int R, bool TA, bool ACC, bool MASK>
TLALOC_AVX2_FMA inline void micro(int64_t K, const float* A, int64_t lda, const float* Bp, float* C,
                                  int64_t ldc, __m256i m0, __m256i m1, const float* bias,
                                  const float* add) {
  __m256 c0[R], c1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if constexpr (!ACC) {
      c0[r] = c1[r] = _mm256_setzero_ps();
    } else if constexpr (MASK) {
      c0[r] = _mm256_maskload_ps(C + r * ldc, m0);
      c1[r] = _mm256_maskload_ps(C + r * ldc + 8, m1);
    } else {
      c0[r] = _mm256_loadu_ps(C + r * ldc);
      c1[r] = _mm256_loadu_ps(C + r * ldc + 8);
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_load_ps(Bp + k * kNr), b1 = _mm256_load_ps(Bp + k * kNr + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256 a = _mm256_broadcast_ss(TA ? A + k * lda + r : A + r * lda + k);
      c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
    }
  }
  if (bias) {
    const __m256 b0 = MASK ? _mm256_maskload_ps(bias, m0) : _mm256_loadu_ps(bias),
                 b1 = MASK ? _mm256_maskload_ps(bias + 8, m1) : _mm256_loadu_ps(bias + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      c0[r] = _mm256_add_ps(c0[r], b0);
      c1[r] = _mm256_add_ps(c1[r], b1);
    }
  }
  if (add) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float* x = add + r * ldc;
      c0[r] = _mm256_add_ps(c0[r], MASK ? _mm256_maskload_ps(x, m0) : _mm256_loadu_ps(x));
      c1[r] = _mm256_add_ps(c1[r], MASK ? _mm256_maskload_ps(x + 8, m1) : _mm256_loadu_ps(x + 8));
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

template <bool TA, bool ACC, bool MASK>
TLALOC_AVX2_FMA void tile(int R, int64_t K, const float* A, int64_t lda, const float* Bp, float* C,
                          int64_t ldc, __m256i m0, __m256i m1, const float* bias,
                          const float* add) {
  switch (R) {
    case 6:
      return micro<6, TA, ACC, MASK>(K, A, lda, Bp, C, ldc, m0, m1, bias, add);
    case 5:
      return micro<5, TA, ACC, MASK>(K, A, lda, Bp, C, ldc, m0, m1, bias, add);
    case 4:
      return micro<4, TA, ACC, MASK>(K, A, lda, Bp, C, ldc, m0, m1, bias, add);
    case 3:
      return micro<3, TA, ACC, MASK>(K, A, lda, Bp, C, ldc, m0, m1, bias, add);
    case 2:
      return micro<2, TA, ACC, MASK>(K, A, lda, Bp, C, ldc, m0, m1, bias, add);
    default:
      return micro<1, TA, ACC, MASK>(K, A, lda, Bp, C, ldc, m0, m1, bias, add);
  }
}

template <bool TA, bool ACC>
TLALOC_AVX2_FMA void tile_any(bool mask, int R, int64_t K, const float* A, int64_t lda,
                              const float* Bp, float* C, int64_t ldc, __m256i m0, __m256i m1,
                              const float* bias, const float* add) {
  if (mask)
    tile<TA, ACC, true>(R, K, A, lda, Bp, C, ldc, m0, m1, bias, add);
  else
    tile<TA, ACC, false>(R, K, A, lda, Bp, C, ldc, m0, m1, bias, add);
}

// 8 x 8 transpose: d[c * 16 + r] = s[r * lds + c] for r, c < 8.
TLALOC_AVX2_FMA inline void transpose8(const float* s, int64_t lds, float* d) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_store_ps(d + i * kNr, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_store_ps(d + (i + 4) * kNr, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

// Bp[panel][k][16] = B(k0 + k, j0 + panel * 16 + j), zero past column j0 + nc.
// B(k, j) is B[k * ldb + j], or B[j * ldb + k] when TB.
TLALOC_AVX2_FMA void pack_b(float* Bp, const float* B, int64_t ldb, bool tb, int64_t k0, int64_t kc,
                            int64_t j0, int64_t nc) {
  if (!tb) {  // row by row: B is read as one sequential stream
    const int64_t full = nc / kNr * kNr;
    for (int64_t k = 0; k < kc; ++k) {
      const float* s = B + (k0 + k) * ldb + j0;
      float* d = Bp + k * kNr;
      for (int64_t p = 0; p < full; p += kNr, d += kc * kNr) {
        _mm256_store_ps(d, _mm256_loadu_ps(s + p));
        _mm256_store_ps(d + 8, _mm256_loadu_ps(s + p + 8));
      }
      if (full < nc)
        for (int64_t j = 0; j < kNr; ++j) d[j] = full + j < nc ? s[full + j] : 0.0f;
    }
    return;
  }
  for (int64_t p = 0; p < nc; p += kNr) {
    const int64_t w = std::min(kNr, nc - p);
    float* d = Bp + p * kc;
    const float* s = B + (j0 + p) * ldb + k0;  // row j of the panel: s + j * ldb
    int64_t k = 0;
    if (w == kNr)
      for (; k + 8 <= kc; k += 8) {
        if ((k & 15) == 0)  // the panel's 16 rows, two cache lines ahead
          for (int64_t j = 0; j < kNr; ++j)
            _mm_prefetch(reinterpret_cast<const char*>(s + j * ldb + k + 32), _MM_HINT_T0);
        transpose8(s + k, ldb, d + k * kNr);
        transpose8(s + 8 * ldb + k, ldb, d + k * kNr + 8);
      }
    for (; k < kc; ++k)
      for (int64_t j = 0; j < kNr; ++j) d[k * kNr + j] = j < w ? s[j * ldb + k] : 0.0f;
  }
}

// Ap[panel][k][6] = A[(k0 + k) * lda + i0 + panel * 6 + r] for A stored [K, M], zero past
// row i0 + mc; row by row, as one sequential stream.
void pack_a_trans(float* Ap, const float* A, int64_t lda, int64_t k0, int64_t kc, int64_t i0,
                  int64_t mc) {
  const int64_t full = mc / kMr * kMr;
  for (int64_t k = 0; k < kc; ++k) {
    const float* s = A + (k0 + k) * lda + i0;
    float* d = Ap + k * kMr;
    for (int64_t p = 0; p < full; p += kMr, d += kc * kMr)
      for (int64_t r = 0; r < kMr; ++r) d[r] = s[p + r];
    if (full < mc)
      for (int64_t r = 0; r < kMr; ++r) d[r] = full + r < mc ? s[full + r] : 0.0f;
  }
}

template <bool TA>
TLALOC_AVX2_FMA void gemm(bool tb, int64_t m0, int64_t m1, int64_t N, int64_t K, const float* A,
                          int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
                          float* pack, const float* bias, const float* add) {
  float* Bp = pack;
  float* Ap = pack + std::min(kKc, K) * ((std::min(kNc, N) + kNr - 1) / kNr * kNr);
  for (int64_t pc = 0; pc < K; pc += kKc) {
    const int64_t kc = std::min(kKc, K - pc);
    for (int64_t jc = 0; jc < N; jc += kNc) {
      const int64_t nc = std::min(kNc, N - jc);
      pack_b(Bp, B, ldb, tb, pc, kc, jc, nc);
      for (int64_t ic = m0; ic < m1; ic += TA ? kMc : m1 - m0) {
        const int64_t mc = std::min(TA ? kMc : m1 - m0, m1 - ic);
        if constexpr (TA) pack_a_trans(Ap, A, lda, pc, kc, ic, mc);
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int64_t w = std::min(kNr, nc - jr);
          alignas(32) int32_t mask[16];
          for (int i = 0; i < 16; ++i) mask[i] = i < w ? -1 : 0;
          const __m256i k0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask)),
                        k1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask + 8));
          const float* bp = Bp + jr * kc;
          // The epilogue once every k is in: on the last K block.
          const bool last = pc + kc == K;
          const float* bj = bias && last ? bias + jc + jr : nullptr;
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int R = int(std::min(kMr, mc - ir));
            const float* a = TA ? Ap + ir * kc : A + (ic + ir) * lda + pc;
            const int64_t la = TA ? kMr : lda;
            float* c = C + (ic + ir) * ldc + jc + jr;
            const float* aj = add && last ? add + (ic + ir) * ldc + jc + jr : nullptr;
            if (pc == 0)
              tile_any<TA, false>(w < kNr, R, kc, a, la, bp, c, ldc, k0, k1, bj, aj);
            else
              tile_any<TA, true>(w < kNr, R, kc, a, la, bp, c, ldc, k0, k1, bj, aj);
          }
        }
      }
    }
  }
}

}  // namespace

bool sgemm_rows_available() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

int64_t sgemm_rows_pack_floats(bool ta, int64_t N, int64_t K) {
  const int64_t kc = std::min(kKc, K), nc = (std::min(kNc, N) + kNr - 1) / kNr * kNr;
  return kc * nc + (ta ? kc * kMc : 0) + 8;  // + 8: room to align to 32 bytes
}

void empty_gemm_rows(int64_t m0, int64_t m1, int64_t N, float* C, int64_t ldc, const float* bias,
                     const float* add) {
  for (int64_t i = m0; i < m1; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float c = 0.0f;
      if (bias) c = c + bias[j];
      if (add) c = c + add[i * ldc + j];
      C[i * ldc + j] = c;
    }
}

void sgemm_rows(bool ta, bool tb, int64_t m0, int64_t m1, int64_t N, int64_t K, const float* A,
                int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, float* pack,
                const float* bias, const float* add) {
  if (m1 <= m0 || N <= 0) return;
  if (K <= 0) {  // the empty sum 0, then the epilogue's adds
    empty_gemm_rows(m0, m1, N, C, ldc, bias, add);
    return;
  }
  auto* p = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(pack) + 31) & ~uintptr_t(31));
  if (ta)
    gemm<true>(tb, m0, m1, N, K, A, lda, B, ldb, C, ldc, p, bias, add);
  else
    gemm<false>(tb, m0, m1, N, K, A, lda, B, ldb, C, ldc, p, bias, add);
}

}  // namespace tlaloc::runtime::host
