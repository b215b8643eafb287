// tlaloc.attention and tlaloc.attention_grad: scaled dot-product attention (FlashAttention, Dao
// et al. 2022) and its VJP (FlashAttention-2's backward, Dao 2023).
//
// attention (q [B,Hq,S,D], k [B,Hkv,T,D], v [B,Hkv,T,Dv], key_mask i1 [B,T]?)
//     {scale, causal} -> (out [B,Hq,S,Dv], lse [B,Hq,S])
//   f32, f64 or bf16; Hq a multiple of Hkv: query head h reads kv head h / (Hq / Hkv). Visible:
//   key j for query i when key_mask[b, j] and, with causal, j <= i + T - S. Its decomposition is
//   the masked softmax: s = scale·q·kᵀ, hidden entries -inf; m = max s; e = exp(s - m); l = Σe;
//   out = e·v / l; lse = m + log l. Where a row can see no key (a key mask, causal with S > T,
//   or T = 0) it is guarded: m is 0 where it is -inf, and where l = 0 out is 0 and lse -inf.
//   Otherwise it is the plain softmax as JAX and PyTorch write it (no select for empty rows): a
//   row whose visible scores are all -inf or hold a NaN or +inf gives NaN out and lse.
//   bf16 q, k, v (mixed precision, as torch.autocast's bf16 attention): out and lse are f32, the
//   dots accumulate in f32 (preferred_element_type), softmax is f32, and the probabilities
//   e / l are rounded to bf16 before the dot with v.
// attention_grad (q, k, v, out, lse, d_out, key_mask?) {scale, causal} -> (dq, dk, dv)
//   recomputes p = exp(s - lse) (guarded: an lse of -inf or NaN taken as 0) and dv = pᵀ·do,
//   dp = do·vᵀ, ds = p ∘ (dp - rowsum(do ∘ out)), dq = scale·ds·k, dk = scale·dsᵀ·q, summed
//   over the query heads that share a kv head. bf16 q, k, v (out, lse, d_out f32): p, d_out and
//   scale·ds rounded to bf16 for the dots, f32 accumulation, dq, dk, dv rounded to bf16 at the
//   end. Its own VJP (second derivatives) is its decomposition's.
// Host kernels: finite inputs take the GEMM path (attention_gemm.h: blocks of query rows, each
// GEMM at once, a key mask hiding scores); otherwise per (batch, query head, query row) an online
// softmax over tiles of kTile keys (a running max m, sum l and output accumulator, rescaled by
// exp(m_old - m_new) when the max grows), so no [S, T] score matrix exists; the backward per
// (batch, kv head) recomputes a query row's scores and p = exp(s - lse) from the saved
// log-sum-exp and accumulates dq, dk, dv. A task owns its kv head's dk / dv rows, so work splits
// over threads without races and the sums run in a fixed order (bitwise reproducible for any
// thread count). bf16: the GEMM path on the bf16 GEMM; with an inf or NaN, the f32 kernel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tlaloc/autodiff/rules.h"
#include "tlaloc/composites/attention_gemm.h"
#include "tlaloc/composites/attention_internal.h"
#include "tlaloc/composites/attention_rows.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/ir/scalar.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"
#include "tlaloc/trace/autocast.h"

