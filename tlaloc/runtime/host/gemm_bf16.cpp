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

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "tlaloc/core/error.h"
#include "tlaloc/runtime/host/kernel.h"
#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::runtime::host {
namespace {

#define TLALOC_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define TLALOC_AVX2_FMA __attribute__((target("avx2,fma")))

constexpr int64_t kMr = 12, kNr = 32;  // register tile (native, scalar)
// K block (even): deep, so C is loaded and stored few times; the A block (kMc x kKc, 384 KiB)
// and the B panel in use (kKc x 32, 128 KiB) stream from L2, which keeps up.
constexpr int64_t kKc = 2048;
constexpr int64_t kMc = 96;    // A block rows
constexpr int64_t kNc = 1024;  // N block: the packed B block (up to 4 MiB) in L3
// The AVX2 fallback: 6 x 16 register tile, K blocks of 512 (its panels hold f32, each k pair as
// two rows: the A block 384 KiB).
constexpr int64_t kMrF = 6, kNrF = 16, kKcF = 512;

// Element (x, k) of an operand seen as [X, K]: src[x * ld + k], or src[k * ld + x] when kmajor
// (A [K, M] when ta, B [K, N] unless tb).
template <class T>
struct View {
  const T* src;
  int64_t ld;
  bool kmajor;
};

// Prefetches the line of element n of p: a hint, so p + n may lie past the array (the address is
// computed as an integer).
template <class T>
inline void prefetch(const T* p, int64_t n) {
  _mm_prefetch(
      reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + uintptr_t(n) * sizeof(T)),
      _MM_HINT_T0);
}

inline uint16_t bf16_bits(uint16_t v) { return v; }
inline uint16_t bf16_bits(float v) { return to_bf16(v); }

// ---- Packing -----------------------------------------------------------------------------------

// dst[panel][p][W] = the pair word of element (x0 + panel * W + x, k0 + 2p (+1)), zero past
// column x0 + xn and past k0 + kc; ceil(xn / W) panels of kp = ceil(kc / 2) pairs. Portable.
template <class T>
void pack_scalar(uint32_t* dst, int64_t W, const View<T>& v, int64_t k0, int64_t kc, int64_t x0,
                 int64_t xn) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t x = 0; x < (xn + W - 1) / W * W; ++x) {
    uint32_t* d = dst + x / W * kp * W + x % W;
    if (x >= xn) {
      for (int64_t p = 0; p < kp; ++p) d[p * W] = 0;
      continue;
    }
    for (int64_t p = 0; p < kp; ++p) {
      const int64_t k = k0 + 2 * p;
      const T* lo = v.kmajor ? v.src + k * v.ld + x0 + x : v.src + (x0 + x) * v.ld + k;
      const uint32_t hi = 2 * p + 1 < kc ? bf16_bits(v.kmajor ? lo[v.ld] : lo[1]) : 0;
      d[p * W] = bf16_bits(*lo) | hi << 16;
    }
  }
}

// The AVX2 fallback's panels: dst[panel][2p + h][W] f32 = element (x0 + panel * W + x, k0 + 2p
// + 1 - h) as bf16 (the odd k first, as the chain takes them), zero past column x0 + xn and past
// k0 + kc. Portable.
template <class T>
void pack_expand(float* dst, int64_t W, const View<T>& v, int64_t k0, int64_t kc, int64_t x0,
                 int64_t xn) {
  const int64_t kp = (kc + 1) / 2, xw = (xn + W - 1) / W * W;
  auto at = [&](int64_t x, int64_t k) {
    return x < xn && k < kc ? from_bf16(bf16_bits(v.kmajor ? v.src[(k0 + k) * v.ld + x0 + x]
                                                           : v.src[(x0 + x) * v.ld + k0 + k]))
                            : 0.0f;
  };
  auto put = [&](int64_t x, int64_t p) {
    float* d = dst + x / W * 2 * kp * W + 2 * p * W + x % W;
    d[0] = at(x, 2 * p + 1);
    d[W] = at(x, 2 * p);
  };
  if (v.kmajor)  // rows of the source in order
    for (int64_t p = 0; p < kp; ++p)
      for (int64_t x = 0; x < xw; ++x) put(x, p);
  else
    for (int64_t x = 0; x < xw; ++x)
      for (int64_t p = 0; p < kp; ++p) put(x, p);
}

