#include "tlaloc/composites/attention_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tlaloc/composites/sum8.h"
#include "tlaloc/ir/scalar.h"
#include "tlaloc/runtime/host/gemm_bf16.h"
#include "tlaloc/runtime/host/kernel.h"
#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::composites::attention_gemm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// p[j] = exp(s[j] - shift) for j < n (a vector loop); returns nothing.
TLALOC_CLONES void exp_shifted(float* p, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j) p[j] = ir::scalar::fexp(p[j] - shift);
}

// ds[j] = p[j] · (dp[j] - delta) · scale, in place over dp.
TLALOC_CLONES void softmax_grad_row(const float* p, float* dp, int64_t n, float delta,
                                    float scale) {
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - delta) * scale;
}

// Row max over s[0:n] (n >= 1), NaN ignored. The select form (not std::max, whose NaN order
// GCC keeps as a scalar loop) vectorizes at full width.
TLALOC_CLONES float row_max(const float* s, int64_t n) {
  float m[16];
  for (int k = 0; k < 16; ++k) m[k] = kNegInf;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) m[k] = s[j + k] > m[k] ? s[j + k] : m[k];
  for (; j < n; ++j) m[0] = s[j] > m[0] ? s[j] : m[0];
  float r = m[0];
  for (int k = 1; k < 16; ++k) r = m[k] > r ? m[k] : r;
  return r;
}

TLALOC_CLONES float row_sum(const float* s, int64_t n) {
  return sum8<float>(n, [&](int64_t j) { return s[j]; });
}

TLALOC_CLONES void scale_row(float* s, int64_t n, float c) {
  for (int64_t j = 0; j < n; ++j) s[j] *= c;
}

// Σ a[j]·b[j] in order (a row's delta = do·o: head_dim terms).
float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

// Scores of keys the mask hides become -inf (none without a mask).
void hide_masked(const Dims& d, float* p, int64_t e) {
  if (d.mask)
    for (int64_t j = 0; j < e; ++j) p[j] = d.mask[j] ? p[j] : kNegInf;
}

// Query rows i0 .. i0 + rows - 1's scores in P [rows, n] (multiplied by `scale` first unless it
// is 1): each row's softmax over its visible keys (the rest 0) and its log-sum-exp into L.
// Guarded (not d.plain), the decomposition's guards: a shift of 0 when the row's max is -inf,
// and log-sum-exp -inf when the sum is not > 0 (no key, or a NaN: the row stays NaN). Plain: a
// max of -inf or a NaN score makes the sum NaN, so the row's p and log-sum-exp are NaN.
void softmax_block(const Dims& d, int64_t i0, int64_t rows, int64_t n, float* P, float* L,
                   float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    float* p = P + r * n;
    const int64_t e = d.end(i0 + r);
    std::fill(p + e, p + n, 0.0f);
    if (e == 0) {
      L[i0 + r] = kNegInf;
      continue;
    }
    if (scale != 1.0f) scale_row(p, e, scale);
    hide_masked(d, p, e);
    const float m = row_max(p, e), shift = d.plain || m > kNegInf ? m : 0.0f;
    exp_shifted(p, e, shift);
    const float l = row_sum(p, e);
    const bool normal = d.plain || l > 0;
    L[i0 + r] = normal ? shift + std::log(l) : kNegInf;
    scale_row(p, e, normal ? 1.0f / l : 1.0f);
  }
}

// The backward's rows i0 .. i0 + rows - 1: from the scores in P [rows, n] (multiplied by `scale`
// first unless it is 1) and dP = dO Vᵀ in dS, p = exp(s - lse) (guarded, a log-sum-exp of
// -inf or NaN counting as 0, the decomposition's where) and ds = p (dp - do·o) · scale in
// place; hidden entries 0 (finite inputs only: a finite log-sum-exp).
void softmax_grad_block(const Dims& d, int64_t i0, int64_t rows, int64_t n, float* P, float* dS,
                        const float* O, const float* L, const float* dO, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r, e = d.end(i);
    float* p = P + r * n;
    float* ds = dS + r * n;
    std::fill(p + e, p + n, 0.0f);
    std::fill(ds + e, ds + n, 0.0f);
    if (e == 0) continue;
    if (scale != 1.0f) scale_row(p, e, scale);
    hide_masked(d, p, e);  // then exp gives them 0
    exp_shifted(p, e, d.plain || L[i] > kNegInf ? L[i] : 0.0f);
    softmax_grad_row(p, ds, e, dot(dO + i * d.Dv, O + i * d.Dv, d.Dv), d.scale);
  }
}

}  // namespace

int64_t Dims::end(int64_t i) const { return causal ? std::clamp<int64_t>(i + T - S + 1, 0, T) : T; }