namespace tlaloc::composites {
namespace {

using attention_detail::any_non_finite;
using attention_detail::dotp;
using attention_detail::kCausal;
using attention_detail::kScale;
using ir::Op;
using ir::TensorType;
using ir::ValueId;

// ---- type rule ----------------------------------------------------------------------------

struct Dims {
  int64_t B, Hq, S, D, Hkv, T, Dv, G;
};

// q, k, v, then (grad) out, lse, d_out, then an optional key mask i1 [B, T].
Dims check(std::span<const TensorType> in, const ir::Attrs& a, bool grad) {
  const size_t base = grad ? 6 : 3;
  for (size_t i = 0; i < 3; ++i)
    if (in[i].shape.rank() != 4) fail("operand {} must have rank 4", i);
  const DType t = in[0].dtype;
  if (t != DType::f32 && t != DType::f64 && t != DType::bf16)
    fail("needs f32, f64 or bf16, got {}", name(t));
  for (size_t i = 1; i < 3; ++i)
    if (in[i].dtype != t) fail("operand {} dtype differs from q's", i);
  const DType rt = t == DType::bf16 ? DType::f32 : t;  // out, lse, d_out
  for (size_t i = 3; i < base; ++i)
    if (in[i].dtype != rt) fail("operand {} must be {} for {} q, k, v", i, name(rt), name(t));
  const Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  Dims d{q[0], q[1], q[2], q[3], k[1], k[2], v[3], 0};
  if (k[0] != d.B || v[0] != d.B) fail("batch sizes of q, k, v differ");
  if (k[3] != d.D) fail("k head size {} differs from q's {}", k[3], d.D);
  if (v[1] != d.Hkv || v[2] != d.T) fail("v heads/length differ from k's");
  if (d.Hkv < 1 || d.Hq % d.Hkv != 0) fail("q heads {} not a multiple of kv heads {}", d.Hq, d.Hkv);
  d.G = d.Hq / d.Hkv;
  if (!std::isfinite(a.params[kScale])) fail("scale {} is not finite", a.params[kScale]);
  if (a.params[kCausal] != 0 && a.params[kCausal] != 1)
    fail("causal {} must be 0 or 1", a.params[kCausal]);
  if (grad) {
    const TensorType ot{rt, Shape{d.B, d.Hq, d.S, d.Dv}}, lt{rt, Shape{d.B, d.Hq, d.S}};
    if (in[3] != ot || in[5] != ot) fail("out and d_out must be {}", to_string(ot));
    if (in[4] != lt) fail("lse must be {}", to_string(lt));
  }
  if (in.size() == base + 1 && in[base] != TensorType{DType::i1, Shape{d.B, d.T}})
    fail("key mask must be i1[{},{}]", d.B, d.T);
  return d;
}

std::vector<TensorType> infer(std::span<const TensorType> in, const ir::Attrs& a) {
  const Dims d = check(in, a, false);
  const DType t = in[0].dtype == DType::bf16 ? DType::f32 : in[0].dtype;
  return {{t, Shape{d.B, d.Hq, d.S, d.Dv}}, {t, Shape{d.B, d.Hq, d.S}}};
}

std::vector<TensorType> infer_grad(std::span<const TensorType> in, const ir::Attrs& a) {
  check(in, a, true);
  return {in[0], in[1], in[2]};
}

// ---- VJP ----------------------------------------------------------------------------------

// The attention_grad composite, reading the forward's output and log-sum-exp; a cotangent on
// the log-sum-exp itself (rare: a loss that reads it) goes through the decomposition.
std::vector<ValueId> vjp(const autodiff::detail::RuleCtx& c) {
  if (c.cts[1] >= 0 || c.cts[0] < 0) return autodiff::detail::vjp_by_decomposition(c);
  const ir::Node& n = c.n;
  std::vector<ValueId> ops{c.operand(0), c.operand(1), c.operand(2),
                           c.outs[0],    c.outs[1],    c.cts[0]};
  if (n.operands.size() == 4) ops.push_back(c.operand(3));
  std::vector<ValueId> g = c.b.composite(Op::attention_grad, ops, n.attrs.params);
  std::vector<ValueId> out(n.operands.size(), -1);
  for (size_t i = 0; i < 3; ++i)
    if (c.need[i]) out[i] = g[i];
  return out;
}

// ---- host kernels ---------------------------------------------------------------------------

using runtime::host::Frame;
using runtime::host::Kernel;

constexpr int64_t kTile = 32;  // keys per online-softmax tile

struct AttentionKernel : Kernel {
  int32_t q = -1, k = -1, v = -1, out = -1, lse = -1, dout = -1, mask = -1;
  int32_t r0 = -1, r1 = -1, r2 = -1;  // results: (out, lse) or (dq, dk, dv)
  int64_t B = 0, Hq = 0, S = 0, D = 0, Hkv = 0, T = 0, Dv = 0, G = 0;
  double scale = 1;
  bool causal = false, grad = false, parallel = false;
  bool plain = false;    // every row sees a key: the plain softmax (attention_internal.h)
  bool f32_qkv = false;  // bf16 kernel: q, k, v read as f32 (converts folded), rounded as packed
  bool wide[3] = {};     // bf16 gradient: result i written as its f32 convert (write_converted)

