// bf16 GEMM with f32 accumulation (see gemm_bf16.h for the chain every element is). Blocked and
// packed as in BLIS (Van Zee and van de Geijn, 2015), as gemm_avx2.cpp: N in blocks of kNc, K in
// blocks of kKc (even, so no k pair straddles two blocks) whose B block is packed into 32-column
// panels of k pairs [kc / 2][32] (one 32-bit word: the bf16 of k = 2p in the low half, 2p + 1 in
// the high half, as vdpbf16ps reads them), and M in blocks of kMc rows packed the same way into
// 12-row panels [kc / 2][12]. Packing pads with zeros (columns past N, rows past m1, the odd K's
// last element) and rounds f32 operands to bf16. A 12 x 32 register tile accumulates in k order
// from zero (a later K block reloads it from C, exactly), so every element is the same chain
// whatever the blocking. Native: one vdpbf16ps per row and 16 columns per k pair, the A pair
// broadcast. AVX2 fallback: panels of f32, each k pair as two rows (the odd k first), and a
// 6 x 16 tile of fused multiply-adds under MXCSR DAZ + FTZ: an f32 GEMM over the chain's steps.
// Scalar: the native panels, the rule spelled out per element.
#include "tlaloc/runtime/host/gemm_bf16.h"

#include "tlaloc/runtime/host/gemm_bf16_pack.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "tlaloc/core/error.h"
#include "tlaloc/runtime/host/kernel.h"
#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::runtime::host {
namespace {

using namespace bf16;  // NOLINT: the GEMM and its packing are one unit

// ---- Native: vdpbf16ps -------------------------------------------------------------------------

// 16 f32 at p, zero where m is clear (not read); unmasked when full (see load_cols).
TLALOC_AVX512_BF16 inline __m512 load16(bool full, __mmask16 m, const float* p) {
  return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

// C[R rows, 32 columns] = the chain over kp pairs from zero, or (acc) from C, of the A panel
// (Ap[p * 12 + r]) by the B panel (Bp[p * 32 + j]), then + bias[0:32] when bias is not null,
// then + add[r * ldc + 0:32] when add is not null. Only the columns whose bits are set in m0, m1
// are read / written.
template <int R>
TLALOC_AVX512_BF16 void micro_native(int64_t kp, const uint32_t* Ap, const uint32_t* Bp, float* C,
                                     int64_t ldc, __mmask16 m0, __mmask16 m1, bool acc,
                                     const float* bias, const float* add, int64_t next) {
  for (int r = 0; r < kMr; ++r) {  // the next tile's C (at element next of C), while this one runs
    prefetch(C, next + r * ldc);
    prefetch(C, next + r * ldc + 16);
  }
  const bool full = m0 == 0xffff && m1 == 0xffff;
  __m512 c0[R], c1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    c0[r] = acc ? load16(full, m0, C + r * ldc) : _mm512_setzero_ps();
    c1[r] = acc ? load16(full, m1, C + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(Bp + p * kNr),
                   b1 = (__m512bh)_mm512_load_si512(Bp + p * kNr + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(Ap[p * kMr + r]));
      c0[r] = _mm512_dpbf16_ps(c0[r], a, b0);  // a first: its NaN wins (gemm_bf16.h)
      c1[r] = _mm512_dpbf16_ps(c1[r], a, b1);
    }
  }
  if (bias) {
    const __m512 b0 = load16(full, m0, bias), b1 = load16(full, m1, bias + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      c0[r] = _mm512_add_ps(c0[r], b0);
      c1[r] = _mm512_add_ps(c1[r], b1);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    if (add) {
      c0[r] = _mm512_add_ps(c0[r], load16(full, m0, add + r * ldc));
      c1[r] = _mm512_add_ps(c1[r], load16(full, m1, add + r * ldc + 16));
    }
    _mm512_mask_storeu_ps(C + r * ldc, m0, c0[r]);
    _mm512_mask_storeu_ps(C + r * ldc + 16, m1, c1[r]);
  }
}

// ---- Fallback: AVX2 + FMA, scalar --------------------------------------------------------------

// c = a * b + c as vfmadd231ps: a's NaN wins over b's, as vdpbf16ps' first operand's.
TLALOC_AVX2_FMA inline void fma231(__m256& c, __m256 a, __m256 b) {
  asm("vfmadd231ps %[b], %[a], %[c]" : [c] "+x"(c) : [a] "x"(a), [b] "x"(b));
}

// The chain of C[R rows, 16 columns] (no epilogue), R <= 6, over kk = 2 * pairs f32 rows of
// the fallback's panels: A Ap[k * 6 + r], B Bp[k * 16 + j]. Runs under MXCSR DAZ + FTZ, which
// makes each FMA a step of the rule.
template <int R>
TLALOC_AVX2_FMA void micro_avx2(int64_t kk, const float* Ap, const float* Bp, float* C, int64_t ldc,
                                __m256i m0, __m256i m1, bool acc) {
  __m256 c0[R], c1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    c0[r] = acc ? _mm256_maskload_ps(C + r * ldc, m0) : _mm256_setzero_ps();
    c1[r] = acc ? _mm256_maskload_ps(C + r * ldc + 8, m1) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kk; ++k) {
    const __m256 b0 = _mm256_load_ps(Bp + k * kNrF), b1 = _mm256_load_ps(Bp + k * kNrF + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(Ap + k * kMrF + r);
      fma231(c0[r], a, b0);
      fma231(c1[r], a, b1);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_maskstore_ps(C + r * ldc, m0, c0[r]);
    _mm256_maskstore_ps(C + r * ldc + 8, m1, c1[r]);
  }
}

// The chain of C[R rows, w columns] (R <= 6, w <= 16) with AVX2: MXCSR DAZ + FTZ, round to
// nearest, exceptions masked while it runs, the caller's restored after. noinline: the calls
// around it order it against the MXCSR writes.
__attribute__((noinline)) TLALOC_AVX2_FMA void tile_avx2(int R, int64_t w, int64_t kk,
                                                         const float* Ap, const float* Bp, float* C,
                                                         int64_t ldc, bool acc) {
  alignas(32) int32_t mask[16];
  for (int i = 0; i < 16; ++i) mask[i] = i < w ? -1 : 0;
  const __m256i m0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask)),
                m1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask + 8));
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(0x8040u | 0x1f80u);
  using Micro = decltype(&micro_avx2<1>);
  static constexpr Micro kMicro[] = {micro_avx2<1>, micro_avx2<2>, micro_avx2<3>,
                                     micro_avx2<4>, micro_avx2<5>, micro_avx2<6>};
  kMicro[std::clamp(R, 1, 6) - 1](kk, Ap, Bp, C, ldc, m0, m1, acc);
  _mm_setcsr(saved);
}

