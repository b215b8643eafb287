// Host kernels of the cross_entropy composites (trace/composite.h), per row of C logits: the
// max m (NaN if any is NaN; a max of -inf shifts by 0), e = exp(x - m), lse = log Σe,
// loss = -((x[label] - m) - lse) (-0 for a label outside [0, C)); the gradient recomputes e and
// writes d_loss · (e / Σe - one_hot) (the decomposition's exp(s - lse), rounded differently), 0
// for a label outside [0, C) (that row's loss is constant). exp is the fused loops' own
// (instr_ops.h: exp_f32) for f32; sums use 8 interleaved partials added pairwise, so every
// row's result is fixed by its values alone, whatever the threads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"
// kernels.h first: instr_ops.h uses kernel.h's bits_f32.
#include "tlaloc/runtime/host/instr_ops.h"

namespace tlaloc::runtime::host {
namespace {

struct CrossEntropyKernel : Kernel {
  int32_t x = -1, labels = -1, dl = -1, res = -1;
  int64_t N = 0, C = 0;
  bool parallel = false;
};

// NaN-propagating max: a NaN operand wins.
template <class F>
__attribute__((always_inline)) inline F max_nan(F a, F b) {
  return (a > b || a != a) ? a : b;
}

// A row's shift (its max, 0 when that is -inf); e[i] = exp(x[i] - shift); returns Σ e. Each
// pass is its own simple loop, so each vectorizes.
template <class F>
__attribute__((always_inline)) inline F row_exp(const F* x, int64_t C, F& shift, F* e) {
  F m[8];
  for (int k = 0; k < 8; ++k) m[k] = -std::numeric_limits<F>::infinity();
  int64_t i = 0;
  for (; i + 8 <= C; i += 8)
    for (int k = 0; k < 8; ++k) m[k] = max_nan(m[k], x[i + k]);
  for (; i < C; ++i) m[i % 8] = max_nan(m[i % 8], x[i]);
  F mx = m[0];
  for (int k = 1; k < 8; ++k) mx = max_nan(mx, m[k]);
  shift = mx == -std::numeric_limits<F>::infinity() ? F(0) : mx;
  for (i = 0; i < C; ++i) e[i] = instr_ops::fexp(x[i] - shift);
  F s[8] = {};
  for (i = 0; i + 8 <= C; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += e[i + k];
  for (; i < C; ++i) s[i % 8] += e[i];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// Rows [r0, r1). The loss needs e only for its sum (written to `buf`, C values); the gradient
// writes e to its output row and scales it there: d = d_loss · (e / Σe - one_hot).
template <class F>
TLALOC_CLONES void rows(const CrossEntropyKernel& k, const Frame& fr, int64_t r0, int64_t r1,
                        F* buf) {
  const int64_t C = k.C;
  const auto* L = static_cast<const int32_t*>(fr.ptr[k.labels]);
  for (int64_t r = r0; r < r1; ++r) {
    const F* x = static_cast<const F*>(fr.ptr[k.x]) + r * C;
    const int64_t label = L[r];
    const bool in = label >= 0 && label < C;
    F shift;
    if (k.dl < 0) {
      const F lse = std::log(row_exp(x, C, shift, buf));
      static_cast<F*>(fr.ptr[k.res])[r] = in ? -((x[label] - shift) - lse) : -F(0);
      continue;
    }
    F* d = static_cast<F*>(fr.ptr[k.res]) + r * C;
    if (!in) {
      std::fill(d, d + C, F(0));
      continue;
    }
    const F sum = row_exp(x, C, shift, d);
    const F dl = static_cast<const F*>(fr.ptr[k.dl])[r];
    const F el = d[label];
    for (int64_t i = 0; i < C; ++i) d[i] = dl * (d[i] / sum);
    d[label] = dl * (el / sum - F(1));
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = as<CrossEntropyKernel>(kk);
  const int nt = k.parallel ? int(std::min<int64_t>(fr.num_threads * kPartsPerThread, k.N)) : 1;
  parallel(nt, [&](int p, int P) {
    F* buf = reinterpret_cast<F*>(fr.scratch) + team_thread() * k.C;
    rows<F>(k, fr, k.N * p / P, k.N * (p + 1) / P, buf);
  });
}

}  // namespace

std::unique_ptr<Kernel> make_cross_entropy(const ir::Function& f, int32_t id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<CrossEntropyKernel>();
  k->x = n.operands[0];
  k->labels = n.operands[1];
  if (n.op == ir::Op::cross_entropy_grad) k->dl = n.operands[2];
  k->res = id;
  const Shape& xs = f.type(k->x).shape;
  k->N = xs[0];
  k->C = xs[1];
  k->parallel = num_threads != 1 && k->N * k->C >= kParallelElements;
  const int64_t elem = f.type(k->x).dtype == DType::f64 ? 8 : 4;
  if (k->dl < 0) k->scratch_bytes = std::max(num_threads, 1) * k->C * elem;  // one row each
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = {id};
  k->run = f.type(k->x).dtype == DType::f64 ? run<double> : run<float>;
  return k;
}

}  // namespace tlaloc::runtime::host
