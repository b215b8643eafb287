// Internal to composites/attention.cpp: the attention host kernels' GEMM path for finite inputs
// (the common training case), with or without a key mask (a hidden key's score is -inf before
// the softmax, so its weight is 0). Blocks of kQueryBlock query rows take
// each GEMM at once against all their visible keys (OpenBLAS sgemm, single-threaded inside a
// team part): scores [rows, keys], an exact softmax per row (every visible key is in the block's
// scores, so no online rescaling), then probabilities · values. So no [S, T] matrix exists,
// only [kQueryBlock, T] per thread. The backward (FlashAttention-2's equations) recomputes
// p = exp(s - lse) per block and takes dq, dk, dv as GEMMs too; dk / dv accumulate over the
// blocks and query heads in a fixed order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace tlaloc::composites::attention_gemm {

inline constexpr int64_t kQueryBlock = 64;

struct Dims {
  int64_t S = 0, T = 0, D = 0, Dv = 0;  // query rows, keys, head dims of q / k and v
  float scale = 1;
  bool causal = false;
  const uint8_t* mask = nullptr;  // key_mask's row for this batch [T] (0: hidden), or none
  // Every row sees a key (attention_internal.h: no_empty_rows): the plain softmax, whose row of
  // -inf or NaN scores gives NaN out and log-sum-exp (else the guarded one's 0 and -inf).
  bool plain = false;
  // Keys visible to query row i: j < end(i), and mask[j] when there is a mask.
  int64_t end(int64_t i) const;
};

// Floats of per-thread scratch forward / backward need.
int64_t forward_scratch(const Dims& d);
int64_t backward_scratch(const Dims& d);

// One (batch, query head): Q [S, D], K [T, D], V [T, Dv] -> O [S, Dv], L [S] (log-sum-exp;
// a row with no visible key: O 0, L -inf; without plain, a row whose scores are all -inf too).
void forward(const Dims& d, const float* Q, const float* K, const float* V, float* O, float* L,
             float* scratch);

// One query head's part of the backward: adds its dk, dv into dK [T, D], dV [T, Dv] and writes
// dQ [S, D], from Q, K, V, O, L (forward's), dO.
void backward(const Dims& d, const float* Q, const float* K, const float* V, const float* O,
              const float* L, const float* dO, float* dQ, float* dK, float* dV, float* scratch);

// bf16 q, k, v (bit patterns) with f32 results, each GEMM on the bf16 kernel (runtime/host/
// gemm_bf16.h: f32 accumulation), scores and softmax in f32; the GEMMs' f32 operands (p, ds,
// d_out) are rounded to bf16 as they are packed. Finite inputs only: hidden keys are skipped, not
// weighted by 0 (attention.cpp takes inputs with inf / NaN to the f32 kernel's dense paths).
// `pack`: bf16_pack_bytes(d) (the GEMMs' buffer, and K and V packed once per head for the
// blocks' Q Kᵀ and dO Vᵀ).
int64_t bf16_pack_bytes(const Dims& d);
int64_t forward_bf16_scratch(const Dims& d);   // floats
int64_t backward_bf16_scratch(const Dims& d);  // floats
// T: uint16_t (bf16 bit patterns) or float (f32 q, k, v rounded to bf16 as they are packed: the
// bits of converting them first).
template <class T>
void forward_bf16(const Dims& d, const T* Q, const T* K, const T* V, float* O, float* L,
                  float* scratch, void* pack);
// Writes dQ [S, D] (rounded to bf16: store_bf16, at dQ_wide) and adds into the f32
// accumulators dK [T, D], dV [T, Dv].
template <class T>
void backward_bf16(const Dims& d, const T* Q, const T* K, const T* V, const float* O,
                   const float* L, const float* dO, void* dQ, bool dQ_wide, float* dK, float* dV,
                   float* scratch, void* pack);

// src[0:n] rounded to bf16 (nearest even, NaN quieted) into dst[off:off + n]: bf16 bit patterns,
// or with `wide` f32 values (the bf16 widened: a convert of the result to f32 folded in).
void store_bf16(void* dst, bool wide, int64_t off, const float* src, int64_t n);

}  // namespace tlaloc::composites::attention_gemm