inline float daz(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

// The chain of C[R rows, w columns] spelled out in scalar code (any x86-64 CPU), under the
// default MXCSR (round to nearest, no DAZ / FTZ: bf16_gemm_step flushes), the caller's restored
// after.
__attribute__((noinline)) void tile_scalar(int R, int64_t w, int64_t kp, const uint32_t* Ap,
                                           const uint32_t* Bp, float* C, int64_t ldc, bool acc) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(0x1f80u);
  for (int r = 0; r < R; ++r)
    for (int64_t j = 0; j < w; ++j) {
      float c = acc ? C[r * ldc + j] : 0.0f;
      for (int64_t p = 0; p < kp; ++p) {
        const uint32_t a = Ap[p * kMr + r], b = Bp[p * kNr + j];
        c = bf16_gemm_step(from_bf16(uint16_t(a >> 16)), from_bf16(uint16_t(b >> 16)), c);
        c = bf16_gemm_step(from_bf16(uint16_t(a)), from_bf16(uint16_t(b)), c);
      }
      C[r * ldc + j] = c;
    }
  _mm_setcsr(saved);
}

// ---- Driver ------------------------------------------------------------------------------------

using NativeTile = void (*)(int64_t, const uint32_t*, const uint32_t*, float*, int64_t, __mmask16,
                            __mmask16, bool, const float*, const float*, int64_t);
