// Internal: constructors of the compute kernels (reduce, dot_general). `id` is the node's value.
#pragma once

#include "tlaloc/ir/ir.h"
#include "tlaloc/runtime/host/kernel.h"

// Composite kernels' row / task loops compiled for the baseline ISA, AVX2 and AVX-512, picked
// when the process starts (GCC target_clones). None uses FMA (avx512f does not imply it) and
// their sums' order is written out, so every clone gives the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TLALOC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TLALOC_CLONES
#endif

namespace tlaloc::runtime::host {

std::unique_ptr<Kernel> make_reduce(const ir::Function& f, int32_t id);
// reduce_window and select_and_scatter (window.cpp): parts over fixed chunks of the outer
// dimensions, so results do not depend on the thread count.
std::unique_ptr<Kernel> make_window(const ir::Function& f, int32_t id);
// all_reduce and all_gather (collective.cpp): over distributed::world() on the calling thread;
// a copy for replica groups of one replica, a tlaloc::Error when the run's groups do not match
// the process group (distributed/collective.h).
std::unique_ptr<Kernel> make_collective(const ir::Function& f, int32_t id);

// Reductions run in fixed chunks of kReduceChunk elements with kReduceLanes interleaved lanes
// each; chunk partials are combined in order. FusedReduce exposes that arithmetic to fused
// elementwise loops (full reductions), bitwise equal to make_reduce's kernel.
inline constexpr int64_t kReduceChunk = 8192;
inline constexpr int kReduceLanes = 16;
struct FusedReduce {
  ir::ReduceKind kind = ir::ReduceKind::sum;
  DType dtype = DType::f32;     // of the reduced value (lanes hold its compute type)
  int32_t out = -1, slot = -1;  // result value; register accumulated each block
  void (*reset)(void* lanes) = nullptr;
  void (*accumulate)(void* lanes, const void* x, int64_t len) = nullptr;
  void (*finish_chunk)(void* lanes, void* partials, int64_t chunk) = nullptr;
  void (*store)(const void* partials, int64_t nchunks, void* out) = nullptr;
};
FusedReduce fused_reduce(ir::ReduceKind kind, DType dtype);
// dot_general: small f32 GEMMs through sgemm_rows, others OpenBLAS sgemm / dgemm; bf16 / f16
// convert to f32, an f32 GEMM, round back.
// The values node `id`'s kernel reads: its operands, except that an operand convert(x) from f32
// to bf16 of a bf16 dot is read as x, rounded to bf16 as the GEMM packs it (the bits of the
// convert; the convert is then not computed for the dot), and so are bf16 attention's (and its
// gradient's) q, k, v when all three are such converts. Not a convert of a cross-entropy
// gradient (or of a reshape of one): its kernel writes the bf16 itself. Other nodes: their
// operands.
std::vector<ir::ValueId> kernel_operands(const ir::Function& f, int32_t id);
// src[0:n] rounded to bf16 (to_bf16's bits: nearest even, NaN quieted) into dst[0:n]: bf16 bit
// patterns, or with `wide` the f32 values of those bf16 (dst may be src then). Vectorized.
void round_to_bf16(const float* src, void* dst, bool wide, int64_t n);
std::unique_ptr<Kernel> make_dot(const ir::Function& f, int32_t id, int num_threads);
// f32 C[m0:m1, 0:N] = op(A) op(B), + bias[0:N] on every row when bias is not null, then +
// add[i * ldc + j] when add is not null: A [M, K] (lda), or [K, M] when ta; B [K, N] (ldb), or
// [N, K] when tb; C (and add) row-major (ldc). Every element is one fused multiply-add per k in
// k order from zero, then one add per addend, so its bits do not depend on how rows are split
// over calls. `pack`: scratch of
// sgemm_rows_pack_floats(ta, N, K) floats (any alignment). AVX2 + FMA only: callers check
// sgemm_rows_available().
bool sgemm_rows_available();
// A GEMM with K = 0: C[m0:m1, 0:N] = +0, + bias[j], + add[i * ldc + j] (each when not null).
void empty_gemm_rows(int64_t m0, int64_t m1, int64_t N, float* C, int64_t ldc, const float* bias,
                     const float* add);
int64_t sgemm_rows_pack_floats(bool ta, int64_t N, int64_t K);
void sgemm_rows(bool ta, bool tb, int64_t m0, int64_t m1, int64_t N, int64_t K, const float* A,
                int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, float* pack,
                const float* bias = nullptr, const float* add = nullptr);
// Makes dot kernel k (make_dot) add value v to its f32 / f64 result as it computes each tile:
// `row`: v is [N], added to every row (a bias); else v has the result's type (a residual or
// another product), added elementwise after any bias. One IEEE add per element each, as a
// separate add would (the same bits), but while the tile is in cache. Returns false, k
// unchanged, for another kernel, a bf16 / f16 dot, or an addend of that kind already there (or
// a bias after a matrix addend: the adds' order would change).
bool dot_add_epilogue(Kernel& k, int32_t v, bool row);
// Makes a oneDNN forward convolution kernel (conv_dnnl.cpp, NCHW f32) add v, an f32 [O]
// per-channel bias, to its output as each batch chunk is written (one IEEE add per element, as
// the separate add: the same bits). Returns false, k unchanged, for any other kernel or a
// second bias.
bool conv_add_epilogue(Kernel& k, int32_t v);
// convolution (conv.cpp): every convolution as GEMMs over im2col tiles, tiles and K chunks
// fixed by the shapes (bits independent of the thread count); f32 through OpenBLAS / sgemm_rows,
// f64 dgemm, bf16 / f16 in f32.
std::unique_ptr<Kernel> make_conv(const ir::Function& f, int32_t id, int num_threads);
// The host kernel of composite node `id` (its record's, ir/composite.h). Throws
// tlaloc::Error naming the op when it has none for this node: compile() expands those first
// (expand_for_host).
std::unique_ptr<Kernel> make_composite(const ir::Function& f, int32_t id, int num_threads);
// f with every composite that has no host kernel for its instance replaced by its
// decomposition (the host lane then runs the plain ops).
ir::Function expand_for_host(const ir::Function& f);

}  // namespace tlaloc::runtime::host
