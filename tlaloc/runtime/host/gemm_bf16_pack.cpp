// Packing of the bf16 GEMM's operands (gemm_bf16_pack.h): portable, the AVX2 fallback's f32
// panels, and AVX-512 (transposes for pairs adjacent in a row; k-major rows interleaved).
#include "tlaloc/runtime/host/gemm_bf16_pack.h"

#include <algorithm>
#include <type_traits>

#include "tlaloc/core/error.h"
#include "tlaloc/runtime/host/kernel.h"

namespace tlaloc::runtime::host::bf16 {
namespace {

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

}  // namespace

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

#define TLALOC_PACK_PANELS(P, T)                                                              \
  template void pack_panels<P>(uint32_t*, int64_t, const View<T>&, int64_t, int64_t, int64_t, \
                               int64_t);
TLALOC_PACK_PANELS(Bf16GemmPath::native, float)
TLALOC_PACK_PANELS(Bf16GemmPath::native, uint16_t)
TLALOC_PACK_PANELS(Bf16GemmPath::avx2, float)
TLALOC_PACK_PANELS(Bf16GemmPath::avx2, uint16_t)
TLALOC_PACK_PANELS(Bf16GemmPath::scalar, float)
TLALOC_PACK_PANELS(Bf16GemmPath::scalar, uint16_t)
#undef TLALOC_PACK_PANELS

}  // namespace tlaloc::runtime::host::bf16