constexpr NativeTile kNativeTiles[kMr] = {micro_native<1>,  micro_native<2>,  micro_native<3>,
                                          micro_native<4>,  micro_native<5>,  micro_native<6>,
                                          micro_native<7>,  micro_native<8>,  micro_native<9>,
                                          micro_native<10>, micro_native<11>, micro_native<12>};

// A path's blocking: register tile MR x NR, K block KC, packed rows per k pair (one of words,
// or the fallback's two f32 halves).
template <Bf16GemmPath P>
struct Blocking {
  static constexpr bool fallback = P == Bf16GemmPath::avx2;
  static constexpr int64_t MR = fallback ? kMrF : kMr, NR = fallback ? kNrF : kNr,
                           KC = fallback ? kKcF : kKc, rows = fallback ? 2 : 1;
  // 32-bit words of pack this path uses for N, K.
  static int64_t words(int64_t N, int64_t K) {
    const int64_t kp = (std::min(KC, K) + 1) / 2;
    return rows * kp * ((std::min(kNc, N) + NR - 1) / NR * NR + kMc);
  }
};

// pre_a / pre_b: the operand pre-packed over all of K (bf16_gemm_prepack), from the panel of row
// m0 / column 0, or null: then each K block of it is packed here.
template <Bf16GemmPath P, class AT, class BT>
void gemm(const View<AT>& a, const View<BT>& b, int64_t m0, int64_t m1, int64_t N, int64_t K,
          float* C, int64_t ldc, uint32_t* pack, const uint32_t* pre_a, const uint32_t* pre_b,
          const float* bias, const float* add) {
  using L = Blocking<P>;
  uint32_t* Bp = pack;
  uint32_t* Ap = pack + L::rows * ((std::min(L::KC, K) + 1) / 2) *
                            ((std::min(kNc, N) + L::NR - 1) / L::NR * L::NR);
  const int64_t kp_all = (K + 1) / 2;
  for (int64_t jc = 0; jc < N; jc += kNc) {
    const int64_t nc = std::min(kNc, N - jc);
    for (int64_t pc = 0; pc < K; pc += L::KC) {
      const int64_t kc = std::min(L::KC, K - pc), kp = (kc + 1) / 2;
      const bool acc = pc > 0, last = pc + kc == K;  // the epilogue once every k is in
      // The B block and its panel stride (words); a pre-packed panel holds every k pair.
      const uint32_t* bblock = Bp;
      int64_t bstride = kp * L::NR * L::rows;
      if (pre_b) {
        bstride = kp_all * L::NR * L::rows;
        bblock = pre_b + jc / L::NR * bstride + pc / 2 * L::NR * L::rows;
      } else {
        pack_panels<P>(Bp, L::NR, b, pc, kc, jc, nc);
      }
      for (int64_t ic = m0; ic < m1; ic += kMc) {
        const int64_t mc = std::min(kMc, m1 - ic);
        const uint32_t* ablock = Ap;
        int64_t astride = kp * L::MR * L::rows;
        if (pre_a) {
          astride = kp_all * L::MR * L::rows;
          ablock = pre_a + (ic - m0) / L::MR * astride + pc / 2 * L::MR * L::rows;
        } else {
          pack_panels<P>(Ap, L::MR, a, pc, kc, ic, mc);
        }
        for (int64_t jr = 0; jr < nc; jr += L::NR) {
          const int64_t w = std::min(L::NR, nc - jr);
          const uint32_t* bp = bblock + jr / L::NR * bstride;
          const float* bj = bias && last ? bias + jc + jr : nullptr;
          for (int64_t ir = 0; ir < mc; ir += L::MR) {
            const int R = int(std::min(L::MR, mc - ir));
            const uint32_t* ap = ablock + ir / L::MR * astride;
            float* c = C + (ic + ir) * ldc + jc + jr;
            const float* aj = add && last ? add + (ic + ir) * ldc + jc + jr : nullptr;
            if constexpr (P == Bf16GemmPath::native) {
              const int64_t next = ir + kMr < mc ? kMr * ldc : kNr - ir * ldc;  // or the next jr
              kNativeTiles[R - 1](kp, ap, bp, c, ldc, first_n16(w), first_n16(w - 16), acc, bj, aj,
                                  next);
              continue;
            } else if constexpr (P == Bf16GemmPath::avx2) {
              tile_avx2(R, w, 2 * kp, reinterpret_cast<const float*>(ap),
                        reinterpret_cast<const float*>(bp), c, ldc, acc);
            } else {
              tile_scalar(R, w, kp, ap, bp, c, ldc, acc);
            }
            for (int r = 0; r < R && (bj || aj); ++r)  // the epilogue, under the caller's MXCSR
              for (int64_t j = 0; j < w; ++j) {
                if (bj) c[r * ldc + j] = c[r * ldc + j] + bj[j];
                if (aj) c[r * ldc + j] = c[r * ldc + j] + aj[r * ldc + j];
              }
          }
        }
      }
    }
  }
}

