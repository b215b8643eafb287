// Internal to the bf16 GEMM (gemm_bf16.cpp): its blocking constants and the packing of its
// operands into panels (gemm_bf16_pack.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "tlaloc/runtime/host/gemm_bf16.h"

#define TLALOC_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define TLALOC_AVX2_FMA __attribute__((target("avx2,fma")))

namespace tlaloc::runtime::host::bf16 {

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

inline __mmask32 first_n32(int64_t n) {
  return n >= 32 ? ~__mmask32(0) : n <= 0 ? __mmask32(0) : __mmask32((1u << n) - 1);
}
inline __mmask16 first_n16(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Packs panels of W rows of A (or columns of B), [ceil(xn / W)][kp][W] words (kp = ceil(kc / 2);
// the fallback's each k pair as two rows of W f32): element (x0 + panel * W + x, k0 + 2p (+1))
// as bf16 in the low (high) half of word [panel][p][x], zero past column x0 + xn and past
// k0 + kc; f32 sources rounded to nearest even. The layout of a pre-packed operand too.
template <Bf16GemmPath P, class T>
void pack_panels(uint32_t* dst, int64_t W, const View<T>& v, int64_t k0, int64_t kc, int64_t x0,
                 int64_t xn);

}  // namespace tlaloc::runtime::host::bf16