// AVX-512 packing (native path): 32 elements of a row as bf16 in the 16-bit lanes, zero where
// m is clear (those are not read).
TLALOC_AVX512_BF16 inline __m512i load32(const uint16_t* p, __mmask32 m) {
  return _mm512_maskz_loadu_epi16(m, p);
}
// to_bf16 on 16 f32 lanes, the bf16 in each lane's high half: NaN quieted, else rounded to
// nearest even.
TLALOC_AVX512_BF16 inline __m512i round_high(__m512i u) {
  const __m512i r = _mm512_add_epi32(
      u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                          _mm512_and_si512(__m512i(__v16su(u) >> 16), _mm512_set1_epi32(1))));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
}
// 32 f32 (16 in lo, 16 in hi) as 32 bf16 in the 16-bit lanes.
TLALOC_AVX512_BF16 inline __m512i pair_high(__m512i lo, __m512i hi) {
  const __m512i odd =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(round_high(lo), odd, round_high(hi));
}
TLALOC_AVX512_BF16 inline __m512i load32(const float* p, __mmask32 m) {
  return pair_high(_mm512_maskz_loadu_epi32(__mmask16(m), p),
                   _mm512_maskz_loadu_epi32(__mmask16(m >> 16), p + 16));
}

inline __mmask32 first_n32(int64_t n) {
  return n >= 32 ? ~__mmask32(0) : n <= 0 ? __mmask32(0) : __mmask32((1u << n) - 1);
}
inline __mmask16 first_n16(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// vpermt2d indices of transpose16's step b = 8 >> s: row i's and row i + b's new words.
constexpr auto kTransposeIdx = [] {
  struct {
    alignas(64) int32_t lo[4][16], hi[4][16];
  } t{};
  for (int s = 0, b = 8; s < 4; ++s, b /= 2)
    for (int l = 0; l < 16; ++l) {
      t.lo[s][l] = l & b ? l - b + 16 : l;
      t.hi[s][l] = l & b ? l + 16 : l + b;
    }
  return t;
}();

// In place: r[c] = column c of the 16 x 16 matrix of 32-bit words whose rows are r[0..15]: for
// b = 8, 4, 2, 1, rows i and i + b swap their off-diagonal b x b blocks. (vpermt2d rather than
// unpack / shuffle: GCC 12 warns about the undefined vectors those intrinsics use.)
TLALOC_AVX512_BF16 inline void transpose16(__m512i r[16]) {
#pragma GCC unroll 4
  for (int s = 0; s < 4; ++s) {
    const int b = 8 >> s;
    const __m512i il = _mm512_load_si512(kTransposeIdx.lo[s]),
                  ih = _mm512_load_si512(kTransposeIdx.hi[s]);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      if (!(i & b)) {
        const __m512i x = r[i];
        r[i] = _mm512_permutex2var_epi32(x, il, r[i + b]);
        r[i + b] = _mm512_permutex2var_epi32(x, ih, r[i + b]);
      }
  }
}

// The first min(W, avail) elements of p as load32 gives them, zero past those. Loads are
// unmasked where all their lanes lie among the avail elements (lanes past W then hold the next
// panel's, which are not stored): a masked load with a mask known only at run time reads cold
// memory several times slower on AMD Zen 5.
template <int W>
TLALOC_AVX512_BF16 inline __m512i load_cols(const uint16_t* p, int64_t avail) {
  return avail >= 32 ? _mm512_loadu_si512(p) : load32(p, first_n32(std::min<int64_t>(W, avail)));
}
template <int W>
TLALOC_AVX512_BF16 inline __m512i load_cols(const float* p, int64_t avail) {
  if (avail >= 32) return load32(p, ~__mmask32(0));
  const int64_t w = std::min<int64_t>(W, avail);
  const __m512 lo = avail >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(first_n16(w), p);
  const __m512 hi = W > 16 ? _mm512_maskz_loadu_ps(first_n16(w - 16), p + 16) : _mm512_setzero_ps();
  return pair_high(_mm512_castps_si512(lo), _mm512_castps_si512(hi));
}

// pack_avx512 of a k-major source (rows k and k + 1 interleaved, 16 columns per permute), W a
// constant: rows read in order, a panel's columns of the rows 4 pairs ahead prefetched.
template <int W, class T>
TLALOC_AVX512_BF16 void pack_kmajor_avx512(uint32_t* dst, const View<T>& v, int64_t k0, int64_t kc,
                                           int64_t x0, int64_t xn) {
  const int64_t kp = (kc + 1) / 2, panels = (xn + W - 1) / W;
  const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                      39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  constexpr __mmask16 s0 = W >= 16 ? 0xffff : (1u << W) - 1, s1 = W > 16 ? (1u << (W - 16)) - 1 : 0;
  const int64_t ld = v.ld;
  for (int64_t p = 0; p < kp; ++p) {
    const T* row = v.src + (k0 + 2 * p) * ld + x0;
    const bool odd = 2 * p + 1 < kc;
    uint32_t* d = dst + p * W;
    for (int64_t panel = 0; panel < panels; ++panel, d += kp * W) {
      const int64_t avail = xn - panel * W;  // columns of the call from this panel's first
      const T* s = row + panel * W;
      prefetch(s, 8 * ld);
      prefetch(s, 9 * ld);
      prefetch(s, 8 * ld + W - 1);
      prefetch(s, 9 * ld + W - 1);
      const __m512i r0 = load_cols<W>(s, avail),
                    r1 = odd ? load_cols<W>(s + ld, avail) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(d, s0, _mm512_permutex2var_epi16(r0, lo, r1));
      if constexpr (W > 16)
        _mm512_mask_storeu_epi32(d + 16, s1, _mm512_permutex2var_epi16(r0, hi, r1));
    }
  }
}

// The pair words of columns c .. c + 15 of f32 rows r0 (k) and r1 (k + 1, or null: past K):
// bf16(r0[x]) | bf16(r1[x]) << 16, zero from column avail on (loads within avail only).
TLALOC_AVX512_BF16 inline __m512i pair_words(const float* r0, const float* r1, int64_t c,
                                             int64_t avail) {
  const bool full = avail - c >= 16;
  const __mmask16 m = first_n16(avail - c);
  const __m512i a =
      round_high(full ? _mm512_loadu_si512(r0 + c) : _mm512_maskz_loadu_epi32(m, r0 + c));
  const __m512i lo = __m512i(__v16su(a) >> 16);
  if (!r1) return lo;
  const __m512i b =
      round_high(full ? _mm512_loadu_si512(r1 + c) : _mm512_maskz_loadu_epi32(m, r1 + c));
  // (a >> 16) | (b & 0xffff0000): ternary logic A | (B & C), 0xf8.
  return _mm512_ternarylogic_epi32(lo, b, _mm512_set1_epi32(int(0xffff0000u)), 0xf8);
}

// pack_avx512 of a k-major f32 source, W a constant: the words of 16 columns of a row pair are
// built in their lanes (no permutes) and stored by panel; rows 4 pairs ahead prefetched.
template <int W>
TLALOC_AVX512_BF16 void pack_kmajor_f32(uint32_t* dst, const View<float>& v, int64_t k0, int64_t kc,
                                        int64_t x0, int64_t xn) {
  const int64_t kp = (kc + 1) / 2, panels = (xn + W - 1) / W, ld = v.ld;
  for (int64_t p = 0; p < kp; ++p) {
    const float* r0 = v.src + (k0 + 2 * p) * ld + x0;
    const float* r1 = 2 * p + 1 < kc ? r0 + ld : nullptr;
    for (int64_t c = 0; c < xn; c += 16) {
      prefetch(r0, 8 * ld + c);
      prefetch(r0, 9 * ld + c);
    }
    uint32_t* d = dst + p * W;
    if constexpr (W == 32) {
      for (int64_t q = 0; q < panels; ++q, d += kp * W) {
        _mm512_storeu_si512(d, pair_words(r0, r1, q * W, xn));
        _mm512_storeu_si512(d + 16, pair_words(r0, r1, q * W + 16, xn));
      }
    } else {
      static_assert(W == 12, "12 rows or 32 columns");
      for (int64_t q = 0; q < panels; q += 4) {  // 4 panels: the words of 48 columns
        const __m512i w0 = pair_words(r0, r1, q * W, xn), w1 = pair_words(r0, r1, q * W + 16, xn),
                      w2 = pair_words(r0, r1, q * W + 32, xn);
        // (maskz_alignr: GCC 12 warns about the undefined vector plain alignr uses)
        const __m512i w[4] = {w0, _mm512_maskz_alignr_epi32(0xffff, w1, w0, 12),
                              _mm512_maskz_alignr_epi32(0xffff, w2, w1, 8),
                              _mm512_maskz_alignr_epi32(0xffff, w2, w2, 4)};
        for (int64_t t = 0; t < 4 && q + t < panels; ++t)
          _mm512_mask_storeu_epi32(d + (q + t) * kp * W, 0xfff, w[t]);
      }
    }
  }
}

// pack_scalar's result, with AVX-512 (W = 12 or 32).
template <class T>
TLALOC_AVX512_BF16 void pack_avx512(uint32_t* dst, int64_t W, const View<T>& v, int64_t k0,
                                    int64_t kc, int64_t x0, int64_t xn) {
  const int64_t kp = (kc + 1) / 2, panels = (xn + W - 1) / W;
  if (v.kmajor) {
    if constexpr (std::is_same_v<T, float>) {
      if (W == kNr) return pack_kmajor_f32<kNr>(dst, v, k0, kc, x0, xn);
      if (W == kMr) return pack_kmajor_f32<kMr>(dst, v, k0, kc, x0, xn);
    }
    if (W == kNr) return pack_kmajor_avx512<kNr>(dst, v, k0, kc, x0, xn);
    if (W == kMr) return pack_kmajor_avx512<kMr>(dst, v, k0, kc, x0, xn);
    fail("bf16 GEMM: a panel of {} is not packed with AVX-512", W);
  }
  // Pairs adjacent in a row: 16 x 16 word transposes of 16 rows by 16 pairs. Many short row
  // streams, which the hardware prefetcher misses: each prefetches its row 4 blocks ahead.
  for (int64_t panel = 0; panel < panels; ++panel)
    for (int64_t g = 0; g < W; g += 16) {
      const int64_t row0 = panel * W + g, rows = std::min<int64_t>(16, std::min(W - g, xn - row0));
      const T* src = v.src + (x0 + row0) * v.ld + k0;
      const __mmask16 store = first_n16(W - g);
      for (int64_t p = 0; p < kp; p += 16) {
        __m512i r[16];
        const __mmask32 m = first_n32(kc - 2 * p);
        const bool full = kc - 2 * p >= 32;
        for (int64_t i = 0; i < 16; ++i) {
          if (i >= rows) {
            r[i] = _mm512_setzero_si512();
            continue;
          }
          const T* s = src + i * v.ld + 2 * p;
          // 4 blocks ahead in the row, or past its end in the next panel's row: the rows
          // of a short K are each read in a few blocks.
          const int64_t ahead = 2 * p + 128 < kc ? 128 : W * v.ld + 128 - kc;
          prefetch(s, ahead);
          if (sizeof(T) == 4) prefetch(s, ahead + 16);
          r[i] = full ? load32(s, ~__mmask32(0)) : load32(s, m);  // see load_cols
        }
        transpose16(r);
        uint32_t* d = dst + panel * kp * W + p * W + g;
        for (int64_t q = 0; q < std::min<int64_t>(16, kp - p); ++q)
          _mm512_mask_storeu_epi32(d + q * W, store, r[q]);
      }
    }
}

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

// Packs panels of W rows of A (or columns of B) over all of K, [X / W][kp][W] words (each k
// pair as `rows` rows of W): pack_panels of the path. The layout of a pre-packed operand.
template <Bf16GemmPath P, class T>
void pack_panels(uint32_t* dst, int64_t W, const View<T>& v, int64_t k0, int64_t kc, int64_t x0,
                 int64_t xn) {
  if constexpr (P == Bf16GemmPath::native)
    pack_avx512(dst, W, v, k0, kc, x0, xn);
  else if constexpr (P == Bf16GemmPath::avx2)
    pack_expand(reinterpret_cast<float*>(dst), W, v, k0, kc, x0, xn);
  else
    pack_scalar(dst, W, v, k0, kc, x0, xn);
}

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
