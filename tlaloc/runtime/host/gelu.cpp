// Host kernels of the gelu composites (trace/composite.h), one pass over the elements:
//   gelu:      t = tanh(√(2/π)(x + ((0.044715·x)·x)·x)), y = (0.5·x)·(1 + t)
//   gelu_grad: q = 1 + t = 2y / x from the forward's y (1 for |x| < 2^-60), d_x = d_y·(0.5·q +
//              ((0.5·x)·(q·(2 - q)))·(√(2/π)·(1 + 0.134145·(x·x))))
// Each op is one IEEE operation in the decomposition's order (no FMA), and tanh is the fused
// loops' own for f32 (instr_ops.h: tanh_f32), so the forward is bitwise the unfused loops'. The
// unfused forward and backward were fused groups of 10 and 21 passes over their blocks; here
// each is one pass, and the backward computes no tanh (the benchmark LM's step: 0.96x the time
// on 2 threads, in-process A/B).
#include <cmath>
#include <numbers>

#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"
// kernels.h first: instr_ops.h uses kernel.h's bits_f32.
#include "tlaloc/runtime/host/instr_ops.h"

namespace tlaloc::runtime::host {
namespace {

struct GeluKernel : Kernel {
  int32_t x = -1, y = -1, dy = -1, res = -1;
  int64_t n = 0;
  bool parallel = false;
};

template <class F>
TLALOC_CLONES void span(const GeluKernel& k, const Frame& fr, int64_t i0, int64_t i1) {
  const F c = F(std::sqrt(2.0 / std::numbers::pi)), a = F(0.044715), a3 = F(3 * 0.044715);
  const F half = F(0.5), one = F(1);
  const F* x = static_cast<const F*>(fr.ptr[k.x]);
  F* r = static_cast<F*>(fr.ptr[k.res]);
  if (k.dy < 0) {
    for (int64_t i = i0; i < i1; ++i) {
      const F v = x[i];
      const F t = instr_ops::ftanh(c * (v + a * v * v * v));
      r[i] = (half * v) * (one + t);
    }
    return;
  }
  const F* y = static_cast<const F*>(fr.ptr[k.y]);
  const F* dy = static_cast<const F*>(fr.ptr[k.dy]);
  const F tiny = F(std::ldexp(1.0, -60)), two = F(2);
  for (int64_t i = i0; i < i1; ++i) {
    const F v = x[i];
    const bool small = std::fabs(v) < tiny;
    const F q = small ? one : (y[i] + y[i]) / (small ? one : v);
    const F du = c * (one + a3 * (v * v));
    r[i] = dy[i] * (half * q + ((half * v) * (q * (two - q))) * du);
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = as<GeluKernel>(kk);
  // Parts of whole 64-element runs, so every vector loop but the last runs full.
  const int64_t units = (k.n + 63) / 64;
  const int nt =
      k.parallel ? int(std::min<int64_t>(int64_t(fr.num_threads) * kPartsPerThread, units)) : 1;
  parallel(nt, [&](int p, int P) {
    span<F>(k, fr, std::min(k.n, units * p / P * 64), std::min(k.n, units * (p + 1) / P * 64));
  });
}

}  // namespace

std::unique_ptr<Kernel> make_gelu(const ir::Function& f, int32_t id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<GeluKernel>();
  k->x = n.operands[0];
  if (n.op == ir::Op::gelu_grad) {
    k->y = n.operands[1];
    k->dy = n.operands[2];
  }
  k->res = id;
  k->n = f.type(k->x).shape.numel();
  k->parallel = num_threads != 1 && k->n >= kParallelElements;
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = {id};
  k->run = f.type(k->x).dtype == DType::f64 ? run<double> : run<float>;
  return k;
}

}  // namespace tlaloc::runtime::host
