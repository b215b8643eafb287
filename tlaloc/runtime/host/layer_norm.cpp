// Host kernels of the layer_norm composites (trace/composite.h). Per row of D values: the mean,
// then the variance of the centred values (corrected two-pass: exact for rows with a large
// mean), rstd = 1 / sqrt(var + eps), y = (x - mean)·rstd·weight (+ bias). The gradient recomputes
// each row's statistics, then d_x = rstd·((g - Σg/D) - xhat·Σ(g·xhat)/D) with g = d_y·weight and
// xhat = (x - mean)·rstd; d_weight = Σrows d_y·xhat and d_bias = Σrows d_y are summed per fixed
// chunk of kRows rows and the chunks added in order. Row sums use 8 interleaved partials added
// pairwise. Every order is fixed by the shapes, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::runtime::host {
namespace {

constexpr int64_t kRows = 16;  // rows per chunk of the weight / bias gradient sums

struct LayerNormKernel : Kernel {
  int32_t x = -1, w = -1, b = -1, dy = -1, res = -1;
  int64_t R = 0, D = 0;
  double eps = 0;
  bool parallel = false;
  int64_t chunks() const { return (R + kRows - 1) / kRows; }
};

// Σ f(i) for i < n in 8 interleaved partials (i into partial i % 8), added pairwise.
template <class F, class G>
__attribute__((always_inline)) inline F sum8(int64_t n, G f) {
  F s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += f(i + k);
  for (; i < n; ++i) s[i % 8] += f(i);
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// Writes x - mean to c; returns rstd. Corrected two-pass (Chan, Golub & LeVeque 1983): the
// rounding error of the first mean, Σ(x - mean)/D, is subtracted too, so a long f32 row with a
// large mean is centred as exactly as the decomposition's (whose sums are pairwise).
template <class F>
__attribute__((always_inline)) inline F centre(const F* x, F* c, int64_t D, F eps) {
  const F mean = sum8<F>(D, [&](int64_t i) { return x[i]; }) / F(D);
  for (int64_t i = 0; i < D; ++i) c[i] = x[i] - mean;
  const F corr = sum8<F>(D, [&](int64_t i) { return c[i]; }) / F(D);
  for (int64_t i = 0; i < D; ++i) c[i] -= corr;
  const F var = sum8<F>(D, [&](int64_t i) { return c[i] * c[i]; }) / F(D);
  return F(1) / std::sqrt(var + eps);
}

template <class F>
TLALOC_CLONES void forward_rows(const LayerNormKernel& k, const Frame& fr, int64_t r0, int64_t r1) {
  const int64_t D = k.D;
  const F* W = static_cast<const F*>(fr.ptr[k.w]);
  const F* B = k.b >= 0 ? static_cast<const F*>(fr.ptr[k.b]) : nullptr;
  const F eps = F(k.eps);
  for (int64_t r = r0; r < r1; ++r) {
    const F* x = static_cast<const F*>(fr.ptr[k.x]) + r * D;
    F* y = static_cast<F*>(fr.ptr[k.res]) + r * D;
    const F rstd = centre(x, y, D, eps);
    if (B)
      for (int64_t i = 0; i < D; ++i) y[i] = y[i] * rstd * W[i] + B[i];
    else
      for (int64_t i = 0; i < D; ++i) y[i] = y[i] * rstd * W[i];
  }
}

// Chunks [c0, c1): d_x rows, and per chunk the partial d_weight, d_bias rows in `part`.
template <class F>
TLALOC_CLONES void backward_chunks(const LayerNormKernel& k, const Frame& fr, int64_t c0,
                                   int64_t c1, F* part) {
  const int64_t D = k.D;
  const F* W = static_cast<const F*>(fr.ptr[k.w]);
  const F eps = F(k.eps);
  for (int64_t c = c0; c < c1; ++c) {
    F* pw = part + c * 2 * D;
    F* pb = pw + D;
    std::fill(pw, pw + 2 * D, F(0));
    for (int64_t r = c * kRows; r < std::min(k.R, (c + 1) * kRows); ++r) {
      const F* x = static_cast<const F*>(fr.ptr[k.x]) + r * D;
      const F* dy = static_cast<const F*>(fr.ptr[k.dy]) + r * D;
      F* dx = static_cast<F*>(fr.ptr[k.res]) + r * D;
      const F rstd = centre(x, dx, D, eps);
      for (int64_t i = 0; i < D; ++i) dx[i] = dx[i] * rstd;  // xhat
      const F mg = sum8<F>(D, [&](int64_t i) { return dy[i] * W[i]; }) / F(D);
      const F mgx = sum8<F>(D, [&](int64_t i) { return dy[i] * W[i] * dx[i]; }) / F(D);
      for (int64_t i = 0; i < D; ++i) {
        pw[i] += dy[i] * dx[i];
        pb[i] += dy[i];
        dx[i] = rstd * ((dy[i] * W[i] - mg) - dx[i] * mgx);
      }
    }
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = as<LayerNormKernel>(kk);
  const bool grad = k.dy >= 0;
  const int64_t n = k.chunks();
  F* part = reinterpret_cast<F*>(fr.scratch);
  const int nt = k.parallel ? int(std::min<int64_t>(fr.num_threads * kPartsPerThread, n)) : 1;
  parallel(nt, [&](int p, int P) {
    const int64_t c0 = n * p / P, c1 = n * (p + 1) / P;
    if (grad)
      backward_chunks<F>(k, fr, c0, c1, part);
    else
      forward_rows<F>(k, fr, std::min(k.R, c0 * kRows), std::min(k.R, c1 * kRows));
  });
  if (!grad) return;
  F* dwb = static_cast<F*>(fr.ptr[k.res]) + k.R * k.D;  // the d_weight, d_bias rows
  std::fill(dwb, dwb + 2 * k.D, F(0));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < 2 * k.D; ++i) dwb[i] += part[c * 2 * k.D + i];
}

}  // namespace

std::unique_ptr<Kernel> make_layer_norm(const ir::Function& f, int32_t id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<LayerNormKernel>();
  const Shape& xs = f.type(n.operands[0]).shape;
  k->x = n.operands[0];
  k->w = n.operands[1];
  if (n.op == ir::Op::layer_norm_grad)
    k->dy = n.operands[2];
  else if (n.operands.size() == 3)
    k->b = n.operands[2];
  k->res = id;
  k->D = xs[xs.rank() - 1];
  k->R = 1;
  for (int64_t i = 0; i + 1 < xs.rank(); ++i) k->R *= xs[i];
  k->eps = n.attrs.epsilon;
  k->parallel = num_threads != 1 && k->R * k->D >= kParallelElements;
  const size_t elem = n.type.dtype == DType::f64 ? 8 : 4;
  if (k->dy >= 0) k->scratch_bytes = k->chunks() * 2 * k->D * int64_t(elem);
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = {id};
  k->run = n.type.dtype == DType::f64 ? run<double> : run<float>;
  return k;
}

}  // namespace tlaloc::runtime::host
