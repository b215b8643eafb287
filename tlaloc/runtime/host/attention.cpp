// Host kernels of the attention composites (FlashAttention, Dao et al. 2022; backward as in
// FlashAttention-2, Dao 2023). Forward: per (batch, query head, query row) an online softmax
// over tiles of kTile keys -- a running max m, sum l and output accumulator, rescaled by
// exp(m_old - m_new) when the max grows -- so no [S,T] score matrix exists. Backward: per
// (batch, kv head) it recomputes a query row's scores, p = exp(s - lse) from the saved
// log-sum-exp (one vector loop of the fused loops' f32 exp per row: 0.87x the backward's time
// against a libm call per key), and accumulates dq, dk, dv; a task owns its kv head's dk/dv rows,
// so work splits over threads without races and the sums run in a fixed order (bitwise
// reproducible).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"
// kernels.h first: instr_ops.h uses kernel.h's bits_f32.
#include "tlaloc/runtime/host/instr_ops.h"

namespace tlaloc::runtime::host {
namespace {

constexpr int64_t kTile = 32;  // keys per online-softmax tile

struct AttentionKernel : Kernel {
  int32_t q = -1, k = -1, v = -1, out = -1, dout = -1, mask = -1, res = -1;
  int64_t B = 0, Hq = 0, S = 0, D = 0, Hkv = 0, T = 0, Dv = 0, G = 0;
  double scale = 1;
  bool causal = false;
  bool parallel = false;