bool has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace

bool bf16_gemm_native() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
}

Bf16GemmPath bf16_gemm_path(Bf16GemmPath p) {
  auto check = [](Bf16GemmPath p) {
    if (p == Bf16GemmPath::native && !bf16_gemm_native())
      fail("bf16 GEMM: the native path needs AVX512_BF16, which this CPU lacks");
    if (p == Bf16GemmPath::avx2 && !has_avx2())
      fail("bf16 GEMM: the avx2 path needs AVX2 and FMA, which this CPU lacks");
    return p;
  };
  if (p != Bf16GemmPath::best) return check(p);
  static const Bf16GemmPath best = [&] {
    const Bf16GemmPath fallback = has_avx2() ? Bf16GemmPath::avx2 : Bf16GemmPath::scalar;
    const char* e = std::getenv("TLALOC_BF16_GEMM");
    if (!e || !*e) return bf16_gemm_native() ? Bf16GemmPath::native : fallback;
    const std::string_view s(e);
    if (s == "native") return check(Bf16GemmPath::native);
    if (s == "fallback") return fallback;
    if (s == "avx2") return check(Bf16GemmPath::avx2);
    if (s == "scalar") return Bf16GemmPath::scalar;
    fail("TLALOC_BF16_GEMM={}: expected native, fallback, avx2 or scalar", s);
  }();
  return best;
}

float bf16_gemm_step(float a, float b, float c) {
  a = daz(a), b = daz(b), c = daz(c);
  auto quiet = [](float x) { return bits_f32(f32_bits(x) | 0x00400000u); };
  if (std::isnan(a)) return quiet(a);
  if (std::isnan(b)) return quiet(b);
  if (std::isnan(c)) return quiet(c);
  const float r = std::fma(a, b, c);
  return std::isnan(r) ? bits_f32(0xffc00000u) : daz(r);  // FTZ: a denormal result flushed
}

int64_t bf16_gemm_pack_bytes(bool, int64_t N, int64_t K) {
  N = std::max<int64_t>(N, 1), K = std::max<int64_t>(K, 1);
  return 4 * std::max(Blocking<Bf16GemmPath::native>::words(N, K),
                      Blocking<Bf16GemmPath::avx2>::words(N, K)) +
         64;  // + 64: room to align to 64 bytes
}

