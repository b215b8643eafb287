// bf16 GEMM with f32 accumulation for the host lane: AVX-512 BF16 (vdpbf16ps) where the CPU has
// it, else a fallback that gives the same bits (gemm_bf16.cpp).
//
// The bits. Every element C[i, j] is one chain of f32 steps, the one vdpbf16ps computes for an
// output lane: from c = +0.0f, for each k pair p = 0, 1, ... (k = 2p and 2p + 1; an odd K's last
// pair padded with a +0 in both operands),
//   c = bf16_gemm_step(a[2p + 1], b[2p + 1], c);  then  c = bf16_gemm_step(a[2p], b[2p], c);
// with a[k] = op(A)[i, k], b[k] = op(B)[k, j] as f32. A step is x86's fused multiply-add a * b + c
// (one rounding, to nearest even) with DAZ on all three inputs (a denormal reads as a zero of its
// sign; the accumulator too) and FTZ on its result (a denormal result becomes a zero of its
// sign); a NaN result is a quiet copy of the first NaN among a, b, c, else (inf * 0, inf - inf)
// the default NaN 0xffc00000. The control register (MXCSR: rounding, DAZ / FTZ) plays no part.
// Then + bias[j] when bias is not null, then + add[i * ldc + j] when add is not null, each one f32
// add under the caller's MXCSR, as sgemm_rows' epilogue. So the bits depend neither on the
// blocking nor on how rows / columns are split over calls or threads, nor on the path.
//
// How the rule was found: vdpbf16ps on an AMD Zen 5 against scalar candidates on tens of millions
// of random lanes (bf16 bit patterns of every exponent, denormals, zeros of both signs,
// infinities, NaNs with payloads; accumulators that cancel the products, denormal, tiny, huge,
// NaN), under several MXCSR settings; this rule, as scalar code and as two FMA instructions
// under MXCSR DAZ + FTZ, matched every lane; other orders and roundings did not
// (docs/benchmarks.md has the counts). Intel's SDM states the same order, DAZ / FTZ and rounding.
// Which factor's NaN wins in an x86 FMA depends on the instruction's form (the first factor of
// its formula), so the AVX2 fallback pins the form in asm. HostBf16Gemm.EveryPathIsTheStepChain
// checks the rule on every CPU the tests run on.
#pragma once

#include <cstdint>

namespace tlaloc::runtime::host {

// Which code computes the chain. best: the environment's TLALOC_BF16_GEMM (read once: native,
// fallback, avx2 or scalar; fallback: avx2 where the CPU has AVX2 + FMA, else scalar) if set, else
// native where the CPU has AVX512_BF16, else avx2, else scalar. Asking for a path the CPU lacks
// throws tlaloc::Error.
enum class Bf16GemmPath { best, native, avx2, scalar };

bool bf16_gemm_native();                      // the CPU has AVX512_BF16 (checked once)
Bf16GemmPath bf16_gemm_path(Bf16GemmPath p);  // what p resolves to on this CPU and environment

// One step of the chain (see above), as plain scalar code under the default MXCSR: the tests'
// statement of the rule.
float bf16_gemm_step(float a, float b, float c);

// Bytes of scratch bf16_gemm_rows needs in `pack` for these N, K (any alignment). ta is kept
// for sgemm_rows' shape: A is packed either way.
int64_t bf16_gemm_pack_bytes(bool ta, int64_t N, int64_t K);

// An operand packed once for several bf16_gemm_rows calls that share it (threads each taking
// rows or columns of one GEMM): whole-K panels, so a call packs only its own part of the other
// operand. a: op(A)'s panels from the call's row m0 on (A is then not read); b: op(B)'s from
// the call's column 0 on (B is not read; 64-byte aligned). Null: packed in the call.
struct Bf16Prepacked {
  const void* a = nullptr;
  const void* b = nullptr;
};

// Bytes of a pre-packed operand of X rows of op(A) (or X columns of op(B)) by K, on any path
// (any alignment).
int64_t bf16_gemm_prepacked_bytes(int64_t X, int64_t K);
// Byte offset in a pre-packed buffer of the panel starting at row (a) or column x: x must be a
// multiple of 12 for rows, 32 for columns (throws tlaloc::Error otherwise).
int64_t bf16_gemm_prepacked_offset(bool a, int64_t x, int64_t K,
                                   Bf16GemmPath path = Bf16GemmPath::best);
// Packs rows [x0, x1) of op(A) (a; trans: A stored [K, M]) or columns [x0, x1) of op(B) (trans:
// B stored [N, K]) into dst (bf16_gemm_prepacked_bytes of the whole operand, 64-byte aligned),
// x0 a multiple of 12 (rows) or 32 (columns), rounding f32 to bf16 as bf16_gemm_rows does.
// Threads may pack disjoint ranges of one buffer at once. Throws tlaloc::Error for a misaligned
// dst or x0.
template <class T>
void bf16_gemm_prepack(bool a, bool trans, int64_t K, const T* src, int64_t ld, void* dst,
                       int64_t x0, int64_t x1, Bf16GemmPath path = Bf16GemmPath::best);
extern template void bf16_gemm_prepack(bool, bool, int64_t, const uint16_t*, int64_t, void*,
                                       int64_t, int64_t, Bf16GemmPath);
extern template void bf16_gemm_prepack(bool, bool, int64_t, const float*, int64_t, void*, int64_t,
                                       int64_t, Bf16GemmPath);

// f32 C[m0:m1, 0:N] (row-major, ldc) = op(A) op(B), then + bias[0:N] on every row when bias is
// not null, then + add[i * ldc + j] when add is not null (add must not alias C: the fallbacks
// store C before adding): A [M, K] (lda), or [K, M] when ta; B [K, N] (ldb), or [N, K] when
// tb. AT and BT are each uint16_t (bf16 bit patterns) or float (an f32 operand rounded to bf16 as
// to_bf16 in kernel.h, to nearest even, while it is packed: the bits of converting it first).
// Single-threaded: callers split rows / columns over threads, each with its own `pack` of
// bf16_gemm_pack_bytes(ta, N, K) bytes (up to about 4.4 MiB: the packed B block of up to 2048 k by
// 1024 columns, and an A block); `pre` (packed with the same path) saves packing a shared
// operand in every call, and leaves the bits as they are.
template <class AT, class BT>
void bf16_gemm_rows(bool ta, bool tb, int64_t m0, int64_t m1, int64_t N, int64_t K, const AT* A,
                    int64_t lda, const BT* B, int64_t ldb, float* C, int64_t ldc, void* pack,
                    const float* bias = nullptr, const float* add = nullptr,
                    Bf16GemmPath path = Bf16GemmPath::best, const Bf16Prepacked& pre = {});

#define TLALOC_BF16_GEMM_ROWS(AT, BT)                                                             \
  void bf16_gemm_rows<AT, BT>(bool, bool, int64_t, int64_t, int64_t, int64_t, const AT*, int64_t, \
                              const BT*, int64_t, float*, int64_t, void*, const float*,           \
                              const float*, Bf16GemmPath, const Bf16Prepacked&)
extern template TLALOC_BF16_GEMM_ROWS(uint16_t, uint16_t);
extern template TLALOC_BF16_GEMM_ROWS(float, uint16_t);
extern template TLALOC_BF16_GEMM_ROWS(uint16_t, float);
extern template TLALOC_BF16_GEMM_ROWS(float, float);

}  // namespace tlaloc::runtime::host