  // Keys visible to query row i are j < end(i) with mask[j] set.
  int64_t end(int64_t i) const { return causal ? std::clamp<int64_t>(i + T - S + 1, 0, T) : T; }
};

// Dot product in 8 interleaved partial sums (element i into sum i % 8), added pairwise at the
// end: a fixed order, so results do not depend on threads, and the loop vectorizes without
// reassociation (a single running sum is one long chain of dependent adds).
// The 8 partials are one GCC vector (as an array, GCC kept them as 8 scalars), folded in vector
// adds: ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)), pairs commuted (the same bits).
using V8f = float __attribute__((vector_size(32)));
using V4f = float __attribute__((vector_size(16)));
using V8d = double __attribute__((vector_size(64)));
using V4d = double __attribute__((vector_size(32)));

template <class F>
__attribute__((always_inline)) inline F dotp(const F* a, const F* b, int64_t n) {
  constexpr bool f32 = std::is_same_v<F, float>;
  using V = std::conditional_t<f32, V8f, V8d>;
  using H = std::conditional_t<f32, V4f, V4d>;
  V s = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    V x, y;
    std::memcpy(&x, a + i, sizeof x);
    std::memcpy(&y, b + i, sizeof y);
    s += x * y;
  }
  for (; i < n; ++i) s[i % 8] += a[i] * b[i];
  const H h = __builtin_shufflevector(s, s, 0, 1, 2, 3) + __builtin_shufflevector(s, s, 4, 5, 6, 7);
  const H q = h + __builtin_shufflevector(h, h, 1, 0, 3, 2);
  return q[0] + q[2];
}

template <class F>
__attribute__((always_inline)) inline void forward_task(const AttentionKernel& a, const Frame& fr,
                                                        int64_t bh, F* acc) {
  const int64_t b = bh / a.Hq, h = bh % a.Hq, kvh = h / a.G;
  const F* Q = static_cast<const F*>(fr.ptr[a.q]) + (b * a.Hq + h) * a.S * a.D;
  const F* K = static_cast<const F*>(fr.ptr[a.k]) + (b * a.Hkv + kvh) * a.T * a.D;
  const F* V = static_cast<const F*>(fr.ptr[a.v]) + (b * a.Hkv + kvh) * a.T * a.Dv;
  const uint8_t* M = a.mask >= 0 ? static_cast<const uint8_t*>(fr.ptr[a.mask]) + b * a.T : nullptr;
  F* O = static_cast<F*>(fr.ptr[a.res]) + (b * a.Hq + h) * a.S * (a.Dv + 1);
  const F scale = F(a.scale), ninf = -INFINITY;
  F s[kTile];
  for (int64_t i = 0; i < a.S; ++i) {
    const F* qi = Q + i * a.D;
    F m = ninf, l = 0;
    std::fill(acc, acc + a.Dv, F(0));
    const int64_t jend = a.end(i);
    for (int64_t j0 = 0; j0 < jend; j0 += kTile) {
      const int64_t n = std::min(kTile, jend - j0);
      F tmax = ninf;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t j = j0 + t;
        s[t] = (M && !M[j]) ? ninf : scale * dotp(qi, K + j * a.D, a.D);
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
    F* oi = O + i * (a.Dv + 1);
    if (l > 0) {
      const F inv = F(1) / l;
      for (int64_t d = 0; d < a.Dv; ++d) oi[d] = acc[d] * inv;
      oi[a.Dv] = m + std::log(l);
    } else {
      std::fill(oi, oi + a.Dv, F(0));
      oi[a.Dv] = ninf;
    }
  }
}

template <class F>
__attribute__((always_inline)) inline void backward_task(const AttentionKernel& a, const Frame& fr,
                                                         int64_t bk, F* p) {
  const int64_t b = bk / a.Hkv, kvh = bk % a.Hkv;
  const int64_t row = a.Hq * a.S * a.D + a.Hkv * a.T * (a.D + a.Dv);
  const F* K = static_cast<const F*>(fr.ptr[a.k]) + (b * a.Hkv + kvh) * a.T * a.D;
  const F* V = static_cast<const F*>(fr.ptr[a.v]) + (b * a.Hkv + kvh) * a.T * a.Dv;
  const uint8_t* M = a.mask >= 0 ? static_cast<const uint8_t*>(fr.ptr[a.mask]) + b * a.T : nullptr;
  F* R = static_cast<F*>(fr.ptr[a.res]) + b * row;
  F* dK = R + a.Hq * a.S * a.D + kvh * a.T * a.D;
  F* dV = R + a.Hq * a.S * a.D + a.Hkv * a.T * a.D + kvh * a.T * a.Dv;
  std::fill(dK, dK + a.T * a.D, F(0));
  std::fill(dV, dV + a.T * a.Dv, F(0));
  const F scale = F(a.scale), ninf = -INFINITY;
  for (int64_t g = 0; g < a.G; ++g) {
    const int64_t h = kvh * a.G + g;
    const F* Q = static_cast<const F*>(fr.ptr[a.q]) + (b * a.Hq + h) * a.S * a.D;
    const F* O = static_cast<const F*>(fr.ptr[a.out]) + (b * a.Hq + h) * a.S * (a.Dv + 1);
    const F* dO = static_cast<const F*>(fr.ptr[a.dout]) + (b * a.Hq + h) * a.S * (a.Dv + 1);
    F* dQ = R + h * a.S * a.D;
    std::fill(dQ, dQ + a.S * a.D, F(0));
    for (int64_t i = 0; i < a.S; ++i) {
      const F* qi = Q + i * a.D;
      const F* oi = O + i * (a.Dv + 1);
      const F* doi = dO + i * (a.Dv + 1);
      const F lse = oi[a.Dv];
      if (lse == ninf) continue;  // no visible key: p = 0 everywhere
      const F delta = dotp(doi, oi, a.Dv) - doi[a.Dv];
      F* dqi = dQ + i * a.D;
      const int64_t jend = a.end(i);
      for (int64_t j = 0; j < jend; ++j) p[j] = scale * dotp(qi, K + j * a.D, a.D) - lse;
      for (int64_t j = 0; j < jend; ++j) p[j] = instr_ops::fexp(p[j]);  // a vector loop
      for (int64_t j = 0; j < jend; ++j) {
        if (M && !M[j]) continue;
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

// The tasks as TLALOC_CLONES (kernels.h): AVX2 halves the vector loops over head dims.
template <class F>
TLALOC_CLONES void tasks(const AttentionKernel& a, const Frame& fr, int64_t t0, int64_t t1,
                         F* acc) {
  for (int64_t t = t0; t < t1; ++t) {
    if (a.out < 0)
      forward_task<F>(a, fr, t, acc);
    else
      backward_task<F>(a, fr, t, acc);
  }
}

template <class F>
void run_attention(const Kernel& kk, const Frame& fr) {
  const auto& a = as<AttentionKernel>(kk);
  const bool fwd = a.out < 0;
  const int64_t n = fwd ? a.B * a.Hq : a.B * a.Hkv;
  const int nt = a.parallel ? int(std::min<int64_t>(fr.num_threads * kPartsPerThread, n)) : 1;
  parallel(nt, [&](int p, int P) {
    std::vector<F> acc(size_t(fwd ? a.Dv : a.T));  // forward: an output row; backward: p
    tasks<F>(a, fr, n * p / P, n * (p + 1) / P, acc.data());
  });
}

}  // namespace

std::unique_ptr<Kernel> make_attention(const ir::Function& f, int32_t id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<AttentionKernel>();
  const bool grad = n.op == ir::Op::attention_grad;
  k->q = n.operands[0];
  k->k = n.operands[1];
  k->v = n.operands[2];
  if (grad) {
    k->out = n.operands[3];
    k->dout = n.operands[4];
  }
  const size_t base = grad ? 5 : 3;
  if (n.operands.size() > base) k->mask = n.operands[base];
  k->res = id;
  const Shape &q = f.type(k->q).shape, &kv = f.type(k->k).shape, &v = f.type(k->v).shape;
  k->B = q[0], k->Hq = q[1], k->S = q[2], k->D = q[3];
  k->Hkv = kv[1], k->T = kv[2], k->Dv = v[3], k->G = k->Hq / k->Hkv;
  k->scale = n.attrs.scale;
  k->causal = n.attrs.causal;
  k->parallel =
      num_threads != 1 && k->B * k->Hq * k->S * k->T * (k->D + k->Dv) >= kParallelElements;
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = {id};
  if (n.type.dtype == DType::f64)
    k->run = run_attention<double>;
  else
    k->run = run_attention<float>;
  return k;
}

}  // namespace tlaloc::runtime::host