int64_t forward_scratch(const Dims& d) { return kQueryBlock * d.T; }
int64_t backward_scratch(const Dims& d) { return 2 * kQueryBlock * d.T; }

void forward(const Dims& d, const float* Q, const float* K, const float* V, float* O, float* L,
             float* P) {
  for (int64_t i0 = 0; i0 < d.S; i0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, d.S - i0), n = d.end(i0 + rows - 1);
    if (n == 0) {  // no row of the block sees a key (causal with S > T)
      std::fill(O + i0 * d.Dv, O + (i0 + rows) * d.Dv, 0.0f);
      std::fill(L + i0, L + i0 + rows, kNegInf);
      continue;
    }
    // P = scale · Q Kᵀ over the keys any row of the block sees, then each row's softmax over
    // its own keys (the rest 0).
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(n), int(d.D), d.scale,
                Q + i0 * d.D, int(d.D), K, int(d.D), 0.0f, P, int(n));
    softmax_block(d, i0, rows, n, P, L, 1.0f);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(d.Dv), int(n), 1.0f, P,
                int(n), V, int(d.Dv), 0.0f, O + i0 * d.Dv, int(d.Dv));
  }
}

void backward(const Dims& d, const float* Q, const float* K, const float* V, const float* O,
              const float* L, const float* dO, float* dQ, float* dK, float* dV, float* scratch) {
  float* P = scratch;
  float* dS = scratch + kQueryBlock * d.T;
  for (int64_t i0 = 0; i0 < d.S; i0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, d.S - i0), n = d.end(i0 + rows - 1);
    if (n == 0) {
      std::fill(dQ + i0 * d.D, dQ + (i0 + rows) * d.D, 0.0f);
      continue;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(n), int(d.D), d.scale,
                Q + i0 * d.D, int(d.D), K, int(d.D), 0.0f, P, int(n));
    // dP = dO Vᵀ
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(n), int(d.Dv), 1.0f,
                dO + i0 * d.Dv, int(d.Dv), V, int(d.Dv), 0.0f, dS, int(n));
    softmax_grad_block(d, i0, rows, n, P, dS, O, L, dO, 1.0f);
    // dQ = dS K; dK += dSᵀ Q; dV += Pᵀ dO
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(d.D), int(n), 1.0f, dS,
                int(n), K, int(d.D), 0.0f, dQ + i0 * d.D, int(d.D));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(n), int(d.D), int(rows), 1.0f, dS,
                int(n), Q + i0 * d.D, int(d.D), 1.0f, dK, int(d.D));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(n), int(d.Dv), int(rows), 1.0f, P,
                int(n), dO + i0 * d.Dv, int(d.Dv), 1.0f, dV, int(d.Dv));
  }
}

namespace {

using runtime::host::bf16_gemm_rows;

// C [rows, N] (ldc) = op(A) op(B) on the bf16 kernel.
template <class AT, class BT>
void gemm16(bool ta, bool tb, int64_t rows, int64_t N, int64_t K, const AT* A, int64_t lda,
            const BT* B, int64_t ldb, float* C, int64_t ldc, void* pack,
            const void* packed_b = nullptr) {
  bf16_gemm_rows(ta, tb, 0, rows, N, K, A, lda, B, ldb, C, ldc, pack, nullptr, nullptr,
                 runtime::host::Bf16GemmPath::best, {nullptr, packed_b});
}

// C [rows, N] (dense) += op(A) B through `tmp` (the GEMM's add operand may not alias C).
template <class AT, class BT>
void gemm16_add(int64_t rows, int64_t N, int64_t K, const AT* A, int64_t lda, const BT* B, float* C,
                float* tmp, void* pack) {
  bf16_gemm_rows(true, false, 0, rows, N, K, A, lda, B, N, tmp, N, pack);
  for (int64_t i = 0; i < rows * N; ++i) C[i] += tmp[i];
}

// The GEMMs' pack buffer, then K and V pre-packed as Q Kᵀ's and dO Vᵀ's right operand (keys as
// columns), once for every query block.
int64_t gemm_pack_bytes(const Dims& d) {
  using runtime::host::bf16_gemm_pack_bytes;
  const int64_t w = std::max({d.T, d.D, d.Dv});
  return std::max({bf16_gemm_pack_bytes(false, w, w), bf16_gemm_pack_bytes(true, w, kQueryBlock)});
}
struct Packs {
  void* gemm;
  char *k, *v;
};
Packs packs(const Dims& d, void* pack) {
  using runtime::host::bf16_gemm_prepacked_bytes;
  auto align = [](uintptr_t p) { return reinterpret_cast<char*>((p + 63) & ~uintptr_t(63)); };
  char* k = align(reinterpret_cast<uintptr_t>(pack) + uintptr_t(gemm_pack_bytes(d)));
  char* v = align(reinterpret_cast<uintptr_t>(k) + uintptr_t(bf16_gemm_prepacked_bytes(d.T, d.D)));
  return {pack, k, v};
}

}  // namespace