  // Keys visible to query row i are j < end(i) with mask[j] set.
  int64_t end(int64_t i) const { return causal ? std::clamp<int64_t>(i + T - S + 1, 0, T) : T; }
};

template <class F>
const F* in(const Frame& fr, int32_t v) {
  return static_cast<const F*>(fr.ptr[v]);
}

// M: the key mask's row of the task's batch, or null.
attention_gemm::Dims gemm_dims(const AttentionKernel& a, const uint8_t* M = nullptr) {
  return {.S = a.S,
          .T = a.T,
          .D = a.D,
          .Dv = a.Dv,
          .scale = float(a.scale),
          .causal = a.causal,
          .mask = M,
          .plain = a.plain};
}

// Key j hidden from query row i (masked, or after it with causal).
inline bool hidden(const AttentionKernel& a, const uint8_t* M, int64_t i, int64_t j) {
  return j >= a.end(i) || (M && !M[j]);
}

template <class F>
__attribute__((always_inline)) inline void forward_task(const AttentionKernel& a, const Frame& fr,
                                                        int64_t bh, F* acc) {
  const int64_t b = bh / a.Hq, h = bh % a.Hq, kvh = h / a.G;
  const F* Q = in<F>(fr, a.q) + (b * a.Hq + h) * a.S * a.D;
  const F* K = in<F>(fr, a.k) + (b * a.Hkv + kvh) * a.T * a.D;
  const F* V = in<F>(fr, a.v) + (b * a.Hkv + kvh) * a.T * a.Dv;
  const uint8_t* M = a.mask >= 0 ? static_cast<const uint8_t*>(fr.ptr[a.mask]) + b * a.T : nullptr;
  F* O = static_cast<F*>(fr.ptr[a.r0]) + (b * a.Hq + h) * a.S * a.Dv;
  F* L = static_cast<F*>(fr.ptr[a.r1]) + (b * a.Hq + h) * a.S;
  const F scale = F(a.scale), ninf = -INFINITY;
  // The decomposition multiplies every value row by its weight, 0 for a hidden key: an inf or
  // NaN there makes that output column NaN (as PyTorch's and JAX's reference attention do).
  std::vector<int64_t> bad;
  if (any_non_finite(V, a.T * a.Dv))
    for (int64_t j = 0; j < a.T; ++j)
      if (any_non_finite(V + j * a.Dv, a.Dv)) bad.push_back(j);
  if constexpr (std::is_same_v<F, float>) {
    if (bad.empty() && !any_non_finite(Q, a.S * a.D) && !any_non_finite(K, a.T * a.D)) {
      attention_gemm::forward(gemm_dims(a, M), Q, K, V, O, L, acc);
      return;
    }
  }
  F s[kTile];
  for (int64_t i = 0; i < a.S; ++i) {
    const F* qi = Q + i * a.D;
    F m = ninf, l = 0;
    bool nan_score = false;  // the decomposition's max is then NaN: the whole row is NaN
    std::fill(acc, acc + a.Dv, F(0));
    const int64_t jend = a.end(i);
    for (int64_t j0 = 0; j0 < jend; j0 += kTile) {
      const int64_t n = std::min(kTile, jend - j0);
      F tmax = ninf;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t j = j0 + t;
        s[t] = (M && !M[j]) ? ninf : scale * dotp(qi, K + j * a.D, a.D);
        nan_score |= s[t] != s[t];
        tmax = std::max(tmax, s[t]);
      }
      if (tmax == ninf) continue;
      if (tmax > m) {
        const F c = m == ninf ? F(0) : std::exp(m - tmax);
        l *= c;
        for (int64_t d = 0; d < a.Dv; ++d) acc[d] *= c;
        m = tmax;
      }
      for (int64_t t = 0; t < n; ++t) {
        if (s[t] == ninf) continue;
        const F p = std::exp(s[t] - m);
        l += p;
        const F* vj = V + (j0 + t) * a.Dv;
        for (int64_t d = 0; d < a.Dv; ++d) acc[d] += p * vj[d];
      }
    }
    F* oi = O + i * a.Dv;
    if (l > 0) {
      const F inv = F(1) / l;
      for (int64_t d = 0; d < a.Dv; ++d) oi[d] = acc[d] * inv;
      L[i] = m + std::log(l);
    } else {  // no visible key (acc is 0), or a NaN / inf score made l NaN (acc is NaN)
      std::copy(acc, acc + a.Dv, oi);
      L[i] = ninf;
    }
    for (int64_t j : bad)
      if (hidden(a, M, i, j))
        for (int64_t d = 0; d < a.Dv; ++d)
          if (!std::isfinite(V[j * a.Dv + d])) oi[d] = F(NAN);
    // A NaN score: guarded, max NaN and l NaN, so every column NaN and log-sum-exp -inf.
    // Plain, a NaN score or a max of -inf (l NaN) makes the row and its log-sum-exp NaN.
    if (nan_score || (a.plain && !(l > 0))) {
      std::fill(oi, oi + a.Dv, F(NAN));
      L[i] = a.plain ? F(NAN) : ninf;
    }
  }
}

template <class F>
__attribute__((always_inline)) inline void backward_task(const AttentionKernel& a, const Frame& fr,
                                                         int64_t bk, F* p) {
  const int64_t b = bk / a.Hkv, kvh = bk % a.Hkv;
  const F* K = in<F>(fr, a.k) + (b * a.Hkv + kvh) * a.T * a.D;
  const F* V = in<F>(fr, a.v) + (b * a.Hkv + kvh) * a.T * a.Dv;
  const uint8_t* M = a.mask >= 0 ? static_cast<const uint8_t*>(fr.ptr[a.mask]) + b * a.T : nullptr;
  F* dK = static_cast<F*>(fr.ptr[a.r1]) + (b * a.Hkv + kvh) * a.T * a.D;
  F* dV = static_cast<F*>(fr.ptr[a.r2]) + (b * a.Hkv + kvh) * a.T * a.Dv;
  std::fill(dK, dK + a.T * a.D, F(0));
  std::fill(dV, dV + a.T * a.Dv, F(0));
  const F scale = F(a.scale), ninf = -INFINITY;
  // With an inf or NaN among the task's inputs, hidden keys take part with weight 0, as in the
  // decomposition (0 times it is NaN there); otherwise they change nothing and are skipped.
  bool dense = any_non_finite(K, a.T * a.D) || any_non_finite(V, a.T * a.Dv);
  for (int64_t g = 0; g < a.G && !dense; ++g) {
    const int64_t at = (b * a.Hq + kvh * a.G + g) * a.S;
    dense = any_non_finite(in<F>(fr, a.q) + at * a.D, a.S * a.D) ||
            any_non_finite(in<F>(fr, a.out) + at * a.Dv, a.S * a.Dv) ||
            any_non_finite(in<F>(fr, a.dout) + at * a.Dv, a.S * a.Dv) ||
            any_non_finite(in<F>(fr, a.lse) + at, a.S);
  }
  for (int64_t g = 0; g < a.G; ++g) {
    const int64_t h = kvh * a.G + g;
    const F* Q = in<F>(fr, a.q) + (b * a.Hq + h) * a.S * a.D;
    const F* O = in<F>(fr, a.out) + (b * a.Hq + h) * a.S * a.Dv;
    const F* Lse = in<F>(fr, a.lse) + (b * a.Hq + h) * a.S;
    const F* dO = in<F>(fr, a.dout) + (b * a.Hq + h) * a.S * a.Dv;
    F* dQ = static_cast<F*>(fr.ptr[a.r0]) + (b * a.Hq + h) * a.S * a.D;
    if constexpr (std::is_same_v<F, float>) {
      if (!dense) {
        attention_gemm::backward(gemm_dims(a, M), Q, K, V, O, Lse, dO, dQ, dK, dV, p);
        continue;
      }
    }
    std::fill(dQ, dQ + a.S * a.D, F(0));
    for (int64_t i = 0; i < a.S; ++i) {
      const F* qi = Q + i * a.D;
      const F* oi = O + i * a.Dv;
      const F* doi = dO + i * a.Dv;
      // Guarded, a row with no visible key (lse -inf; NaN taken alike, as the decomposition's
      // where(lse > -inf) does) has p = exp(s - 0) on hidden keys only, so 0 everywhere. Plain:
      // p = exp(s - lse) as it comes (NaN for every key with a NaN or -inf lse).
      const bool none = !a.plain && !(Lse[i] > ninf);
      const F lse = none ? F(0) : Lse[i];
      if (none && !dense) continue;
      const F delta = dotp(doi, oi, a.Dv);
      F* dqi = dQ + i * a.D;
      const int64_t vend = a.end(i), jend = dense ? a.T : vend;
      for (int64_t j = 0; j < jend; ++j) p[j] = scale * dotp(qi, K + j * a.D, a.D) - lse;
      for (int64_t j = 0; j < jend; ++j) p[j] = ir::scalar::fexp(p[j]);  // a vector loop
      for (int64_t j = 0; j < jend; ++j) {
        if (j >= vend || (M && !M[j])) {  // hidden: s = -inf
          if (!dense) continue;
          p[j] = a.plain ? ir::scalar::fexp(ninf - lse) : F(0);
        }
        const F* kj = K + j * a.D;
        const F* vj = V + j * a.Dv;
        F* dvj = dV + j * a.Dv;
        for (int64_t d = 0; d < a.Dv; ++d) dvj[d] += p[j] * doi[d];
        const F ds = scale * p[j] * (dotp(doi, vj, a.Dv) - delta);
        F* dkj = dK + j * a.D;
        for (int64_t d = 0; d < a.D; ++d) {
          dqi[d] += ds * kj[d];
          dkj[d] += ds * qi[d];
        }
      }
    }
  }
}

// The tasks as TLALOC_CLONES (runtime/host/kernels.h): AVX2 halves the vector loops over head
// dims.
template <class F>
TLALOC_CLONES void tasks(const AttentionKernel& a, const Frame& fr, int64_t t0, int64_t t1,
                         F* acc) {
  for (int64_t t = t0; t < t1; ++t) {
    if (a.grad)
      backward_task<F>(a, fr, t, acc);
    else
      forward_task<F>(a, fr, t, acc);
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& a = runtime::host::as<AttentionKernel>(kk);
  const int64_t n = a.grad ? a.B * a.Hkv : a.B * a.Hq;
  const int nt =
      a.parallel ? int(std::min<int64_t>(fr.num_threads * runtime::host::kPartsPerThread, n)) : 1;
  runtime::host::parallel(nt, [&](int p, int P) {
    // forward: an output row; backward: p; or the GEMM path's blocks
    const attention_gemm::Dims d = gemm_dims(a);
    std::vector<F> acc(
        size_t(std::max(a.grad ? a.T : a.Dv, a.grad ? attention_gemm::backward_scratch(d)
                                                    : attention_gemm::forward_scratch(d))));
    tasks<F>(a, fr, n * p / P, n * (p + 1) / P, acc.data());
  });
}

// Whether an inf or NaN is among the bf16 kernel's inputs: q, k, v (bf16) and, for the
// gradient, out, lse and d_out (f32).
bool bf16_inputs_non_finite(const AttentionKernel& a, const Frame& fr) {
  const int64_t nq = a.B * a.Hq * a.S, nkv = a.B * a.Hkv * a.T;
  auto bad = [&](int32_t v, int64_t n) {
    return a.f32_qkv ? any_non_finite(in<float>(fr, v), n, true)
                     : any_non_finite(in<uint16_t>(fr, v), n);
  };
  if (bad(a.q, nq * a.D) || bad(a.k, nkv * a.D) || bad(a.v, nkv * a.Dv)) return true;
  return a.grad && (any_non_finite(in<float>(fr, a.out), nq * a.Dv) ||
                    any_non_finite(in<float>(fr, a.lse), nq) ||
                    any_non_finite(in<float>(fr, a.dout), nq * a.Dv));
}

// bf16 inputs holding an inf or NaN: the f32 kernel on f32 copies of q, k, v (exact), whose dense
// paths give hidden keys weight 0 as the decomposition does (0 · inf is NaN there too); dq, dk,
// dv rounded to bf16 after. Its finite values skip the bf16 roundings of p, d_out and ds (a step
// with such inputs is one found-inf skips; what matters is where NaN and inf appear).
void run_bf16_dense(const AttentionKernel& a, const Frame& fr) {
  int32_t top = 0;
  for (int32_t v : {a.q, a.k, a.v, a.out, a.lse, a.dout, a.mask, a.r0, a.r1, a.r2})
    top = std::max(top, v);
  std::vector<void*> ptr(fr.ptr, fr.ptr + top + 1);
  const int64_t nq = a.B * a.Hq * a.S * a.D, nk = a.B * a.Hkv * a.T * a.D,
                nv = a.B * a.Hkv * a.T * a.Dv;
  std::vector<float> q(static_cast<size_t>(nq)), k(static_cast<size_t>(nk)),
      v(static_cast<size_t>(nv));
  auto widen = [&](int32_t id, std::vector<float>& to) {  // the bf16 values, exactly
    const auto* x = static_cast<const uint16_t*>(fr.ptr[id]);
    const auto* xf = static_cast<const float*>(fr.ptr[id]);
    for (size_t i = 0; i < to.size(); ++i)
      to[i] = bf16_to_f32(a.f32_qkv ? runtime::host::to_bf16(xf[i]) : x[i]);
    ptr[size_t(id)] = to.data();
  };
  widen(a.q, q);
  widen(a.k, k);
  widen(a.v, v);
  std::vector<float> dq, dk, dv;
  if (a.grad) {
    for (auto [id, g, n] : {std::tuple{a.r0, &dq, nq}, {a.r1, &dk, nk}, {a.r2, &dv, nv}}) {
      g->resize(size_t(n));
      ptr[size_t(id)] = g->data();
    }
  }
  run<float>(a, Frame{ptr.data(), fr.scratch, fr.num_threads});
  if (a.grad)
    for (auto [i, id, g] : {std::tuple{0, a.r0, &dq}, {1, a.r1, &dk}, {2, a.r2, &dv}})
      attention_gemm::store_bf16(fr.ptr[id], a.wide[i], 0, g->data(), int64_t(g->size()));
}

// Bytes of Frame::scratch each thread of run_bf16 takes: its f32 buffers (the backward's dk / dv
// accumulators first), then the GEMM's pack buffer.
int64_t bf16_floats(const AttentionKernel& a) {
  const attention_gemm::Dims d = gemm_dims(a);
  return a.grad ? a.T * (a.D + a.Dv) + attention_gemm::backward_bf16_scratch(d)
                : attention_gemm::forward_bf16_scratch(d);
}
int64_t bf16_thread_bytes(const AttentionKernel& a) {
  return (bf16_floats(a) * 4 + 63) / 64 * 64 + attention_gemm::bf16_pack_bytes(gemm_dims(a));
}

// bf16 q, k, v: per task the GEMM path on the bf16 GEMM (a key mask hides scores there); the
// backward adds each query head's dk, dv into f32 accumulators and rounds them once at the end.
template <class T>  // q, k, v as stored: uint16_t (bf16) or float (rounded as packed)
void run_bf16_as(const AttentionKernel& a, const Frame& fr) {
  const int64_t n = a.grad ? a.B * a.Hkv : a.B * a.Hq;
  const int nt =
      a.parallel ? int(std::min<int64_t>(fr.num_threads * runtime::host::kPartsPerThread, n)) : 1;
  const attention_gemm::Dims d = gemm_dims(a);
  const int64_t acc = a.grad ? a.T * (a.D + a.Dv) : 0, per = bf16_thread_bytes(a);
  runtime::host::parallel(nt, [&](int part, int parts) {
    char* mine = fr.scratch + runtime::host::team_thread() * per;
    float* buf = reinterpret_cast<float*>(mine);
    void* pack = mine + (bf16_floats(a) * 4 + 63) / 64 * 64;
    auto dq_at = [&](int64_t off) -> void* {
      return a.wide[0] ? static_cast<void*>(static_cast<float*>(fr.ptr[a.r0]) + off)
                       : static_cast<uint16_t*>(fr.ptr[a.r0]) + off;
    };
    auto in_at = [&](int32_t v, int64_t off) { return static_cast<const T*>(fr.ptr[v]) + off; };
    auto with_mask = [&](int64_t b) {
      attention_gemm::Dims db = d;
      if (a.mask >= 0) db.mask = static_cast<const uint8_t*>(fr.ptr[a.mask]) + b * a.T;
      return db;
    };
    for (int64_t t = n * part / parts; t < n * (part + 1) / parts; ++t) {
      if (!a.grad) {
        const int64_t b = t / a.Hq, h = t % a.Hq, kvh = h / a.G;
        attention_gemm::forward_bf16(
            with_mask(b), in_at(a.q, (b * a.Hq + h) * a.S * a.D),
            in_at(a.k, (b * a.Hkv + kvh) * a.T * a.D), in_at(a.v, (b * a.Hkv + kvh) * a.T * a.Dv),
            static_cast<float*>(fr.ptr[a.r0]) + (b * a.Hq + h) * a.S * a.Dv,
            static_cast<float*>(fr.ptr[a.r1]) + (b * a.Hq + h) * a.S, buf, pack);
        continue;
      }
      const int64_t b = t / a.Hkv, kvh = t % a.Hkv;
      float *dK = buf, *dV = dK + a.T * a.D;
      std::fill(dK, dK + acc, 0.0f);
      for (int64_t g = 0; g < a.G; ++g) {
        const int64_t h = (b * a.Hq + kvh * a.G + g);
        attention_gemm::backward_bf16(
            with_mask(b), in_at(a.q, h * a.S * a.D), in_at(a.k, (b * a.Hkv + kvh) * a.T * a.D),
            in_at(a.v, (b * a.Hkv + kvh) * a.T * a.Dv), in<float>(fr, a.out) + h * a.S * a.Dv,
            in<float>(fr, a.lse) + h * a.S, in<float>(fr, a.dout) + h * a.S * a.Dv,
            dq_at(h * a.S * a.D), a.wide[0], dK, dV, dK + acc, pack);
      }
      const int64_t kv = b * a.Hkv + kvh;
      attention_gemm::store_bf16(fr.ptr[a.r1], a.wide[1], kv * a.T * a.D, dK, a.T * a.D);
      attention_gemm::store_bf16(fr.ptr[a.r2], a.wide[2], kv * a.T * a.Dv, dV, a.T * a.Dv);
    }
  });
}

void run_bf16(const Kernel& kk, const Frame& fr) {
  const auto& a = runtime::host::as<AttentionKernel>(kk);
  if (bf16_inputs_non_finite(a, fr)) return run_bf16_dense(a, fr);
  a.f32_qkv ? run_bf16_as<float>(a, fr) : run_bf16_as<uint16_t>(a, fr);
}

std::unique_ptr<Kernel> make_kernel(const ir::Function& f, ValueId id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  const bool bf16 = f.type(n.operands[0]).dtype == DType::bf16;
  // bf16 q, k, v converted from f32 are read as f32 (runtime/host/kernels.h: kernel_operands).
  const std::vector<ValueId> reads = runtime::host::kernel_operands(f, id);
  auto k = std::make_unique<AttentionKernel>();
  k->grad = n.op == Op::attention_grad;
  k->q = reads[0];
  k->k = reads[1];
  k->v = reads[2];
  k->f32_qkv = bf16 && f.type(reads[0]).dtype == DType::f32;
  if (k->grad) {
    k->out = n.operands[3];
    k->lse = n.operands[4];
    k->dout = n.operands[5];
  }
  const size_t base = k->grad ? 6 : 3;
  if (n.operands.size() > base) k->mask = n.operands[base];
  k->r0 = id + 1;
  k->r1 = id + 2;
  if (k->grad) k->r2 = id + 3;
  const Shape &q = f.type(k->q).shape, &kv = f.type(k->k).shape, &v = f.type(k->v).shape;
  k->B = q[0], k->Hq = q[1], k->S = q[2], k->D = q[3];
  k->Hkv = kv[1], k->T = kv[2], k->Dv = v[3], k->G = k->Hq / k->Hkv;
  k->scale = n.attrs.params[kScale];
  k->causal = n.attrs.params[kCausal] != 0;
  k->plain = attention_detail::no_empty_rows(k->mask >= 0, k->causal, k->S, k->T);
  k->parallel = num_threads != 1 &&
                k->B * k->Hq * k->S * k->T * (k->D + k->Dv) >= runtime::host::kParallelElements;
  k->reads = reads;
  k->writes = ir::results_of(f, id);
  k->run = bf16 ? run_bf16 : n.type.dtype == DType::f64 ? run<double> : run<float>;
  if (bf16) k->scratch_bytes = std::max(num_threads, 1) * bf16_thread_bytes(*k);
  if (bf16 && k->grad)  // a bf16 gradient widened to f32 (autocast): written as f32
    k->write_converted = [](Kernel& kk, int32_t from, int32_t to, DType dt) {
      auto& a = static_cast<AttentionKernel&>(kk);
      const int i = from == a.r0 ? 0 : from == a.r1 ? 1 : from == a.r2 ? 2 : -1;
      if (dt != DType::f32 || i < 0 || a.wide[i]) return false;
      a.wide[i] = true;
      (i == 0 ? a.r0 : i == 1 ? a.r1 : a.r2) = to;
      std::replace(a.writes.begin(), a.writes.end(), from, to);
      return true;
    };
  return k;
}

// ---- examples for the record-walking tests ------------------------------------------------

std::vector<ir::CompositeExample> examples() {
  const TensorType q{DType::f32, Shape{2, 4, 3, 5}}, k{DType::f32, Shape{2, 2, 4, 5}},
      v{DType::f32, Shape{2, 2, 4, 6}}, m{DType::i1, Shape{2, 4}};
  ir::Attrs causal, plain;
  causal.params = {0.7, 1};
  plain.params = {0.5, 0};
  const TensorType qs{DType::f64, Shape{1, 2, 4, 3}}, ks{DType::f64, Shape{1, 2, 4, 3}};
  const TensorType qb{DType::bf16, Shape{2, 4, 5, 3}}, kb{DType::bf16, Shape{2, 2, 6, 3}},
      vb{DType::bf16, Shape{2, 2, 6, 4}};
  // Causal with S > T and no mask: guarded, its first rows see no key.
  const TensorType qe{DType::f32, Shape{1, 2, 5, 3}}, ke{DType::f32, Shape{1, 1, 3, 3}};
  return {{{q, k, v, m}, causal},
          {{qs, ks, ks}, plain},
          {{qb, kb, vb}, causal},
          {{qe, ke, ke}, causal}};
}

std::vector<ir::CompositeExample> examples_grad() {
  std::vector<ir::CompositeExample> out;
  for (ir::CompositeExample e : examples()) {
    const std::vector<TensorType> r = infer(e.operands, e.attrs);
    std::vector<TensorType> ops{e.operands[0], e.operands[1], e.operands[2], r[0], r[1], r[0]};
    if (e.operands.size() == 4) ops.push_back(e.operands[3]);
    e.operands = std::move(ops);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

AttentionResult attention_with_lse(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const std::optional<Tensor>& key_mask, double scale,
                                   bool causal) {
  std::vector<Tensor> ops{q, k, v};
  // Under a bf16 autocast (trace/autocast.h) f32 q, k, v go in as bf16; the results stay f32.
  if (trace::autocast_dtype() == DType::bf16 && q.dtype() == DType::f32 &&
      k.dtype() == DType::f32 && v.dtype() == DType::f32)
    for (Tensor& x : ops) x = astype(x, DType::bf16);
  if (key_mask) ops.push_back(*key_mask);
  std::vector<Tensor> r = call(Op::attention, ops, {scale, causal ? 1.0 : 0.0});
  return {r[0], r[1]};
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const std::optional<Tensor>& key_mask, double scale, bool causal) {
  return attention_with_lse(q, k, v, key_mask, scale, causal).out;
}

}  // namespace tlaloc::composites

TLALOC_COMPOSITE_RECORD(attention, "tlaloc.attention", 3, 4, {"scale", "causal"}, composites::infer,
                        composites::attention_detail::decompose, composites::vjp,
                        composites::make_kernel, composites::examples)
TLALOC_COMPOSITE_RECORD(attention_grad, "tlaloc.attention_grad", 6, 7, {"scale", "causal"},
                        composites::infer_grad, composites::attention_detail::decompose_grad,
                        nullptr, composites::make_kernel, composites::examples_grad)