template <class AT, class BT>
void bf16_gemm_rows(bool ta, bool tb, int64_t m0, int64_t m1, int64_t N, int64_t K, const AT* A,
                    int64_t lda, const BT* B, int64_t ldb, float* C, int64_t ldc, void* pack,
                    const float* bias, const float* add, Bf16GemmPath path,
                    const Bf16Prepacked& pre) {
  path = bf16_gemm_path(path);
  if (m1 <= m0 || N <= 0) return;
  if (K <= 0) {  // the empty sum +0, then the epilogue's adds
    empty_gemm_rows(m0, m1, N, C, ldc, bias, add);
    return;
  }
  auto* p = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(pack) + 63) & ~uintptr_t(63));
  const View<AT> a{A, lda, ta};
  const View<BT> b{B, ldb, !tb};
  const auto *pa = static_cast<const uint32_t*>(pre.a), *pb = static_cast<const uint32_t*>(pre.b);
  if (path == Bf16GemmPath::native)
    gemm<Bf16GemmPath::native>(a, b, m0, m1, N, K, C, ldc, p, pa, pb, bias, add);
  else if (path == Bf16GemmPath::avx2)
    gemm<Bf16GemmPath::avx2>(a, b, m0, m1, N, K, C, ldc, p, pa, pb, bias, add);
  else
    gemm<Bf16GemmPath::scalar>(a, b, m0, m1, N, K, C, ldc, p, pa, pb, bias, add);
}

int64_t bf16_gemm_prepacked_bytes(int64_t X, int64_t K) {
  // X rounded up to whole panels of any path's A (12 or 6 rows) or B (32 or 16 columns); two
  // rows per k pair, as the fallback packs them.
  X = std::max<int64_t>(X, 1);
  const int64_t padded = std::max((X + kNr - 1) / kNr * kNr, (X + kMr - 1) / kMr * kMr);
  return 4 * 2 * ((std::max<int64_t>(K, 1) + 1) / 2) * padded;
}

int64_t bf16_gemm_prepacked_offset(bool a, int64_t x, int64_t K, Bf16GemmPath path) {
  const int64_t rows = bf16_gemm_path(path) == Bf16GemmPath::avx2 ? 2 : 1;
  const int64_t W = a ? (rows == 2 ? kMrF : kMr) : (rows == 2 ? kNrF : kNr);
  if (x % W != 0)
    fail("bf16 GEMM: pre-packed {} starts at {}, not a multiple of {}", a ? "row" : "column", x, W);
  return 4 * rows * ((K + 1) / 2) * x;
}

template <class T>
void bf16_gemm_prepack(bool a, bool trans, int64_t K, const T* src, int64_t ld, void* dst,
                       int64_t x0, int64_t x1, Bf16GemmPath path) {
  path = bf16_gemm_path(path);
  if (reinterpret_cast<uintptr_t>(dst) % 64 != 0)
    fail("bf16 GEMM: a pre-packed operand's buffer must be 64-byte aligned");
  if (x1 <= x0 || K <= 0) return;
  auto* d = reinterpret_cast<uint32_t*>(static_cast<char*>(dst) +
                                        bf16_gemm_prepacked_offset(a, x0, K, path));
  const View<T> v{src, ld, a ? trans : !trans};
  const bool avx2 = path == Bf16GemmPath::avx2;
  const int64_t W = a ? (avx2 ? kMrF : kMr) : (avx2 ? kNrF : kNr);
  if (path == Bf16GemmPath::native)
    pack_panels<Bf16GemmPath::native>(d, W, v, 0, K, x0, x1 - x0);
  else if (avx2)
    pack_panels<Bf16GemmPath::avx2>(d, W, v, 0, K, x0, x1 - x0);
  else
    pack_panels<Bf16GemmPath::scalar>(d, W, v, 0, K, x0, x1 - x0);
}

template void bf16_gemm_prepack(bool, bool, int64_t, const uint16_t*, int64_t, void*, int64_t,
                                int64_t, Bf16GemmPath);
template void bf16_gemm_prepack(bool, bool, int64_t, const float*, int64_t, void*, int64_t, int64_t,
                                Bf16GemmPath);

template TLALOC_BF16_GEMM_ROWS(uint16_t, uint16_t);
template TLALOC_BF16_GEMM_ROWS(float, uint16_t);
template TLALOC_BF16_GEMM_ROWS(uint16_t, float);
template TLALOC_BF16_GEMM_ROWS(float, float);

}  // namespace tlaloc::runtime::host