int64_t bf16_pack_bytes(const Dims& d) {
  using runtime::host::bf16_gemm_prepacked_bytes;
  return gemm_pack_bytes(d) + bf16_gemm_prepacked_bytes(d.T, d.D) +
         bf16_gemm_prepacked_bytes(d.T, d.Dv) + 128;  // + 128: room to align k and v to 64 bytes
}
int64_t forward_bf16_scratch(const Dims& d) { return kQueryBlock * d.T; }
int64_t backward_bf16_scratch(const Dims& d) {
  return 2 * kQueryBlock * d.T + kQueryBlock * d.D + d.T * std::max(d.D, d.Dv);
}

template <class T>
void forward_bf16(const Dims& d, const T* Q, const T* K, const T* V, float* O, float* L, float* P,
                  void* pack) {
  const Packs pk = packs(d, pack);
  runtime::host::bf16_gemm_prepack(false, true, d.D, K, d.D, pk.k, 0, d.T);
  for (int64_t i0 = 0; i0 < d.S; i0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, d.S - i0), n = d.end(i0 + rows - 1);
    if (n == 0) {
      std::fill(O + i0 * d.Dv, O + (i0 + rows) * d.Dv, 0.0f);
      std::fill(L + i0, L + i0 + rows, kNegInf);
      continue;
    }
    gemm16(false, true, rows, n, d.D, Q + i0 * d.D, d.D, K, d.D, P, n, pk.gemm, pk.k);
    softmax_block(d, i0, rows, n, P, L, d.scale);
    gemm16(false, false, rows, d.Dv, n, P, n, V, d.Dv, O + i0 * d.Dv, d.Dv, pk.gemm);
  }
}

void store_bf16(void* dst, bool wide, int64_t off, const float* src, int64_t n) {
  runtime::host::round_to_bf16(
      src,
      wide ? static_cast<void*>(static_cast<float*>(dst) + off) : static_cast<uint16_t*>(dst) + off,
      wide, n);
}

template <class T>
void backward_bf16(const Dims& d, const T* Q, const T* K, const T* V, const float* O,
                   const float* L, const float* dO, void* dQ, bool dQ_wide, float* dK, float* dV,
                   float* scratch, void* pack) {
  float* P = scratch;
  float* dS = P + kQueryBlock * d.T;
  float* dq = dS + kQueryBlock * d.T;
  float* tmp = dq + kQueryBlock * d.D;
  const Packs pk = packs(d, pack);
  runtime::host::bf16_gemm_prepack(false, true, d.D, K, d.D, pk.k, 0, d.T);
  runtime::host::bf16_gemm_prepack(false, true, d.Dv, V, d.Dv, pk.v, 0, d.T);
  for (int64_t i0 = 0; i0 < d.S; i0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, d.S - i0), n = d.end(i0 + rows - 1);
    if (n == 0) {
      std::fill(dq, dq + rows * d.D, 0.0f);
      store_bf16(dQ, dQ_wide, i0 * d.D, dq, rows * d.D);
      continue;
    }
    gemm16(false, true, rows, n, d.D, Q + i0 * d.D, d.D, K, d.D, P, n, pk.gemm, pk.k);
    gemm16(false, true, rows, n, d.Dv, dO + i0 * d.Dv, d.Dv, V, d.Dv, dS, n, pk.gemm, pk.v);  // dP
    softmax_grad_block(d, i0, rows, n, P, dS, O, L, dO, d.scale);
    // dQ = dS K (rounded to bf16); dK += dSᵀ Q; dV += Pᵀ dO
    gemm16(false, false, rows, d.D, n, dS, n, K, d.D, dq, d.D, pk.gemm);
    store_bf16(dQ, dQ_wide, i0 * d.D, dq, rows * d.D);
    gemm16_add(n, d.D, rows, dS, n, Q + i0 * d.D, dK, tmp, pk.gemm);
    gemm16_add(n, d.Dv, rows, P, n, dO + i0 * d.Dv, dV, tmp, pk.gemm);
  }
}

template void forward_bf16(const Dims&, const uint16_t*, const uint16_t*, const uint16_t*, float*,
                           float*, float*, void*);
template void forward_bf16(const Dims&, const float*, const float*, const float*, float*, float*,
                           float*, void*);
template void backward_bf16(const Dims&, const uint16_t*, const uint16_t*, const uint16_t*,
                            const float*, const float*, const float*, void*, bool, float*, float*,
                            float*, void*);
template void backward_bf16(const Dims&, const float*, const float*, const float*, const float*,
                            const float*, const float*, void*, bool, float*, float*, float*, void*);

}  // namespace tlaloc::composites::attention_gemm
